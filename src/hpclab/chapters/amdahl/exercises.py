"""Amdahl lab: run the student's distributed addition on the first P engines and check it."""
from __future__ import annotations

import numpy as np


def _add_on_rank(add_func, nprocs, shape, seed):
    """Runs on every engine: the student's addition on the first nprocs ranks."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank = sub.Get_rank()
        A = B = None
        if rank == 0:
            rng = np.random.default_rng(seed)
            A, B = rng.random(shape), rng.random(shape)
        result = add_func(sub, A, B)
        if not (isinstance(result, tuple) and len(result) == 2):
            return {"rank": rank, "problem": "return a pair (C, planes): C on rank 0 (None "
                    f"elsewhere) and how many planes this rank added; got {type(result).__name__}"}
        C, planes = result
        out = {"rank": rank, "planes": int(planes) if isinstance(planes, (int, np.integer))
               else None, "problem": None}
        if rank == 0:
            C = np.asarray(C, dtype=float) if C is not None else None
            if C is None or C.shape != tuple(shape):
                out["problem"] = (f"rank 0 must return C of shape {tuple(shape)}, got "
                                  f"{None if C is None else C.shape}")
            else:
                out["C"] = C  # compared with A + B where the check runs, not here
        elif C is not None:
            out["problem"] = "only rank 0 returns C; the other ranks return None"
        return out


def addition_check(engines, add_func, nprocs, shape=(800, 30, 10), seed=0, timeout=60):
    """Run ``add_func(comm, A, B)`` on the first nprocs engines.

    Rank 0 passes two random arrays of ``shape``, the others None. ``add_func`` must
    return ``(C, planes)`` on every rank: C = A + B on rank 0 (None elsewhere) and the
    number of planes (first-dimension slices) the rank added itself. Returns a dict:
    ``ok`` (C is right element by element and every rank added its own balanced block
    of planes), ``ranks`` (what each rank reported) and ``problems``.
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    per_rank = [r for r in engines.run(_add_on_rank, add_func, int(nprocs), tuple(shape),
                                       int(seed), timeout=timeout,
                                       what=f"your addition on {nprocs} ranks")
                if r is not None]
    from hpclab.kernels.topology import block_range

    # what is right is computed here, where the check runs, not taken from the engines
    problems = [f"rank {r['rank']}: {r['problem']}" for r in per_rank if r.get("problem")]
    if sorted(r["rank"] for r in per_rank) != list(range(nprocs)):
        problems.append(f"not every one of the {nprocs} ranks reported")
    for r in per_rank:
        r["want_planes"] = block_range(shape[0], nprocs, r["rank"])[1]
        if not r.get("problem") and r["planes"] != r["want_planes"]:
            problems.append(f"rank {r['rank']} added {r['planes']} planes; its block of the "
                            f"{shape[0]} planes over {nprocs} ranks has {r['want_planes']}")
    root = next((r for r in per_rank if r["rank"] == 0), {})
    C = root.pop("C", None)
    if C is not None:
        rng = np.random.default_rng(seed)
        A, B = rng.random(shape), rng.random(shape)
        wrong = np.flatnonzero((np.asarray(C) != A + B).ravel())
        if wrong.size:
            problems.append(f"{wrong.size} elements of C differ from A + B (the first at flat "
                            f"index {wrong[0]})")
    elif not root.get("problem"):
        problems.append("rank 0 returned no C")
    return {"ok": not problems, "ranks": per_rank, "problems": problems}
