"""PingPong: one-way time of a message between ranks 0 and 1.

Four implementations with one signature::

    run_c(comm, nbytes, warmup=None, iterations=None, repetitions=5, hugepages=False)
    run_cython(...)   # Cython against mpi4py's libmpi cimports
    run_python(...)   # mpi4py buffer API (Send/Recv)
    run_pickle(...)   # mpi4py pickle API (send/recv of a bytes object)

Each returns a numpy array of one-way times in seconds, one per repetition
(the slowest rank's), on every rank. Ranks beyond 1 only join the barriers.
Iteration counts default to osu_latency's: 100 warm-up and 10,000 timed round
trips up to 8 KiB, 10 and 1,000 above.
"""
import numbers

from hpclab.kernels import KernelError, check_mpi_match

check_mpi_match()

from . import _pingpong  # noqa: E402
from ._python import pattern  # noqa: E402
from ._python import run_pickle as _run_pickle, run_python as _run_python  # noqa: E402

IMPLEMENTATIONS = ("c", "cython", "python", "pickle")
MAX_BYTES = 2**31 - 1
SMALL_MESSAGE_LIMIT = 8192
# What one round trip moves, for the models: two messages of nbytes each.
MESSAGES_PER_ROUND_TRIP = 2


def default_iterations(nbytes):
    """osu_latency's (warm-up, timed) round trips for a message of nbytes."""
    return (100, 10_000) if nbytes <= SMALL_MESSAGE_LIMIT else (10, 1_000)


def _check(comm, nbytes, warmup, iterations, repetitions):
    from mpi4py import MPI

    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm must be an mpi4py communicator, got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    if comm.Get_size() < 2:
        raise ValueError(
            f"pingpong needs at least 2 MPI ranks, this communicator has {comm.Get_size()}: "
            "run it with `mpiexec -n 2 ...` or on `hpclab.launch.cluster(n=2)`")
    if not isinstance(nbytes, numbers.Integral) or isinstance(nbytes, bool):
        raise TypeError(f"nbytes must be an integer, got {nbytes!r}")
    if not 0 <= nbytes <= MAX_BYTES:
        raise ValueError(f"nbytes must be between 0 and {MAX_BYTES} (an MPI count), got {nbytes}")
    dw, di = default_iterations(nbytes)
    warmup = dw if warmup is None else warmup
    iterations = di if iterations is None else iterations
    for name, value, low in (("warmup", warmup, 0), ("iterations", iterations, 1),
                             ("repetitions", repetitions, 1)):
        if not isinstance(value, numbers.Integral) or value < low or value > 2**31 - 1:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(nbytes), int(warmup), int(iterations), int(repetitions)


def _wrap(impl, func):
    def run(comm, nbytes, warmup=None, iterations=None, repetitions=5, hugepages=False):
        nbytes, warmup, iterations, repetitions = _check(comm, nbytes, warmup, iterations,
                                                         repetitions)
        try:
            return func(comm, nbytes, warmup, iterations, repetitions, bool(hugepages))
        except _pingpong.PingPongError as exc:
            raise KernelError(f"pingpong ({impl}) failed: {exc}") from None

    run.__name__ = f"run_{impl}"
    run.__qualname__ = run.__name__
    run.__doc__ = f"""PingPong, {impl} implementation.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        A communicator of at least 2 ranks; ranks 0 and 1 exchange messages.
    nbytes : int
        Message size in bytes, 0 to 2**31 - 1.
    warmup, iterations : int, optional
        Untimed and timed round trips per repetition (osu_latency's counts by default).
    repetitions : int
        Number of timed batches.
    hugepages : bool
        Ask for transparent huge pages for the buffers.

    Returns
    -------
    numpy.ndarray
        One-way time in seconds of each repetition, the slowest rank's, on every rank.

    Raises
    ------
    hpclab.kernels.KernelError
        On every rank, when any rank received wrong bytes.
    """
    return run


run_c = _wrap("c", _pingpong.run_c)
run_cython = _wrap("cython", _pingpong.run_cython)
run_python = _wrap("python", _run_python)
run_pickle = _wrap("pickle", _run_pickle)

RUNNERS = {"c": run_c, "cython": run_cython, "python": run_python, "pickle": run_pickle}


__all__ = ["run_c", "run_cython", "run_python", "run_pickle", "RUNNERS", "IMPLEMENTATIONS",
           "default_iterations", "pattern", "KernelError"]
