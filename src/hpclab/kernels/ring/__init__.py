"""Ring: two messages travel around a periodic ring of P ranks and come home.

Every variant (how one step exchanges its two messages) in three
implementations with one signature::

    run_c(comm, variant="irecv", nbytes=4, warmup=None, iterations=None, repetitions=5,
          hugepages=False)
    run_cython(...)   # Cython against mpi4py's libmpi cimports
    run_python(...)   # mpi4py buffer API

Each returns a numpy array of the time of one full ring (P steps) in seconds,
one per repetition, the slowest rank's, on every rank; each checks the sums and
the payload that come home and raises :class:`hpclab.kernels.KernelError` on
every rank when any is wrong. Variants (see ring.c):

``ssend_ordered``  even/odd ordering with MPI_Ssend; half the links idle
``send``           MPI_Send/MPI_Recv; works only while MPI buffers the message
``isend``          MPI_Isend + MPI_Recv + wait
``irecv``          MPI_Irecv + MPI_Isend + MPI_Waitall
``sendrecv``       MPI_Sendrecv per direction
``naive``          MPI_Ssend first on every rank: deadlocks (needs allow_deadlock=True,
                   see :func:`demonstrate_deadlock`)
"""
import numbers
import sys
import time

from hpclab.kernels import KernelError, check_mpi_match

check_mpi_match()

from . import _ring  # noqa: E402
from ._python import run_python as _run_python  # noqa: E402
from ._ring import VARIANTS, expected, pattern  # noqa: E402

IMPLEMENTATIONS = ("c", "cython", "python")
SAFE_VARIANTS = ("ssend_ordered", "send", "isend", "irecv", "sendrecv")
MAX_BYTES = 4 * (2**31 - 1)
# Rings per timed batch: about 1e7 rank-steps of bytes moved, at most 10,000 rings.
_BUDGET_BYTES = 1 << 27


