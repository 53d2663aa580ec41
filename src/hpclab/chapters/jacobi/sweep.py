"""The Jacobi sweep: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys

from hpclab import launch, profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import over_ranks, over_ranks_in_job, some_impls

NAME = "jacobi"
KERNEL = registry.get(NAME)
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
DECOMPOSITIONS = KERNEL.param("decomposition").choices


def grid_of(decomposition, nprocs):
    from hpclab.chapters.jacobi.kernels import process_grid

    return process_grid(decomposition, nprocs)


def tasks(profile=None, impls=IMPLS, max_procs=None, weak=None, strong=True,
          weak_impls=None):
    """The measurements a profile asks for, in the order they run; ``weak`` replaces the
    profile's points per rank of the weak sweep, ``strong=False`` leaves out the strong
    one (a lab times the weak sweep at its own size). The weak sweep runs the C kernel with
    every decomposition (when in ``impls``), and the other implementations of ``weak_impls``
    (of ``impls``) at the most ranks only, with cube blocks without overlap."""
    settings = dict(profiles.get(NAME, profile))
    if weak is not None:
        settings["weak"] = [int(v) for v in weak]
    if not strong:
        settings["strong"] = []
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown jacobi implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    weak_impls = some_impls(impls, weak_impls, "weak_impls")
    max_procs = max_procs or NPROCS
    base = {"sweeps": settings["sweeps"], "repetitions": settings["repetitions"]}
    out = []
    for nprocs in range(1, max_procs + 1):
        for L in settings["weak"]:
            for d in DECOMPOSITIONS:
                dims = grid_of(d, nprocs)
                for overlap in ((False, True) if d == "cube" else (False,)):
                    for impl in weak_impls:
                        if impl == "c" or (d == "cube" and not overlap
                                           and nprocs == max_procs):
                            out.append({"kind": "weak", "impl": impl, "nprocs": nprocs,
                                        "decomposition": d, "overlap": overlap, "L": L,
                                        "N": 0, "nx": L * dims[0], "ny": L * dims[1],
                                        "nz": L * dims[2], **base})
        for N in settings["strong"]:
            for d in DECOMPOSITIONS:
                for impl in impls:
                    if impl == "c" or (N == settings["strong"][0] and d == "cube"):
                        out.append({"kind": "strong", "impl": impl, "nprocs": nprocs,
                                    "decomposition": d, "overlap": False, "L": 0, "N": N,
                                    "nx": N, "ny": N, "nz": N, **base})
    return out


def measure(kind, impl, nprocs, decomposition, overlap, L, N, nx, ny, nz, sweeps, repetitions,
            comm=None):
    """One measurement on the first nprocs ranks; the records, on rank 0 only."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.kernels.api import first_ranks

    with first_ranks(comm or MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return []
        times = jacobi.RUNNERS[impl](sub, decomposition, nx, ny, nz, overlap=overlap,
                                     sweeps=sweeps, repetitions=repetitions)
        params = {"kind": kind, "decomposition": decomposition, "overlap": bool(overlap),
                  "L": L, "N": N, "nx": nx, "ny": ny, "nz": nz,
                  "grid": "x".join(map(str, grid_of(decomposition, nprocs))),
                  "oversubscribed": nprocs > launch.usable_cores(),
                  # how the busiest rank stored its new values (the model's bytes per update)
                  "stores": jacobi.stores(impl, sub, decomposition, (nx, ny, nz))}
        rows = records.timings(KERNEL, impl, nprocs, 1, params, times)
        return rows if sub.Get_rank() == 0 else []


def _describe(task):
    return (f"{task['kind']} {task['impl']} {task['decomposition']} P={task['nprocs']} "
            f"{task['nx']}x{task['ny']}x{task['nz']}")


def run(profile=None, impls=IMPLS, n=None, mpi_args=(), progress=True, engines=None,
        timeout=None, hugepages=False, weak=None, strong=True, weak_impls=None):
    """Measure on n MPI engines (default: the cores; P never exceeds the cores); ``weak``,
    ``strong`` and ``weak_impls`` as for :func:`tasks`."""
    return over_ranks(sys.modules[__name__], profile, impls, n, mpi_args, progress, engines,
                      timeout, weak=weak, strong=strong, weak_impls=weak_impls)


def lab_points(profile=None):
    """Points per rank and dimension L for a lab's timed weak sweep: the smallest L from the
    profile's largest on, in steps of 8, whose three arrays of one rank (u, unew, f with
    their halo: 24 bytes a point) are beyond the cache by :func:`hpclab.machine.beyond_cache`,
    so that even one rank sweeps from memory. The ``quick`` profile keeps its own L (its
    timings mean nothing)."""
    from hpclab import machine

    own = int(max(profiles.get(NAME, profile)["weak"]))
    if profiles.name(profile) == "quick":
        return own
    return int(machine.beyond_cache(lambda L: 24 * (L + 2) ** 3, own, 8))


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same sweeps in this MPI job, P = 1 .. its size; records on rank 0."""
    return over_ranks_in_job(sys.modules[__name__], profile, impls, comm, progress)
