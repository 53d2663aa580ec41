"""Stencil bench: the Laplacian of order 4, 8 and 12 against Devito's generated code.

Each round is one mpiexec of one rank (its OpenMP threads bound to cores, close) that
applies the Laplacian to an L³ grid of doubles with each of: the C kernel unblocked (report
003's baseline: each thread a contiguous share of the rows) and blocked (bands of planes dealt
out to the threads in turn, each walked in blocks of rows), on several threads also unblocked
with its planes dealt out in turn ("c_dealt": the threads sweep neighbouring planes and share
what they read in the cache, a gain of its own that blocking's is printed beside), the Cython
kernel, and, when Devito is importable (``pip install devito`` in this
environment: never a dependency of hpclab), Devito's operator ``Eq(w, u.laplace)`` with
``space_order`` = the order, float64 (Devito's default is float32), opt='advanced', the same
threads. The parts run in an order drawn anew every round. A part's rate is its best of five
timed batches, in MLUP/s; the table prints the median over rounds [min-max] and the ratios,
above 1 meaning ours is faster. Devito's result is first compared with numpy's on a small
random grid: its generated code prints the weights with fewer digits than a double holds,
so the check allows 1e-7 of the largest value. The C kernel writes its output past the cache
(streaming stores: 16 bytes a point from memory instead of 24) where its two arrays exceed
the node's cores' shares of the cache together (machine.streaming_threshold_bytes); the bench
prints which stores it made. Devito's generated code (4.8) asks for no streaming stores.

Blocking pays when the unblocked loop cannot keep the 2r + 1 planes that a point reads along
axis 3 in a core's L2 cache between their uses: at order 8 or more the target is blocked /
unblocked >= 1.5 wherever those planes exceed the L2. The bench also times the C kernel
unblocked and blocked alone where they exceed the last-level cache as well, at the size the
labs' rule gives (machine.CACHE_FACTOR: the planes twice the last-level cache), or, where two
arrays of that size do not fit in half the memory, at the largest size that does and whose
planes still exceed that cache (L a multiple of 128); a machine whose last level is too large
for that says so.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from hpclab import launch, profiles, protocol
from hpclab.bench import in_random_order

TIMEOUT = profiles.timeout("stencil", "full")
DEVITO_HINT = ("Devito is not importable here: `pip install devito` in this environment (it "
               "is never a dependency of hpclab) to compare with it")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--L", type=int, nargs="+", default=[256, 384],
                   help="points per dimension of the cubes")
    p.add_argument("--orders", type=int, nargs="+", default=[4, 8, 12])
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="OpenMP threads (default: 1 and the usable cores)")
    p.add_argument("--blocks", default="16x4", metavar="B3xB2",
                   help="the blocked kernel's blocks of axes 3 x 2 (default 16x4)")
    p.add_argument("--applications", type=int, default=5, help="applications per batch")
    p.add_argument("--no-blocking-size", dest="blocking_size", action="store_false",
                   help="skip the blocking comparison at planes beyond the last-level cache")


# blocked / unblocked at least this where the planes exceed a core's L2 cache (order >= 8)
BLOCKING_TARGET = 1.5
BLOCKING_FROM_ORDER = 8


def planes_bytes(L, order):
    """The bytes of the 2r + 1 planes (halo included) that one output point reads along
    axis 3: what the unblocked loop must keep in cache between their uses."""
    r = order // 2
    return (2 * r + 1) * (L + 2 * r) ** 2 * 8


def blocking_size(order):
    """The L = 256 + 128 k of the blocking comparison at this order: the smallest whose
    planes are the labs' factor (machine.CACHE_FACTOR) times the last-level cache, or the
    largest below it for which two arrays fit in half the memory, so long as its planes
    still exceed that cache. Returns (L, None), or (None, the words that say why not)."""
    from hpclab import machine

    def fits(n):
        return mem is None or 2 * (n + order) ** 3 * 8 <= mem // 2

    def planes(n):
        return planes_bytes(n, order)

    mem = machine.memory_bytes()
    least = machine.beyond_cache(planes, 256, 128, factor=1)
    L = machine.beyond_cache(planes, 256, 128)
    while L > least and not fits(L):
        L -= 128
    if not fits(L):
        return None, (f"order {order}: its planes exceed the last-level cache from L = {L}, "
                      f"where two arrays take {2 * (L + order) ** 3 * 8 / 2**30:.1f} GiB, more "
                      f"than half this machine's {mem / 2**30:.1f} GiB: the blocking "
                      "comparison beyond the cache is skipped")
    return L, None


def _devito_operator(L, order, threads):
    """Devito's Laplacian of this order on an L³ grid of doubles (unit spacing),
    opt='advanced', with OpenMP threads: the operator and its two fields."""
    os.environ["DEVITO_LANGUAGE"] = "openmp"
    os.environ["OMP_NUM_THREADS"] = str(threads)
    os.environ.setdefault("DEVITO_LOGGING", "ERROR")
    os.environ["DEVITO_MPI"] = "0"
    from devito import Eq, Function, Grid, Operator

    grid = Grid(shape=(L, L, L), extent=(L - 1.0,) * 3, dtype=np.float64)
    u = Function(name="u", grid=grid, space_order=order, dtype=np.float64)
    w = Function(name="w", grid=grid, space_order=order, dtype=np.float64)
    return Operator([Eq(w, u.laplace)], opt="advanced"), u, w


def devito_check(order, threads, L=20):
    """Devito's Laplacian against numpy's (:func:`hpclab.chapters.stencil.fd.laplacian`) on
    a random grid with a zero halo: what is wrong when they differ, else None. With the
    threads of the timed run: Devito reads OMP_NUM_THREADS once, when it is imported."""
    from hpclab.chapters.stencil import fd

    op, u, w = _devito_operator(L, order, threads)
    a = np.random.default_rng(0).random((L, L, L))
    u.data[:] = a
    op.apply()
    want = fd.laplacian(np.pad(a, order // 2), order)
    worst = float(np.max(np.abs(np.asarray(w.data) - want)))
    if not worst <= 1e-7 * float(np.max(np.abs(want))):
        return f"Devito's order-{order} Laplacian differs from numpy's by {worst:.3g}"
    return None


def _devito_mlups(L, order, threads, applications, batches=5):
    op, u, _ = _devito_operator(L, order, threads)
    u.data[:] = 1.0
    op.apply()  # compiled, and the pages touched
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(applications):
            op.apply()
        best = min(best, (time.perf_counter() - t0) / applications)
    return L**3 / best / 1e6


def _ours(L, order, threads, blocks, applications, only_c=False):
    """Runs under mpiexec (one rank): the MLUP/s of every part (of C unblocked and blocked
    alone when ``only_c``), emitted by the rank."""
    import importlib.util

    from mpi4py import MPI

    from hpclab.chapters.stencil import kernels as stencil

    comm = MPI.COMM_WORLD
    b3, b2 = blocks

    def ours(impl, block3=0, block2=0):
        t = stencil.RUNNERS[impl](comm, operator="laplacian", order=order, n1=L, n2=L, n3=L,
                                  block3=block3, block2=block2, threads=threads,
                                  applications=applications, repetitions=5)
        return L**3 / float(np.min(t[1])) / 1e6  # the compute phase: one rank, no halo

    parts = {"c": lambda: ours("c"), "c_blocked": lambda: ours("c", b3, b2)}
    if threads > 1:  # bands of one plane and every row: the unblocked loop, planes dealt out
        parts["c_dealt"] = lambda: ours("c", 1, L)
    stores = {"c_stores": stencil.stores("c", 1, L, order)}
    if only_c:
        protocol.emit({**in_random_order(comm, parts), **stores})
        return
    parts["cython"] = lambda: ours("cython")
    if importlib.util.find_spec("devito") is not None:
        wrong = devito_check(order, threads)
        if wrong:
            raise SystemExit(wrong)
        parts["devito"] = lambda: _devito_mlups(L, order, threads, applications)
    protocol.emit({**in_random_order(comm, parts), **stores})


def stencil_threshold_words():
    """The streaming threshold of the bench's one rank, in words."""
    from hpclab.chapters.stencil import kernels as stencil

    above = stencil.streaming_threshold()
    if above >= stencil.NEVER:
        return "a threshold this machine or build does not give (never)"
    return f"{above / 2**20:.0f} MiB (the node's caches, counted as the kernel counts them)"


