"""PingPong: one-way time of a message between ranks 0 and 1.

Four implementations with one signature, generated from the declaration
(:mod:`hpclab.chapters.pingpong.declaration`)::

    run_c(comm, nbytes, warmup=None, iterations=None, repetitions=5, hugepages=False)
    run_cython(...)   # Cython against mpi4py's libmpi cimports
    run_python(...)   # mpi4py buffer API (Send/Recv)
    run_pickle(...)   # mpi4py pickle API (send/recv of a bytes object)

Each returns an array of shape (1, repetitions): the one-way time in seconds of
each repetition (the slowest rank's), on every rank. Ranks beyond 1 only join
the barriers. Iteration counts default to osu_latency's: 100 warm-up and
10,000 timed round trips up to 8 KiB, 10 and 1,000 above.
"""
from hpclab.chapters.pingpong.declaration import KERNEL
from hpclab.kernels import KernelError, check_mpi_match
from hpclab.kernels.api import build

check_mpi_match()

from . import _pingpong
from ._python import pattern, run_pickle as _run_pickle, run_python as _run_python

IMPLEMENTATIONS = KERNEL.implementations
SMALL_MESSAGE_LIMIT = 8192


def default_iterations(nbytes):
    """osu_latency's (warm-up, timed) round trips for a message of nbytes."""
    return (100, 10_000) if nbytes <= SMALL_MESSAGE_LIMIT else (10, 1_000)


def _prepare(comm, v):
    warmup, iterations = default_iterations(v["nbytes"])
    return (v["nbytes"], warmup if v["warmup"] is None else v["warmup"],
            iterations if v["iterations"] is None else v["iterations"], v["repetitions"],
            v["hugepages"])


RUNNERS = build(KERNEL, {"c": _pingpong.run_c, "cython": _pingpong.run_cython,
                         "python": _run_python, "pickle": _run_pickle},
                (_pingpong.PingPongError, KernelError), prepare=_prepare)
run_c, run_cython, run_python, run_pickle = (RUNNERS[i] for i in IMPLEMENTATIONS)



def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check pingpong``: sizes around the
    eager limit and odd ones, few iterations."""
    for nbytes in (0, 1, 7, 4096, 8193, (1 << 20) + 3):
        yield {"nbytes": nbytes, "warmup": 1, "iterations": 3, "repetitions": 2}


def inject_fault(comm):
    """Test hook of the correctness runner: rank 1 flips byte 5 of what it receives."""
    _pingpong._set_fault_byte(5)


__all__ = ["run_c", "run_cython", "run_python", "run_pickle", "RUNNERS", "IMPLEMENTATIONS",
           "KERNEL", "default_iterations", "pattern", "KernelError"]
