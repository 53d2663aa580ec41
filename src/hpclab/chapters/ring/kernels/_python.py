"""The ring with mpi4py's buffer API: the same steps, sums and checks as ring.c.

Written in Python so the chapter can show what the interpreter adds to every
step of the ring. Buffers come from hpclab_alloc, like the C and Cython ones.
"""
import numpy as np
from mpi4py import MPI

from hpclab.kernels import agree
from hpclab.kernels.common._common import Buffer
from hpclab.kernels.topology import Topology

from ._ring import TAG_LEFT, TAG_RIGHT, VARIANTS, RingError, _fault, expected, pattern

RIGHT, LEFT = 0, 1
NAMES = ("from the left", "from the right")


def _exchange(cart, rank, size, left, right, variant, sr, sl, rr, rl):
    """One step: send ``sr`` right and ``sl`` left, receive ``rr`` from the left and ``rl``
    from the right, in the way ``variant`` names."""
    if size == 1 and variant in ("ssend_ordered", "send"):
        variant = "sendrecv"  # a ring of one: see ring.c's NOTES
    if variant == "ssend_ordered":
        if rank % 2 == 0:
            cart.Ssend(sr, right, TAG_RIGHT)
            cart.Recv(rr, left, TAG_RIGHT)
            cart.Ssend(sl, left, TAG_LEFT)
            cart.Recv(rl, right, TAG_LEFT)
        else:
            cart.Recv(rr, left, TAG_RIGHT)
            cart.Ssend(sr, right, TAG_RIGHT)
            cart.Recv(rl, right, TAG_LEFT)
            cart.Ssend(sl, left, TAG_LEFT)
    elif variant == "send":
        cart.Send(sr, right, TAG_RIGHT)
        cart.Send(sl, left, TAG_LEFT)
        cart.Recv(rr, left, TAG_RIGHT)
        cart.Recv(rl, right, TAG_LEFT)
    elif variant == "isend":
        reqs = [cart.Isend(sr, right, TAG_RIGHT), cart.Isend(sl, left, TAG_LEFT)]
        cart.Recv(rr, left, TAG_RIGHT)
        cart.Recv(rl, right, TAG_LEFT)
        MPI.Request.Waitall(reqs)
    elif variant == "irecv":
        MPI.Request.Waitall([cart.Irecv(rr, left, TAG_RIGHT), cart.Irecv(rl, right, TAG_LEFT),
                             cart.Isend(sr, right, TAG_RIGHT), cart.Isend(sl, left, TAG_LEFT)])
    elif variant == "sendrecv":
        cart.Sendrecv(sr, right, TAG_RIGHT, rr, left, TAG_RIGHT)
        cart.Sendrecv(sl, left, TAG_LEFT, rl, right, TAG_LEFT)
    else:  # naive: deadlocks
        cart.Ssend(sr, right, TAG_RIGHT)
        cart.Ssend(sl, left, TAG_LEFT)
        cart.Recv(rr, left, TAG_RIGHT)
        cart.Recv(rl, right, TAG_LEFT)


def run_python(comm, variant, nbytes, warmup, iterations, repetitions, hugepages):
    """The two-way ring of report 001: every rank sends a message of ``nbytes`` to both
    neighbours of a periodic ring, ``size`` steps, each step passing on what it received
    (the rank adds itself to the first element of what goes right and subtracts itself from
    what goes left, but for the last step), until every message is home. ``variant`` is an
    index into ``VARIANTS`` (ssend_ordered, send, isend, irecv, sendrecv, naive): how one
    step exchanges.
    Returns the time of one whole ring per repetition (the slowest rank's); raises
    RingError on every rank when a sum or a message that came home is wrong."""
    name = VARIANTS[variant]
    # the periodic 1D grid of the topology layer, one point per rank
    ring = Topology(comm, (comm.Get_size(),), dims=(comm.Get_size(),), periods=(True,))
    cart = ring.cart
    try:
        rank, size = ring.rank, ring.size
        left, right = ring.lo[0], ring.hi[0]
        count = nbytes // 4
        raw = [Buffer(nbytes, hugepages) for _ in range(6)]
        views = [np.frombuffer(b, np.int32) for b in raw]
        origin = views[0:2]
        bufs = [views[2:4], views[4:6]]  # bufs[direction][step % 2]
        for d in (RIGHT, LEFT):
            origin[d][:] = pattern(rank, count, d)
            origin[d][0] = -rank if d == RIGHT else rank
        want = [expected(rank, size, RIGHT), expected(rank, size, LEFT)]
        fault, fault_rank = _fault()
        fault = fault if 0 <= fault < count and rank == fault_rank else -1

        def one_ring():
            """``size`` steps; the two messages that came home, and how many sums are wrong."""
            sr, sl = origin
            for step in range(size):
                rr, rl = bufs[RIGHT][step & 1], bufs[LEFT][step & 1]
                _exchange(cart, rank, size, left, right, name, sr, sl, rr, rl)
                if fault >= 0:
                    rr[fault] += 1
                if step < size - 1:
                    rr[0] += rank
                    rl[0] -= rank
                sr, sl = rr, rl
            return (rr, rl), (rr[0] != want[RIGHT]) + (rl[0] != want[LEFT])

        for _ in range(warmup):
            one_ring()
        times = np.zeros(repetitions)
        for r in range(repetitions):
            for d in (RIGHT, LEFT):
                bufs[d][0][:] = 0
                bufs[d][1][:] = 0
            wrong = 0
            cart.Barrier()
            t0 = MPI.Wtime()
            for _ in range(iterations):
                home, bad = one_ring()
                wrong += bad
            elapsed = (MPI.Wtime() - t0) / iterations
            times[r] = cart.allreduce(elapsed, op=MPI.MAX)
            agree(cart, _check_home(home, rank, size, count, r, want, wrong, iterations),
                  RingError)
        return times
    finally:
        ring.free()


def _check_home(home, rank, size, count, rep, want, wrong, iterations):
    """None when both messages that came home are this rank's own with the right sums,
    else what is wrong, in words."""
    for d in (RIGHT, LEFT):
        got = home[d]
        if got[0] != want[d]:
            return (f"repetition {rep}, ring of {size} ranks: the sum that came home "
                    f"{NAMES[d]} is {got[0]}, expected {want[d]}")
        own = pattern(rank, count, d)
        diff = np.flatnonzero(got[1:] != own[1:])
        if diff.size:
            i = int(diff[0]) + 1
            return (f"repetition {rep}, ring of {size} ranks: the message that came home "
                    f"{NAMES[d]} is not this rank's own (element {i} is {got[i]}, "
                    f"expected {own[i]})")
    if wrong:
        return (f"repetition {rep}, ring of {size} ranks: {wrong} of {2 * iterations} sums "
                "that came home were wrong")
    return None
