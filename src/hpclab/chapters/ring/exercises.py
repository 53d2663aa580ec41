"""Ring lab: run the student's ring on the first P engines and check the sums that come home."""
from __future__ import annotations


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
