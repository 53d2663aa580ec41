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
        from hpclab.exercises import pending

        calls: dict[str, int] = {}
        order: list = []
        requests: list = []
        got = ring_func(CountingComm(sub, calls, order, requests))
        got = tuple(int(v) for v in got) if got is not None else None
        return {"rank": sub.Get_rank(), "got": got, "calls": calls,
                "order": [(n, k) for n, k in order if n in MESSAGES],
                "unwaited": pending(requests)}


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
    its message calls in order, each as ``(name, sends started and not yet waited for)``)
    and ``unwaited`` (the most sends a rank had not waited for when it returned).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    from hpclab.chapters.ring import kernels as ring

    out = {"nprocs": nprocs, "deadlocked": False, "ok": False, "ranks": [], "calls": {},
           "messages": {}, "orders": {}, "unwaited": 0,
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
    out["unwaited"] = max((r["unwaited"] for r in per_rank), default=0)
    return out


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
    return None
