"""Ring lab: run the student's ring on the first P engines and check the sums that come home."""
from __future__ import annotations

from hpclab.exercises import CountingComm


def _ring_on_rank(ring_func, nprocs, repeats):
    """Runs on every engine: the student's ring on the first nprocs ranks."""
    import time

    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank = sub.Get_rank()
        got = ring_func(sub)
        sub.Barrier()
        t0 = time.perf_counter()
        for _ in range(repeats):
            ring_func(sub)
        elapsed = (time.perf_counter() - t0) / max(repeats, 1)
        got = tuple(int(v) for v in got) if got is not None else None
        return {"rank": rank, "got": got, "time": elapsed}


def ring_check(engines, ring_func, nprocs, repeats=20, timeout=60):
    """Run ``ring_func(comm)`` on the first nprocs engines (a communicator of nprocs ranks).

    ``ring_func`` must return, on every rank, the two values that came home:
    ``(from_left, from_right)``. Returns a dict: ``ok`` (every rank got the
    closed-form sums), ``ranks`` (what each rank returned and expected) and
    ``time`` (seconds per call, the slowest rank's, over ``repeats`` calls).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    from hpclab.chapters.ring import kernels as ring

    per_rank = [r for r in engines.run(_ring_on_rank, ring_func, int(nprocs), int(repeats),
                                       timeout=timeout, what=f"your ring on {nprocs} ranks")
                if r is not None]
    # the expected sums are computed here, where the grader runs, not taken from the engines
    for r in per_rank:
        r["want"] = (ring.expected(r["rank"], nprocs, 0), ring.expected(r["rank"], nprocs, 1))
    ok = sorted(r["rank"] for r in per_rank) == list(range(nprocs)) and \
        all(r["got"] is not None and tuple(r["got"]) == r["want"] for r in per_rank)
    return {"ok": ok, "ranks": per_rank, "time": max(r["time"] for r in per_rank)}


# --------------------------------------------------------------- the ordered (safe) ring

# the calls the ordered ring may make on P >= 2 ranks, and what it must not use there
SYNCHRONOUS, RECEIVES = ("Ssend", "ssend"), ("Recv", "recv")
# what the non-blocking ring posts, and the blocking calls it must not make
POSTED = ("Isend", "isend", "Irecv", "irecv")
BLOCKING = ("Send", "send", "Ssend", "ssend", "Recv", "recv", "Sendrecv", "sendrecv",
            "Sendrecv_replace", "Bsend", "bsend", "Rsend")
NOT_BLOCKING_SYNCHRONOUS = ("Send", "send", "Isend", "isend", "Issend", "issend", "Irecv",
                            "irecv", "Sendrecv", "sendrecv", "Sendrecv_replace", "Bsend",
                            "bsend", "Ibsend", "Rsend", "Irsend", "Neighbor_alltoall",
                            "neighbor_alltoall", "Alltoall", "alltoall", "Sendrecv_init")


# every call that sends or receives a message
MESSAGES = frozenset((*SYNCHRONOUS, *RECEIVES, *POSTED, *BLOCKING, *NOT_BLOCKING_SYNCHRONOUS))


def _ordered_on_rank(ring_func, nprocs):
    """Runs on every engine: the student's ring once on the first nprocs ranks, counting
    its calls."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        from hpclab.exercises import pending, watch_send_buffers

        calls: dict[str, int] = {}
        order: list = []
        requests: list = []
        sent: list = []
        changed: list = []
        with watch_send_buffers(ring_func, sent, changed):
            got = ring_func(CountingComm(sub, calls, order, requests, sent))
        got = tuple(int(v) for v in got) if got is not None else None
        return {"rank": sub.Get_rank(), "got": got, "calls": calls,
                "order": [(n, k) for n, k, _ in order if n in MESSAGES],
                "tags": [t for n, _, t in order if n in MESSAGES],
                "unwaited": pending(requests), "changed": changed[0] if changed else None}


