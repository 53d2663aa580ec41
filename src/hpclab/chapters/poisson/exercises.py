"""Poisson lab: run the student's distributed dot product, matrix-free product and CG on the
first P engines, with the rows of the mesh split over the ranks, and compare with the serial
reference."""
from __future__ import annotations

import numpy as np

from hpclab.exercises import stuck_limits
from hpclab.kernels.topology import block_range


def _parts_on_rank(dot, apply_A, cg, nprocs, n, seed, tol):
    """Runs on every engine: a rank's rows (with a halo row above and below, and the
    boundary columns), the student's three functions on them."""
    from mpi4py import MPI

    from hpclab.chapters.poisson import kernels as poisson
    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=[nprocs]) as cart:
        if cart is None:
            return None
        rank = cart.Get_rank()
        first, rows = block_range(n, nprocs, rank)
        rng = np.random.default_rng(seed)
        a_all, b_all = rng.standard_normal((2, n + 2, n + 2))
        for x in (a_all, b_all):  # the boundary ring is zero
            x[0], x[-1], x[:, 0], x[:, -1] = 0, 0, 0, 0
        a = a_all[first:first + rows + 2].copy()
        b = b_all[first:first + rows + 2].copy()
        a[0], a[-1], b[0], b[-1] = 1e3, 1e3, 1e3, 1e3  # halo rows hold stale values
        out = {"rank": rank, "dot": None, "q": None, "x": None, "k": None}
        try:  # a dot product that is not a number on some rank stops every rank here
            out["dot"] = float(dot(cart, a, b))
        except Exception as exc:  # noqa: BLE001 - the student's error, reported below
            out["dot_error"] = f"{type(exc).__name__}: {exc}"[:300]
        if cart.allreduce(int("dot_error" in out), op=MPI.MAX):
            return out
        p = a.copy()
        p[0] = p[-1] = np.nan  # halo rows the product must fill (or leave, at the ends)
        if rank == 0:
            p[0] = 0.0
        if rank == nprocs - 1:
            p[-1] = 0.0
        q = np.asarray(apply_A(cart, p), dtype=float)
        out["q"] = q[1:-1].copy()
        if q.shape == p.shape:  # zero on the mesh's boundary: CG adds q into r and r into p,
            # and the stencil reads p there (a halo row between ranks is refilled every time)
            edge = [q[1:-1, 0], q[1:-1, -1]] + ([q[0]] if rank == 0 else []) \
                + ([q[-1]] if rank == nprocs - 1 else [])
            out["q_outside"] = bool(any(np.any(e != 0) for e in edge))  # NaN too
        h = 1.0 / (n + 1)
        rhs = np.zeros((rows + 2, n + 2))
        rhs[1:-1, 1:-1] = h * h * poisson.f(*poisson.mesh(n, first, rows))
        out["first"] = first
        try:  # a wrong product or dot product makes CG fail: that is said first
            x, k = cg(cart, rhs, dot, apply_A, tol=tol, maxiter=10 * n + 100)
            out["x_shape"], out["x_want"] = np.shape(x), rhs.shape
            out["x"], out["k"] = np.asarray(x, dtype=float)[1:-1, 1:-1].copy(), int(k)
        except Exception as exc:  # noqa: BLE001 - the student's error, reported below
            import traceback

            out["cg_error"] = "".join(traceback.format_exception_only(exc)).strip()
            # as IPython prints a frame: its source is looked up in the notebook's kernel
            out["cg_frames"] = "\n".join(f"File {f.filename}:{f.lineno}, in {f.name}"
                                         for f in traceback.extract_tb(exc.__traceback__))
            return out
        out["maxiter"] = _at_maxiter(cg, cart, rhs, dot, apply_A, tol)
        return out


