"""The Amdahl sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys
import warnings

from hpclab import launch, profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import in_job, on_engines

NAME = "amdahl"
KERNEL = registry.get(NAME)
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
DISTRIBUTIONS = KERNEL.param("distribution").choices
SERIAL_PHASES = ("create", "distribute", "collect")
KINDS = ("strong", "weak", "synthetic")


def shape_name(nx, ny, nz):
    return f"{nx}x{ny}x{nz}"


def tasks(profile=None, impls=IMPLS, hugepages=False, max_procs=None, kinds=KINDS,
          shapes=None, distributions=None, procs=None, repetitions=None):
    """The measurements a profile asks for, in the order they run; ``shapes`` replaces the
    profile's shapes of the strong sweep (a lab times its own, :func:`lab_shape`);
    ``distributions`` and ``procs`` keep only those of the strong sweep (a lab's one
    comparison); ``repetitions`` replaces the profile's for the strong sweep (runs of a few
    microseconds need more than its three to show their scatter)."""
    settings = profiles.get(NAME, profile)
    if shapes is not None:
        settings["shapes"] = [[int(v) for v in shape] for shape in shapes]
    unknown = (set(impls) - set(IMPLS)) | (set(kinds) - set(KINDS)) \
        | (set(distributions or ()) - set(DISTRIBUTIONS))
    if unknown or not impls:
        raise ValueError(f"unknown amdahl implementation(s), kind(s) or distribution(s) "
                         f"{sorted(unknown)}: implementations {', '.join(IMPLS)}; kinds "
                         f"{', '.join(KINDS)}; distributions {', '.join(DISTRIBUTIONS)}")
    if distributions is not None:
        settings["compare"] = [d for d in DISTRIBUTIONS if d in distributions]
    if repetitions is not None and int(repetitions) < 1:
        raise ValueError(f"repetitions must be at least 1, got {repetitions}")
    max_procs = max_procs or NPROCS
    reps, out = int(repetitions or settings["repetitions"]), []

    def task(kind, impl, nprocs, distribution, shape):
        return {"kind": kind, "impl": impl, "nprocs": nprocs, "distribution": distribution,
                "nx": int(shape[0]), "ny": int(shape[1]), "nz": int(shape[2]),
                "repetitions": reps, "hugepages": bool(hugepages)}

    for nprocs in range(1, max_procs + 1):
        if "strong" in kinds and (procs is None or nprocs in procs):
            for shape in settings["shapes"]:
                for distribution in DISTRIBUTIONS if distributions is None else \
                        settings["compare"]:
                    if "c" in impls:
                        out.append(task("strong", "c", nprocs, distribution, shape))
            for distribution in settings["compare"]:
                for impl in impls:
                    if impl != "c":
                        out.append(task("strong", impl, nprocs, distribution,
                                        settings["shapes"][0]))
        if "weak" in kinds and "c" in impls:
            nx, ny, nz = settings["weak"]
            for ranks in sorted({1, nprocs}):
                out.append(task("weak", "c", ranks, "none", (nx * nprocs, ny, nz)))
    if "synthetic" in kinds:
        syn = settings["synthetic"]
        for nprocs in range(1, max(syn["procs"], max_procs) + 1):
            out.append({"kind": "synthetic", "impl": "synthetic", "nprocs": nprocs,
                        "serial_fraction": syn["s"], "work": syn["work"],
                        "jitter": syn["jitter"], "seed": syn["seed"],
                        "repetitions": syn["repetitions"]})
    if not out:
        raise ValueError(f"no amdahl measurement asks for kinds {', '.join(kinds)}, "
                         f"distributions {', '.join(distributions or DISTRIBUTIONS)} and P = "
                         f"{', '.join(map(str, procs or range(1, max_procs + 1)))} on at most "
                         f"{max_procs} ranks (one per core)")
    return out


def measure(kind, impl, nprocs, repetitions, distribution=None, nx=None, ny=None, nz=None,
            hugepages=False, serial_fraction=None, work=None, jitter=None, seed=0, comm=None):
    """One measurement on the first nprocs ranks; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.chapters.amdahl import kernels as amdahl
    from hpclab.kernels.api import first_ranks

    with first_ranks(comm or MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return []
        over = nprocs > launch.usable_cores()
        if kind == "synthetic":
            times = amdahl.synthetic(sub, serial_fraction, work, repetitions, jitter, seed)
            params = {"kind": kind, "serial_fraction": serial_fraction, "work": work,
                      "jitter": jitter, "oversubscribed": over}
            rows = []
            for metric, values in zip(amdahl.SYNTHETIC_METRICS, times):
                rows += records.rows(NAME, NAME, impl, nprocs, 1, params, values, metric, "s")
        else:
            times = amdahl.RUNNERS[impl](sub, distribution, nx, ny, nz,
                                         repetitions=repetitions, hugepages=hugepages)
            params = {"kind": kind, "distribution": distribution, "nx": nx, "ny": ny,
                      "nz": nz, "shape": shape_name(nx, ny, nz),
                      "hugepages": bool(hugepages), "oversubscribed": over}
            rows = records.timings(KERNEL, impl, nprocs, 1, params, times)
        return rows if sub.Get_rank() == 0 else []


def _describe(task):
    if task["kind"] == "synthetic":
        return f"synthetic P={task['nprocs']}"
    return (f"{task['kind']} {task['impl']} {task['distribution']} P={task['nprocs']} "
            f"{shape_name(task['nx'], task['ny'], task['nz'])}")


def lab_shape(profile=None, ranks=1):
    """The shape a lab times: the profile's first, its first dimension grown in steps of 24
    until the three arrays of one of ``ranks`` ranks (A, B and C: 24 bytes an element) are
    beyond the cache by :func:`hpclab.machine.beyond_cache`, so that even the most ranks
    timed add from memory. The ``quick`` profile keeps its own (its timings mean
    nothing)."""
    from hpclab import machine

    nx, ny, nz = (int(v) for v in profiles.get(NAME, profile)["shapes"][0])
    if profiles.name(profile) != "quick":
        nx = machine.beyond_cache(lambda n: 24 * n * ny * nz / ranks, nx, 24)
    return int(nx), ny, nz


def _extra(impls, hugepages, distributions=None, procs=None, repetitions=None):
    """The run's metadata; a run of chosen distributions, P or repetitions is a probe, not
    the profile's sweep, and says so (``subset``: see :mod:`hpclab.inputs`). A lab's own
    shape is not: its sweep is whole, on arrays chosen for this machine's cache."""
    what = ([f"distributions {', '.join(distributions)}"] if distributions is not None
            else []) + ([f"P = {', '.join(map(str, procs))}"] if procs is not None else []) \
        + ([f"{repetitions} repetitions"] if repetitions is not None else [])
    return {"implementations": list(impls), "hugepages": bool(hugepages),
            **({"subset": " and ".join(what) + " only"} if what else {})}


def run(profile=None, impls=IMPLS, n=None, hugepages=False, mpi_args=(), progress=True,
        engines=None, timeout=None, kinds=KINDS, shapes=None, distributions=None,
        procs=None, repetitions=None):
    """Measure on MPI engines: the matrix program on P = 1 .. cores, the synthetic
    program on up to ``max(cores, procs)`` sleeping ranks (``shapes``, ``distributions``,
    ``procs`` and ``repetitions`` as for :func:`tasks`). Returns a
    :class:`hpclab.records.Run`."""
    cores = launch.usable_cores()
    syn = profiles.get(NAME, profile)["synthetic"]["procs"] if "synthetic" in kinds else 0
    n = n or (engines.n if engines is not None else max(NPROCS, syn))
    todo = tasks(profile, impls, hugepages, min(n, cores), kinds, shapes, distributions,
                 procs, repetitions)
    todo = [t for t in todo if t["nprocs"] <= n]
    timeout = timeout or profiles.timeout(NAME, profile)
    owned = engines is None
    if owned:
        # more engines than cores only for the sleeping program; the matrix program runs on
        # P <= cores of them while the others wait outside MPI, idle
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", launch.OversubscriptionWarning)
            engines = launch.cluster(n=n, timeout=timeout, mpi_args=mpi_args, what=NAME,
                                     oversubscribe=n > cores).start()
    try:
        return on_engines(sys.modules[__name__], todo, profile=profile, n=n, engines=engines,
                          timeout=timeout, mpi_args=mpi_args, progress=progress,
                          describe=_describe,
                          extra=_extra(impls, hugepages, distributions, procs, repetitions))
    finally:
        if owned:
            engines.stop()


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True,
            kinds=KINDS):
    """The same sweeps in this MPI job, P = 1 .. its size; records on rank 0."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    todo = [t for t in tasks(profile, impls, hugepages, comm.Get_size(), kinds)
            if t["nprocs"] <= comm.Get_size()]
    return in_job(sys.modules[__name__], todo, comm=comm, profile=profile, progress=progress,
                  extra=_extra(impls, hugepages))


def check(upto=4, profile=None, mpi_args=(), timeout=None, progress=False):
    """Every implementation and distribution on 1 .. upto ranks under mpiexec (the
    chapter's part of ``python -m hpclab check amdahl``)."""
    from hpclab import check as checker

    return checker.run(NAME, upto=upto, profile=profile, mpi_args=mpi_args, timeout=timeout,
                       progress=progress)
