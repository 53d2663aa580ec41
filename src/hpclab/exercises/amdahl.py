"""Amdahl lab: run the student's distributed addition on the first P engines and check it."""
from __future__ import annotations

import numpy as np


def _add_on_rank(add_func, nprocs, shape, seed):
    """Runs on every engine: the student's addition on the first nprocs ranks."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import block_range

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank, size = sub.Get_rank(), sub.Get_size()
        A = B = None
        if rank == 0:
            rng = np.random.default_rng(seed)
            A, B = rng.random(shape), rng.random(shape)
        result = add_func(sub, A, B)
        if not (isinstance(result, tuple) and len(result) == 2):
            return {"rank": rank, "problem": "return a pair (C, planes): C on rank 0 (None "
                    f"elsewhere) and how many planes this rank added; got {type(result).__name__}"}
        C, planes = result
        out = {"rank": rank, "planes": planes if isinstance(planes, (int, np.integer)) else None,
               "want_planes": block_range(shape[0], size, rank)[1], "problem": None}
        if rank == 0:
            C = np.asarray(C) if C is not None else None
            if C is None or C.shape != tuple(shape):
                out["problem"] = (f"rank 0 must return C of shape {tuple(shape)}, got "
                                  f"{None if C is None else C.shape}")
            else:
                wrong = np.flatnonzero((C != A + B).ravel())
                out["wrong"] = int(wrong.size)
                out["first_wrong"] = int(wrong[0]) if wrong.size else None
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
    problems = [f"rank {r['rank']}: {r['problem']}" for r in per_rank if r.get("problem")]
    for r in per_rank:
        if not r.get("problem") and r["planes"] != r["want_planes"]:
            problems.append(f"rank {r['rank']} added {r['planes']} planes; its block of the "
                            f"{shape[0]} planes over {nprocs} ranks has {r['want_planes']}")
    root = next(r for r in per_rank if r["rank"] == 0)
    if root.get("wrong"):
        problems.append(f"{root['wrong']} elements of C differ from A + B (the first at flat "
                        f"index {root['first_wrong']})")
    return {"ok": not problems, "ranks": per_rank, "problems": problems}
