"""The stencil sweeps: what every MPI rank runs (see :mod:`hpclab.chapters`)."""
from __future__ import annotations

import sys

from hpclab import launch, profiles, records
from hpclab.kernels import registry
from hpclab.sweeps import over_ranks, over_ranks_in_job

NAME = "stencil"
KERNEL = registry.get(NAME)
NPROCS = KERNEL.procs("default_procs")
IMPLS = KERNEL.implementations
OPERATORS = KERNEL.param("operator").choices


def tasks(profile=None, impls=IMPLS, max_procs=None):
    """The measurements a profile asks for, in the order they run:

    * ``derivative``: every operator and order of the profile, baseline and each of its
      blocks, on its cubes of n points, every implementation, on the most ranks;
    * ``convergence``: the C Laplacian of every order on the profile's small cubes, one
      rank, for the error's fall with the spacing;
    * ``scaling``: the C Laplacian of order 8 on the first cube, baseline, P = 1 .. the
      most ranks (strong scaling);
    * ``propagator``: the wave propagator (C) of each order, size and share of the stable
      time step of the profile's ``propagator``, on the most ranks.
    """
    settings = profiles.get(NAME, profile)
    unknown = set(impls) - set(IMPLS)
    if unknown or not impls:
        raise ValueError(f"unknown stencil implementation(s) {sorted(unknown)}: choose from "
                         f"{', '.join(IMPLS)}")
    most = max_procs or NPROCS
    base = {"applications": settings["applications"], "repetitions": settings["repetitions"],
            "threads": 1}
    out = []

    def add(kind, impl, nprocs, operator, order, n, blocks):
        out.append({"kind": kind, "impl": impl, "nprocs": nprocs, "operator": operator,
                    "order": order, "n": n, "block3": blocks[0], "block2": blocks[1],
                    **base})

    for n in settings["n"]:
        for order in settings["orders"]:
            for operator in OPERATORS:
                for blocks in [(0, 0), *map(tuple, settings["blocks"])]:
                    for impl in impls:
                        add("derivative", impl, most, operator, order, n, blocks)
    if "c" in impls:
        for n in settings["convergence_n"]:
            for order in settings["orders"]:
                add("convergence", "c", 1, "laplacian", order, n, (0, 0))
        for nprocs in range(1, most + 1):
            add("scaling", "c", nprocs, "laplacian", 8, settings["n"][0], (0, 0))
        wave = settings["propagator"]
        for n in wave["n"]:
            for order in wave["orders"]:
                for fraction in wave["dt_fractions"]:
                    add("propagator", "c", thick_enough(most, n, order), "laplacian", order,
                        n, (0, 0))
                    out[-1].update(mode=wave["mode"], periods=wave["periods"],
                                   dt_fraction=fraction)
    return out


def lab_points(profile=None, ranks=1, order=8):
    """Points per axis n of the cube a lab times on ``ranks`` ranks: the smallest n from 64
    on, in steps of 8, whose two arrays per rank (u with its halo of order / 2 and the
    result, 16 bytes a point) are beyond the cache by :func:`hpclab.machine.beyond_cache`,
    so that the Laplacian streams from memory. The ``quick`` profile times its own small
    cube (its timings mean nothing)."""
    from hpclab import machine

    if profiles.name(profile) == "quick":
        return int(profiles.get(NAME, profile)["n"][0])
    r = order // 2
    return int(machine.beyond_cache(lambda n: 16 * (n + 2 * r) ** 3 / max(1, ranks), 64, 8))


def thick_enough(most, n, order):
    """The most ranks, up to ``most``, whose blocks of an n³ cube are at least as thick as
    the halo of this order (order / 2) along every cut axis."""
    from mpi4py import MPI

    for p in range(most, 1, -1):
        dims = MPI.Compute_dims(p, [0, 0, 0])
        if all(q == 1 or n // q >= order // 2 for q in dims):
            return p
    return 1


# the propagator's metrics (stencil.h's hpclab_wave_metric) and their units
WAVE_UNITS = {"step": "s", "compute": "s", "halo": "s", "error": "1", "steps": "count"}


def measure(kind, impl, nprocs, operator, order, n, block3, block2, threads, applications,
            repetitions, mode=0, periods=0.0, dt_fraction=0.0, comm=None):
    """One measurement on the first nprocs ranks; the records, on rank 0 only. The
    propagator's records carry its own metrics (:data:`WAVE_UNITS`) and its ``mode,
    periods, dt_fraction``; the others have them 0."""
    from mpi4py import MPI

    from hpclab.chapters.stencil import kernels as stencil
    from hpclab.kernels.api import first_ranks

    with first_ranks(comm or MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return []
        p1, p2, p3 = stencil.process_grid(nprocs)
        params = {"kind": kind, "operator": operator, "order": order, "n": n,
                  "blocked": bool(block3), "block3": block3, "block2": block2,
                  "grid": f"{p1}x{p2}x{p3}", "mode": mode, "periods": periods,
                  "dt_fraction": dt_fraction,
                  "oversubscribed": nprocs * threads > launch.usable_cores(),
                  # how the busiest rank stored the output (the model's bytes per point)
                  "stores": stencil.stores(impl, nprocs, n, order, kind,
                                           stencil.node_ranks(sub))}
        if kind == "propagator":
            times = stencil.propagate(sub, order=order, n=n, mode=mode, periods=periods,
                                      dt_fraction=dt_fraction, block3=block3, block2=block2,
                                      threads=threads, repetitions=repetitions)
            rows = [r for name, values in zip(stencil.WAVE_METRICS, times)
                    for r in records.rows(NAME, NAME, impl, nprocs, threads, params, values,
                                          name, WAVE_UNITS[name])]
        else:
            times = stencil.RUNNERS[impl](sub, operator=operator, order=order, n1=n, n2=n,
                                          n3=n, block3=block3, block2=block2, threads=threads,
                                          applications=applications, repetitions=repetitions)
            rows = records.timings(KERNEL, impl, nprocs, threads, params, times)
        return rows if sub.Get_rank() == 0 else []


def _describe(task):
    blocked = f" blocks {task['block3']}x{task['block2']}" if task["block3"] else ""
    if task["kind"] == "propagator":
        blocked += f" dt {task['dt_fraction']:g} of the stable step"
    return (f"{task['kind']} {task['impl']} {task['operator']} order {task['order']} "
            f"n={task['n']} P={task['nprocs']}{blocked}")


def run(profile=None, impls=IMPLS, n=None, mpi_args=(), progress=True, engines=None,
        timeout=None, hugepages=False):
    """Measure on n MPI engines (default: the cores; P never exceeds the cores)."""
    return over_ranks(sys.modules[__name__], profile, impls, n, mpi_args, progress, engines,
                      timeout)


def run_mpi(comm=None, profile=None, impls=IMPLS, hugepages=False, progress=True):
    """The same measurements in this MPI job, P = 1 .. its size; records on rank 0."""
    return over_ranks_in_job(sys.modules[__name__], profile, impls, comm, progress)
