"""Jacobi lab: run sweeps with the student's slab halo exchange on the first P engines and
compare the field with a serial sweep of the same grid."""
from __future__ import annotations

import numpy as np


def _sweeps_on_rank(exchange, nprocs, shape, sweeps, seed):
    """Runs on every engine: slabs of the global grid, the student's exchange, our sweep."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import block_range

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rank, size = sub.Get_rank(), sub.Get_size()
        u0 = np.random.default_rng(seed).random(shape)
        _, f_all, w, diag = jacobi.serial_problem(shape)
        first, planes = block_range(shape[0], size, rank)
        f = np.ascontiguousarray(f_all[first:first + planes + 2])
        u = np.zeros_like(f)
        u[1:-1, 1:-1, 1:-1] = u0[first:first + planes]
        if rank > 0:
            u[0] = np.nan  # a halo the exchange must fill
        if rank < size - 1:
            u[-1] = np.nan
        unew = u.copy()
        cart = sub.Create_cart([size], periods=[False])
        after_one = None
        halos = []
        try:
            for step in range(sweeps):
                exchange(cart, u)
                if step == 0:
                    halos = _slab_halos(u, u0, rank, size, first, planes)
                jacobi.sweep(u, f, unew, w, diag)
                u, unew = unew, u
                if step == 0:  # where a wrong halo shows before it spreads
                    after_one = sub.gather(u[1:-1, 1:-1, 1:-1].copy(), root=0)
        finally:
            cart.Free()
        blocks = sub.gather(u[1:-1, 1:-1, 1:-1].copy(), root=0)
        halos = sub.gather(halos, root=0)
        if rank != 0:
            return {"rank": rank}
        # compared with the serial sweep where the check runs, not here
        return {"rank": 0, "field": np.concatenate(blocks),
                "after_one": None if after_one is None else np.concatenate(after_one),
                "halos": [h for per_rank in halos for h in per_rank]}


def _slab_halos(u, u0, rank, size, first, planes):
    """This rank's halo planes after the first exchange that hold something else than they
    should: {"rank", "side", "held", "want"}, "held" and "want" a plane of the whole grid
    (its index), "zeros" (the boundary), "nan" (never filled) or None (no plane of it)."""
    out = []
    for side, index, want in (("lower", 0, first - 1 if rank > 0 else "zeros"),
                              ("upper", -1, first + planes if rank < size - 1 else "zeros")):
        got = u[index, 1:-1, 1:-1]
        if np.isnan(got).any():
            held = "nan"
        elif not got.any():
            held = "zeros"
        else:
            held = next((j for j in range(u0.shape[0]) if np.array_equal(got, u0[j])), None)
        if held != want:
            out.append({"rank": rank, "side": side, "held": held, "want": want})
    return out


def _plane_words(j, shape0, nprocs, rank):
    """Plane j of the whole grid, named by the rank that holds it, beside rank ``rank``."""
    from hpclab.kernels.topology import block_range

    if j == "zeros":
        return "the boundary's zeros"
    if j == "nan":
        return "NaN: nothing was received into it"
    if j is None:
        return "values that are no plane of the grid"
    for owner in range(nprocs):
        start, count = block_range(shape0, nprocs, owner)
        if start <= j < start + count:
            local = j - start + 1
            name = "its own" if owner == rank else \
                "the lower neighbour's" if owner == rank - 1 else \
                "the upper neighbour's" if owner == rank + 1 else f"rank {owner}'s"
            which = "first" if local == 1 else "last" if local == count else None
            plane = f"{which} plane u[{1 if which == 'first' else -2}]" if which else \
                f"plane u[{local}]"
            return f"{name} {plane} (plane {j} of the whole grid)"
    return f"plane {j} of the whole grid"


def _halo_words(halos, shape0, nprocs):
    """A sentence on the most telling wrong halo of :func:`halo_check`'s ``halos`` (one with
    a neighbour before one at the grid's edge), and on where its plane went instead."""
    halo = min(halos, key=lambda h: (h["want"] == "zeros", h["rank"]))
    r, side = halo["rank"], halo["side"]
    where = {"lower": "u[0]", "upper": "u[-1]"}
    text = (f"after your first exchange on {nprocs} ranks, rank {r}'s {side} halo "
            f"{where[side]} held {_plane_words(halo['held'], shape0, nprocs, r)}; it should "
            f"hold {_plane_words(halo['want'], shape0, nprocs, r)}")
    other = next((h for h in halos if h["rank"] == r and h["side"] != side
                  and h["held"] == halo["want"]), None)
    if other is not None:
        return (text + f", which went to its {other['side']} halo {where[other['side']]} "
                "instead: lower and upper are swapped. The lower halo u[0] takes the lower "
                "neighbour's last plane, the upper halo u[-1] the upper neighbour's first")
    if halo["want"] == "zeros":
        text += (f". Rank {r} has no {side} neighbour: cart.Shift gives MPI.PROC_NULL there, "
                 "and a Sendrecv with it leaves the halo alone")
        if halo["held"] not in ("zeros", "nan", None):
            text += ("; nothing may wrap around from the other end of the grid, and no plane "
                     "meant for the other halo may land here")
    return text


