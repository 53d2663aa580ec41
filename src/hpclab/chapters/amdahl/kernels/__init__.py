"""Amdahl: C = A + B on 3D arrays that rank 0 creates, distributes and collects.

The program of report 001, section 2, timed phase by phase, in three
implementations with one signature generated from the declaration
(:mod:`hpclab.chapters.amdahl.declaration`)::

    run_c(comm, distribution="none", nx=2400, ny=100, nz=100, repetitions=3,
          hugepages=False)
    run_cython(...)   # Cython against mpi4py's libmpi cimports
    run_python(...)   # mpi4py buffer API and numpy

Each returns an array of shape (5, repetitions): the seconds of the phases
``create`` (rank 0 fills A and B), ``distribute`` (every rank receives its blocks),
``add`` (every rank adds its blocks), ``collect`` (rank 0 receives C) and ``total``.
Rank 0 checks every element of C against A + B and every rank raises
:class:`hpclab.kernels.KernelError` when one is wrong. Distributions:

``none``  the flattened array in P contiguous pieces (MPI_Scatterv / MPI_Gatherv)
``1d``    slabs of a P x 1 x 1 process grid        } each block one MPI subarray
``2d``    pencils of a px x py x 1 grid             } datatype of the global array
``3d``    cubes of a px x py x pz grid (MPI_Dims_create)

:func:`synthetic` is a program whose serial fraction the caller sets: it sleeps
instead of computing, so that a fit can be checked against a known answer.
"""
import time

import numpy as np

from hpclab.chapters.amdahl.declaration import DISTRIBUTIONS, KERNEL
from hpclab.kernels import KernelError, check_mpi_match
from hpclab.kernels.api import build, check_comm

check_mpi_match()

from . import _amdahl
from ._amdahl import PHASES, first_wrong
from ._python import run_python as _run_python, values

IMPLEMENTATIONS = KERNEL.implementations
GRID_DIMS = {"none": (0, 1, 1), "1d": (0, 1, 1), "2d": (0, 0, 1), "3d": (0, 0, 0)}


def process_grid(distribution, size):
    """The process grid (ranks per dimension) of a distribution on size ranks."""
    from mpi4py import MPI

    if distribution not in GRID_DIMS:
        raise ValueError(f"unknown distribution {distribution!r}: choose one of "
                         f"{', '.join(DISTRIBUTIONS)}")
    if distribution == "none":
        return (size,)
    return tuple(MPI.Compute_dims(size, list(GRID_DIMS[distribution])))


