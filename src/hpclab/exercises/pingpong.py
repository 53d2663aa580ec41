"""PingPong lab: run the student's ping-pong loop on the engines; the library's time as a
yardstick."""
from __future__ import annotations

import numpy as np


def _pingpong_on_rank(loop, nbytes, iterations, seed):
    """Runs on every engine: the student's loop on buffers from hpclab_alloc."""
    from mpi4py import MPI

    from hpclab.kernels.common._common import Buffer
    from hpclab.kernels.pingpong import pattern

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    sbuf, rbuf = Buffer(nbytes), Buffer(nbytes)
    send, recv = np.frombuffer(sbuf, np.uint8), np.frombuffer(rbuf, np.uint8)
    expected = pattern(nbytes, seed)
    if rank < 2:
        send[:] = expected
    result = loop(comm, sbuf, rbuf, iterations)
    ok = bool(np.array_equal(recv, expected)) if rank < 2 else True
    return {"rank": rank, "time": None if result is None else float(result), "received_ok": ok}


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
            "received_ok": all(r["received_ok"] for r in per_rank)}


def reference_pingpong_time(engines, nbytes, iterations=100, impl="python", timeout=60):
    """The library's one-way time for the same message, as a yardstick (seconds)."""
    from hpclab.experiments import pingpong

    rows = engines.run(pingpong.measure, impl, int(nbytes), 1, int(iterations), 3,
                       timeout=timeout, what=f"reference ping-pong ({impl}, {nbytes} B)")[0]
    return float(np.median([r["value"] for r in rows]))