def _compare(args, L, order, t, blocks, out, below, only_c=False):
    """One size, order and thread count, over the rounds: its table, and its comparisons
    into ``out`` (the sizes below a target into ``below``)."""
    from hpclab.bench import compare_rounds, spread, table

    b3, b2 = blocks
    env = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
    rounds = []
    applications = 1 if only_c else args.applications
    for r in range(args.rounds):
        res = launch.mpirun([sys.executable, "-m", __name__, "_ours", str(L), str(order),
                             str(t), f"{b3}x{b2}", str(applications), str(int(only_c))],
                            n=1, timeout=TIMEOUT, env=env,
                            what=f"stencil bench L={L} order {order}")
        rounds.append(protocol.last(res.stdout, "the stencil bench"))
        print(f"L={L} order {order} threads {t}: round {r + 1}/{args.rounds} done",
              file=sys.stderr)
    names = [k for k in ("c", "c_dealt", "c_blocked", "cython", "devito") if k in rounds[0]]
    table(f"Laplacian order {order}, L = {L}, {t} thread(s), MLUP/s: median over rounds "
          "[min-max]", [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.0f}")
    print(f"the C kernel's stores: {rounds[0].get('c_stores', 'plain')} (streaming: past the "
          f"cache, where its two arrays pass {stencil_threshold_words()})")
    size = f"L={L} order={order} threads={t}"
    out[f"c_blocked/c {size}"] = compare_rounds(rounds, "c_blocked", "c", "MLUP/s", False)
    if order >= BLOCKING_FROM_ORDER:
        from hpclab import machine

        l2, llc = machine.cache_bytes(2), machine.last_level_cache_bytes()
        assumed = "" if l2 and llc else (
            f" (this machine does not say its caches: {machine.UNKNOWN_CACHE_BYTES >> 20} MiB "
            "assumed for each it does not)")
        l2 = l2 or machine.UNKNOWN_CACHE_BYTES
        llc = llc or machine.UNKNOWN_CACHE_BYTES
        planes = planes_bytes(L, order)
        beyond = planes > l2
        ratio = out[f"c_blocked/c {size}"]["ratio"]
        print(f"blocked / unblocked = {ratio:.3f}; the {order + 1} planes of axis 3 take "
              f"{planes / 2**20:.1f} MiB, {planes / l2:.2g} times a core's L2 cache and "
              f"{planes / llc:.2g} times the last-level cache{assumed}"
              + (f" (target >= {BLOCKING_TARGET}: beyond the L2)" if beyond
                 else " (within the L2: no target)"))
        if beyond and ratio < BLOCKING_TARGET:
            below.append(f"{size} (blocked / unblocked)")
    if "c_dealt" in names:
        out[f"c_dealt/c {size}"] = compare_rounds(rounds, "c_dealt", "c", "MLUP/s", False)
        out[f"c_blocked/c_dealt {size}"] = compare_rounds(rounds, "c_blocked", "c_dealt",
                                                          "MLUP/s", False)
        print(f"unblocked with its planes dealt out / unblocked = "
              f"{out[f'c_dealt/c {size}']['ratio']:.3f} (threads sharing the planes they read "
              f"in the cache); blocked / unblocked with its planes dealt out = "
              f"{out[f'c_blocked/c_dealt {size}']['ratio']:.3f} (blocking's gain over a loop "
              "whose threads already share planes; no target)")
    if "cython" in names:
        out[f"c/cython {size}"] = compare_rounds(rounds, "c", "cython", "MLUP/s", False)
    if "devito" in names:
        c_parts = [k for k in ("c", "c_dealt", "c_blocked") if k in names]
        for ours in (*c_parts, "cython"):
            out[f"{ours}/devito {size}"] = compare_rounds(rounds, ours, "devito", "MLUP/s",
                                                          False)
        best = max(out[f"{k}/devito {size}"]["ratio"] for k in c_parts)
        print(f"ours (C, the best of its {len(c_parts)} loops) / Devito = {best:.3f} (target "
              ">= 1.0)")
        if best < 1.0:
            below.append(size)


def run(args):
    import importlib.util

    from hpclab.bench import BenchFailed

    threads = args.threads or sorted({1, launch.usable_cores()})
    try:
        b3, b2 = (int(v) for v in args.blocks.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--blocks {args.blocks!r}: give B3xB2, such as 16x4") from None
    print(__doc__.split("\n\n", 1)[1])
    has_devito = importlib.util.find_spec("devito") is not None
    if not has_devito:
        print(DEVITO_HINT)
    out, below = {}, []
    for L in args.L:
        for order in args.orders:
            for t in threads:
                _compare(args, L, order, t, (b3, b2), out, below)
    if args.blocking_size:
        for order in args.orders:
            if order < BLOCKING_FROM_ORDER:
                continue
            L, why = blocking_size(order)
            if L is None:
                print(why)
                continue
            for t in threads:
                if f"c_blocked/c L={L} order={order} threads={t}" not in out:
                    _compare(args, L, order, t, (b3, b2), out, below, only_c=True)
    if below:
        print(f"below a target at: {'; '.join(below)}")
    if not out:
        raise BenchFailed("stencil: nothing was compared", out)
    return out


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda L, order, threads, blocks, applications, only_c: _ours(
        int(L), int(order), int(threads), tuple(int(v) for v in blocks.split("x")),
        int(applications), bool(int(only_c))))


if __name__ == "__main__":
    sys.exit(main())
