"""PingPong lab: run the student's ping-pong loop on the engines; the library's time as a
yardstick; and the loop under a clock that ticks once per message, which grades the timing
arithmetic without timing anything (a shared machine's noise cannot change it)."""
from __future__ import annotations

import warnings

import numpy as np

from hpclab.exercises import stuck_limits

GUARD = 0xA5  # the bytes after a guarded receive buffer
SEND_GUARD = 0x5A  # after a guarded send buffer: what a send past its end carries is not GUARD
GUARDED = 16  # a guarded buffer of n bytes is followed by 16n + 64 guard bytes: room for n
# elements of any MPI datatype a loop might name in place of MPI_BYTE (long double complex: 32)


def _python_calls_counted(comm, calls):
    """``comm`` as an mpi4py communicator (so a Cython function typed ``MPI.Comm`` takes it)
    that passes every call on and lists in ``calls`` the point-to-point ones made through
    Python: a compiled loop should make none."""
    from mpi4py import MPI

    def counted(name):
        def call(self, *args, **kwargs):
            calls.append(name)
            return getattr(MPI.Intracomm, name)(self, *args, **kwargs)
        return call

    names = sorted(_ONE | _TWO | {"Recv", "recv", "Irecv", "irecv", "Mrecv", "Imrecv"})
    cls = type("PythonCallsCounted", (MPI.Intracomm,), {n: counted(n) for n in names})
    return cls(comm)


def _pingpong_on_rank(loop, nbytes, iterations, seed, ticking=False, guarded=False):
    """Runs on every engine: the student's loop on buffers from hpclab_alloc, rank r < 2
    sending the pattern of ``seed + r`` (so that an answer that echoes what it received is
    told from one that answers with its own buffer); with ``ticking``, under the ticking
    clock (see :func:`pingpong_clock_check`). With ``guarded`` (a compiled loop): the
    buffers are the first ``nbytes`` of larger ones whose rest must stay GUARD (a count in
    elements larger than a byte writes past them), and the communicator lists the
    point-to-point calls made through Python (``python_calls``)."""
    from mpi4py import MPI

    from hpclab.chapters.pingpong.kernels import pattern
    from hpclab.kernels.common._common import Buffer

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    pickled = pickle_calls(loop)
    if pickled:  # every rank sees the same function, so every rank returns here
        return {"rank": rank, "time": None, "messages": None, "barriers": None,
                "received": None, "pickled": pickled, "clock_reads": None,
                "python_calls": [], "overran": False}
    extra = GUARDED * nbytes + 64 if guarded else 0
    sfull, rfull = Buffer(nbytes + extra), Buffer(nbytes + extra)
    whole_s, whole_r = np.frombuffer(sfull, np.uint8), np.frombuffer(rfull, np.uint8)
    whole_s[nbytes:], whole_r[nbytes:] = SEND_GUARD, GUARD
    sbuf, rbuf = (memoryview(sfull)[:nbytes], memoryview(rfull)[:nbytes]) if guarded \
        else (sfull, rfull)
    send, recv = whole_s[:nbytes], whole_r[:nbytes]
    if rank < 2:
        send[:] = pattern(nbytes, seed + rank)
    clock, reads, python_calls = [1000.0], [0], []
    given = _TickingComm(comm, clock) if ticking \
        else _python_calls_counted(comm, python_calls) if guarded else comm
    real = MPI.Wtime

    def ticking_wtime():
        reads[0] += 1
        return clock[0]

    if ticking:
        MPI.Wtime = ticking_wtime
    try:
        result = loop(given, sbuf, rbuf, iterations)
    finally:
        MPI.Wtime = real
    # what arrived is compared with the pattern where the check runs, not here
    return {"rank": rank, "time": None if result is None else float(result),
            "messages": given.messages if ticking else None,
            "barriers": given.barriers if ticking else None,
            "received": recv.copy() if rank < 2 else None, "pickled": [],
            "clock_reads": reads[0] if ticking else None,
            "order": given.order if ticking else None,
            "python_calls": sorted(set(python_calls)),
            "overran": bool(guarded and (whole_r[nbytes:] != GUARD).any())}