def halo_check(engines, exchange, nprocs, shape=(12, 8, 6), sweeps=3, seed=0, timeout=60):
    """Run ``sweeps`` Jacobi sweeps of a random field on the first nprocs engines, slabs of
    planes per rank, with ``exchange(cart, u)`` filling the halo planes ``u[0]`` and
    ``u[-1]`` before every sweep (``cart``: a 1D non-periodic Cartesian communicator).

    Returns a dict: ``ok`` (the gathered field equals a serial sweep of the whole grid),
    ``deadlocked`` (it did not finish within ``timeout`` seconds; fresh engines start with the
    next call), ``wrong`` (points that differ), ``nan`` (points reached by a halo never
    filled); and where a wrong halo first shows, after the first sweep (later sweeps spread
    it one plane further each): ``first_wrong_plane`` (counted in the whole grid from 0), the
    rank that holds it and its index in that rank's ``u`` (``first_wrong_rank``,
    ``first_wrong_local``: ``u[1]`` is a rank's first own plane), and ``halo``, the halo it
    lies next to (``"lower"``, ``u[0]``; ``"upper"``, ``u[-1]``; else None); ``halos``, the
    halo planes that held something else than they should after the first exchange (see
    ``halo_words``, one sentence on the most telling of them).
    """
    from hpclab.kernels.topology import block_range

    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    out = {"ok": False, "deadlocked": False, "wrong": 0, "nan": 0, "first_wrong_plane": None,
           "first_wrong_rank": None, "first_wrong_local": None, "halo": None, "halos": [],
           "halo_words": ""}
    try:
        per_rank = engines.run(_sweeps_on_rank, exchange, int(nprocs), tuple(shape),
                               int(sweeps), int(seed), timeout=timeout,
                               what=f"your halo exchange on {nprocs} ranks")
    except TimeoutError:
        out["deadlocked"] = True
        return out
    from hpclab.chapters.jacobi import kernels as jacobi

    root = next(r for r in per_rank if r is not None and r["rank"] == 0)
    got = np.asarray(root["field"], dtype=float)
    u0 = np.random.default_rng(seed).random(shape)
    want = jacobi.serial_sweeps(u0, sweeps)
    if got.shape != want.shape:  # no plane to name
        out.update(wrong=int(want.size))
        return out
    bad = ~np.isclose(got, want, rtol=1e-12, atol=1e-12)
    out.update(ok=not bad.any(), wrong=int(bad.sum()), nan=int(np.isnan(got).sum()),
               halos=list(root["halos"]),
               halo_words=_halo_words(root["halos"], shape[0], nprocs) if root["halos"] else "")
    if bad.any():
        early = ~np.isclose(np.asarray(root["after_one"], dtype=float),
                            jacobi.serial_sweeps(u0, 1), rtol=1e-12, atol=1e-12)
        plane = int(np.argwhere(early if early.any() else bad)[0][0])
        for rank in range(nprocs):
            first, planes = block_range(shape[0], nprocs, rank)
            if first <= plane < first + planes:
                local = plane - first + 1
                out.update(first_wrong_plane=plane, first_wrong_rank=rank,
                           first_wrong_local=local,
                           halo="lower" if local == 1 else "upper" if local == planes else None)
    return out


