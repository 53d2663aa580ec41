"""Amdahl lab: run the student's distributed addition on the first P engines and check it."""
from __future__ import annotations

import numpy as np


def _arrays(rank, shape, seed):
    """Rank 0's two random arrays of ``shape``; (None, None) on the other ranks."""
    if rank != 0:
        return None, None
    rng = np.random.default_rng(seed)
    return rng.random(shape), rng.random(shape)


def _take_C(out, rank, C, shape):
    """Rank 0's C into ``out`` (compared with A + B where the check runs, not on the
    engine), or what is wrong with what a rank returned."""
    if rank == 0:
        C = np.asarray(C, dtype=float) if C is not None else None
        if C is None or C.shape != tuple(shape):
            out["problem"] = (f"rank 0 must return C of shape {tuple(shape)}, got "
                              f"{None if C is None else C.shape}")
        else:
            out["C"] = C
    elif C is not None:
        out["problem"] = "only rank 0 returns C; the other ranks return None"
    return out


def _add_on_rank(add_func, nprocs, shape, seed):
    """Runs on every engine: the student's addition on the first nprocs ranks."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        from hpclab.exercises import CountingComm

        rank = sub.Get_rank()
        A, B = _arrays(rank, shape, seed)
        calls: dict[str, int] = {}
        result = add_func(CountingComm(sub, calls), A, B)
        if not (isinstance(result, tuple) and len(result) == 2):
            return {"rank": rank, "problem": "return a pair (C, planes): C on rank 0 (None "
                    f"elsewhere) and how many planes this rank added; got {type(result).__name__}"}
        C, planes = result
        out = {"rank": rank, "planes": int(planes) if isinstance(planes, (int, np.integer))
               else None, "problem": None, "calls": calls}
        return _take_C(out, rank, C, shape)


# what a rank other than 0 calls to receive its blocks, and to send its part of C back
RECEIVES = {"Scatterv", "Scatter", "scatter", "Recv", "recv", "Irecv", "irecv", "Sendrecv",
            "sendrecv", "Alltoallv", "Alltoall", "alltoall"}
SENDS = {"Gatherv", "Gather", "gather", "Send", "send", "Isend", "isend", "Ssend", "ssend",
         "Sendrecv", "sendrecv", "Allgatherv", "Allgather", "allgather", "Alltoallv",
         "Alltoall", "alltoall"}


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
        calls = set(r.pop("calls", {}))
        if r["rank"] > 0 and not r.get("problem") and not (calls & RECEIVES and calls & SENDS):
            problems.append(
                f"rank {r['rank']} " + ("received nothing" if not calls & RECEIVES else
                                        "sent nothing back") +
                " on the communicator: every rank receives its planes of A and B "
                "(comm.Scatterv) and sends its part of C to rank 0 (comm.Gatherv); rank 0 "
                "adding everything alone is not a parallel addition")
        elif r["rank"] > 0 and not r.get("problem") and not {"Scatterv", "Gatherv"} <= calls:
            used = sorted(calls & (RECEIVES | SENDS))
            problems.append(
                f"rank {r['rank']} moved its planes with {', '.join(used)}: (a) asks for the "
                "collectives comm.Scatterv and comm.Gatherv (one call on every rank, counts "
                "and displacements in elements; the MPI library chooses how the blocks travel)"
                + (", not the lower-case ones, which pickle Python objects"
                   if calls & {"scatter", "gather"} else ""))
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
        if wrong.size and wrong[0] == shape[0] and np.prod(shape[1:]) > 1:
            problems.append(f"only the first {shape[0]} elements of C are right, one per plane: "
                            "the counts and displacements of comm.Scatterv and comm.Gatherv "
                            "are in elements, not planes (a block of n planes is "
                            "n * ny * nz elements)")
        elif wrong.size:
            problems.append(f"{wrong.size} elements of C differ from A + B (the first at flat "
                            f"index {wrong[0]})")
    elif not root.get("problem"):
        problems.append("rank 0 returned no C")
    return {"ok": not problems, "ranks": per_rank, "problems": problems}


def expected_grid(nprocs, ndims):
    """The process grid (three extents) of ``MPI_Dims_create(nprocs, ndims)``, padded with
    ones: what ``comm.Create_cart(MPI.Compute_dims(P, ndims))`` lays the ranks out on."""
    from hpclab.chapters.amdahl.kernels import process_grid

    dims = list(process_grid({1: "1d", 2: "2d", 3: "3d"}[int(ndims)], int(nprocs)))
    return tuple(dims[:int(ndims)] + [1] * (3 - int(ndims)))


def expected_box(shape, grid, rank):
    """(starts, counts) of rank's block of ``shape`` on the row-major process ``grid``."""
    from hpclab.kernels.topology import block_range

    coords = np.unravel_index(int(rank), grid)
    ranges = [block_range(n, d, c) for n, d, c in zip(shape, grid, coords)]
    return tuple(int(o) for o, _ in ranges), tuple(int(c) for _, c in ranges)