def _received(per_rank, nbytes, seed):
    """What ranks 0 and 1 hold after the loop: 'ok' (each the other's pattern), 'echo'
    (rank 0 got its own pattern back: rank 1 answered with the buffer it received into),
    else 'wrong'."""
    from hpclab.chapters.pingpong.kernels import pattern

    got = {r["rank"]: r.get("received") for r in per_rank}
    if any(got.get(rank) is None for rank in (0, 1)):
        return "wrong"
    held = {rank: np.asarray(got[rank], dtype=np.uint8).tobytes() for rank in (0, 1)}
    mine = {rank: pattern(nbytes, seed + rank).tobytes() for rank in (0, 1)}
    if held[0] == mine[1] and held[1] == mine[0]:
        return "ok"
    if nbytes and held[0] == mine[0] and held[1] == mine[0]:
        return "echo"
    return "wrong"


def _received_ok(per_rank, nbytes, seed):
    """Rank 0 received rank 1's pattern and rank 1 rank 0's, byte for byte."""
    return _received(per_rank, nbytes, seed) == "ok"


PICKLE_CALLS = {"send", "recv", "isend", "irecv", "sendrecv", "ssend", "issend"}


def pickle_calls(func):
    """The pickle API's point-to-point calls (``comm.send``, ``comm.recv``...) a function
    names (:func:`hpclab.exercises.names_used`; none for a function whose code and source
    cannot be read as Python, a compiled one): a loop that should use the buffer API
    (``Send``, ``Recv``) but does not. Such a loop is not run by the checks: one side pickling
    while the other waits on a buffer would block until the timeout."""
    from hpclab.exercises import names_used

    try:
        return sorted(names_used(func) & PICKLE_CALLS)
    except (ValueError, SyntaxError):
        return []


# the library's own ping-pong loops: a loop that calls one is not the student's own
LIBRARY_LOOPS = {"reference_loop", "buffer_round_trips", "run_python", "run_pickle", "run_c",
                 "run_cython", "run_cython_native"}


def borrowed_calls(func):
    """The library's ping-pong loops ``func`` names (:data:`LIBRARY_LOOPS`): a loop that hands
    the work to one of them and so is not the student's own."""
    from hpclab.exercises import names_used

    try:
        return sorted(names_used(func) & LIBRARY_LOOPS)
    except (ValueError, SyntaxError):
        return []


def pingpong_check(engines, loop, nbytes, iterations=100, timeout=60, seed=3, guarded=False,
                   busy=None):
    """Run ``loop(comm, sendbuf, recvbuf, iterations)`` on the engines.

    The send buffers of ranks 0 and 1 hold a known pattern; afterwards both
    ranks' receive buffers must hold it.

    Returns
    -------
    dict
        ``time``: what rank 0 returned (seconds), ``times``: every rank's
        return value, ``received_ok``: whether both ranks received the right bytes,
        ``received``: 'ok', 'echo' or 'wrong' (see :func:`_received`), ``pickled``: the
        pickle-API calls the loop names (:func:`pickle_calls`; such a loop is not run),
        ``borrowed``: the library's loops it calls (:func:`borrowed_calls`; such a loop is
        not run). With
        ``guarded`` (see :func:`_pingpong_on_rank`): ``python_calls``, the point-to-point
        calls any rank made through mpi4py, and ``overran``, whether a rank wrote past its
        receive buffer. ``busy``: see :meth:`hpclab.engines.Engines.run`.
    """
    borrowed = borrowed_calls(loop)
    if borrowed:  # not run: the library's loop (which an engine may not even know by name)
        return {"time": None, "times": [], "received_ok": False, "received": "wrong",
                "pickled": pickle_calls(loop), "borrowed": borrowed, "python_calls": [],
                "overran": False}
    per_rank = engines.run(_pingpong_on_rank, loop, int(nbytes), int(iterations), int(seed),
                           False, bool(guarded), timeout=timeout, busy=busy,
                           what=f"your ping-pong loop ({nbytes} B)")
    return {"time": per_rank[0]["time"], "times": [r["time"] for r in per_rank],
            "received_ok": _received_ok(per_rank, nbytes, seed),
            "received": _received(per_rank, nbytes, seed), "pickled": per_rank[0]["pickled"],
            "borrowed": [],
            "python_calls": sorted({c for r in per_rank for c in r["python_calls"]}),
            "overran": any(r["overran"] for r in per_rank)}


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