def _swapped_faces(cart, u, u0, ranges, dims, coords):
    """The halo faces of this rank's block ``u``, as (direction, "lower" or "upper"), that
    hold the neighbour's other interior plane: its first where its last belongs (the lower
    halo) or its last where its first belongs (the upper). A neighbour with one plane has
    one, and is never counted."""
    from mpi4py import MPI

    from hpclab.kernels.topology import block_range

    inner = tuple(slice(o, o + n) for o, n in ranges)
    out = set()
    for d in range(3):
        lower, upper = cart.Shift(d, 1)
        for side, neighbour, index in (("lower", lower, 0), ("upper", upper, -1)):
            if neighbour == MPI.PROC_NULL:
                continue
            first, planes = block_range(u0.shape[d], dims[d],
                                        coords[d] - 1 if side == "lower" else coords[d] + 1)
            if planes < 2:
                continue
            other = first if side == "lower" else first + planes - 1
            face = list((slice(1, -1),) * 3)
            face[d] = index
            want = list(inner)
            want[d] = other
            if np.array_equal(u[tuple(face)], u0[tuple(want)]):
                out.add((d, side))
    return out


def _cube_on_rank(exchange, nprocs, dims, shape, sweeps, seed):
    """Runs on every engine: the blocks of a 3D process grid, the student's exchange of the
    six faces, our sweep; rank 0 returns every block with its start."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import block_range

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=list(dims)) as cart:
        if cart is None:
            return None
        coords = cart.Get_coords(cart.Get_rank())
        ranges = [block_range(n, d, c) for n, d, c in zip(shape, dims, coords)]
        u0 = np.random.default_rng(seed).random(shape)
        _, f_all, w, diag = jacobi.serial_problem(shape)
        outer = tuple(slice(o, o + n + 2) for o, n in ranges)
        f = np.ascontiguousarray(f_all[outer])
        u = np.zeros_like(f)
        u[1:-1, 1:-1, 1:-1] = u0[tuple(slice(o, o + n) for o, n in ranges)]
        for d in range(3):  # the faces a neighbour must fill start as NaN
            lower, upper = cart.Shift(d, 1)
            for neighbour, index in ((lower, 0), (upper, -1)):
                if neighbour != MPI.PROC_NULL:
                    u[(slice(None),) * d + (index,)] = np.nan
        unew = u.copy()
        unfilled, overwritten, swapped = set(), set(), set()
        for step in range(sweeps):
            before = u[1:-1, 1:-1, 1:-1].copy()
            exchange(cart, u)
            if step == 0:  # the block's own first and last planes, changed by the exchange
                changed = u[1:-1, 1:-1, 1:-1] != before
                for d in range(3):
                    for side, index in (("lower", 0), ("upper", -1)):
                        if changed[(slice(None),) * d + (index,)].any():
                            overwritten.add((d, side))
            if step == 0:  # the faces (without the layer around them) still NaN
                inner = (slice(1, -1),) * 3
                for d in range(3):
                    for side, index in (("lower", 0), ("upper", -1)):
                        face = list(inner)
                        face[d] = index
                        if np.isnan(u[tuple(face)]).any():
                            unfilled.add((d, side))
                swapped = _swapped_faces(cart, u, u0, ranges, dims, coords)
            jacobi.sweep(u, f, unew, w, diag)
            u, unew = unew, u
        faces = {"unfilled": unfilled, "overwritten": overwritten, "swapped": swapped}
        gathered = cart.gather((tuple(o for o, _ in ranges), u[1:-1, 1:-1, 1:-1].copy(),
                                faces), root=0)
        rank = cart.Get_rank()
        if rank != 0:
            return {"rank": rank}
        out = {"rank": 0, "blocks": [(starts, block) for starts, block, _ in gathered]}
        for kind in faces:  # a face any rank reported
            out[kind] = sorted(set().union(*(each[kind] for _, _, each in gathered)))
        return out


def cube_halo_check(engines, exchange, nprocs, dims, shape=(9, 8, 7), sweeps=3, seed=0,
                    timeout=30):
    """Run ``sweeps`` Jacobi sweeps of a random field on the first nprocs engines, on the
    process grid ``dims`` (three extents, not periodic), with ``exchange(cart, u)`` filling
    the six halo faces of every rank's block ``u`` (its points plus one layer all round)
    before every sweep.

    Returns a dict: ``ok`` (the assembled field equals a serial sweep of the whole grid),
    ``deadlocked`` (it did not finish within ``timeout`` seconds; fresh engines start with the
    next call), ``wrong`` (points that differ), ``nan`` (points reached by a face never
    filled), ``first_wrong`` (the global index of the first point that differs) and
    ``unfilled`` (the faces, as (direction, "lower" or "upper"), that some rank with a
    neighbour there still held as NaN after the first exchange), ``overwritten`` (the
    block's own first or last planes, as (direction, "lower" or "upper"), that the first
    exchange changed on some rank: received into, instead of the halo beyond them) and
    ``swapped`` (the halo faces that some rank's first exchange filled with the neighbour's
    other interior plane: the lower halo with its first, the upper with its last).
    """
    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    dims = tuple(int(d) for d in dims)
    if len(dims) != 3 or int(np.prod(dims)) != nprocs:
        raise ValueError(f"dims must be three extents whose product is {nprocs}, got {dims}")
    out = {"ok": False, "deadlocked": False, "wrong": 0, "nan": 0, "first_wrong": None,
           "unfilled": [], "overwritten": [], "swapped": []}
    try:
        per_rank = engines.run(_cube_on_rank, exchange, int(nprocs), dims, tuple(shape),
                               int(sweeps), int(seed), timeout=timeout,
                               what=f"your halo exchange on the {'x'.join(map(str, dims))} grid")
    except TimeoutError:
        out["deadlocked"] = True
        return out
    from hpclab.chapters.jacobi import kernels as jacobi

    root = next(r for r in per_rank if r is not None and r["rank"] == 0)
    got = np.full(tuple(shape), np.nan)
    for starts, block in root["blocks"]:
        got[tuple(slice(o, o + n) for o, n in zip(starts, np.shape(block)))] = block
    want = jacobi.serial_sweeps(np.random.default_rng(seed).random(shape), sweeps)
    bad = ~np.isclose(got, want, rtol=1e-12, atol=1e-12)
    out.update(ok=not bad.any(), wrong=int(bad.sum()), nan=int(np.isnan(got).sum()),
               unfilled=[tuple(f) for f in root["unfilled"]],
               overwritten=[tuple(f) for f in root["overwritten"]],
               swapped=[tuple(f) for f in root["swapped"]])
    if bad.any():
        out["first_wrong"] = tuple(int(v) for v in np.argwhere(bad)[0])
    return out


def _halo_time_on_rank(exchange, nprocs, dims, L, repetitions):
    from mpi4py import MPI

    from hpclab.exercises import take_turns
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import Topology

    with first_ranks(MPI.COMM_WORLD, nprocs, dims=list(dims)) as cart:
        if cart is None:
            return None
        rng = np.random.default_rng(cart.Get_rank())
        calls = {}
        tops = []
        try:
            for impl in ("c", "python"):
                t = Topology(cart, tuple(L * d for d in dims), dims=list(dims), impl=impl)
                tops.append(t)
                u = t.field()
                u[...] = rng.random(u.shape)
                calls[impl] = (t.exchange, u)
            for name, func in (exchange or {}).items():
                calls[name] = (lambda u, func=func: func(cart, u), rng.random((L + 2,) * 3))
            times = take_turns(cart, {name: (lambda call=call, u=u: call(u))
                                      for name, (call, u) in calls.items()}, repetitions)
        finally:
            for t in tops:
                t.free()
        return {"rank": cart.Get_rank(), **times}


def halo_timing(engines, exchange, nprocs, dims, L, repetitions=15, timeout=120):
    """Seconds of each halo exchange of blocks of L points per dimension on the process grid
    ``dims`` of the first nprocs engines, the slowest rank's, every call alone between a
    barrier and the clock: {"c": [...], "python": [...], "yours": [...]}. "c" and "python" are
    the library's exchanges of the same six faces (:class:`hpclab.kernels.topology.Topology`,
    its face datatypes made once, before any clock; every receive and send posted at once),
    "yours" is ``exchange(cart, u)``, left out when ``exchange`` is None; ``exchange`` may
    also be a dict of such functions by name, each timed under its name. All take turns
    within every repetition, so a change in the machine's load falls on all of them alike."""
    from hpclab.exercises import timed_ranks

    nprocs = timed_ranks(engines, nprocs)
    if callable(exchange):
        exchange = {"yours": exchange}
    what = "the library's halo exchanges" if not exchange else "your halo exchange"
    res = engines.run(_halo_time_on_rank, exchange, int(nprocs), tuple(int(d) for d in dims),
                      int(L), int(repetitions), timeout=timeout,
                      what=f"{what} timed on {nprocs} ranks")
    out = next(r for r in res if r is not None and r["rank"] == 0)
    return {k: v for k, v in out.items() if k != "rank"}


