"""PingPong lab: run the student's ping-pong loop on the engines; the library's time as a
yardstick; and the loop under a clock that ticks once per message, which grades the timing
arithmetic without timing anything (a shared machine's noise cannot change it)."""
from __future__ import annotations

import numpy as np


def _pingpong_on_rank(loop, nbytes, iterations, seed, ticking=False):
    """Runs on every engine: the student's loop on buffers from hpclab_alloc; with
    ``ticking``, under the ticking clock (see :func:`pingpong_clock_check`)."""
    from mpi4py import MPI

    from hpclab.chapters.pingpong.kernels import pattern
    from hpclab.kernels.common._common import Buffer

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    sbuf, rbuf = Buffer(nbytes), Buffer(nbytes)
    send, recv = np.frombuffer(sbuf, np.uint8), np.frombuffer(rbuf, np.uint8)
    expected = pattern(nbytes, seed)
    if rank < 2:
        send[:] = expected
    clock = [1000.0]
    given = _TickingComm(comm, clock) if ticking else comm
    real = MPI.Wtime
    if ticking:
        MPI.Wtime = lambda: clock[0]
    try:
        result = loop(given, sbuf, rbuf, iterations)
    finally:
        MPI.Wtime = real
    # what arrived is compared with the pattern where the check runs, not here
    return {"rank": rank, "time": None if result is None else float(result),
            "messages": given.messages if ticking else None,
            "received": recv.copy() if rank < 2 else None}


def _received_ok(per_rank, nbytes, seed):
    """Both ranks 0 and 1 received the pattern, byte for byte."""
    from hpclab.chapters.pingpong.kernels import pattern

    expected = pattern(nbytes, seed).tobytes()
    got = {r["rank"]: r.get("received") for r in per_rank}
    return all(got.get(rank) is not None and np.asarray(got[rank], dtype=np.uint8).tobytes()
               == expected for rank in (0, 1))


def pingpong_check(engines, loop, nbytes, iterations=100, timeout=60, seed=3):
    """Run ``loop(comm, sendbuf, recvbuf, iterations)`` on the engines.

    The send buffers of ranks 0 and 1 hold a known pattern; afterwards both
    ranks' receive buffers must hold it.

    Returns
    -------
    dict
        ``time``: what rank 0 returned (seconds), ``times``: every rank's
        return value, ``received_ok``: whether both ranks received the right bytes.
    """
    per_rank = engines.run(_pingpong_on_rank, loop, int(nbytes), int(iterations), int(seed),
                           timeout=timeout, what=f"your ping-pong loop ({nbytes} B)")
    return {"time": per_rank[0]["time"], "times": [r["time"] for r in per_rank],
            "received_ok": _received_ok(per_rank, nbytes, seed)}


def reference_pingpong_time(engines, nbytes, iterations=100, impl="python", timeout=60):
    """The library's one-way time for the same message, as a yardstick (seconds)."""
    from hpclab.chapters.pingpong import analysis as pingpong

    rows = engines.run(pingpong.measure, impl, int(nbytes), 1, int(iterations), 3,
                       timeout=timeout, what=f"reference ping-pong ({impl}, {nbytes} B)")[0]
    return float(np.median([r["value"] for r in rows]))


TICK = 1e-3  # seconds the ticking clock advances per message a rank sends or receives
_ONE = {"Send", "Ssend", "Bsend", "Rsend", "Isend", "Issend", "Ibsend", "Irsend", "send",
        "ssend", "isend", "issend", "Recv", "Irecv", "recv", "irecv", "Mrecv", "Imrecv"}
_TWO = {"Sendrecv", "sendrecv", "Sendrecv_replace"}


class _TickingComm:
    """A communicator that passes everything on and advances ``clock`` by TICK for each
    message its rank sends or receives (two for a sendrecv)."""

    def __init__(self, comm, clock):
        self._comm, self._clock, self.messages = comm, clock, 0

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        ticks = 1 if name in _ONE else 2 if name in _TWO else 0
        if not ticks or not callable(attr):
            return attr

        def counted(*args, **kwargs):
            self._clock[0] += ticks * TICK
            self.messages += ticks
            return attr(*args, **kwargs)
        return counted


def pingpong_clock_check(engines, loop, nbytes, iterations=10, timeout=60, seed=5):
    """Run ``loop`` with MPI.Wtime replaced by a clock that advances by TICK for every message
    a rank sends or receives through the communicator it is given.

    A loop that times ``iterations`` round trips with MPI.Wtime and divides by 2·iterations
    returns exactly one TICK: ``ticks`` is rank 0's result in ticks (1 for the one-way time,
    2 for a round trip). ``messages``: messages each rank sent and received.
    """
    per_rank = engines.run(_pingpong_on_rank, loop, int(nbytes), int(iterations),
                           int(seed), True, timeout=timeout,
                           what=f"your ping-pong loop under a ticking clock ({nbytes} B)")
    t = per_rank[0]["time"]
    return {"time": t, "ticks": None if t is None else t / TICK,
            "messages": [r["messages"] for r in per_rank],
            "received_ok": _received_ok(per_rank, nbytes, seed)}