def _box(value):
    """The student's (starts, counts) as two tuples of three ints, or None."""
    try:
        starts, counts = value
        out = (tuple(int(v) for v in starts), tuple(int(v) for v in counts))
    except (TypeError, ValueError):
        return None
    return out if all(len(t) == 3 for t in out) else None


def _cartesian_on_rank(add_func, nprocs, ndims, shape, seed):
    """Runs on every engine: the student's Cartesian addition on the first nprocs ranks."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        from hpclab.exercises import CountingComm

        rank = sub.Get_rank()
        A, B = _arrays(rank, shape, seed)
        calls: dict[str, int] = {}
        result = add_func(CountingComm(sub, calls), A, B, ndims)
        out = {"rank": rank, "box": None, "problem": None, "calls": calls}
        if not (isinstance(result, tuple) and len(result) == 2):
            out["problem"] = ("return a pair (C, box): C on rank 0 (None elsewhere) and this "
                              f"rank's box ((starts), (counts)); got {type(result).__name__}")
            return out
        C, box = result
        out["box"] = _box(box)
        if out["box"] is None:
            out["problem"] = ("the box must be ((start0, start1, start2), (count0, count1, "
                              f"count2)): got {box!r}")
        return _take_C(out, rank, C, shape)


def cartesian_check(engines, add_func, nprocs, ndims, shape=(30, 21, 10), seed=0,
                    timeout=30):
    """Run ``add_func(comm, A, B, ndims)`` on the first nprocs engines, with a deadline.

    Rank 0 passes two random arrays of ``shape``, the others None; ``add_func`` must return
    ``(C, box)`` on every rank: C = A + B on rank 0 (None elsewhere) and the rank's block,
    ``((start0, start1, start2), (count0, count1, count2))``, on the process grid of
    ``MPI_Dims_create(nprocs, ndims)`` (row-major ranks, the first ``n % d`` blocks of each
    dimension one point longer). Returns a dict: ``ok``, ``deadlocked`` (it did not finish
    within ``timeout`` seconds; fresh engines start with the next call), ``grid`` (the
    process grid expected), ``ranks`` (each rank's box and the expected one) and
    ``problems`` (what is wrong, in words).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    if ndims not in (1, 2, 3):
        raise ValueError(f"ndims is 1, 2 or 3, got {ndims!r}")
    shape = tuple(int(v) for v in shape)
    grid = expected_grid(nprocs, ndims)
    out = {"ok": False, "deadlocked": False, "grid": grid, "ranks": [], "problems": []}
    try:
        per_rank = [r for r in engines.run(_cartesian_on_rank, add_func, int(nprocs),
                                           int(ndims), shape, int(seed), timeout=timeout,
                                           what=f"your Cartesian addition on {nprocs} ranks")
                    if r is not None]
    except TimeoutError:
        out["deadlocked"] = True
        out["problems"].append(
            f"it did not finish within {timeout} s on {nprocs} ranks: a deadlock, for example "
            "rank 0 in a blocking send to itself, which waits for a receive it has not "
            "posted yet (copy rank 0's own block into its array, or post its receive first "
            "with Irecv)")
        return out
    problems = [f"rank {r['rank']}: {r['problem']}" for r in per_rank if r.get("problem")]
    if sorted(r["rank"] for r in per_rank) != list(range(nprocs)):
        problems.append(f"not every one of the {nprocs} ranks reported")
    from hpclab.exercises import DERIVED

    derived = sum(r.get("calls", {}).get(DERIVED, 0) for r in per_rank)
    root = next((r for r in per_rank if r["rank"] == 0), None)
    root_calls = root.get("calls", {}) if root is not None else {}

    def in_place(kind):  # rank 0's sends ("send") or receives ("recv") given a derived
        # datatype, in any of their forms (Send, Isend, Ssend, Send_init, Recv, Irecv, Mrecv...)
        return sum(n for key, n in root_calls.items()
                   if key.startswith(f"{DERIVED} ") and kind in key[len(DERIVED) + 1:].lower())

    counted = len(problems)
    wrong_boxes = []
    for r in per_rank:
        calls = r.pop("calls", {})
        if r["rank"] > 0 and not r.get("problem"):
            received = sum(n for name, n in calls.items() if name in RECEIVES)
            sent = sum(n for name, n in calls.items() if name in SENDS)
            if not received or not sent:
                problems.append(
                    f"rank {r['rank']} " + ("received nothing" if not received else
                                            "sent nothing back") +
                    " on the communicator: rank 0 sends every rank its box of A and of B, and "
                    "each rank sends its box of C back; rank 0 adding everything alone is not "
                    "a parallel addition")
            elif received > 2 or sent > 1:
                problems.append(
                    f"rank {r['rank']} received its boxes of A and B in {received} messages "
                    f"and sent its box of C in {sent}: (b) sends each box as one message, its "
                    "place in the global array described by a subarray datatype "
                    "(MPI.DOUBLE.Create_subarray), not one message per plane or row")
        r["want_box"] = expected_box(shape, grid, r["rank"])
        if r["box"] is not None and r["box"] != r["want_box"]:
            wrong_boxes.append(r)
    if nprocs > 1 and not derived and len(problems) == counted:
        problems.append(
            "no send or receive was given a derived datatype: the boxes travel as contiguous "
            "copies; (b) describes each rank's box of A, B and C in the global array with "
            "MPI.DOUBLE.Create_subarray and sends or receives it in place, [A, 1, box_type]")
    elif nprocs > 1 and len(problems) == counted and in_place("send") < 2 * (nprocs - 1):
        problems.append(
            "rank 0 sent the boxes of A and B as contiguous copies: describe each rank's box in "
            "the global array with a subarray datatype t and send it in place, "
            "cart.Send([A, 1, t], dest=r), with no copy")
    elif nprocs > 1 and len(problems) == counted and in_place("recv") < nprocs - 1:
        problems.append(
            "rank 0 received the boxes of C into contiguous arrays and copied them: receive "
            "each into its place in C with the same datatype, cart.Recv([C, 1, t], source=r)")
    if wrong_boxes:
        r = wrong_boxes[0]
        (s, c), (ws, wc) = r["box"], r["want_box"]
        coords = tuple(int(v) for v in np.unravel_index(r["rank"], grid))
        hint = ""
        theirs = tuple(len({b["box"][0][d] for b in per_rank if b["box"]}) for d in range(3))
        if theirs != grid and int(np.prod(theirs)) == nprocs:
            hint = (f" Your boxes lie on a {'x'.join(map(str, theirs))} grid: take the extents "
                    "in the order MPI.Compute_dims gives them, dims[0] blocks along the first "
                    "dimension of the array.")
        elif ndims > 1 and grid[1] > 1 and c[1] == shape[1]:
            hint = (f" Your blocks cut only the first dimension; with ndims = {ndims} the grid "
                    f"is {'x'.join(map(str, grid))}.")
        elif any(n % d for n, d in zip(shape, grid)) and all(
                cc == n // d for cc, n, d in zip(c, shape, grid)):
            hint = (" Every block has n // d points: the first n % d blocks of a dimension "
                    "get one point more (hpclab.kernels.topology.block_range).")
        problems.append(
            f"rank {r['rank']} owns the box starting at {s} with {c} points; on the process grid "
            f"{'x'.join(map(str, grid))} of MPI_Dims_create({nprocs}, {ndims}) its coordinates "
            f"are {coords} and its block starts at {ws} with {wc} points.{hint}")
    root = next((r for r in per_rank if r["rank"] == 0), {})
    C = root.pop("C", None)
    if C is not None:
        rng = np.random.default_rng(seed)
        A, B = rng.random(shape), rng.random(shape)
        wrong = np.argwhere(np.asarray(C) != A + B)
        if wrong.size:
            first = tuple(int(v) for v in wrong[0])
            owner = next((k for k in range(nprocs) if all(
                o <= i < o + n for i, o, n in zip(first, *expected_box(shape, grid, k)))), None)
            problems.append(
                f"{len(wrong)} elements of C differ from A + B, the first at index {first}, in "
                f"the block of rank {owner}" + (
                    " (rank 0's own block: does rank 0 copy its part of A and B, and its part "
                    "of C back?)" if owner == 0 and nprocs > 1 else
                    " (a subarray type of the global array: sizes, subsizes and starts in the "
                    "order of the array's dimensions, C order)"))
    elif not root.get("problem"):
        problems.append("rank 0 returned no C")
    out.update(ok=not problems, ranks=per_rank, problems=problems)
    return out


def _time_on_rank(add_func, nprocs, shape, repetitions, extra):
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank = sub.Get_rank()
        A, B = _arrays(rank, shape, 5)
        times, right = [], True
        for _ in range(repetitions):
            sub.Barrier()
            t0 = MPI.Wtime()
            C, _ = add_func(sub, A, B, *extra)
            sub.Barrier()
            times.append(sub.bcast(MPI.Wtime() - t0, root=0))
            if rank == 0:
                right = right and bool(np.array_equal(C, A + B))
        return {"rank": rank, "times": times, "right": sub.bcast(right, root=0)}


def addition_timing(engines, add_func, nprocs, shape, extra=(), repetitions=3, timeout=300):
    """Seconds of each call ``add_func(comm, A, B, *extra)`` on the first nprocs engines
    (distribute, add, collect; rank 0's arrays are made before the clock starts), and
    whether every C was right: ``{"times": [...], "right": bool}``."""
    from hpclab.exercises import timed_ranks

    nprocs = timed_ranks(engines, nprocs)
    res = [r for r in engines.run(_time_on_rank, add_func, int(nprocs),
                                  tuple(int(v) for v in shape), int(repetitions), tuple(extra),
                                  timeout=timeout, what=f"your addition timed on {nprocs} ranks")
           if r is not None and r["rank"] == 0]
    return {"times": res[0]["times"], "right": res[0]["right"]}
