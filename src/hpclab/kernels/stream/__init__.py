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
import numbers
import os

import numpy as np

from hpclab.kernels import KernelError, check_mpi_match

check_mpi_match()

from . import _stream  # noqa: E402

IMPLEMENTATIONS = ("c", "cython")
OPS = ("copy", "scale", "add", "triad")
# bytes moved per element, as STREAM counts them (no write-allocate traffic)
BYTES_PER_ELEMENT = {"copy": 16, "scale": 16, "add": 24, "triad": 24}
# floating-point operations per element
FLOPS_PER_ELEMENT = {"copy": 0, "scale": 1, "add": 1, "triad": 2}
MAX_NTIMES = _stream.MAX_NTIMES
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


def _check(n, ntimes, threads, comm):
    if n is None:
        n = min_elements()
    for name, value, low, high in (("n", n, 1, 2**40), ("ntimes", ntimes, 2, MAX_NTIMES)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"{name} must be an integer, got {value!r}")
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low} and {high}, got {value}"
                             + (" (STREAM counts the trials after the first: at least 2)"
                                if name == "ntimes" else ""))
    threads = default_threads() if threads is None else threads
    if not isinstance(threads, numbers.Integral) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if comm is not None:
        from mpi4py import MPI

        if not isinstance(comm, MPI.Comm) or comm == MPI.COMM_NULL:
            raise TypeError(f"comm must be an mpi4py communicator or None, got {comm!r}")
    return int(n), int(ntimes), int(threads)


def _wrap(impl, func):
    def run(n=None, ntimes=10, threads=None, hugepages=False, comm=None):
        n, ntimes, threads = _check(n, ntimes, threads, comm)
        try:
            times = func(n, ntimes, threads, bool(hugepages), comm)
        except _stream.StreamError as exc:
            raise KernelError(f"stream ({impl}) failed: {exc}") from None
        return times[:, 1:]

    run.__name__ = run.__qualname__ = f"run_{impl}"
    run.__doc__ = f"""STREAM, {impl} implementation.

    Parameters
    ----------
    n : int, optional
        Elements (doubles) per array; default: STREAM's minimum for this machine.
    ntimes : int
        Trials, the first of which is not returned (STREAM's NTIMES, at least 2).
    threads : int, optional
        OpenMP threads; default OMP_NUM_THREADS or the usable cores.
    hugepages : bool
        Ask for transparent huge pages for the arrays.
    comm : mpi4py.MPI.Comm, optional
        Start every kernel together with the other ranks of comm (StarSTREAM).

    Returns
    -------
    numpy.ndarray
        Seconds of shape (4, ntimes - 1): copy, scale, add, triad by trial.

    Raises
    ------
    hpclab.kernels.KernelError
        The arrays failed validation, or the threads or memory were not available.
    """
    return run


run_c = _wrap("c", _stream.run_c)
run_cython = _wrap("cython", _stream.run_cython)
RUNNERS = {"c": run_c, "cython": run_cython}


def bandwidth(times, n):
    """Bytes per second of each operation and trial (STREAM's byte counts)."""
    per = np.array([BYTES_PER_ELEMENT[op] for op in OPS], dtype=float)[:, None]
    return per * n / np.asarray(times)


__all__ = ["run_c", "run_cython", "RUNNERS", "IMPLEMENTATIONS", "OPS", "BYTES_PER_ELEMENT",
           "FLOPS_PER_ELEMENT", "min_elements", "default_threads", "bandwidth", "expected",
           "openmp", "KernelError"]