# columns of the wide strip: a halo row of 64 Ki doubles (512 KiB) is beyond the size up to
# which MPICH, Open MPI and Intel MPI buffer a send (16 KiB deadlocks MPICH already), so a
# blocking send that waits for its receive shows as a deadlock, not as luck
WIDE_COLUMNS = 1 << 16


def _wide_on_rank(apply_A, nprocs, columns):
    """Runs on every engine: the student's product on a strip of two rows per rank, each row
    ``columns`` wide, so that every halo message is too large for MPI to buffer."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=[nprocs]) as cart:
        if cart is None:
            return None
        p = np.zeros((4, columns + 2))
        p[1:-1, 1:-1] = 1.0
        apply_A(cart, p)
        return cart.Get_rank()


def wide_rows_deadlock(engines, apply_A, nprocs, timeout=30, busy=None):
    """Whether the student's ``apply_A`` deadlocks on rows too wide for MPI to buffer a send
    (a blocking Send before the Recv on both neighbours); an error it raises is not judged
    here. ``busy``: see :meth:`hpclab.engines.Engines.run`."""
    try:
        engines.run(_wide_on_rank, apply_A, int(nprocs), WIDE_COLUMNS, timeout=timeout, busy=busy,
                    what=f"your apply_A on rows of {WIDE_COLUMNS} values on {nprocs} ranks")
    except TimeoutError:
        return True
    except Exception:  # noqa: BLE001 - a failure of the product is told by poisson_check
        return False
    return False


def _at_maxiter(cg, cart, rhs, dot, apply_A, tol, maxiter=2):
    """What the student's cg does when it cannot converge in ``maxiter`` iterations: None when
    it raises a RuntimeError, else what it did instead, in words."""
    try:
        _, k = cg(cart, rhs, dot, apply_A, tol=tol, maxiter=maxiter)
    except RuntimeError:
        return None
    except Exception as exc:  # noqa: BLE001 - the student's error, reported by the check
        return f"raised {type(exc).__name__}: {str(exc)[:200]}"
    return f"returned after {k} iterations without raising"


def _clear_stop(n, k_ref, at, margin=1e-6):
    """Whether the serial reference's relative residual, ``at`` when it stopped after k_ref
    iterations, crosses the tolerance by more than ``margin`` on each side: then a
    distributed CG, whose sums differ only in their order (relative 1e-15), must stop at the
    same iteration."""
    from hpclab.chapters.poisson import kernels as poisson

    before = poisson.serial_cg(n, maxiter=k_ref - 1)[2] if k_ref > 1 else np.inf
    return before > poisson.TOL * (1 + margin) and at < poisson.TOL * (1 - margin)


def poisson_check(engines, dot, apply_A, cg, nprocs, n=24, seed=0, timeout=60):
    """Run the student's ``dot(comm, a, b)``, ``apply_A(comm, p)`` and
    ``cg(comm, b, dot, apply_A, tol)``
    on the first nprocs engines, each rank holding its rows of an n x n mesh as an array of
    (rows + 2) x (n + 2): a halo row above and below, the boundary columns.

    ``cg`` is also run with ``maxiter=2``, which must raise a RuntimeError, and ``apply_A``
    on rows too wide for MPI to buffer a send (:func:`wide_rows_deadlock`).

    Returns a dict with ``dot``, ``apply`` and ``cg``, each None when right, else what is
    wrong in words, and ``deadlocked``, ``iterations`` and ``reference_iterations``.
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    from hpclab.chapters.poisson import kernels as poisson

    out = {"deadlocked": False, "dot": None, "apply": None, "cg": None, "iterations": None,
           "reference_iterations": None}
    try:
        per_rank = [r for r in engines.run(_parts_on_rank, dot, apply_A, cg, int(nprocs),
                                           int(n), int(seed), poisson.TOL, timeout=timeout,
                                           what=f"your CG parts on {nprocs} ranks")
                    if r is not None]
    except TimeoutError:
        out["deadlocked"] = True
        return out
    per_rank.sort(key=lambda r: r["rank"])
    broken = next((r for r in per_rank if r.get("dot_error")), None)
    if broken is not None:
        out["dot"] = (f"on rank {broken['rank']} your dot product did not give a number "
                      f"({broken['dot_error']}): every rank needs the sum, so add the ranks' "
                      "parts with comm.allreduce (comm.reduce leaves None on all but the root)")
        return out
    rng = np.random.default_rng(seed)
    a_all, b_all = rng.standard_normal((2, n + 2, n + 2))
    for x in (a_all, b_all):
        x[0], x[-1], x[:, 0], x[:, -1] = 0, 0, 0, 0
    want = float(np.vdot(a_all[1:-1, 1:-1], b_all[1:-1, 1:-1]))
    dots = [r["dot"] for r in per_rank]
    if not all(np.isclose(d, want, rtol=1e-10) for d in dots):
        def own(x, rank):
            first, rows = block_range(n, nprocs, rank)
            return x[1 + first:1 + first + rows, 1:-1]

        local = [float(np.vdot(own(a_all, r["rank"]), own(b_all, r["rank"]))) for r in per_rank]
        if nprocs > 1 and all(np.isclose(d, w, rtol=1e-10) for d, w in zip(dots, local)):
            out["dot"] = ("every rank returned the dot product of its own rows only: add the "
                          "ranks' parts with comm.allreduce, so that every rank has the sum")
        elif any(abs(d - want) > 1e4 for d in dots):
            out["dot"] = ("the dot product counts the halo rows (they hold a neighbour's values, "
                          "or nothing yet): take the interior a[1:-1, 1:-1] of your rows")
        else:
            bad = next(r for r in per_rank if not np.isclose(r["dot"], want, rtol=1e-10))
            out["dot"] = (f"the dot product is {bad['dot']!r} on rank {bad['rank']}, the sum "
                          f"over the interior of the whole mesh is {want!r}"
                          + (": every rank needs the sum, not only rank 0 (comm.allreduce, "
                             "not comm.reduce with the total sent nowhere else)"
                             if bad["rank"] != 0 and np.isclose(dots[0], want, rtol=1e-10)
                             else ""))
    q_all = np.zeros_like(a_all)
    poisson.apply_a(a_all.copy(), q_all)
    got = np.concatenate([r["q"] for r in per_rank])
    if got.shape != q_all[1:-1].shape:
        out["apply"] = (f"apply_A returned rows of shape {got.shape[1:]}: return q of p's shape, "
                        "A p on the interior")
    elif np.isnan(got).any():
        rows = sorted({int(i) for i in np.argwhere(np.isnan(got))[:, 0]})
        out["apply"] = (f"A p is NaN on global rows {rows[:4]}: a halo row was never filled; "
                        "before applying the stencil, send your first row (p[1]) to the "
                        "neighbour whose rank is below yours, into its halo row p[-1], and your "
                        "last row (p[-2]) to the rank above, into its p[0] (lower, upper = "
                        "cart.Shift(0, 1); Sendrecv fills both halo rows)")
    elif not np.allclose(got[:, 1:-1], q_all[1:-1, 1:-1], rtol=1e-12, atol=1e-12):
        bad = np.argwhere(~np.isclose(got[:, 1:-1], q_all[1:-1, 1:-1], rtol=1e-12, atol=1e-12))
        out["apply"] = (f"A p differs from the 5-point operator at interior point "
                        f"{tuple(int(v) for v in bad[0])}: 4 p[i, j] minus its four neighbours")
    elif (stray := next((r["rank"] for r in per_rank if r.get("q_outside")), None)) is not None:
        out["apply"] = (f"on rank {stray} the q of apply_A is not zero on the mesh's boundary "
                        "(the boundary columns, or the first or last row of the mesh): CG adds "
                        "q into r and r into p, so the boundary's zeros that the stencil reads "
                        "would change; start from q = np.zeros_like(p) and write only "
                        "q[1:-1, 1:-1]")
    x_ref, k_ref, rel_ref = poisson.serial_cg(n)
    failed = next((r for r in per_rank if r.get("cg_error")), None)
    if failed is not None:
        from hpclab.launch import remote_frames

        where = remote_frames(failed["cg_frames"])
        out["cg"] = (f"cg raised on rank {failed['rank']}: {failed['cg_error']}"
                     + (f"\n{where}" if where else ""))
        return out
    shaped = next((r for r in per_rank if tuple(r["x_shape"]) != tuple(r["x_want"])), None)
    if shaped is not None:
        rows, cols = shaped["x_want"]
        out["cg"] = (f"cg returned x of shape {tuple(shaped['x_shape'])} on rank "
                     f"{shaped['rank']}: return the whole local array, like b, {rows} x {cols} "
                     "there (your rows with the halo row above and below, and the boundary "
                     "columns)")
        return out
    ks = {r["k"] for r in per_rank}
    out["iterations"], out["reference_iterations"] = sorted(ks), k_ref
    x = np.concatenate([r["x"] for r in per_rank])
    if len(ks) != 1:
        out["cg"] = f"the ranks stopped after different numbers of iterations: {sorted(ks)}"
    elif abs((k := ks.pop()) - k_ref) > 1:
        out["cg"] = (f"CG took {k} iterations, the reference {k_ref}: stop "
                     "when ||r|| <= tol * ||r0||, relative to the first residual, with norms "
                     "from your global dot product")
    elif x.shape != x_ref.shape:
        out["cg"] = (f"cg's solution, put together from the ranks' interiors, has shape "
                     f"{x.shape}, the mesh's interior {x_ref.shape}")
    elif not np.allclose(x, x_ref, rtol=0, atol=1e-8):
        out["cg"] = (f"CG stopped after {out['iterations'][0]} iterations (the reference "
                     f"{k_ref}) but its solution differs from the reference's by up to "
                     f"{float(np.max(np.abs(x - x_ref))):.3g}: "
                     "stop when ||r|| <= tol * ||r0||, relative to the first residual, and "
                     "check the updates of x, r and p")
    elif k != k_ref and _clear_stop(n, k_ref, rel_ref):
        out["cg"] = (f"CG took {k} iterations, the serial reference {k_ref}, whose residual "
                     "crosses tol * ||r0|| far from where the order of a sum could move it: "
                     "count the updates of x (none before the first), and test "
                     "||r|| <= tol * ||r0|| before each, as the reference does")
    # two exchanges of 512 KiB take milliseconds of work: half a minute of an engine's
    # processor time is room for any right code, on any load (stuck_limits)
    if out["apply"] is None and nprocs > 1 and wide_rows_deadlock(
            engines, apply_A, nprocs, **stuck_limits(min(timeout, 30))):
        out["apply"] = (f"on {nprocs} ranks with rows of {WIDE_COLUMNS} values, apply_A did not "
                        "finish: a deadlock. A blocking Send returns only once MPI has "
                        "buffered the message or its receive is posted; small rows are "
                        "buffered, large ones wait, and both neighbours were sending. Pair "
                        "each send with its receive in cart.Sendrecv")
    stuck = next((r for r in per_rank if r.get("maxiter")), None)
    if out["cg"] is None and stuck is not None:
        out["cg"] = (f"cg(..., maxiter=2), on a mesh that needs {k_ref} iterations, "
                     f"{stuck['maxiter']} on rank {stuck['rank']}: after maxiter iterations "
                     "without converging raise a RuntimeError (an x returned as if it were the "
                     "solution hides the failure)")
    return out