BARRIER_TICKS = 7  # a barrier's ticks: a loop that times its barrier reads more than one tick
COLD = 50  # ticks of each of the first COLD_MESSAGES messages: cold buffers, a new connection
COLD_MESSAGES = 2
SLOW = 3  # ticks of each message of the last timed batch: a batch's own time, not the mean


def _bytes_of(arg):
    """The bytes of a message argument (a buffer, or [buffer, ...] / (buffer, ...)) as a
    uint8 array over the same memory; None when it has no buffer (a pickled object)."""
    if isinstance(arg, (list, tuple)) and arg:
        arg = arg[0]
    try:
        return np.frombuffer(arg, np.uint8)
    except (TypeError, ValueError):
        return None


class _TickingComm:
    """A communicator that passes everything on and advances ``clock`` by TICK for each
    message its rank sends or receives (two for a sendrecv); with ``cold``, each of the
    rank's first COLD_MESSAGES messages advances it by COLD ticks instead, as a first
    message on fresh buffers takes far longer than the next ones; a barrier advances it by
    BARRIER_TICKS; with ``slow`` (first, end), the rank's messages numbered first to end - 1
    (from 0) advance it by SLOW ticks each. ``sizes``: the sizes in bytes of the messages the
    rank sent; ``order``: its calls in turn, each 'send', 'recv' or 'sendrecv'."""

    def __init__(self, comm, clock, cold=False, slow=None):
        self._comm, self._clock, self.messages, self._cold = comm, clock, 0, cold
        self._slow = slow
        self.order: list[str] = []
        self.sizes, self.barriers, self.unwritten = set(), 0, False
        self.buffers = {"send": set(), "recv": set()}

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name in ("Barrier", "barrier") and callable(attr):
            def barrier(*args, **kwargs):
                self.barriers += 1
                self._clock[0] += BARRIER_TICKS * TICK
                return attr(*args, **kwargs)
            return barrier
        ticks = 1 if name in _ONE else 2 if name in _TWO else 0
        if not ticks or not callable(attr):
            return attr

        def counted(*args, **kwargs):
            self.order.append("sendrecv" if name in _TWO
                              else "send" if "send" in name.lower() else "recv")
            for _ in range(ticks):
                cold = self._cold and self.messages < COLD_MESSAGES
                slow = self._slow is not None and self._slow[0] <= self.messages < self._slow[1]
                self._clock[0] += (COLD if cold else SLOW if slow else 1) * TICK
                self.messages += 1
            if args:
                kind = "send" if "send" in name.lower() else "recv"
                data = _bytes_of(args[0])
                self.buffers[kind].add(None if data is None
                                       else data.__array_interface__["data"][0])
                if kind == "send":
                    self.sizes.add(None if data is None else data.size)
                    self.unwritten |= data is not None and data.size > 0 and not data.any()
            return attr(*args, **kwargs)
        return counted


def reference_loop(comm, sendbuf, recvbuf, iterations):
    """A correct ping-pong loop (the one the lab asks for), so that the batch check grades
    the batches alone."""
    from mpi4py import MPI

    from hpclab.chapters.pingpong.kernels._python import buffer_round_trips

    comm.Barrier()
    start = MPI.Wtime()
    buffer_round_trips(comm, sendbuf, recvbuf, iterations, tag=0)
    return (MPI.Wtime() - start) / (2 * iterations)


