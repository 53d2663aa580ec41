"""The correctness matrix of a kernel: ``python -m hpclab check <kernel> [--upto 8]``.

For every rank count (1 .. ``upto``, from the kernel's smallest), one ``mpiexec``
with a timeout runs every implementation on every case the kernel lists
(``check_cases(comm)`` in its module: variants, message sizes, array sizes).
Rank counts above the cores are allowed here (correctness, not timing) and
labelled ``oversubscribed``. The result is a table of records with metric
``correct`` (1 or 0); any wrong answer raises :class:`hpclab.kernels.KernelError`
after all runs, so the CLI exits non-zero.
"""
from __future__ import annotations

import os
import sys
import warnings

from hpclab import launch, profiles, protocol, records
from hpclab.kernels.registry import get as declaration


def _child(slug, inject_fault=False):
    """Runs under mpiexec: every case of every implementation; results on rank 0."""
    from importlib import import_module

    from mpi4py import MPI

    from hpclab.kernels import KernelError

    module = import_module(f"hpclab.chapters.{slug}.kernels")
    kernel = module.KERNEL
    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    if inject_fault:  # test hook: the compiled implementations see a wrong answer
        module.inject_fault(comm)
    failures = 0
    for case in module.check_cases(comm):
        params = {k: v for k, v in case.items() if k not in ("comm", "skip")}
        if case.get("skip"):
            if rank0:
                protocol.emit({"impl": "-", "params": params, "ok": None,
                               "message": case["skip"]})
            continue
        for impl in kernel.implementations:
            kwargs = dict(case)
            if kernel.comm == "first":
                kwargs.pop("comm", None)
                call = (comm,)
            else:
                call = ()
            try:
                module.RUNNERS[impl](*call, **kwargs)
                ok, message = True, ""
            except KernelError as exc:
                ok, message = False, str(exc)
                failures += 1
            if rank0:
                protocol.emit({"impl": impl, "params": params, "ok": ok, "message": message})
    return 1 if failures else 0


def run(slug, upto=None, ranks=None, profile=None, mpi_args=(), timeout=None,
        inject_fault=False, progress=False):
    """The correctness matrix of one kernel as records (see the module's doc).

    Parameters
    ----------
    slug : str
        A declared kernel.
    upto : int, optional
        Largest rank count (every count from the kernel's smallest, ``min_procs``);
        default: the largest of the declaration's ``check_procs``.
    ranks : sequence of int, optional
        The rank counts to run instead of 1 .. upto.
    timeout : float, optional
        Seconds per mpiexec (default: the kernel's profile timeout).
    """
    from tqdm import tqdm  # text, not a widget: a saved notebook keeps no widget state

    from hpclab.kernels import KernelError

    kernel = declaration(slug)
    if ranks is None:
        upto = max(kernel.check_procs) if upto is None else upto
        ranks = range(kernel.min_procs, upto + 1)
    ranks = sorted(set(int(r) for r in ranks))
    if not ranks or ranks[0] < kernel.min_procs:
        raise ValueError(f"{slug} runs on at least {kernel.min_procs} rank(s): choose rank "
                         f"counts from {kernel.min_procs} up, got {ranks or 'none'}")
    timeout = timeout or profiles.get(slug, profile)["timeout"]
    cores = launch.usable_cores()
    args = [sys.executable, "-m", "hpclab.check", "_child", slug]
    if inject_fault:
        args.append("--inject-fault")
    rows, failures = [], []
    for p in tqdm(ranks, desc=f"{slug} check", disable=not progress, leave=False):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", launch.OversubscriptionWarning)
            # OpenMP threads that wait sleep instead of spinning, unless the user chose: a
            # check is never timed, and its larger rank counts put more threads than cores (a
            # threaded kernel's matrix on 4 ranks of 2 threads, two cores busy with other work:
            # 15 s of processor time spinning, 2 s passive)
            proc = launch.mpirun(args, n=p, timeout=timeout, mpi_args=mpi_args, check=False,
                                 what=f"{slug} correctness on {p} ranks",
                                 env={"OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY",
                                                                        "passive")})
        results = protocol.parse(proc.stdout)
        wrong = [r for r in results if r["ok"] is False]
        if proc.returncode and not wrong:
            raise launch.MPILaunchError(f"{slug} correctness on {p} ranks failed (exit code "
                                        f"{proc.returncode}):\n{proc.stderr[-2000:]}")
        for r in results:
            if r["ok"] is None:
                continue
            params = {**r["params"], "oversubscribed": p > cores}
            rows += records.rows(slug, slug, r["impl"], p, 1, params, [float(r["ok"])],
                                 "correct", "bool")
            if not r["ok"]:
                failures.append(f"{p} ranks, {r['impl']}: {r['message']}")
    df = records.frame(rows)
    meta = records.metadata(slug, profiles.name(profile), {
        "launcher": "mpiexec", "ranks": ranks, "mpi_args": list(mpi_args), "cores": cores})
    if failures:
        raise KernelError(f"{len(failures)} {slug} run(s) gave a wrong answer; first: "
                          f"{failures[0]}")
    return records.Run(df, meta)


def table(df):
    """One row per case and rank count: implementations as columns, ✓ or ✗."""
    c = df[df["metric"] == "correct"]
    keys = [k for k in c.columns if k not in records.REQUIRED + ["impl", "run"]]
    wide = c.pivot_table(index=keys + ["nprocs"], columns="impl", values="value",
                         aggfunc="min")
    return wide.map(lambda v: "✓" if v == 1 else "✗").reset_index()


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(prog="python -m hpclab.check")
    p.add_argument("mode", choices=["_child"])
    p.add_argument("slug")
    p.add_argument("--inject-fault", action="store_true")
    args = p.parse_args(argv)
    import mpi4py

    mpi4py.rc.thread_level = launch.THREAD_LEVEL
    return _child(args.slug, args.inject_fault)


if __name__ == "__main__":
    sys.exit(main())