def _time_parts_on_rank(dot, apply_A, nprocs, n, repetitions, more=None):
    from mpi4py import MPI

    from hpclab.chapters.poisson.kernels._poisson import Product
    from hpclab.chapters.poisson.kernels._python import product
    from hpclab.exercises import take_turns
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import Topology

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=[nprocs]) as cart:
        if cart is None:
            return None
        rank = cart.Get_rank()
        first, rows = block_range(n, nprocs, rank)
        rng = np.random.default_rng(rank)
        c_product = Product(cart, n, True)
        top = None
        try:
            top = Topology(cart, (n, n), dims=(nprocs, 1), impl="python")
            fields = [np.zeros((rows + 2, n + 2)) for _ in range(3)]
            for f in fields:
                f[1:-1, 1:-1] = rng.random((rows, n))
            p_py, q_py, p_yours = fields
            calls = {"c": c_product,
                     "python": lambda: product(top, p_py, q_py, True)}
            if apply_A is not None:
                calls["apply_A"] = lambda: apply_A(cart, p_yours)
                calls["dot"] = lambda: dot(cart, p_yours, p_yours)
            for name, func in (more or {}).items():
                calls[name] = lambda func=func: func(cart, p_yours)
            times = take_turns(cart, calls, repetitions)
        finally:
            c_product.free()
            if top is not None:
                top.free()
        return {"rank": rank, **times}


