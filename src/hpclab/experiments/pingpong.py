"""PingPong experiment: one-way time against message size, per implementation.

Sizes and iteration counts come from :mod:`hpclab.profiles`; for each size
every implementation is measured in turn (interleaved, so a drift of the
machine does not favour one implementation). Records: one row per repetition,
metric ``one_way_time`` in seconds, with the columns ``nbytes, warmup,
iterations, hugepages``.
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd

from hpclab import models, profiles, records
from hpclab.kernels import registry
from hpclab.experiments import in_job, on_engines

NAME = "pingpong"
KERNEL = registry.get(NAME)
MIN_PROCS = KERNEL.min_procs
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
METRIC, UNIT = "one_way_time", "s"


def tasks(profile=None, impls=IMPLS, hugepages=False):
    """The measurements a profile asks for, in the order they run."""
    from hpclab.kernels.pingpong import default_iterations

    settings = profiles.get(NAME, profile)
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown pingpong implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    out = []
    for nbytes in settings["sizes"]:
        warmup, iterations = default_iterations(nbytes)
        scale = settings["scale"]
        for impl in impls:
            out.append({"impl": impl, "nbytes": nbytes,
                        "warmup": max(1, warmup // scale), "iterations": max(1, iterations // scale),
                        "repetitions": settings["repetitions"], "hugepages": bool(hugepages)})
    return out


def measure(impl, nbytes, warmup, iterations, repetitions, hugepages=False, comm=None):
    """Run one implementation at one size on every rank; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.kernels import pingpong

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
        engines=None, timeout=None):
    """Measure on n MPI engines (default NPROCS; started and stopped here unless
    ``engines`` is given).

    Returns a :class:`hpclab.records.Run`: the records and the metadata that
    :func:`hpclab.records.save` writes beside them.
    """
    return on_engines(sys.modules[__name__], tasks(profile, impls, hugepages), profile=profile,
                      n=n, engines=engines, timeout=timeout, mpi_args=mpi_args,
                      progress=progress, describe=_describe,
                      extra={"implementations": list(impls), "hugepages": bool(hugepages)})


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same sweep in this MPI job (under mpiexec); records on rank 0, None elsewhere."""
    return in_job(sys.modules[__name__], tasks(profile, impls, hugepages), comm=comm,
                  profile=profile, progress=progress,
                  extra={"implementations": list(impls), "hugepages": bool(hugepages)})


# ----------------------------------------------------------------------------- analysis

def summary(df):
    """Median, best and worst one-way time and the bandwidth per implementation and size."""
    df = records.table(df)
    g = df[df["metric"] == METRIC].groupby(["impl", "nbytes"])["value"]
    out = g.agg(median="median", best="min", worst="max", reps="count").reset_index()
    out["bandwidth_MBps"] = np.where(out["nbytes"] > 0, out["nbytes"] / out["median"] / 1e6, np.nan)
    order = {impl: i for i, impl in enumerate(IMPLS)}
    return out.sort_values(["impl", "nbytes"], key=lambda s: s.map(order) if s.name == "impl"
                           else s).reset_index(drop=True)


def fit(df, impl="c"):
    """Hockney and two-segment Hockney fitted to one implementation's median times.

    Returns a dict with ``hockney`` (a :class:`hpclab.models.Fit`) and
    ``two_segment`` (a :class:`hpclab.models.TwoSegmentFit`); both weigh relative
    errors. When the two-segment fit cannot be made (too few sizes), ``two_segment``
    is None, ``two_segment_error`` says why and a :class:`hpclab.models.FitWarning`
    is issued.
    """
    s = summary(df)
    s = s[s["impl"] == impl]
    if s.empty:
        raise ValueError(f"no records of implementation {impl!r}")
    x, y = s["nbytes"].to_numpy(float), s["median"].to_numpy(float)
    out = {"hockney": models.fit(models.HOCKNEY, x, y, sigma="relative"), "two_segment": None,
           "two_segment_error": None}
    try:
        out["two_segment"] = models.fit_two_segment(x, y)
    except models.FitError as exc:
        out["two_segment_error"] = str(exc)
        warnings.warn(f"no two-segment fit for {impl}: {exc}", models.FitWarning, stacklevel=2)
    return out


def small_message_latency(df, max_bytes=8):
    """Median one-way time of messages of at most max_bytes, per implementation (seconds)."""
    df = records.table(df)
    s = df[(df["metric"] == METRIC) & (df["nbytes"] <= max_bytes)]
    return s.groupby("impl")["value"].median().reindex([i for i in IMPLS if i in set(s["impl"])])


def python_overhead(df):
    """Per-message cost of each implementation over C, in seconds, at small sizes."""
    lat = small_message_latency(df)
    return (lat - lat.get("c", np.nan)).rename("overhead_s")
