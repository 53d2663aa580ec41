"""Harnesses that run a student's code on the MPI engines and report what it did.

They hold no answers: they allocate buffers, call the student's function on
every rank, and check what arrived, so that a lab's self-checks and its
hidden tests can assert on plain numbers. Every call has a timeout.
"""
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


def _ring_on_rank(ring_func, nprocs, repeats):
    """Runs on every engine: the student's ring on the first nprocs ranks."""
    import time

    from mpi4py import MPI

    from hpclab.kernels import ring

    world = MPI.COMM_WORLD
    inside = world.Get_rank() < nprocs
    sub = world.Split(0 if inside else MPI.UNDEFINED, world.Get_rank())
    if not inside:
        return None
    try:
        rank, size = sub.Get_rank(), sub.Get_size()
        want = (ring.expected(rank, size, 0), ring.expected(rank, size, 1))
        got = ring_func(sub)
        sub.Barrier()
        t0 = time.perf_counter()
        for _ in range(repeats):
            ring_func(sub)
        elapsed = (time.perf_counter() - t0) / max(repeats, 1)
        got = tuple(int(v) for v in got) if got is not None else None
        return {"rank": rank, "got": got, "want": want, "time": elapsed}
    finally:
        sub.Free()


def ring_check(engines, ring_func, nprocs, repeats=20, timeout=60):
    """Run ``ring_func(comm)`` on the first nprocs engines (a communicator of nprocs ranks).

    ``ring_func`` must return, on every rank, the two values that came home:
    ``(from_left, from_right)``. Returns a dict: ``ok`` (every rank got the
    closed-form sums), ``ranks`` (what each rank returned and expected) and
    ``time`` (seconds per call, the slowest rank's, over ``repeats`` calls).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    per_rank = [r for r in engines.run(_ring_on_rank, ring_func, int(nprocs), int(repeats),
                                       timeout=timeout, what=f"your ring on {nprocs} ranks")
                if r is not None]
    ok = all(r["got"] is not None and r["got"] == r["want"] for r in per_rank)
    return {"ok": ok, "ranks": per_rank, "time": max(r["time"] for r in per_rank)}


def stream_triad_check(triad, n, threads=1, scalar=None, seed=1):
    """Call ``triad(a, b, c, scalar, threads)`` on arrays of n doubles and check it
    (``scalar``: STREAM's, :data:`hpclab.kernels.stream.SCALAR`, by default).

    Returns a dict: ``correct`` (a equals b + scalar * c to rounding),
    ``inputs_untouched`` (b and c unchanged), ``seconds`` (one call).
    """
    import time

    if scalar is None:
        from hpclab.kernels.stream import SCALAR as scalar
    rng = np.random.default_rng(seed)
    b, c = rng.standard_normal(n), rng.standard_normal(n)
    b0, c0 = b.copy(), c.copy()
    a = np.full(n, np.nan)
    t0 = time.perf_counter()
    triad(a, b, c, float(scalar), int(threads))
    seconds = time.perf_counter() - t0
    return {"correct": bool(np.allclose(a, b0 + scalar * c0, rtol=1e-12, atol=0)),
            "inputs_untouched": bool(np.array_equal(b, b0) and np.array_equal(c, c0)),
            "seconds": seconds}
