"""The Poisson sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys

import numpy as np

from hpclab import launch, profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import over_ranks, over_ranks_in_job, some_impls

NAME = "poisson"
KERNEL = registry.get(NAME)
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
BYTES = KERNEL.extra["bytes_per_point"]
BYTES_WA = KERNEL.extra["bytes_per_point_write_allocate"]
GIB = 2.0 ** 30
MIB = 2.0 ** 20
IMPL_NAMES = {"c": "C", "cython": "Cython", "python": "mpi4py + numpy"}


def tasks(profile=None, impls=IMPLS, max_procs=None, strong=None, compare=True,
          convergence=True, strong_impls=None):
    """The measurements a profile asks for, in the order they run; ``strong`` replaces the
    profile's meshes of the strong sweep (a lab times its own, :func:`lab_n`),
    ``compare=False`` and ``convergence=False`` leave those sweeps out. The strong sweep runs
    the C solver with and without interleaving (when in ``impls``), and the other
    implementations of ``strong_impls`` (of ``impls``) at the most ranks only, interleaved."""
    settings = profiles.get(NAME, profile)
    if strong is not None:
        settings["strong"] = [int(n) for n in strong]
    if not convergence:
        settings["convergence"] = []
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown poisson implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    strong_impls = some_impls(impls, strong_impls, "strong_impls")
    max_procs = max_procs or NPROCS
    reps, cap = settings["repetitions"], settings["iterations"]
    out = []
    if "c" in impls:
        for n in settings["convergence"]:
            for nprocs in sorted({1, max_procs}):
                out.append({"kind": "convergence", "impl": "c", "nprocs": nprocs, "n": n,
                            "interleave": True, "iterations": 0, "repetitions": 1})
    for nprocs in range(1, max_procs + 1):
        for n in settings["strong"]:
            for impl in (i for i in strong_impls if i == "c" or nprocs == max_procs):
                for interleave in ((True, False) if impl == "c" else (True,)):
                    out.append({"kind": "strong", "impl": impl, "nprocs": nprocs, "n": n,
                                "interleave": interleave, "iterations": cap,
                                "repetitions": reps})
        for impl in (impls if compare else ()):
            out.append({"kind": "compare", "impl": impl, "nprocs": nprocs,
                        "n": settings["compare"], "interleave": True, "iterations": cap,
                        "repetitions": reps})
    return out


def measure(kind, impl, nprocs, n, interleave, iterations, repetitions, comm=None):
    """One measurement on the first nprocs ranks; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.chapters.poisson import kernels as poisson
    from hpclab.kernels.api import first_ranks

    with first_ranks(comm or MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return []
        times = poisson.RUNNERS[impl](sub, n=n, interleave=interleave, iterations=iterations,
                                      repetitions=repetitions)
        params = {"kind": kind, "n": n, "interleave": bool(interleave),
                  "iterations_cap": iterations,
                  "oversubscribed": nprocs > launch.usable_cores()}
        rows = records.timings(KERNEL, impl, nprocs, 1, params, times)
        return rows if sub.Get_rank() == 0 else []


def _describe(task):
    return (f"{task['kind']} {task['impl']} P={task['nprocs']} N={task['n']} "
            f"{'interleaved' if task['interleave'] else 'not interleaved'}")


def run(profile=None, impls=IMPLS, n=None, mpi_args=(), progress=True, engines=None,
        timeout=None, hugepages=False, **task_options):
    """Measure on n MPI engines (default: the cores; P never exceeds the cores);
    ``task_options`` as for :func:`tasks`."""
    return over_ranks(sys.modules[__name__], profile, impls, n, mpi_args, progress, engines,
                      timeout, **task_options)


def lab_n(profile=None, ranks=1):
    """The mesh N a lab times: from the profile's largest strong mesh on, in steps of 256,
    the smallest whose four vectors of one of ``ranks`` ranks (x, r, p and A p with their
    boundary: 32 bytes a point) are beyond the cache by
    :func:`hpclab.machine.beyond_cache`, so that even the most ranks timed sweep from
    memory. The ``quick`` profile keeps its own (its timings mean nothing)."""
    from hpclab import machine

    own = int(max(profiles.get(NAME, profile)["strong"]))
    if profiles.name(profile) == "quick":
        return own
    return int(machine.beyond_cache(lambda n: 32 * (n + 2) ** 2 / ranks, own, 256))


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same measurements in this MPI job, P = 1 .. its size; records on rank 0."""
    return over_ranks_in_job(sys.modules[__name__], profile, impls, comm, progress)


def _solve(n, impl):
    from mpi4py import MPI

    from hpclab.chapters.poisson import kernels as poisson

    u, metrics = poisson.solution(MPI.COMM_WORLD, n, impl)
    return (u, metrics) if MPI.COMM_WORLD.Get_rank() == 0 else None


def solution(n=31, impl="c", engines=None, timeout=120):
    """(x, y, u_h, u - u_h, metrics) of one converged solve on the mesh with its boundary
    (report 000's Figure 3.1 uses N = 31: 33 x 33 points, h = 1/32), on one MPI engine
    unless engines are given."""
    from hpclab.chapters.poisson.kernels import exact

    owned = engines is None
    if owned:
        engines = launch.cluster(n=1, timeout=timeout, what="poisson solution").start()
    try:
        u, metrics = engines.run(_solve, n, impl, timeout=timeout, what="poisson solution")[0]
    finally:
        if owned:
            engines.stop()
    full = np.zeros((n + 2, n + 2))
    full[1:-1, 1:-1] = u
    g = np.linspace(0, 1, n + 2)
    x, y = np.meshgrid(g, g, indexing="ij")
    return x, y, full, exact(x, y) - full, dict(zip(KERNEL.metric_names, metrics))