def ring_calls_check(engines, ring_func, nprocs, timeout=10, what="your ring"):
    """Run the student's ring once on the first nprocs engines, with a deadline, counting
    the calls it makes on its communicator.

    Returns a dict: ``deadlocked`` (it did not finish within ``timeout`` seconds: the
    engines were stopped, fresh ones start with the next call), ``ok`` (every rank got the
    closed-form sums), ``ranks`` (what each returned and expected), ``calls`` (the calls
    each rank made on its communicator, by name, the largest count over the ranks),
    ``expected`` (how many sends and receives a ring of nprocs ranks makes: two of each per
    step), ``sends`` and ``receives`` (its synchronous sends and blocking receives),
    ``other`` (its calls that are neither, which the ordered ring must not make on two or
    more ranks), ``posted`` (its non-blocking sends and receives), ``blocking`` (its
    blocking calls, which the non-blocking ring must not make) and ``messages`` (every call
    that sends or receives, by name: the largest count over the ranks), ``orders`` (rank ->
    its message calls in order, each as ``(name, sends started and not yet waited for)``),
    ``tags`` (rank -> the tag of each of those calls, None where none was given)
    ``unwaited`` (the most sends a rank had not waited for when it returned) and ``changed``
    (the first rank that changed the buffer of a send it had not yet waited for, as
    ``{"rank", "function", "line", "code"}``: the line of its code that ran last, or None).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    from hpclab.chapters.ring import kernels as ring

    out = {"nprocs": nprocs, "deadlocked": False, "ok": False, "ranks": [], "calls": {},
           "messages": {}, "orders": {}, "tags": {}, "unwaited": 0, "changed": None,
           "expected": {"Ssend": 2 * nprocs, "Recv": 2 * nprocs}, "other": [], "sends": 0,
           "receives": 0, "posted": 0, "blocking": []}
    try:
        per_rank = [r for r in engines.run(_ordered_on_rank, ring_func, int(nprocs),
                                           timeout=timeout,
                                           what=f"{what} on {nprocs} ranks")
                    if r is not None]
    except TimeoutError:
        out["deadlocked"] = True
        return out
    calls: dict[str, int] = {}
    for r in per_rank:
        r["want"] = (ring.expected(r["rank"], nprocs, 0), ring.expected(r["rank"], nprocs, 1))
        for name, count in r["calls"].items():
            calls[name] = max(calls.get(name, 0), count)
    out["ranks"], out["calls"] = per_rank, calls
    out["ok"] = sorted(r["rank"] for r in per_rank) == list(range(nprocs)) and \
        all(r["got"] is not None and tuple(r["got"]) == r["want"] for r in per_rank)
    out["sends"] = sum(calls.get(n, 0) for n in SYNCHRONOUS)
    out["receives"] = sum(calls.get(n, 0) for n in RECEIVES)
    out["other"] = sorted(n for n in calls if n in NOT_BLOCKING_SYNCHRONOUS)
    out["posted"] = sum(calls.get(n, 0) for n in POSTED)
    out["blocking"] = sorted(n for n in calls if n in BLOCKING)
    out["messages"] = {n: c for n, c in sorted(calls.items()) if n in MESSAGES}
    out["orders"] = {r["rank"]: r["order"] for r in per_rank}
    out["tags"] = {r["rank"]: r["tags"] for r in per_rank}
    out["unwaited"] = max((r["unwaited"] for r in per_rank), default=0)
    changed = [dict(r["changed"], rank=r["rank"]) for r in per_rank if r.get("changed")]
    if changed:
        out["changed"] = changed[0]
        out["changed"]["code"] = _line_of(ring_func, changed[0])
    return out


def _line_of(func, where):
    """The text of line ``where["line"]`` of ``func`` (1 = its ``def``) when that is where
    the line ran, else ''."""
    from hpclab.mpicython import source_of

    name = getattr(func, "__name__", getattr(func, "name", None))
    source = source_of(func) if where.get("function") == name else None
    lines = source.splitlines() if source else []
    return lines[where["line"] - 1].strip() if 0 < where["line"] <= len(lines) else ""


def ordered_problem(calls):
    """What is wrong with the order of the ordered ring's calls (a :func:`ring_calls_check`
    result on two or more ranks), in the student's terms; None when every even rank makes
    its calls in one order and every odd rank in the other."""
    names = {rank: [n for n, _ in order] for rank, order in calls["orders"].items()}
    if 0 not in names or 1 not in names:
        return None
    p = calls["nprocs"]

    def shown(seq):
        return ", ".join(seq[:4]) + (", ..." if len(seq) > 4 else "")

    for rank, seq in sorted(names.items()):
        like = rank % 2
        if seq != names[like]:
            return (f"on {p} ranks, rank {rank} calls {shown(seq)} but rank {like}, also "
                    f"{'odd' if like else 'even'}, calls {shown(names[like])}: order the calls "
                    "by the parity of the rank, every even rank sending first and every odd "
                    "rank receiving first. Ordering by rank < P/2, or letting one rank "
                    "receive first, also avoids the deadlock, but then a send completes only "
                    "after its neighbour's has, and a step's messages travel one after another "
                    "down a chain instead of all at once")
    if names[0] == names[1]:
        return (f"on {p} ranks, even and odd ranks make their calls in the same order "
                f"({shown(names[0])}): let the even ranks send first and the odd ranks "
                "receive first")
    return None


def other_ring_problem(calls, name):
    """What is wrong with the calls of ``send_ring`` or ``isend_ring`` (``name``; a
    :func:`ring_calls_check` result), in the student's terms; None when every rank calls
    Send (Isend) twice, then Recv twice, in every step, and ``isend_ring`` waits for its
    two sends after both receives and before it changes what they send."""
    send = "Isend" if name == "isend_ring" else "Send"
    p = calls["nprocs"]
    for rank, order in sorted(calls["orders"].items()):
        names = [n for n, _ in order]
        if names != [send, send, "Recv", "Recv"] * p:
            return (f"on {p} ranks, rank {rank} called {', '.join(names[:8])}"
                    + (", ..." if len(names) > 8 else "")
                    + f": in every step every rank calls {send} twice, then Recv twice, with "
                    "no ordering by rank (that ordering is (b)'s ring)")
        if send == "Isend" and any(k < 2 for _, k in order[2::4]):  # at each first Recv
            return (f"on {p} ranks, rank {rank} waited for a send before its receives: then "
                    "each send completes before the receive is posted, as in send_ring. Wait "
                    "for the two sends after both receives")
    if send == "Isend" and calls["unwaited"]:
        return (f"on {p} ranks your isend_ring returns with {calls['unwaited']} send(s) never "
                "waited for: wait for the two requests of each step (MPI.Request.Waitall) "
                "before you change what you send")
    return send_buffer_problem(calls)


def send_buffer_problem(calls):
    """What is wrong when a rank changed a send's buffer before waiting for the send (a
    :func:`ring_calls_check` result), in the student's terms; None when none did."""
    where = calls.get("changed")
    if not where:
        return None
    line = f"line {where['line']} of {where['function']}" + (
        f" (`{where['code']}`)" if where.get("code") else "")
    return (f"rank {where['rank']} changed what it was sending before it waited for the send: "
            f"after {line} a send's buffer no longer held what it held when the send started. "
            "MPI may read that buffer until the send is waited for, so the message can carry "
            "the new value (a message of 4 bytes is usually copied at once, so the sums may "
            "still come home right, by luck). Wait for the sends (MPI.Request.Waitall) before "
            "you change the arrays they send")


