"""The PingPong sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys

from hpclab import profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import in_job, on_engines

NAME = "pingpong"
KERNEL = registry.get(NAME)
MIN_PROCS = KERNEL.min_procs
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
METRIC, UNIT = "one_way_time", "s"


def tasks(profile=None, impls=IMPLS, hugepages=False, sizes=None, counts=None):
    """The measurements a profile asks for, in the order they run.

    ``sizes`` replaces the profile's message sizes; ``counts`` (``{"warmup": w,
    "iterations": i}``) replaces osu_latency's round-trip counts, for messages so large
    that its counts would take minutes.
    """
    from hpclab.chapters.pingpong.kernels import default_iterations

    settings = profiles.get(NAME, profile)
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown pingpong implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    out = []
    for nbytes in (settings["sizes"] if sizes is None else sizes):
        warmup, iterations = default_iterations(nbytes)
        scale = settings["scale"]
        if counts:
            warmup, iterations, scale = counts["warmup"], counts["iterations"], 1
        for impl in impls:
            out.append({"impl": impl, "nbytes": nbytes,
                        "warmup": max(1, warmup // scale),
                        "iterations": max(1, iterations // scale),
                        "repetitions": settings["repetitions"], "hugepages": bool(hugepages)})
    return out


def measure(impl, nbytes, warmup, iterations, repetitions, hugepages=False, comm=None):
    """Run one implementation at one size on every rank; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.chapters.pingpong import kernels as pingpong

    comm = comm or MPI.COMM_WORLD
    times = pingpong.RUNNERS[impl](comm, nbytes, warmup=warmup, iterations=iterations,
                                   repetitions=repetitions, hugepages=hugepages)
    if comm.Get_rank() != 0:
        return []
    params = {"nbytes": nbytes, "warmup": warmup, "iterations": iterations,
              "hugepages": bool(hugepages)}
    return records.timings(KERNEL, impl, comm.Get_size(), 1, params, times)


def _describe(task):
    return f"{task['impl']} {task['nbytes']} B"


def run(profile=None, impls=IMPLS, n=None, hugepages=False, mpi_args=(), progress=True,
        engines=None, timeout=None, sizes=None, counts=None):
    """Measure on n MPI engines (default NPROCS; started and stopped here unless
    ``engines`` is given); ``sizes`` and ``counts`` as in :func:`tasks`.

    Returns a :class:`hpclab.records.Run`: the records and the metadata that
    :func:`hpclab.records.save` writes beside them.
    """
    return on_engines(sys.modules[__name__], tasks(profile, impls, hugepages, sizes, counts),
                      profile=profile,
                      n=n, engines=engines, timeout=timeout, mpi_args=mpi_args,
                      progress=progress, describe=_describe,
                      extra={"implementations": list(impls), "hugepages": bool(hugepages),
                             **_subset(sizes, counts)})


def _subset(sizes, counts):
    """The metadata of a run of chosen sizes or counts: a probe, not the profile's sweep,
    which later chapters do not take their inputs from (:mod:`hpclab.inputs`)."""
    if sizes is None and counts is None:
        return {}
    what = [f"sizes {', '.join(map(str, sizes))} B"] if sizes is not None else []
    what += [f"{counts['iterations']} round trips"] if counts else []
    return {"subset": " and ".join(what) + " only"}


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same sweep in this MPI job (under mpiexec); records on rank 0, None elsewhere."""
    return in_job(sys.modules[__name__], tasks(profile, impls, hugepages), comm=comm,
                  profile=profile, progress=progress,
                  extra={"implementations": list(impls), "hugepages": bool(hugepages)})