def default_iterations(nbytes, size):
    """(warm-up, timed) rings per repetition for messages of nbytes on size ranks."""
    timed = max(10, min(10_000, _BUDGET_BYTES // (max(nbytes, 256) * max(size, 1))))
    return max(1, timed // 10), timed


def _check(comm, variant, nbytes, warmup, iterations, repetitions, allow_deadlock):
    from mpi4py import MPI

    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm must be an mpi4py communicator, got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    if isinstance(comm, MPI.Intercomm):
        raise ValueError("the ring needs an intracommunicator (e.g. MPI.COMM_WORLD)")
    if variant not in VARIANTS:
        raise ValueError(f"unknown ring variant {variant!r}: choose one of {', '.join(VARIANTS)}")
    if variant == "naive" and not allow_deadlock:
        raise ValueError(
            "the 'naive' ring deadlocks on every run: every rank waits in MPI_Ssend for a "
            "receive that is never posted. Run it under a timeout with "
            "hpclab.kernels.ring.demonstrate_deadlock(), or pass allow_deadlock=True if you "
            "have your own timeout")
    if not isinstance(nbytes, numbers.Integral) or isinstance(nbytes, bool):
        raise TypeError(f"nbytes must be an integer, got {nbytes!r}")
    if nbytes < 4 or nbytes % 4 or nbytes > MAX_BYTES:
        raise ValueError(f"nbytes must be a multiple of 4 (int32 elements) between 4 and "
                         f"{MAX_BYTES}, got {nbytes}")
    dw, di = default_iterations(nbytes, comm.Get_size())
    warmup = dw if warmup is None else warmup
    iterations = di if iterations is None else iterations
    for name, value, low in (("warmup", warmup, 0), ("iterations", iterations, 1),
                             ("repetitions", repetitions, 1)):
        if (not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low
                or value > 2**31 - 1):
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return VARIANTS.index(variant), int(nbytes), int(warmup), int(iterations), int(repetitions)


def _wrap(impl, func):
    def run(comm, variant="irecv", nbytes=4, warmup=None, iterations=None, repetitions=5,
            hugepages=False, allow_deadlock=False):
        v, nbytes, warmup, iterations, repetitions = _check(
            comm, variant, nbytes, warmup, iterations, repetitions, allow_deadlock)
        try:
            return func(comm, v, nbytes, warmup, iterations, repetitions, bool(hugepages))
        except _ring.RingError as exc:
            raise KernelError(f"ring ({impl}, {variant}) failed: {exc}") from None

    run.__name__ = run.__qualname__ = f"run_{impl}"
    run.__doc__ = f"""The ring, {impl} implementation.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm
        Any intracommunicator; the ring is a periodic 1D Cartesian communicator
        over all of its ranks (one rank is a ring of one).
    variant : str
        One of {', '.join(VARIANTS)}.
    nbytes : int
        Size of each message in bytes: a multiple of 4, at least 4 (the rank).
    warmup, iterations : int, optional
        Untimed and timed full rings per repetition (see default_iterations).
    repetitions : int
        Number of timed batches.
    hugepages : bool
        Ask for transparent huge pages for the buffers.
    allow_deadlock : bool
        Needed for the 'naive' variant, which never returns.

    Returns
    -------
    numpy.ndarray
        Seconds per full ring of each repetition, the slowest rank's, on every rank.

    Raises
    ------
    hpclab.kernels.KernelError
        On every rank, when any rank's messages came home wrong.
    """
    return run


run_c = _wrap("c", _ring.run_c)
run_cython = _wrap("cython", _ring.run_cython)
run_python = _wrap("python", _run_python)
RUNNERS = {"c": run_c, "cython": run_cython, "python": run_python}


def send_is_buffered(comm, nbytes, wait=0.25):
    """Would the plain ``send`` ring get through one step with messages of nbytes?

    Every rank starts its two sends with MPI_Isend (standard mode, as MPI_Send)
    and, without posting a receive, polls them for ``wait`` seconds. The sends
    complete only when MPI buffered them (eager protocol); then MPI_Send would
    have returned too. Afterwards the receives are posted, so this never hangs.
    Collective; the same answer on every rank.
    """
    import numpy as np
    from mpi4py import MPI

    _check(comm, "send", nbytes, 0, 1, 1, False)
    cart = comm.Create_cart([comm.Get_size()], periods=[True], reorder=False)
    try:
        left, right = cart.Shift(0, 1)
        count = nbytes // 4
        sr, sl, rr, rl = (np.zeros(count, np.int32) for _ in range(4))
        cart.Barrier()
        sends = [cart.Isend(sr, right, _ring.TAG_RIGHT), cart.Isend(sl, left, _ring.TAG_LEFT)]
        deadline = time.monotonic() + wait
        done = False
        while not done and time.monotonic() < deadline:
            done = MPI.Request.Testall(sends)
        all_done = cart.allreduce(int(done), op=MPI.MIN) == 1
        MPI.Request.Waitall([cart.Irecv(rr, left, _ring.TAG_RIGHT),
                             cart.Irecv(rl, right, _ring.TAG_LEFT)] + sends)
        return all_done
    finally:
        cart.Free()


def eager_limit(comm, sizes, wait=0.25):
    """The largest of ``sizes`` (ascending) that the plain send ring gets through,
    and the first that it does not (None when all get through)."""
    last_ok = None
    for nbytes in sizes:
        if not send_is_buffered(comm, nbytes, wait):
            return last_ok, nbytes
        last_ok = nbytes
    return last_ok, None


def demonstrate_deadlock(n=2, variant="naive", nbytes=4, impl="c", timeout=10.0, mpi_args=()):
    """Run one ring under ``mpiexec -n n`` with a timeout and report what happened.

    Returns a dict: ``deadlocked`` (the run was stopped at its timeout),
    ``seconds`` (wall time until it finished or was stopped), ``message`` (the
    launcher's error, or the program's output) and the arguments. All processes
    are stopped; nothing is left running.
    """
    from hpclab import launch

    args = [sys.executable, "-m", "hpclab.kernels.ring", "--variant", variant, "--nbytes",
            str(nbytes), "--impl", impl, "--allow-deadlock"]
    start = time.monotonic()
    result = {"variant": variant, "nbytes": nbytes, "impl": impl, "n": n, "timeout": timeout}
    try:
        proc = launch.mpirun(args, n=n, timeout=timeout, mpi_args=mpi_args,
                             what=f"the {variant} ring ({impl}, {nbytes} B)")
        result.update(deadlocked=False, message=proc.stdout.strip())
    except TimeoutError as exc:
        result.update(deadlocked=True, message=str(exc).splitlines()[0])
    result["seconds"] = time.monotonic() - start
    return result


__all__ = ["run_c", "run_cython", "run_python", "RUNNERS", "IMPLEMENTATIONS", "VARIANTS",
           "SAFE_VARIANTS", "default_iterations", "expected", "pattern", "send_is_buffered",
           "eager_limit", "demonstrate_deadlock", "KernelError"]