def _batches_on_rank(batches, nbytes, warmup, iterations, repetitions, ticking):
    """Runs on every engine: the student's batches around the reference loop, under the
    cold ticking clock when ``ticking``."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    clock = [1000.0]
    # the last batch's messages are slower: batches that each return their own time show it
    last = 2 * warmup + 2 * iterations * (repetitions - 1)
    slow = (last, last + 2 * iterations) if repetitions > 1 else None
    given = _TickingComm(comm, clock, cold=True, slow=slow) if ticking else comm
    real = MPI.Wtime
    if ticking:
        MPI.Wtime = lambda: clock[0]
    try:
        result = batches(given, reference_loop, nbytes, warmup, iterations, repetitions)
    finally:
        MPI.Wtime = real
    times = None if result is None else np.asarray(result, dtype=float).ravel().tolist()
    return {"rank": comm.Get_rank(), "times": times,
            "messages": given.messages if ticking else None,
            "sizes": sorted(s for s in given.sizes if s is not None) if ticking else None,
            "buffers": ({k: len(v - {None}) for k, v in given.buffers.items()}
                        if ticking else None),
            # one buffer for both directions (fresh buffers per batch may reuse addresses,
            # so only a single buffer in all is taken as shared)
            "shared": bool(ticking and nbytes and len((given.buffers["send"]
                                                        | given.buffers["recv"]) - {None}) == 1),
            "unwritten": bool(ticking and given.unwritten)}


def batches_clock_check(engines, batches, nbytes=256, warmup=3, iterations=4, repetitions=5,
                        timeout=60):
    """Run ``batches(comm, loop, nbytes, warmup, iterations, repetitions)`` with the correct
    loop, under a clock that ticks TICK per message, COLD ticks for each rank's first
    COLD_MESSAGES messages, and SLOW ticks for each message of the last batch.

    Batches that warm up first and time each repetition on its own return one TICK for each
    repetition but the last, and SLOW for the last (``expected``, in ticks; the mean of the
    batches, returned for each, is not). Returns rank 0's ``times`` in ticks, the
    ``messages`` each rank sent and
    received, the message ``sizes`` rank 0 sent, how many distinct send and receive
    ``buffers`` rank 0 used, whether a rank received into the buffer it sent from
    (``shared``) and whether a rank sent a buffer of zero bytes only (``unwritten``).
    """
    per_rank = engines.run(_batches_on_rank, batches, int(nbytes), int(warmup), int(iterations),
                           int(repetitions), True, timeout=timeout,
                           what="your batches under a ticking clock")
    r0 = per_rank[0]
    return {"ticks": None if r0["times"] is None else [t / TICK for t in r0["times"]],
            "expected": [1.0] * (repetitions - 1) + [float(SLOW if repetitions > 1 else 1)],
            "messages": [r["messages"] for r in per_rank], "sizes": r0["sizes"],
            "buffers": r0["buffers"], "shared": any(r["shared"] for r in per_rank[:2]),
            "unwritten": any(r["unwritten"] for r in per_rank[:2])}


def _order_problem(engines, loop, timeout, rounds=3):
    """How ``loop``'s ranks 0 and 1 order their calls, in words, when it is not one round trip
    after another (rank 0 a send then a receive, rank 1 a receive then a send), read under the
    ticking clock with small messages, which MPI buffers; None when it is, or when that run
    did not finish (the timing says so itself)."""
    try:
        orders = pingpong_clock_check(engines, loop, 64, iterations=rounds,
                                      **stuck_limits(min(timeout, 30)))["orders"]
    except Exception:  # noqa: BLE001  (the timing that follows fails in the student's terms)
        return None
    first, second = (list(o or []) for o in orders[:2])
    if first == ["send", "recv"] * rounds and second == ["recv", "send"] * rounds:
        return None
    if first[:2] == ["send", "send"]:
        return "sends all its messages on rank 0 before it receives an answer"
    return (f"calls {', '.join(first[:4]) or 'nothing'} on rank 0 and "
            f"{', '.join(second[:4]) or 'nothing'} on rank 1, not one round trip after another")


def time_batches(engines, batches, loop, sizes, warmup=10, iterations=200, repetitions=5,
                 timeout=60, cython_loop=None):
    """Time the student's ``batches`` with their ``loop`` beside the library's C and Python
    (buffer API) kernels, at the same sizes and counts, one after the other in this call.
    A loop that names the pickle API (:func:`pickle_calls`), or whose ranks do not make one
    round trip after another (:func:`_order_problem`: at large sizes such a loop can wait
    forever), is replaced by :func:`reference_loop`, with a warning. With ``cython_loop``
    (the student's loop from an ``%%mpi_cython`` cell), their batches around it too, and the
    library's Cython kernel.

    Returns a DataFrame: ``nbytes`` and the median one-way time in seconds of ``yours``,
    (``yours_cython``,) ``c``, (``cython``,) and ``python``. A Cython loop that raises or does not
    finish within CY_TIMEOUT leaves ``yours_cython`` empty (NaN) from that size on; the other
    columns are measured.
    """
    import pandas as pd

    from hpclab.chapters.pingpong import sweep

    pickled = pickle_calls(loop)
    if pickled:  # a pickled send to a buffer Recv would wait until the timeout
        warnings.warn(f"your loop calls {', '.join(pickled)} (the pickle API), which cannot "
                      "talk to the buffer API on the other side: your batches are timed with "
                      "the lab's own loop (reference_loop) instead", stacklevel=2)
        loop = reference_loop
    else:
        order = _order_problem(engines, loop, timeout)
        if order:  # e.g. all the sends first: at 1 MiB both ranks would send and wait forever
            warnings.warn(f"your loop {order}, which waits forever once messages are too "
                          "large for MPI to buffer: your batches are timed with the lab's own "
                          "loop (reference_loop) instead (the check of (a) says more)",
                          stacklevel=2)
            loop = reference_loop
    rows, cython_stuck = [], None
    if cython_loop is not None:  # first on small guarded buffers: not one that overruns them
        limits = stuck_limits(min(timeout, CY_TIMEOUT))
        try:
            probe = pingpong_check(engines, cython_loop, 64, iterations=2, guarded=True,
                                   **limits)
            if probe["overran"]:  # wrong bytes alone are (c)'s to grade: it is still timed
                cython_stuck = "writes past the end of a 64-byte buffer"
        except Exception as exc:  # noqa: BLE001  (its check in (c) says what)
            cython_stuck = ("did not finish 64-byte messages within "
                            f"{limits['busy']:g} s of processor time"
                            if isinstance(exc, TimeoutError)
                            else f"raised {type(exc).__name__} on 64-byte messages")
        if cython_stuck:
            warnings.warn(f"your Cython loop {cython_stuck} (its check in (c) says more): it "
                          "is not timed, its column is empty", stacklevel=2)
    for nbytes in sizes:
        mine = engines.run(_run_batches, batches, loop, int(nbytes), int(warmup),
                           int(iterations), int(repetitions), timeout=timeout,
                           what=f"your batches ({nbytes} B)")[0]
        if not mine:
            raise ValueError(f"your batches returned {mine!r} on rank 0 for a {nbytes}-byte "
                             f"message, not {repetitions} times")
        if len(mine) != repetitions:  # (b) grades that; here their median is still theirs
            warnings.warn(f"your batches returned {len(mine)} time(s) for a {nbytes}-byte "
                          f"message, not {repetitions}: the median of those is used",
                          stacklevel=2)
        row = {"nbytes": int(nbytes), "yours": float(np.median(mine))}
        if cython_loop is not None:
            row["yours_cython"] = float("nan")
            if not cython_stuck:
                try:
                    theirs = engines.run(_run_batches, batches, cython_loop, int(nbytes),
                                         int(warmup), int(iterations), int(repetitions), True,
                                         timeout=min(timeout, CY_TIMEOUT),
                                         what=f"your batches around your Cython loop "
                                              f"({nbytes} B)")[0]
                    row["yours_cython"] = float(np.median(theirs)) if theirs else float("nan")
                except Exception as exc:  # noqa: BLE001  (the rest is still measured)
                    cython_stuck = nbytes
                    said = (f"did not finish within {min(timeout, CY_TIMEOUT)} s"
                            if isinstance(exc, TimeoutError)
                            else f"raised {type(exc).__name__}")
                    warnings.warn(f"your Cython loop {said} at {nbytes} B (its check in (c) "
                                  "says more): its column is empty from there on",
                                  stacklevel=2)
        for impl in ("c", "cython", "python") if cython_loop is not None else ("c", "python"):
            recs = engines.run(sweep.measure, impl, int(nbytes), int(warmup), int(iterations),
                               int(repetitions), timeout=timeout,
                               what=f"the library's {impl} ping-pong ({nbytes} B)")[0]
            row[impl] = float(np.median([r["value"] for r in recs]))
        rows.append(row)
    return pd.DataFrame(rows)


def _run_batches(batches, loop, nbytes, warmup, iterations, repetitions, as_bytes=False):
    """Runs on every engine: the student's batches around ``loop``; with ``as_bytes`` (a
    compiled loop, which takes bytes) the loop is given the batches' buffers as bytes, the
    same bytes an mpi4py loop would send whatever their dtype."""
    from mpi4py import MPI

    if as_bytes:
        compiled = loop

        def loop(comm, sendbuf, recvbuf, iterations):
            return compiled(comm, np.frombuffer(sendbuf, np.uint8),
                            np.frombuffer(recvbuf, np.uint8), iterations)

    out = batches(MPI.COMM_WORLD, loop, nbytes, warmup, iterations, repetitions)
    return None if out is None else np.asarray(out, dtype=float).ravel().tolist()



def pingpong_clock_check(engines, loop, nbytes, iterations=10, timeout=60, seed=5, busy=None):
    """Run ``loop`` with MPI.Wtime replaced by a clock that advances by TICK for every message
    a rank sends or receives through the communicator it is given, and by BARRIER_TICKS for
    a barrier.

    A loop that times ``iterations`` round trips with MPI.Wtime, after its barrier, and
    divides by 2·iterations returns exactly one TICK: ``ticks`` is rank 0's result in ticks
    (1 for the one-way time, 2 for a round trip, 1 + BARRIER_TICKS / (2·iterations) when the
    barrier is timed). ``messages``: messages each rank sent and received; ``barriers``:
    barriers each rank called; ``clock_reads``: how often rank 0's loop read MPI.Wtime (0:
    it timed itself with another clock, which the check cannot tick); ``orders``: each
    rank's calls in turn ('send', 'recv', 'sendrecv').
    """
    per_rank = engines.run(_pingpong_on_rank, loop, int(nbytes), int(iterations),
                           int(seed), True, timeout=timeout, busy=busy,
                           what=f"your ping-pong loop under a ticking clock ({nbytes} B)")
    t = per_rank[0]["time"]
    return {"time": t, "ticks": None if t is None else t / TICK,
            "messages": [r["messages"] for r in per_rank],
            "barriers": [r["barriers"] for r in per_rank],
            "received_ok": _received_ok(per_rank, nbytes, seed),
            "pickled": per_rank[0]["pickled"],
            "clock_reads": per_rank[0]["clock_reads"],
            "orders": [r.get("order") for r in per_rank]}


CY_SIZES = (0, 1021)  # the Cython loop's bytes checked, every rank's pattern compared (not a
# multiple of 2, 4, 8 or 16: a count in elements of a wider type loses the last bytes)
CY_DEADLOCK_BYTES = 1 << 20  # beyond any eager limit: a loop whose ranks both send first waits
CY_ROUNDS = 7  # round trips asked of rank 0's loop while the check answers on rank 1
CY_ROUNDS_BYTES = 7  # the size of those messages (again no multiple of a wider type)
CY_TIMEOUT = 15  # seconds for the Cython loop's batches of one size: a stuck loop costs no more
_DONE = 32000  # the tag that tells the counting partner that rank 0's loop has returned


def _rounds_on_rank(loop, nbytes, iterations):
    """Runs on every engine: the student's loop on rank 0 only; rank 1 answers every message
    rank 0 sends, with the same tag, until rank 0 says that its loop has returned, and counts
    the round trips and the sizes of the messages. A loop that calls MPI's C functions cannot
    be counted by a wrapped communicator; a partner that counts can. Returns rank 1's
    ``(count, sizes in bytes)`` (None on other ranks)."""
    from mpi4py import MPI

    from hpclab.kernels.common._common import Buffer

    comm = MPI.COMM_WORLD.Dup()  # nothing left over reaches the next check
    try:
        rank, count = comm.Get_rank(), None
        sbuf, rbuf = Buffer(nbytes), Buffer(nbytes)
        if rank == 0:
            loop(comm, sbuf, rbuf, iterations)
            comm.Send([np.zeros(0, np.uint8), MPI.BYTE], dest=1, tag=_DONE)
        elif rank == 1:
            comm.Barrier()  # the loop's own barrier, as the loop's rank 1 would call it
            count, status, sizes = 0, MPI.Status(), set()
            while True:
                comm.Probe(source=0, tag=MPI.ANY_TAG, status=status)
                if status.Get_tag() == _DONE:
                    comm.Recv([np.zeros(0, np.uint8), MPI.BYTE], source=0, tag=_DONE)
                    break
                size = status.Get_count(MPI.BYTE)
                sizes.add(size)
                got = rbuf if size == nbytes else np.empty(size, np.uint8)  # not truncated
                comm.Recv([got, MPI.BYTE], source=0, tag=status.Get_tag())
                comm.Send(sbuf, dest=0, tag=status.Get_tag())
                count += 1
            count = (count, sorted(sizes))
        else:
            comm.Barrier()
        return count
    finally:
        comm.Free()


# the point-to-point calls a rank can make through mpi4py: as rank 2 of 3 a ping-pong loop
# makes none of them
POINT_TO_POINT = ("Send", "Recv", "Ssend", "Bsend", "Rsend", "Isend", "Irecv", "Issend",
                  "Sendrecv", "Sendrecv_replace", "Probe", "Iprobe", "Mprobe", "Improbe",
                  "send", "recv", "ssend", "bsend", "isend", "irecv", "issend", "sendrecv",
                  "probe", "iprobe", "mprobe", "improbe")
THIRD_TIMEOUT = 10  # seconds a loop may take as rank 2 of 3: a correct one returns at once


class _Stopped(Exception):
    """Raised at the loop's first point-to-point call as rank 2 of 3 (never reaches it)."""


