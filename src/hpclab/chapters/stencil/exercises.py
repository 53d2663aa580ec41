"""Stencil lab: run the student's Laplacian on blocks of a decomposed grid (the library's halo
exchange of width order / 2 around it), compare with the reference operator of
:mod:`hpclab.chapters.stencil.fd`, time it beside the chapter's C and Cython kernels, and run
the wave propagator's configurations.

The student's kernel is ``kernel(u, out, w, inv_h2)``: ``u`` a rank's block with a halo of
r = len(w) - 1 points on every side (C-contiguous doubles), ``out`` its interior (shape
``u.shape`` minus 2r per axis), ``w`` the weights c_0 .. c_r of the second derivative and
``inv_h2`` = 1 / h²."""
from __future__ import annotations

import numpy as np

TOLERANCE = 1e-10  # relative to the largest value of the Laplacian of the check's field


def _weights(order):
    """c_0 .. c_r of d²/dx² of this order as floats (the grader's own, from fd)."""
    from hpclab.chapters.stencil import fd

    c = fd.second_derivative(order)
    return np.ascontiguousarray(c[len(c) // 2:], dtype=float)


def _global_field(shape, r, seed):
    """A random field on the whole grid with its halo of r points on every side."""
    return np.random.default_rng(seed).random(tuple(n + 2 * r for n in shape))


def _poison_edges(u, r):
    """NaN at every halo point outside the faces (edges and corners: two or three of its
    indices in the halo), which no Laplacian reads."""
    inside = [np.zeros(n, bool) for n in u.shape]
    for m, n in zip(inside, u.shape):
        m[r:n - r] = True
    out3 = ~inside[0][:, None, None]
    out2 = ~inside[1][None, :, None]
    out1 = ~inside[2][None, None, :]
    outside = out3.astype(int) + out2.astype(int) + out1.astype(int)
    u[outside >= 2] = np.nan


def _call(kernel, u, out, w, inv_h2, blocks):
    if blocks is None:
        return kernel(u, out, w, inv_h2)
    return kernel(u, out, w, inv_h2, int(blocks[0]), int(blocks[1]))


def _laplacian_on_rank(kernel, nprocs, shape, order, seed, inv_h2, blocks=None):
    """Runs on every engine: this rank's block with its halo (internal faces filled by the
    library's exchange, edges and corners NaN), the student's kernel on it, the blocks
    gathered."""
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import Topology

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        r = order // 2
        g = _global_field(shape, r, seed)
        topo = Topology(sub, shape, halo=r, impl="c")
        try:
            edge = g[tuple(slice(o, o + n + 2 * r) for o, n in zip(topo.offset, topo.local))]
            u = np.full(edge.shape, np.nan)  # a neighbour's points come from the exchange
            u[topo.interior] = edge[topo.interior]
            for d in range(3):  # the grid's own boundary layers are not exchanged
                for side, neighbour in (("lo", topo.lo[d]), ("hi", topo.hi[d])):
                    if neighbour == MPI.PROC_NULL:
                        index = [slice(None)] * 3
                        index[d] = slice(0, r) if side == "lo" else slice(u.shape[d] - r, None)
                        u[tuple(index)] = edge[tuple(index)]
            topo.exchange(u)
            _poison_edges(u, r)
            before = u.copy()
            out = np.full(tuple(topo.local), np.nan)
            raised = None
            try:
                _call(kernel, u, out, _weights(order), float(inv_h2), blocks)
            except Exception as exc:  # noqa: BLE001 (raised on every rank below)
                raised = exc
            # a kernel that raised on some ranks only would leave the others waiting in the
            # gather below: every rank learns of it and raises
            failed = sub.allgather(raised is not None)
            if raised is not None:
                raise raised
            if any(failed):
                raise RuntimeError(f"the kernel raised on rank {failed.index(True)}, not here")
            changed = not np.array_equal(u, before, equal_nan=True)
            gathered = topo.collect(out, root=0)
            changed = sub.gather(changed, root=0)
            rank = sub.Get_rank()
            dims = tuple(topo.dims)
        finally:
            topo.free()
        if rank != 0:
            return {"rank": rank}
        return {"rank": 0, "field": gathered, "changed": [i for i, c in enumerate(changed)
                                                          if c], "dims": dims}


def _diagnosis(got, g, order, h, inv_h2):
    """Words for a result that is not the Laplacian: which common slip it equals."""
    from hpclab.chapters.stencil import fd

    r = order // 2
    parts = [fd.derivative(g, axis, order, h) for axis in (1, 2, 3)]
    want = sum(parts)
    centre = g[r:-r, r:-r, r:-r]
    c0 = _weights(order)[0]

    def same(x):
        return np.allclose(got, x, rtol=1e-9, atol=1e-9 * np.abs(want).max())

    if same(want / inv_h2):
        return ("your result is the Laplacian times h²: multiply the sum over the stencil by "
                "inv_h2 = 1 / h²")
    if same(want * inv_h2):
        return "your result is the Laplacian times 1 / h² once too often: multiply once"
    if same(want - 2 * c0 * centre * inv_h2):
        return ("your centre point is counted once: each of the three second derivatives has "
                "its own c_0 term, so the Laplacian's centre weight is 3 c_0")
    for missing, name in enumerate(("1 (the last index)", "2 (the middle index)",
                                    "3 (the first index)")):
        if same(want - parts[missing]) or same(want - parts[missing] + c0 * centre * inv_h2):
            return (f"your result lacks the second derivative along axis {name} (its "
                    "neighbours ± k along that index): the Laplacian sums all three")
    for axis, name in enumerate(("1 (the last index)", "2", "3 (the first index)")):
        if same(3 * parts[axis]):
            return (f"your result is three times the derivative along axis {name}: each "
                    "axis moves a different index")
    return ""


def laplacian_check(engines, kernel, nprocs, order, shape=(17, 11, 13), seed=0, inv_h2=4.0,
                    timeout=60, blocks=None):
    """Run ``kernel(u, out, w, inv_h2)`` (``kernel(u, out, w, inv_h2, block3, block2)`` with
    ``blocks`` = (block3, block2)) on the first ``nprocs`` engines, each on its block of
    a random field on ``shape`` points with a halo of order / 2, and compare the gathered
    result with :func:`hpclab.chapters.stencil.fd.laplacian` of the whole grid.

    Returns a dict: ``ok``; ``timeout`` (it did not finish in ``timeout`` s); ``wrong``
    (points that differ by more than TOLERANCE of the largest value), ``nan`` (points that
    are NaN: the kernel read an edge or a corner of the halo, which no Laplacian reads, or
    did not write them), ``first_wrong`` (the first such point, indices of the whole grid),
    ``at_block_edge`` (whether it lies within r points of a block's face), ``changed`` (ranks
    whose kernel wrote into u), ``words`` (a common slip the result equals, or empty) and
    ``dims`` (the process grid)."""
    from hpclab.chapters.stencil import fd

    if not 1 <= nprocs <= engines.n:
        raise ValueError(f"nprocs must be between 1 and the {engines.n} engines, got {nprocs}")
    fd.check_order(order)
    out = {"ok": False, "timeout": False, "crashed": False, "wrong": 0, "nan": 0,
           "first_wrong": None, "at_block_edge": False, "deep_wrong": False, "changed": [],
           "words": "", "dims": None}
    from hpclab.engines import EngineCrash

    try:
        per_rank = engines.run(_laplacian_on_rank, kernel, int(nprocs), tuple(shape),
                               int(order), int(seed), float(inv_h2),
                               None if blocks is None else tuple(int(b) for b in blocks),
                               timeout=timeout, what=f"your Laplacian on {nprocs} ranks")
    except TimeoutError:
        out["timeout"] = True
        return out
    except Exception as exc:  # noqa: BLE001 (a crash, here or through the grader's bridge)
        if not (isinstance(exc, EngineCrash) or str(exc).startswith("EngineCrash")):
            raise
        out["crashed"] = True
        return out
    root = next(r for r in per_rank if r is not None and r["rank"] == 0)
    r = order // 2
    g = _global_field(shape, r, seed)
    h = 1 / np.sqrt(inv_h2)
    want = fd.laplacian(g, order, h)
    got = np.asarray(root["field"], dtype=float)
    bad = ~(np.abs(got - want) <= TOLERANCE * np.abs(want).max())
    out.update(ok=not bad.any() and not root["changed"], wrong=int(bad.sum()),
               nan=int(np.isnan(got).sum()), changed=root["changed"], dims=root["dims"])
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        out["first_wrong"] = first
        from hpclab.kernels.topology import block_range

        # how far each point lies from the nearest face of its block, per axis
        near = []
        for n, p in zip(shape, root["dims"]):
            d = np.empty(n, int)
            for k in range(p):
                o, c = block_range(n, p, k)
                i = np.arange(c)
                d[o:o + c] = np.minimum(i, c - 1 - i)
            near.append(d)
        depth = np.minimum(np.minimum(near[0][:, None, None], near[1][None, :, None]),
                           near[2][None, None, :])
        out["at_block_edge"] = bool(depth[first] < r)
        out["deep_wrong"] = bool((bad & (depth >= r)).any())
        if not np.isnan(got).any():
            out["words"] = _diagnosis(got, g, order, h, inv_h2)
    return out


def laplacian_problem(engines, kernel, name, orders=(2, 4, 8), deep=16, blocks=None,
                      timeout=60, shape=(17, 11, 13), seed=0, inv_h2=4.0, ranks=None):
    """What is wrong with ``kernel`` on 1 to all the engines at ``orders`` (and ``deep`` on up
    to 2 ranks, where the check's grid is thick enough for its halo), in words for the
    student, or None when it is right everywhere (see :func:`laplacian_check`; ``ranks``: the
    rank counts to check, all from 1 by default)."""
    borrowed = library_use(kernel, name)
    if borrowed:
        return borrowed
    for p in ranks or range(1, engines.n + 1):
        for order in tuple(orders) + ((deep,) if p <= 2 and deep else ()):
            res = laplacian_check(engines, kernel, p, order, shape=shape, seed=seed,
                                  inv_h2=inv_h2, timeout=timeout, blocks=blocks)
            grid = "x".join(map(str, res["dims"] or ()))
            at = f"order {order} on {p} rank(s)" + (f" (process grid {grid})" if grid else "")
            if res["timeout"]:
                return f"{name} did not finish within {timeout} s at {at}: does a loop never end?"
            if res["crashed"]:
                return (f"{name} crashed its engine at {at}: it read or wrote outside u or "
                        "out (boundscheck=False lets an index run past an array's end). "
                        "Every index of out must stay below its shape"
                        + (f", and a block's last rows too: blocks of {blocks[0]} x "
                           f"{blocks[1]} do not divide the grid, so the last block of an axis "
                           "is smaller (min(b + block, n))" if blocks else ""))
            if res["changed"]:
                return (f"at {at} {name} wrote into u on rank(s) {res['changed']}: write only "
                        "out (u is the field, its halo the neighbours')")
            if res["nan"]:
                return (f"at {at} {res['nan']} point(s) of the result of {name} are NaN: a "
                        "Laplacian reads only along the three axes through its point, so it "
                        "read an edge or a corner of the halo (they hold NaN here), or left "
                        "points of out unwritten (out holds NaN when your kernel gets it: "
                        "set each point before you add to it)")
            if res["words"]:
                return f"at {at}: {res['words']}"
            if not res["ok"]:
                return (f"at {at} {res['wrong']} point(s) of the result of {name} differ from "
                        f"the Laplacian, the first at {res['first_wrong']} (i3, i2, i1 of the "
                        "whole grid)"
                        + (". Points far from every block's face are wrong too, so the sum "
                           "itself is off, not the halo: are all k = 1 .. r there, each with "
                           "w[k] and its six neighbours?" if res["deep_wrong"] else
                           ", and only points within r of a block's face are: those read the "
                           "halo, so is out[i3, i2, i1] the point u[i3 + r, i2 + r, i1 + r], "
                           "with the neighbours ± k along each axis?"
                           if res["at_block_edge"] else ""))
    return None


def _code_lines(kernel):
    """The lines of the cell ``kernel`` was compiled from, its strings blanked and its
    comments cut (what a check reads of the code); None when it has no source."""
    from hpclab import mpicython

    source = mpicython.source_of(kernel)
    if source is None:
        return None
    return [line.split("#", 1)[0] for line in mpicython.without_strings(source).splitlines()]


def library_use(kernel, name):
    """Words when the cell of a student's kernel names hpclab (an import whose fd.laplacian,
    say, would compute the result for it), else None: read from the cell's code, without its
    comments and strings."""
    import re

    lines = _code_lines(kernel)
    if lines is not None and re.search(r"\bhpclab\b", "\n".join(lines)):
        return (f"the cell of {name} imports hpclab: the lab's library computes the Laplacian "
                "(fd.laplacian) but the kernel is yours to write, its loops over the points "
                "and the stencil's weights")
    return None


def blocks_problem(kernel):
    """Words when a blocked kernel's code never uses its block sizes (a kernel that ignores
    them is the baseline again, and right), else None. Read from the cell's source, without
    its comments and strings."""
    import re

    from hpclab import mpicython

    lines = _code_lines(kernel)
    if lines is None:
        return None
    name = getattr(kernel, "__name__", "")
    first, end = mpicython.body_span(lines, name)
    if end == 0:
        return None
    body = "\n".join(lines[first:end]).split("):", 1)[-1]  # after the signature
    unused = [b for b in ("block3", "block2") if not re.search(rf"\b{b}\b", body)]
    if unused:
        return (f"{name} never uses {' and '.join(unused)}: visit the rows (i3, i2) block by "
                "block, blocks of block3 x block2 (a kernel that ignores them is the baseline "
                "again, and the gain you measure compares it with itself)")
    swapped = _swapped_blocks(body)
    if swapped:
        return (f"{name} cuts axis {swapped[0]} (n{swapped[0]}) into blocks of "
                f"block{swapped[1]}: block3 is the block's extent along i3 (n3) and block2 "
                "along i2 (n2), as the chapter's kernels and the timing call pass them (the "
                "result is right either way, but the blocks you time are not the ones you "
                "asked for)")
    return None


def _swapped_blocks(code):
    """(axis, block) of the first range() or min() call in ``code`` that bounds axis 3 by
    block2 or axis 2 by block3 (n3 beside block2 and not block3, or the other way round);
    None when none does."""
    import re

    for call in re.finditer(r"\b(?:range|min)\s*\(((?:[^()]|\([^()]*\))*)\)", code):
        args = call.group(1)
        has = {w: bool(re.search(rf"\b{w}\b", args)) for w in ("n3", "n2", "block3", "block2")}
        if has["n3"] and has["block2"] and not has["block3"]:
            return 3, 2
        if has["n2"] and has["block3"] and not has["block2"]:
            return 2, 3
    return None


def _sine_field(n, r):
    """u = sin(2 x1) sin(3 x2) sin(1.5 x3) on n interior points per axis of the unit cube
    (h = 1 / (n + 1)) with a halo of r points, and its exact Laplacian at the interior."""
    h = 1.0 / (n + 1)
    x = (np.arange(-r, n + r) + 1) * h
    u = np.sin(1.5 * x)[:, None, None] * np.sin(3 * x)[None, :, None] \
        * np.sin(2 * x)[None, None, :]
    exact = -(4 + 9 + 2.25) * u[r:-r, r:-r, r:-r]
    return np.ascontiguousarray(u), exact, h


def _errors_on_rank(kernel, order, sizes):
    from mpi4py import MPI

    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, 1) as sub:
        if sub is None:
            return None
        r = order // 2
        out = {}
        for n in sizes:
            u, exact, h = _sine_field(n, r)
            w = np.full(exact.shape, np.nan)
            kernel(u, w, _weights(order), 1.0 / h**2)
            out[int(n)] = float(np.max(np.abs(w - exact)) / np.max(np.abs(exact)))
        return out


def laplacian_errors(engines, kernel, order, sizes, timeout=120):
    """The relative error of ``kernel`` (max |result - exact| / max |exact|) on the smooth
    field u = sin(2 x1) sin(3 x2) sin(1.5 x3) of the unit cube, n interior points per axis
    (h = 1 / (n + 1)), for each n of ``sizes``, on one engine: {n: error}."""
    from hpclab.chapters.stencil import fd

    fd.check_order(order)
    per_rank = engines.run(_errors_on_rank, kernel, int(order), [int(n) for n in sizes],
                           timeout=timeout, what=f"your Laplacian's errors at order {order}")
    return next(r for r in per_rank if r is not None)


def _timing_on_rank(kernel, nprocs, n, order, blocks, repetitions, blocked_kernel):
    from mpi4py import MPI

    from hpclab import exercises
    from hpclab.chapters.stencil import kernels as stencil
    from hpclab.kernels.api import first_ranks
    from hpclab.kernels.topology import Topology

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        r = order // 2
        grid = stencil.process_grid(nprocs)
        # the chapter's kernels take (p1, p2, p3) along axes 1, 2, 3; numpy's order is 3, 2, 1
        topo = Topology(sub, (n, n, n), dims=[grid[2], grid[1], grid[0]], halo=r, impl="c")
        try:
            u = np.random.default_rng(sub.Get_rank()).random(topo.shape)
            out = np.empty(tuple(topo.local))
            w, inv_h2 = _weights(order), float((n + 1) ** 2)
            common = {"operator": "laplacian", "order": order, "n1": n, "n2": n, "n3": n,
                      "p1": grid[0], "p2": grid[1], "p3": grid[2], "threads": 1,
                      "applications": 2, "repetitions": 1}
            mine = {"yours": lambda: _call(kernel, u, out, w, inv_h2, None)}
            if blocked_kernel is not None:
                mine["yours blocked"] = lambda: _call(blocked_kernel, u, out, w, inv_h2,
                                                      blocks)
            times = {**{name: [] for name in mine}, "c": [], "c blocked": [], "cython": []}
            for call in mine.values():
                call()  # the first call touches out's pages
            for _ in range(repetitions):
                for name, t in exercises.take_turns(sub, mine, 1, warmup=0).items():
                    times[name] += t
                for name, run, b in (("c", stencil.run_c, (0, 0)),
                                     ("c blocked", stencil.run_c, blocks),
                                     ("cython", stencil.run_cython, (0, 0))):
                    t = run(sub, **common, block3=int(b[0]), block2=int(b[1]))
                    times[name].append(float(t[1, 0]))  # compute, the slowest rank's
        finally:
            topo.free()
        return times if sub.Get_rank() == 0 else None


def laplacian_timing(engines, kernel, nprocs, n, order, blocks, repetitions=5, timeout=300,
                     blocked_kernel=None):
    """Seconds per application of the Laplacian of ``order`` on an n³ grid over ``nprocs``
    ranks, computing only (the slowest rank's; no halo exchange), taking turns in every
    repetition: ``yours`` (``kernel`` on this rank's block), ``yours blocked`` (given
    ``blocked_kernel``, called with the block sizes after its four arguments), the chapter's
    ``c``, ``c blocked`` (blocks of ``blocks`` = (block3, block2) points) and ``cython``.
    {name: [seconds per repetition]}. At most one rank per core."""
    from hpclab import exercises
    from hpclab.chapters.stencil import fd

    fd.check_order(order)
    nprocs = exercises.timed_ranks(engines, nprocs)
    per_rank = engines.run(_timing_on_rank, kernel, nprocs, int(n), int(order),
                           tuple(int(b) for b in blocks), int(repetitions),
                           blocked_kernel, timeout=timeout,
                           what=f"the Laplacians timed on {nprocs} ranks")
    return next(r for r in per_rank if r is not None)


def _stores_on_rank(nprocs, n, order):
    from hpclab.chapters.stencil import kernels as stencil

    return stencil.stores("c", nprocs, n, order)


def c_stores(engines, nprocs, n, order, timeout=60):
    """How the chapter's C kernel stores the Laplacian's output in :func:`laplacian_timing`
    on ``nprocs`` ranks of an n³ grid: "streaming" (past the cache, 16 bytes a point) or
    "plain" (24), as the engines' build and machine decide."""
    from hpclab import exercises

    nprocs = exercises.timed_ranks(engines, nprocs)
    return engines.run(_stores_on_rank, nprocs, int(n), int(order), timeout=timeout,
                       what="how the C kernel stores")[0]


def _propagator_on_rank(nprocs, configurations, repetitions):
    from mpi4py import MPI

    from hpclab.chapters.stencil import kernels as stencil
    from hpclab.kernels.api import first_ranks

    with first_ranks(MPI.COMM_WORLD, nprocs) as sub:
        if sub is None:
            return None
        rows = []
        for c in configurations:
            t = stencil.propagate(sub, order=c["order"], n=c["n"], mode=c["mode"],
                                  periods=c["periods"], dt_fraction=c["dt_fraction"],
                                  repetitions=repetitions)
            rows.append({**c, "step": float(np.median(t[0])), "step_min": float(np.min(t[0])),
                         "step_max": float(np.max(t[0])), "error": float(np.max(t[3])),
                         "steps": int(t[4, 0])})
        return rows if sub.Get_rank() == 0 else None


def propagator_runs(engines, profile=None, nprocs=1, repetitions=2, timeout=600):
    """The wave propagator (C) of every order, size and share of the stable step of the
    profile's ``propagator`` settings on ``nprocs`` ranks: a DataFrame with ``order, n,
    mode, periods, dt_fraction, steps, step`` (median seconds per step over the
    ``repetitions`` runs), ``step_min`` and ``step_max`` (their fastest and slowest), ``error``
    (the largest of the repetitions), ``seconds`` (steps x step: the run's cost) and
    ``seconds_min``, ``seconds_max`` (steps x step_min, steps x step_max) and ``runs`` (the
    repetitions)."""
    import pandas as pd

    from hpclab import exercises, profiles

    nprocs = exercises.timed_ranks(engines, nprocs)
    wave = profiles.get("stencil", profile)["propagator"]
    configurations = [{"order": int(o), "n": int(n), "mode": int(wave["mode"]),
                       "periods": float(wave["periods"]), "dt_fraction": float(f)}
                      for n in wave["n"] for o in wave["orders"] for f in wave["dt_fractions"]]
    per_rank = engines.run(_propagator_on_rank, nprocs, configurations, int(repetitions),
                           timeout=timeout, what="the wave propagator's configurations")
    t = pd.DataFrame(next(r for r in per_rank if r is not None))
    for suffix in ("", "_min", "_max"):
        t[f"seconds{suffix}"] = t["steps"] * t[f"step{suffix}"]
    t["runs"] = int(repetitions)
    return t
