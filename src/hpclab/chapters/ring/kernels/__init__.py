"""Ring: two messages travel around a periodic ring of P ranks and come home.

Every variant (how one step exchanges its two messages) in three
implementations with one signature, generated from the declaration
(:mod:`hpclab.chapters.ring.declaration`)::

    run_c(comm, variant="irecv", nbytes=4, warmup=None, iterations=None, repetitions=5,
          hugepages=False)
    run_cython(...)   # Cython against mpi4py's libmpi cimports
    run_python(...)   # mpi4py buffer API

Each returns an array of shape (1, repetitions): the time of one full ring (P
steps) in seconds per repetition, the slowest rank's, on every rank; each checks the sums and
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
import os
import sys
import time

from hpclab.chapters.ring.declaration import KERNEL, VARIANTS
from hpclab.kernels import KernelError, check_mpi_match
from hpclab.kernels.api import build

check_mpi_match()

from . import _ring
from ._python import run_python as _run_python
from ._ring import expected, pattern

IMPLEMENTATIONS = KERNEL.implementations
SAFE_VARIANTS = tuple(v for v in VARIANTS if v != "naive")
# Rings per timed batch: about 1e7 rank-steps of bytes moved, at most 10,000 rings.
_BUDGET_BYTES = 1 << 27


def default_iterations(nbytes, size):
    """(warm-up, timed) rings per repetition for messages of nbytes on size ranks."""
    timed = max(10, min(10_000, _BUDGET_BYTES // (max(nbytes, 256) * max(size, 1))))
    return max(1, timed // 10), timed


def _prepare(comm, v):
    if v["variant"] == "naive" and not v["allow_deadlock"]:
        raise ValueError(
            "the 'naive' ring deadlocks on every run: every rank waits in MPI_Ssend for a "
            "receive that is never posted. Run it under a timeout with "
            "hpclab.chapters.ring.kernels.demonstrate_deadlock(), or pass allow_deadlock=True if "
            "you have your own timeout")
    warmup, iterations = default_iterations(v["nbytes"], comm.Get_size())
    return (VARIANTS.index(v["variant"]), v["nbytes"],
            warmup if v["warmup"] is None else v["warmup"],
            iterations if v["iterations"] is None else v["iterations"], v["repetitions"],
            v["hugepages"])


RUNNERS = build(KERNEL, {"c": _ring.run_c, "cython": _ring.run_cython, "python": _run_python},
                (_ring.RingError, KernelError), prepare=_prepare)
run_c, run_cython, run_python = (RUNNERS[i] for i in IMPLEMENTATIONS)


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

    from hpclab.kernels.api import check_comm

    check_comm(KERNEL, comm)
    nbytes = KERNEL.param("nbytes").check(nbytes, KERNEL.slug)
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


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check ring``: every safe variant at
    two payloads (the rank alone, and a payload); the plain send ring only where MPI
    buffers its messages (elsewhere it would deadlock, which is not a wrong answer)."""
    for nbytes in (4, 4096):
        for variant in SAFE_VARIANTS:
            case = {"variant": variant, "nbytes": nbytes, "warmup": 1, "iterations": 3,
                    "repetitions": 2}
            if variant == "send" and comm.Get_size() > 1 and not send_is_buffered(comm, nbytes):
                case["skip"] = "not buffered by MPI: would deadlock"
            yield case


def inject_fault(comm):
    """Test hook of the correctness runner: the last rank corrupts element 3 of what it
    receives from the left."""
    _ring._set_fault(3, rank=comm.Get_size() - 1)


# what demonstrate_deadlock's ranks are started with (see there)
DEADLOCK_YIELD = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "OMPI_MCA_mpi_yield_when_idle": "1"}


def demonstrate_deadlock(n=2, variant="naive", nbytes=4, impl="c", timeout=10.0, mpi_args=()):
    """Run one ring under ``mpiexec -n n`` with a timeout and report what happened.

    Returns a dict: ``deadlocked`` (the run was stopped at its timeout),
    ``seconds`` (wall time until it finished or was stopped), ``message`` (the
    launcher's error, or the program's output) and the arguments. All processes
    are stopped; nothing is left running.
    """
    from hpclab import launch

    args = [sys.executable, "-m", "hpclab.chapters.ring.kernels", "--variant", variant, "--nbytes",
            str(nbytes), "--impl", impl, "--allow-deadlock"]
    start = time.monotonic()
    result = {"variant": variant, "nbytes": nbytes, "impl": impl, "n": n, "timeout": timeout}
    # a deadlocked rank waits in MPI's progress loop, which MPICH polls at full speed: every
    # rank a busy core until the time limit. This run shows an outcome, not a time, so its
    # ranks sleep between polls (MPICH's heavy yield: a deadlocked pair of ranks used 3.7 of
    # 12 CPU seconds in 6 s) and Open MPI's yield when idle; a user's own setting stays
    yielding = {k: v for k, v in DEADLOCK_YIELD.items() if k not in os.environ}
    try:
        proc = launch.mpirun(args, n=n, timeout=timeout, mpi_args=mpi_args, env=yielding,
                             what=f"the {variant} ring ({impl}, {nbytes} B)")
        result.update(deadlocked=False, message=proc.stdout.strip())
    except TimeoutError as exc:
        result.update(deadlocked=True, message=str(exc).splitlines()[0])
    result["seconds"] = time.monotonic() - start
    return result


__all__ = ["run_c", "run_cython", "run_python", "RUNNERS", "IMPLEMENTATIONS", "VARIANTS",
           "SAFE_VARIANTS", "KERNEL", "default_iterations", "expected", "pattern",
           "send_is_buffered",
           "eager_limit", "demonstrate_deadlock", "KernelError"]