def nonblocking_problem(calls):
    """What is wrong with the calls of a non-blocking ring (a :func:`ring_calls_check`
    result), in the student's terms; None when every step posts two Irecv and two Isend,
    waits for none of them before all four are posted, and waits for all four before the
    next step (or the return)."""
    pickled = sorted(set(calls["messages"]) & {"isend", "irecv"})
    if pickled:
        return (f"your ring calls {', '.join('comm.' + n for n in pickled)}: that is the pickle "
                "API, which sends Python objects; use Isend and Irecv with the numpy arrays")
    for rank, order in sorted(calls["orders"].items()):
        names = [n for n, _ in order]
        if sorted(names) != sorted(["Irecv", "Irecv", "Isend", "Isend"] * calls["nprocs"]):
            return None  # the counts are the other checks' to name
        for step in range(calls["nprocs"]):
            sends, receives = 0, 0
            for name, waiting in order[4 * step:4 * step + 4]:
                if waiting < sends:  # a send of this step was waited for already
                    return (
                        f"rank {rank} waited for a send before it had posted all four calls of "
                        "a step: " + ("it waited for its sends before posting any receive, "
                                      "and such a send waits forever once a message is too "
                                      "large for MPI to buffer" if name == "Irecv"
                                      and not receives else
                                      "it waited for a send before posting its second receive"
                                      if name == "Irecv" else
                                      "it waited for its first send before it started the "
                                      "second, which makes the ring blocking again")
                        + ". Post both Irecv and both Isend, then wait for all four together "
                        "(MPI.Request.Waitall)")
                if waiting > sends:  # a send of an earlier step was never waited for
                    return (f"rank {rank} began a step with {waiting - sends} send(s) of the "
                            "step before not waited for: wait for all four requests of each "
                            "step, the sends' too, before you reuse their buffers")
                sends += name == "Isend"
                receives += name == "Irecv"
    if calls["unwaited"]:
        return (f"a rank returned with {calls['unwaited']} send(s) never waited for: wait for "
                "all four requests of the last step too")
    for rank, tags in sorted(calls.get("tags", {}).items()):
        names = [n for n, _ in calls["orders"][rank]]
        for step in range(calls["nprocs"]):
            sent = [t for n, t in zip(names[4 * step:4 * step + 4], tags[4 * step:4 * step + 4])
                    if n == "Isend"]
            if len(sent) == 2 and sent[0] == sent[1]:
                return (f"rank {rank} sent both directions with tag {sent[0]}: with P = 2 both "
                        "neighbours are the same rank, and then only the order of the two "
                        "messages tells them apart. Give each direction its own tag (the "
                        "receive from the left matches the send to the right)")
    return send_buffer_problem(calls)