def _counted_type(real, counts):
    """MPI.DOUBLE as a real MPI.Datatype that counts the datatypes made from it
    (Create_subarray), committed and freed in ``counts``; the datatypes it makes count too."""
    from mpi4py import MPI

    class Counted(MPI.Datatype):
        def Create_subarray(self, *args, **kwargs):  # noqa: N802 (mpi4py's names)
            counts["made"] += 1
            return Counted(super().Create_subarray(*args, **kwargs))

        def Commit(self):  # noqa: N802
            counts["committed"] += 1
            super().Commit()
            return self

        def Free(self):  # noqa: N802
            counts["freed"] += 1
            super().Free()

    return Counted(real)


def _types_on_rank(func, L):
    from mpi4py import MPI

    from hpclab.exercises import logged

    if MPI.COMM_WORLD.Get_rank() != 0:
        return None
    # one rank, periodic in every direction: each of the six neighbours is the rank itself,
    # so every face is a real message (an exchange that skips MPI.PROC_NULL posts them all)
    cart = MPI.COMM_SELF.Create_cart([1, 1, 1], periods=[True] * 3)
    counts = {"made": 0, "committed": 0, "freed": 0}
    real = MPI.DOUBLE
    setattr(MPI, "DOUBLE", _counted_type(real, counts))  # noqa: B010 (a final name)
    try:
        with logged(cart) as (comm, posts):
            func(comm, np.zeros((L + 2,) * 3))
    finally:
        setattr(MPI, "DOUBLE", real)  # noqa: B010
        cart.Free()
    return {**counts, "posted": posts.posted, "posted_before_first_wait": posts.before_first_wait}


def types_counted(engines, func, L=6, timeout=30):
    """What one call of ``func(cart, u)`` does on one rank that is its own neighbour in every
    direction (a periodic grid of one; blocks of L points per dimension): the datatypes it
    makes from MPI.DOUBLE (``MPI.DOUBLE.Create_subarray``), commits and frees ("made",
    "committed", "freed"), the requests it posts with ``cart.Irecv``/``Isend`` ("posted"), and
    how many of them were posted when it first waited for or tested one
    ("posted_before_first_wait", None when it never did): an exchange that posts everything
    before it waits has posted them all."""
    res = engines.run(_types_on_rank, func, int(L), timeout=timeout,
                      what="your datatypes counted on one rank")
    return next(r for r in res if r is not None)
