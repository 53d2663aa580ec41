"""The Ring sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys

from hpclab import launch, profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import in_job, on_engines

NAME = "ring"
KERNEL = registry.get(NAME)
MIN_PROCS = KERNEL.min_procs
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
VARIANTS = ("ssend_ordered", "send", "isend", "irecv", "sendrecv")
METRIC, UNIT = "ring_time", "s"
_BUFFERED: dict[tuple, bool] = {}


def tasks(profile=None, impls=IMPLS, hugepages=False, max_procs=None, variants=VARIANTS,
          payloads=None):
    """The measurements a profile asks for, in the order they run."""
    from hpclab.chapters.ring.kernels import default_iterations

    settings = profiles.get(NAME, profile)
    unknown = (set(impls) - set(IMPLS)) | (set(variants) - set(VARIANTS))
    if unknown or not impls or not variants:
        raise ValueError(f"unknown ring implementation(s) or variant(s) {sorted(unknown)}: "
                         f"implementations {', '.join(IMPLS)}; variants {', '.join(VARIANTS)}")
    payloads = settings["payloads"] if payloads is None else list(payloads)
    max_procs = max_procs or NPROCS
    out = []
    for nprocs in range(1, max_procs + 1):
        for nbytes in payloads:
            warmup, iterations = default_iterations(nbytes, nprocs)
            for variant in variants:
                for impl in impls:
                    out.append({"impl": impl, "variant": variant, "nprocs": nprocs,
                                "nbytes": nbytes, "warmup": max(1, warmup // settings["scale"]),
                                "iterations": max(1, iterations // settings["scale"]),
                                "repetitions": settings["repetitions"],
                                "hugepages": bool(hugepages)})
    return out


def _buffered(comm, nbytes):
    from hpclab.chapters.ring import kernels as ring

    key = (comm.Get_size(), nbytes)
    if key not in _BUFFERED:  # every rank runs the same calls, so the cache agrees
        _BUFFERED[key] = ring.send_is_buffered(comm, nbytes)
    return _BUFFERED[key]


def measure(impl, variant, nprocs, nbytes, warmup, iterations, repetitions, hugepages=False,
            comm=None):
    """One measurement on the first nprocs ranks; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.chapters.ring import kernels as ring

    comm = comm or MPI.COMM_WORLD
    if not 1 <= nprocs <= comm.Get_size():
        raise ValueError(f"a ring of {nprocs} ranks needs that many ranks; this communicator "
                         f"has {comm.Get_size()}")
    inside = comm.Get_rank() < nprocs
    sub = comm.Split(0 if inside else MPI.UNDEFINED, comm.Get_rank())
    if not inside:
        return []
    try:
        params = {"variant": variant, "nbytes": nbytes, "warmup": warmup,
                  "iterations": iterations, "hugepages": bool(hugepages),
                  "oversubscribed": nprocs > launch.usable_cores()}
        rows = []
        if variant == "send" and nprocs > 1:  # a ring of one exchanges by MPI_Sendrecv
            ok = _buffered(sub, nbytes)
            rows += records.rows(NAME, NAME, impl, nprocs, 1, params, [float(ok)],
                                 "send_buffered", "bool")
            if not ok:
                return rows if sub.Get_rank() == 0 else []
        times = ring.RUNNERS[impl](sub, variant, nbytes, warmup=warmup, iterations=iterations,
                                   repetitions=repetitions, hugepages=hugepages)
        rows += records.timings(KERNEL, impl, nprocs, 1, params, times)
        return rows if sub.Get_rank() == 0 else []
    finally:
        sub.Free()


def _describe(task):
    return f"{task['impl']} {task['variant']} P={task['nprocs']} {task['nbytes']} B"


def _extra(impls, variants, hugepages):
    return {"implementations": list(impls), "variants": list(variants),
            "hugepages": bool(hugepages)}


def run(profile=None, impls=IMPLS, variants=VARIANTS, n=None, hugepages=False, mpi_args=(),
        progress=True, engines=None, timeout=None, check_upto=None):
    """Measure on n MPI engines (default: all cores; with more engines than cores, P
    stops at the cores), then check correctness up to
    ``check_upto`` ranks (default: the profile's; 0 skips it) under mpiexec.

    Returns a :class:`hpclab.records.Run` (records and metadata; the correctness runs'
    metadata under ``meta["runs"]``).
    """
    n = n or (engines.n if engines is not None else NPROCS)
    cores = launch.usable_cores()
    if engines is None and n > cores:
        raise ValueError(f"ring timings use at most {cores} ranks (the cores of this machine), "
                         f"got n = {n}: oversubscribed timings are meaningless. Correctness "
                         "beyond that: check_upto=8")
    # on more engines than cores (a lab checks correctness on 4), time P = 1 .. cores only;
    # the other engines wait outside MPI, idle
    todo = tasks(profile, impls, hugepages, min(n, cores), variants)
    timed = on_engines(sys.modules[__name__], todo, profile=profile, n=n, engines=engines,
                       timeout=timeout, mpi_args=mpi_args, progress=progress, describe=_describe,
                       extra=_extra(impls, variants, hugepages))
    upto = profiles.get(NAME, profile)["check_upto"] if check_upto is None else check_upto
    if not upto:
        return timed
    checked = check(upto, profile=profile, mpi_args=mpi_args, timeout=timeout)
    return records.Run.combine(timed, checked, correctness_run=checked.meta["run_id"])


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True,
            variants=VARIANTS):
    """The same sweep in this MPI job, P = 1 .. its size; records on rank 0, None elsewhere."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    return in_job(sys.modules[__name__], tasks(profile, impls, hugepages, comm.Get_size(),
                                               variants),
                  comm=comm, profile=profile, progress=progress,
                  extra=_extra(impls, variants, hugepages))


def check(upto=8, profile=None, mpi_args=(), timeout=None, progress=False):
    """Every implementation and safe variant on P = 1 .. upto ranks, under mpiexec
    (the ring's part of ``python -m hpclab check ring``; see :mod:`hpclab.check`).

    Ranks beyond the cores are allowed here (correctness only) and labelled
    ``oversubscribed``. Returns a :class:`hpclab.records.Run` with metric ``correct``
    (1 or 0); a wrong ring raises :class:`hpclab.kernels.KernelError` after all runs.
    """
    from hpclab import check as checker

    return checker.run(NAME, upto=upto, profile=profile, mpi_args=mpi_args, timeout=timeout,
                       progress=progress)
