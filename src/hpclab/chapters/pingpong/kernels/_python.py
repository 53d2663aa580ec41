"""PingPong with mpi4py: the buffer API and the pickle API.

Same measurement and checks as pingpong.c, written in Python so that the
chapter can show what the interpreter and pickling cost per message. Buffers
come from hpclab_alloc, like the C and Cython implementations'.
"""
import numpy as np
from mpi4py import MPI

from hpclab.kernels import agree
from hpclab.kernels.common._common import Buffer

from ._pingpong import PingPongError

TAG = 17


def pattern(nbytes, seed):
    """The bytes repetition `seed` sends (the same as pingpong.c's pattern)."""
    i = np.arange(nbytes, dtype=np.uint64)
    return ((i * np.uint64(131) + np.uint64(seed * 17 + 1)) & np.uint64(0xFF)).astype(np.uint8)


def _pattern(nbytes, seed):
    # one level of indirection, so that tests can corrupt what a rank sends
    return pattern(nbytes, seed)


def _check_received(got, expected, rep, nbytes):
    """None when ``got`` holds the bytes sent, else what differs, in words."""
    if np.array_equal(got, expected):
        return None
    bad = int(np.flatnonzero(got != expected)[0])
    return (f"repetition {rep} of a {nbytes}-byte message: byte {bad} is {got[bad]}, "
            f"expected {expected[bad]}")


def buffer_round_trips(comm, send, recv, n, tag=TAG):
    """``n`` round trips between ranks 0 and 1 with the buffer API: rank 0 sends ``send`` and
    receives into ``recv``, rank 1 the other way round; other ranks do nothing."""
    rank = comm.Get_rank()
    if rank == 0:
        for _ in range(n):
            comm.Send(send, 1, tag)
            comm.Recv(recv, 1, tag)
    elif rank == 1:
        for _ in range(n):
            comm.Recv(recv, 0, tag)
            comm.Send(send, 0, tag)


def run_python(comm, nbytes, warmup, iterations, repetitions, hugepages):
    """One-way time of an ``nbytes`` message between ranks 0 and 1 with the buffer API
    (``Send``/``Recv`` of a buffer, no copy): ``warmup`` round trips, then per repetition a
    barrier, one aligning round trip and ``iterations`` timed ones. Returns the time of each
    repetition (half a round trip, the slowest rank's) on every rank; raises PingPongError
    on every rank when a rank received a byte other than the one sent."""
    rank = comm.Get_rank()
    sbuf = Buffer(nbytes, hugepages)
    rbuf = Buffer(nbytes, hugepages)
    send, recv = np.frombuffer(sbuf, np.uint8), np.frombuffer(rbuf, np.uint8)
    smsg, rmsg = [sbuf, nbytes, MPI.BYTE], [rbuf, nbytes, MPI.BYTE]

    def round_trips(n):
        buffer_round_trips(comm, smsg, rmsg, n)

    send[:] = _pattern(nbytes, 0)
    round_trips(warmup)
    times = np.zeros(repetitions)
    for r in range(repetitions):
        seed = r + 1
        expected = _pattern(nbytes, seed)
        send[:] = expected
        recv[:] = 0
        comm.Barrier()
        round_trips(1)  # lines the ranks up after the barrier (see pingpong.c)
        t0 = MPI.Wtime()
        round_trips(iterations)
        elapsed = (MPI.Wtime() - t0) / (2.0 * iterations) if rank < 2 else 0.0
        times[r] = comm.allreduce(elapsed, op=MPI.MAX)
        agree(comm, _check_received(recv, expected, r, nbytes) if rank < 2 else None,
              PingPongError)
    return times


def run_pickle(comm, nbytes, warmup, iterations, repetitions, hugepages):
    """As :func:`run_python`, with the pickle API (``send``/``recv`` of a bytes object):
    every send pickles the payload and every receive makes a new object."""
    rank = comm.Get_rank()
    # The payload is pickled on every send and a new bytes object is made on
    # every receive: that is the cost this implementation shows.
    payload = Buffer(nbytes, hugepages)
    view = np.frombuffer(payload, np.uint8)
    received = b""

    def round_trips(n, message):
        got = message
        if rank == 0:
            for _ in range(n):
                comm.send(message, 1, TAG)
                got = comm.recv(None, 1, TAG)
        elif rank == 1:
            for _ in range(n):
                got = comm.recv(None, 0, TAG)
                comm.send(message, 0, TAG)
        return got

    view[:] = _pattern(nbytes, 0)
    round_trips(warmup, bytes(payload))
    times = np.zeros(repetitions)
    for r in range(repetitions):
        seed = r + 1
        expected = _pattern(nbytes, seed)
        view[:] = expected
        message = bytes(payload)
        comm.Barrier()
        round_trips(1, message)  # lines the ranks up after the barrier (see pingpong.c)
        t0 = MPI.Wtime()
        received = round_trips(iterations, message)
        elapsed = (MPI.Wtime() - t0) / (2.0 * iterations) if rank < 2 else 0.0
        times[r] = comm.allreduce(elapsed, op=MPI.MAX)
        problem = None
        if rank < 2:
            if not isinstance(received, bytes) or len(received) != nbytes:
                problem = (f"repetition {r}: received {type(received).__name__} of "
                           f"{len(received) if hasattr(received, '__len__') else '?'} bytes, "
                           f"expected {nbytes} bytes")
            else:
                problem = _check_received(np.frombuffer(received, np.uint8), expected, r, nbytes)
        agree(comm, problem, PingPongError)
    return times