def parts_timing(engines, dot, apply_A, nprocs, n, repetitions=15, timeout=120, more=None):
    """Seconds of each product q = A p with its halo rows on an n x n mesh split in rows
    over the first nprocs engines, the slowest rank's, every call alone between a barrier and
    the clock: {"c": [...], "python": [...], "apply_A": [...], "dot": [...]}. "c" and
    "python" are the library's solvers' own products (the inner rows computed while the halo
    rows travel, the rank's part of p·q summed on the way, the halo datatypes and q made
    once, before any clock); "apply_A" is the student's ``apply_A(cart, p)`` and "dot" their
    ``dot(cart, p, p)``, both left out when ``apply_A`` is None; ``more``, a dict of other
    products ``f(cart, p)`` by name, each timed under its name. All take turns within every
    repetition, after one untimed round, so a change in the machine's load falls on all of
    them alike."""
    from hpclab.exercises import timed_ranks

    nprocs = timed_ranks(engines, nprocs)
    what = "the library's products" if apply_A is None else "your dot and A p"
    res = engines.run(_time_parts_on_rank, dot, apply_A, int(nprocs), int(n), int(repetitions),
                      more, timeout=timeout, what=f"{what} timed on {nprocs} ranks")
    out = next(r for r in res if r is not None and r["rank"] == 0)
    return {k: v for k, v in out.items() if k != "rank"}