def _third_rank_on_rank(loop, nbytes, iterations):
    """Runs on every engine: on rank 1, ``loop`` given a communicator that says it is rank 2
    of 3 (a duplicate of MPI.COMM_SELF underneath, so its barrier returns at once); its first
    point-to-point call through mpi4py is noted and stops it. A compiled loop calls MPI's C
    functions on the handle instead, and a receive from rank 0 of one rank waits: the check
    tells that from the timeout. Rank 1's ``{"calls": [...]}``; None on the other ranks."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() != 1:
        return None
    calls = []

    def noted(name):
        def call(self, *args, **kwargs):
            calls.append(name)
            raise _Stopped(name)
        return call

    body = {name: noted(name) for name in POINT_TO_POINT}
    body.update(Get_rank=lambda self: 2, Get_size=lambda self: 3,
                rank=property(lambda self: 2), size=property(lambda self: 3))
    third = type("Intracomm", (MPI.Intracomm,), body)
    real = MPI.COMM_SELF.Dup()
    try:
        loop(third(real), np.full(nbytes, 1, np.uint8), np.zeros(nbytes, np.uint8),
             iterations)
    except _Stopped:
        pass
    finally:
        real.Free()
    return {"calls": calls}


def third_rank_check(engines, loop, timeout=None):
    """What ``loop`` does when it runs as rank 2 of 3, where a ping-pong's rank has nothing
    to do: ``calls``, the point-to-point calls it made through mpi4py (it is stopped at the
    first), and ``finished``, False when it did not return within ``timeout`` seconds (a
    compiled loop that receives from rank 0: fresh engines start with the next call), and
    that ``timeout``: the seconds of processor time it was given (THIRD_TIMEOUT, or less:
    :func:`hpclab.exercises.stuck_limits`)."""
    limits = stuck_limits(THIRD_TIMEOUT if timeout is None else timeout)
    try:
        res = engines.run(_third_rank_on_rank, loop, 64, 3, what="your loop as rank 2 of 3",
                          **limits)
    except TimeoutError:
        return {"calls": [], "finished": False, "timeout": limits["busy"]}
    return {"calls": next(r for r in res if r is not None)["calls"], "finished": True,
            "timeout": limits["busy"]}


def cython_loop_check(engines, loop, iterations=200, timeout=30, seed=11):
    """Check the student's compiled loop (an ``%%mpi_cython`` function, which the ticking
    clock cannot reach: it calls MPI's C functions) by what it delivers.

    Returns ``timeout``: the seconds of processor time each step was given (``timeout``, or
    less: :func:`hpclab.exercises.stuck_limits`); ``sizes``: bytes -> the guarded
    :func:`pingpong_check` result at each of CY_SIZES (its ``python_calls`` and ``overran``
    too), or
    the string ``"timeout"`` when the loop did not finish (a send with no matching receive);
    ``deadlock``: True when a few round trips of CY_DEADLOCK_BYTES did not finish within
    ``timeout`` (both ranks sending before they receive waits forever once the message is
    too large to be buffered); ``rounds``: the round trips rank 0's loop made when asked for
    ``asked`` (CY_ROUNDS), counted by a partner on rank 1 that answers each message (None
    when it did not finish), and ``sent_bytes``, the sizes of the messages rank 0 sent when
    its buffers held ``rounds_bytes``; ``nogil``: what is wrong with where its MPI calls sit,
    read from the cell (:func:`hpclab.mpicython.nogil_problem`, None when they are inside
    ``with nogil:``). Each step runs only when the one before passed: a loop
    that writes or reads past its buffers is never given unguarded ones. Nothing here depends
    on a time.
    """
    from hpclab.mpicython import nogil_problem

    limits = stuck_limits(timeout)
    out = {"timeout": limits["busy"], "sizes": {}, "deadlock": False, "rounds": None,
           "asked": CY_ROUNDS, "sent_bytes": None, "rounds_bytes": CY_ROUNDS_BYTES,
           "nogil": nogil_problem(loop)}
    for nbytes in CY_SIZES:
        try:
            out["sizes"][nbytes] = res = pingpong_check(
                engines, loop, nbytes, iterations=iterations, seed=seed, guarded=True,
                **limits)
        except TimeoutError:
            out["sizes"][nbytes] = "timeout"
            return out
        if res["overran"] or not res["received_ok"]:
            return out  # a loop that writes past its buffers is not run on larger ones
    try:
        rounds = engines.run(_rounds_on_rank, loop, CY_ROUNDS_BYTES, CY_ROUNDS,
                             what="your Cython loop's rank 0, answered by a counter",
                             **limits)[1]
        out["rounds"], out["sent_bytes"] = rounds
    except TimeoutError:
        return out
    if out["sent_bytes"] != [CY_ROUNDS_BYTES]:
        return out  # a send of another size than its buffer reads past it: not run on 1 MiB
    try:
        pingpong_check(engines, loop, CY_DEADLOCK_BYTES, iterations=2, seed=seed, **limits)
    except TimeoutError:
        out["deadlock"] = True
    return out
