"""STREAM: sustainable memory bandwidth of copy, scale, add and triad (OpenMP threads).

Two implementations with one signature::

    run_c(n=None, ntimes=10, threads=None, hugepages=False, comm=None)
    run_cython(...)   # the same loops with Cython's prange

Each returns a numpy array ``times[op, trial]`` in seconds for the four
operations (:data:`OPS`) and the trials after the first (STREAM does not count
the first trial). Each validates its arrays as STREAM's ``checkSTREAMresults``
does and raises :class:`hpclab.kernels.KernelError` when they are wrong.

``n`` is the length of each of the three arrays in doubles; by default the
smallest that STREAM's rule allows here (:func:`min_elements`: each array at
least four times all caches together). With ``comm`` (an mpi4py communicator)
every rank runs on its own arrays and the ranks start each kernel together
(HPCC's StarSTREAM); the times are this rank's.
"""
import os

import numpy as np

from hpclab.chapters.stream.declaration import KERNEL
from hpclab.kernels import KernelError, check_mpi_match
from hpclab.kernels.api import build

check_mpi_match()

# compiled: mypy finds no stub for this one module (the other kernels' resolve)
from . import _stream  # type: ignore[attr-defined]

IMPLEMENTATIONS = KERNEL.implementations
OPS = KERNEL.metric_names
# bytes moved per element, as STREAM counts them (no write-allocate traffic)
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}
# floating-point operations per element
FLOPS_PER_ELEMENT = {"copy": 0, "scale": 1, "add": 1, "triad": 2}
MAX_NTIMES = _stream.MAX_NTIMES
# the triad's scalar and the validation tolerance of stream.c (checkSTREAMresults)
SCALAR = _stream.SCALAR
EPSILON = _stream.EPSILON
expected = _stream.expected
openmp = _stream.openmp


def min_elements(cache_bytes=None):
    """STREAM's rule: each array (of doubles) at least 4x the sum of all caches."""
    from hpclab import machine

    cache = machine.total_cache_bytes() if cache_bytes is None else cache_bytes
    return int(np.ceil(4 * cache / 8))


def default_threads():
    """OMP_NUM_THREADS when set, else the cores this process may use."""
    from hpclab import launch

    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(env) if env.isdigit() and int(env) > 0 else launch.usable_cores()


def _prepare(comm, v):
    n = min_elements() if v["n"] is None else v["n"]
    threads = default_threads() if v["threads"] is None else v["threads"]
    return n, v["ntimes"], threads, v["hugepages"]


def _drop_first_trial(times, values):
    return np.asarray(times)[:, 1:]


RUNNERS = build(KERNEL, {"c": _stream.run_c, "cython": _stream.run_cython},
                (_stream.StreamError,), prepare=_prepare, finish=_drop_first_trial)
run_c, run_cython = (RUNNERS[i] for i in IMPLEMENTATIONS)


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check stream``: small odd arrays,
    one and two threads, alone on each rank and together on all of them (StarSTREAM)."""
    for n in (1, 10_007):
        for threads in (1, 2):
            yield {"n": n, "ntimes": 3, "threads": threads}
        yield {"n": n, "ntimes": 3, "threads": 1, "comm": comm}


def inject_fault(comm):
    """Test hook of the correctness runner: element 5 of one array is zeroed."""
    _stream._set_fault(5)


def bandwidth(times, n):
    """Bytes per second of each operation and trial (STREAM's byte counts)."""
    per = np.array([BYTES_PER_ELEMENT[op] for op in OPS], dtype=float)[:, None]
    return per * n / np.asarray(times)


__all__ = ["run_c", "run_cython", "RUNNERS", "IMPLEMENTATIONS", "OPS", "BYTES_PER_ELEMENT",
           "FLOPS_PER_ELEMENT", "KERNEL", "SCALAR", "EPSILON", "min_elements", "default_threads",
           "bandwidth", "expected", "add_seconds_slowest",
           "openmp", "KernelError"]


def add_seconds_slowest(comm, n, ntimes=6, hugepages=False):
    """STREAM add on every rank of ``comm`` at once (one thread, ``n`` elements each), timed
    as the other chapters' benches time their kernels beside it: each repetition's slowest
    rank, the best repetition. (A rank's own best, as STREAM reports it, flatters add beside
    a phase that ends when its slowest rank does.) ``hugepages``: as the kernel beside it
    allocates its arrays."""
    from mpi4py import MPI

    t = run_c(n=n, ntimes=ntimes, threads=1, hugepages=hugepages, comm=comm)
    mine = np.ascontiguousarray(t[KERNEL.metric_names.index("add")], dtype=float)
    slowest = np.empty_like(mine)
    comm.Allreduce(mine, slowest, op=MPI.MAX)
    return float(np.min(slowest))