def _overlap_on_rank(apply_A, nprocs, n, seed):
    """Runs on every engine: the student's product on a rank's rows whose inner rows (those
    only the inner rows of q need, ``p[3:-3]``) hold NaN except between the post of the last
    message to a neighbour (Irecv, Isend: a receive and a send for each neighbour that is
    not PROC_NULL) and the first wait or test; the halo rows NaN where a neighbour must fill
    them. q's inner rows are right only when they were computed while all the messages were
    in flight; its first and last rows only when computed from the halo that arrived.
    ``unwaited``: the requests the product never completed (they are completed here, within
    a few seconds)."""
    import time

    from mpi4py import MPI

    from hpclab.exercises import logged
    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=[nprocs]) as cart:
        if cart is None:
            return None
        rank = cart.Get_rank()
        first, rows = block_range(n, nprocs, rank)
        whole = np.zeros((n + 2, n + 2))
        whole[1:-1, 1:-1] = np.random.default_rng(seed).random((n, n))
        p = whole[first:first + rows + 2].copy()
        want = 4 * p[1:-1, 1:-1] - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
        lower, upper = cart.Shift(0, 1)
        p[0] = np.nan if lower != MPI.PROC_NULL else 0.0
        p[-1] = np.nan if upper != MPI.PROC_NULL else 0.0
        inner = p[3:-3].copy()
        p[3:-3] = np.nan
        # the messages to real neighbours, a receive and a send each (those to PROC_NULL,
        # which a product may post or skip, move nothing)
        needed = 2 * sum(1 for r in (lower, upper) if r != MPI.PROC_NULL)
        state = {"real": 0, "waited": False}

        def on_post(name, args, kwargs):
            key = "source" if name == "Irecv" else "dest"
            peer = kwargs.get(key, args[1] if len(args) > 1 else MPI.ANY_SOURCE)
            if peer != MPI.PROC_NULL:
                state["real"] += 1
            if state["real"] == needed and not state["waited"]:
                p[3:-3] = inner

        def on_wait():
            if not state["waited"]:
                state["waited"] = True
                p[3:-3] = np.nan

        with logged(cart, on_post, on_wait) as (comm, posts):
            q = apply_A(comm, p)
        unwaited = posts.unwaited
        # complete what the product left (its sends): a few seconds, not a hang
        left, t0 = [r for r in posts.requests if r != MPI.REQUEST_NULL], time.monotonic()
        while left and not MPI.Request.Testall(left) and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        q = np.asarray(q, dtype=float)
        out = {"rank": rank, "rows": rows, "shape": list(q.shape), "posted": posts.posted,
               "posted_before_first_wait": posts.before_first_wait, "unwaited": unwaited,
               "edge_rows": False, "inner_rows": False}
        if q.shape == p.shape:
            got = q[1:-1, 1:-1]
            edge = [0, rows - 1]
            out["edge_rows"] = bool(np.allclose(got[edge], want[edge], rtol=1e-12, atol=1e-12))
            out["inner_rows"] = bool(np.allclose(got[1:-1], want[1:-1], rtol=1e-12,
                                                 atol=1e-12))
        return out