def memory_needed(nx, ny, nz, size):
    """Bytes rank 0 allocates: A, B, C and its own three blocks."""
    n = nx * ny * nz
    return 8 * (3 * n + 3 * -(-n // size))


def _prepare(comm, v):
    from hpclab import machine

    size = comm.Get_size()
    shape = (v["nx"], v["ny"], v["nz"])
    n = int(np.prod(shape))
    grid = process_grid(v["distribution"], size)
    if v["distribution"] == "none":
        if n > 2**31 - 1:
            raise ValueError(f"{n:,} elements do not fit MPI_Scatterv's int displacements: "
                             "use a topology (1d, 2d, 3d) or fewer than 2^31 elements")
    else:
        for d, (extent, ranks) in enumerate(zip(shape, grid)):
            if extent < ranks:
                raise ValueError(
                    f"the {v['distribution']} grid {'x'.join(map(str, grid))} of {size} ranks "
                    f"cuts dimension {d} ({extent} points) into {ranks} blocks: every rank "
                    "needs at least one point; use a larger shape or fewer ranks")
    need, have = memory_needed(*shape, size), machine.memory_bytes()
    if have and need > have / 2:
        raise ValueError(f"rank 0 would need {need / 2**30:.1f} GiB for arrays of "
                         f"{'x'.join(map(str, shape))} doubles, more than half of this machine's "
                         f"{have / 2**30:.1f} GiB: use a smaller shape")
    return (DISTRIBUTIONS.index(v["distribution"]), v["nx"], v["ny"], v["nz"],
            v["repetitions"], v["hugepages"])


RUNNERS = build(KERNEL, {"c": _amdahl.run_c, "cython": _amdahl.run_cython,
                         "python": _run_python},
                (_amdahl.AmdahlError, KernelError), prepare=_prepare)
run_c, run_cython, run_python = (RUNNERS[i] for i in IMPLEMENTATIONS)


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check amdahl``: every distribution on a
    shape that no rank count from 2 to 4 divides evenly, and on one that 2 and 4 do."""
    for shape in ((7, 5, 3), (12, 6, 4)):
        for distribution in DISTRIBUTIONS:
            yield {"distribution": distribution, "nx": shape[0], "ny": shape[1],
                   "nz": shape[2], "repetitions": 2}


def inject_fault(comm):
    """Test hook of the correctness runner: the last rank adds 1 to element 0 of its
    block of C."""
    _amdahl._set_fault(0)


# ----------------------------------------------------------------------------- synthetic

SYNTHETIC_METRICS = ("serial", "parallel", "total", "asked")


def _wait_quietly(comm, poll=5e-4):
    """A barrier that sleeps instead of polling, so waiting ranks leave the cores free."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(poll)


def _sleep(seconds):
    start = time.perf_counter()
    time.sleep(max(seconds, 0.0))
    return time.perf_counter() - start


def synthetic(comm, serial_fraction, work=0.2, repetitions=3, jitter=0.0, seed=0):
    """A program with a known serial fraction, in the spirit of HPC Carpentry's ``amdahl``.

    One repetition: rank 0 alone sleeps ``serial_fraction * work`` seconds (the serial
    part), then every rank sleeps its share ``(1 - serial_fraction) * work / P`` (the
    parallel part). Sleeping ranks need no core, so P may exceed the cores. ``jitter``
    stretches a repetition's two parts by ``1 + jitter * z`` (z standard normal, drawn
    from ``seed`` and the repetition, the same on every rank): the scatter of a real
    machine from run to run, made repeatable, with the ranks' shares still equal, so the
    program's serial fraction stays exactly ``serial_fraction``.

    Returns an array (4, repetitions): ``serial`` (rank 0's serial part as it slept),
    ``parallel`` (the slowest rank's share as it slept), ``total`` (their sum) and
    ``asked`` (what the two sleeps asked for) in seconds, the same on every rank.
    ``total - asked`` is the time the system took to wake the sleepers: a cost every
    run pays whatever P, so a fit counts it as serial. Waiting ranks sleep too; their
    wake-up is not counted. Collective.
    """
    check_comm(KERNEL, comm)
    if not 0.0 <= float(serial_fraction) <= 1.0:
        raise ValueError(f"serial_fraction must be between 0 and 1, got {serial_fraction}")
    if not 0.0 < float(work) <= 60.0:
        raise ValueError(f"work must be between 0 and 60 seconds, got {work}")
    if not 0.0 <= float(jitter) < 0.3:
        raise ValueError(f"jitter must be between 0 and 0.3, got {jitter}")
    repetitions = KERNEL.param("repetitions").check(repetitions, KERNEL.slug)
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(int(seed))
    out = np.zeros((len(SYNTHETIC_METRICS), repetitions))
    for r in range(repetitions):
        noise = 1.0 + jitter * rng.standard_normal(2)
        asked = (serial_fraction * work * noise[0],
                 (1.0 - serial_fraction) * work / size * noise[1])
        _wait_quietly(comm)
        serial = _sleep(asked[0]) if rank == 0 else 0.0
        _wait_quietly(comm)
        mine = _sleep(asked[1])
        _wait_quietly(comm)
        serial = comm.bcast(serial, root=0)
        parallel = comm.allreduce(mine, op=_max())
        out[:, r] = serial, parallel, serial + parallel, max(asked[0], 0.0) + max(asked[1], 0.0)
    return out


def _max():
    from mpi4py import MPI

    return MPI.MAX


__all__ = ["run_c", "run_cython", "run_python", "RUNNERS", "IMPLEMENTATIONS", "DISTRIBUTIONS",
           "PHASES", "KERNEL", "process_grid", "memory_needed", "values", "first_wrong",
           "synthetic", "SYNTHETIC_METRICS", "KernelError"]