def overlap_check(engines, apply_A, nprocs=2, n=16, seed=4, timeout=30):
    """What the student's overlapped product does on the first nprocs engines (an n x n mesh
    split in rows, each rank's rows at least five): ``posted``, the messages each rank posted
    with Irecv/Isend, ``posted_before_first_wait``, how many of them were posted when it
    first waited or tested (None: it never did), ``unwaited``, how many of its requests each
    rank never completed, ``edge_rows``, whether every rank's first and last rows of q are
    right (computed from the halo that arrived), and ``inner_rows``, whether its other rows
    are right, which they can be only when computed after every message was posted and before
    the first wait (:func:`_overlap_on_rank`); ``shape``: q's
    shape when it is not p's, else None. ``deadlocked``: it did not finish within
    ``timeout`` seconds."""
    smallest = min(block_range(n, nprocs, r)[1] for r in range(nprocs))
    if smallest < 5:
        raise ValueError(f"n = {n} on {nprocs} ranks leaves a rank {smallest} rows: at least 5")
    try:
        res = [r for r in engines.run(_overlap_on_rank, apply_A, int(nprocs), int(n), int(seed),
                                      timeout=timeout,
                                      what=f"your overlapped product on {nprocs} ranks")
               if r is not None]
    except TimeoutError:
        return {"deadlocked": True}
    bad_shape = next((r["shape"] for r in res if r["shape"] != [r["rows"] + 2, n + 2]), None)
    firsts = [r["posted_before_first_wait"] for r in res]
    return {"deadlocked": False, "shape": bad_shape, "posted": [r["posted"] for r in res],
            "posted_before_first_wait": firsts, "unwaited": [r["unwaited"] for r in res],
            "edge_rows": all(r["edge_rows"] for r in res),
            "inner_rows": all(r["inner_rows"] for r in res)}


def ratio_interval(a, b):
    """(ratio, low, high): the median of ``a`` over the median of ``b`` with its 95%
    interval; NaN for all three when they cannot be compared (:func:`hpclab.stats.ratio_or_nan`)."""
    from hpclab import stats

    return stats.ratio_or_nan(a, b)
