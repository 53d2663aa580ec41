"""Jacobi bench: the compute phase of C and Cython against the STREAM-derived roof.

In every round, one mpiexec on P ranks (default: the cores, bound) runs the C and Cython
sweeps (cubes, L^3 points per rank) and STREAM's add on every rank at once (one thread each),
interleaved. The roof is STREAM add's bandwidth per rank over the bytes one lattice update
moves, counted as add counts its own: add reads two doubles and writes one, 24 bytes, and
leaves out the line the cache reads before each write (write-allocate), so 32 move. A sweep
with plain stores does the same (roof24). Where the fields of the node's ranks together pass
the streaming threshold (the node's cores' shares of the cache), the sweeps store past the
cache and move 24 bytes where add moves 32: 18 of add's bytes (roof18). Beside them run C
with plain stores only (c_cached) and a pass with the sweep's memory traffic and none of its
stencil (unew = u(next plane) + f, streamed as the sweep is, "streams"): what the memory
allows this access pattern, so the gap between it and C is the stencil's cached loads and
arithmetic. When Devito is importable
(``pip install devito``: never a dependency of hpclab), every rank also sweeps an L^3 grid of
its own with Devito's operator for the same update (float64, ``opt='advanced'``, one thread,
checked against numpy first), in the same job: the best public code for this stencil, side
by side. C also runs without its spatial blocking (c_plain), and then both on planes too wide
for the cache budget (--flat-planes), where the blocking is what keeps the planes of u in the
cache. Prints MLUP/s per rank of the compute phase and of the roofs as median over rounds
[min-max], and the ratios (each round's, then the median).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

from hpclab import launch, profiles, protocol
from hpclab.bench import in_random_order

TIMEOUT = profiles.timeout("jacobi", "full")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=None, help="default: the usable cores")
    p.add_argument("--L", type=int, nargs="+", default=[128, 256, 384],
                   help="points per rank and dimension, one or more sizes (default: 128 256 "
                   "384: planes of u that fit a core's private cache, and two that do not)")
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")
    p.add_argument("--flat-planes", type=int, default=16, metavar="NX",
                   help="also sweep NX planes per rank as wide as needed to pass the cache "
                   "budget, blocked and not (0: skip)")
    p.add_argument("--flat-side", type=_positive, default=None, metavar="L",
                   help="the side of those planes (default: the least multiple of 256 whose "
                   "three planes hold four times the cache budget; a smaller one is a quick "
                   "look, not a measurement beyond the cache)")


def _positive(text):
    """An argument that is an integer >= 1 (argparse's type)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of points >= 1")
    return value


DEVITO_HINT = ("Devito is not importable here: `pip install devito` in this environment (it is "
               "never a dependency of hpclab) to compare with it")


def _devito_operator(L, w=(1.0, 2.0, 3.0)):
    """Devito's 7-point Jacobi update on an L³ grid of doubles, one thread (language C),
    opt='advanced': the operator and its two fields. The update is ours, term for term:
    unew = (w0 (u[x-1] + u[x+1]) + w1 (u[y-1] + u[y+1]) + w2 (u[z-1] + u[z+1]) + f) / diag."""
    os.environ["DEVITO_LANGUAGE"] = "C"  # one thread, no OpenMP: as ours is timed
    os.environ.setdefault("DEVITO_LOGGING", "ERROR")
    os.environ["DEVITO_MPI"] = "0"  # every rank sweeps a grid of its own, as ours do
    from devito import Eq, Function, Grid, Operator, TimeFunction

    grid = Grid(shape=(L, L, L), dtype=np.float64)
    x, y, z = grid.dimensions
    t = grid.stepping_dim
    u = TimeFunction(name="u", grid=grid, space_order=1, dtype=np.float64)
    f = Function(name="f", grid=grid, space_order=0, dtype=np.float64)
    update = (w[0] * (u[t, x - 1, y, z] + u[t, x + 1, y, z])
              + w[1] * (u[t, x, y - 1, z] + u[t, x, y + 1, z])
              + w[2] * (u[t, x, y, z - 1] + u[t, x, y, z + 1]) + f) / (2 * sum(w))
    return Operator([Eq(u.forward, update)], opt="advanced"), u, f


def devito_check(L=9, w=(1.0, 2.0, 3.0)):
    """Devito's operator against numpy's update on a small random grid (zero boundary): what
    is wrong when they differ (as every kernel here checks its own result), else None."""
    rng = np.random.default_rng(0)
    u0, f0 = rng.random((L, L, L)), rng.random((L, L, L))
    op, u, f = _devito_operator(L, w)
    u.data[0], f.data[:] = u0, f0
    op.apply(time_M=0)
    p = np.zeros((L + 2,) * 3)
    p[1:-1, 1:-1, 1:-1] = u0
    want = (w[0] * (p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1])
            + w[1] * (p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1])
            + w[2] * (p[1:-1, 1:-1, :-2] + p[1:-1, 1:-1, 2:]) + f0) / (2 * sum(w))
    worst = float(np.max(np.abs(np.asarray(u.data[1]) - want)))
    if not worst <= 1e-12:
        return f"Devito's Jacobi update differs from numpy's by {worst:.3g}: not comparable"
    return None


def _devito_mlups(comm, L, sweeps, repetitions=5):
    """Devito's MLUP/s per rank on L³ points per rank (the slowest rank of each repetition,
    the best repetition), or None when Devito is not importable. Rank 0 compiles first, so
    that the ranks do not race for Devito's cache of compiled operators."""
    import importlib.util

    if importlib.util.find_spec("devito") is None:
        return None
    from mpi4py import MPI

    wrong = comm.bcast(devito_check() if comm.Get_rank() == 0 else None, root=0)
    if wrong:  # every rank stops, none is left waiting
        raise SystemExit(wrong)
    op, u, _ = _devito_operator(L)
    op.apply(time_M=1)  # compiled, and the pages touched
    best = float("inf")
    for _ in range(repetitions):
        comm.Barrier()
        t0 = time.perf_counter()
        op.apply(time_M=sweeps - 1)
        best = min(best, comm.allreduce(time.perf_counter() - t0, op=MPI.MAX))
    return sweeps * L**3 / best / 1e6


def _flat(L, nx, sweeps=10):
    """Runs under mpiexec: compute-phase MLUP/s per rank of C with and without spatial
    blocking on nx planes of L x L points per rank, planes too large for the cache budget."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi.kernels import _jacobi

    comm = MPI.COMM_WORLD
    budget = _jacobi.cache()
    local = (nx, L, L)
    out = in_random_order(comm, {"c": lambda: _sweep_mlups(comm, "c", local, sweeps, budget),
                                 "c_plain": lambda: _sweep_mlups(comm, "c", local, sweeps, 0)})
    if comm.Get_rank() == 0:
        protocol.emit(out)


def _sweep_mlups(comm, impl, local, sweeps, cache, streaming=None):
    """Compute-phase MLUP/s per rank of one implementation on blocks of ``local`` = (nx, ny,
    nz) points per rank of a cube process grid, with the spatial-blocking budget ``cache``
    and the streaming-store threshold ``streaming`` (None: the process's own) for this
    measurement only (the process's own are restored after it)."""
    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.chapters.jacobi.kernels import _jacobi

    dims = jacobi.process_grid("cube", comm.Get_size())
    budget, above = _jacobi.cache(), _jacobi.streaming()
    _jacobi.set_cache(cache)
    _jacobi.set_streaming(above if streaming is None else streaming, 0)
    try:
        t = jacobi.RUNNERS[impl](comm, "cube", *(n * d for n, d in zip(local, dims)),
                                 sweeps=sweeps, repetitions=5)
    finally:
        _jacobi.set_cache(budget)
        _jacobi.set_streaming(above)
    return float(np.prod(local)) / float(np.min(t[1])) / 1e6


FLAT_LEAST = 4  # planes per rank, at the least, where memory cuts the planes asked for


def flat_planes(L, ranks, asked):
    """The planes of L x L points per rank the flat sweeps run: ``asked``, or fewer where
    the ranks' fields would take more than half of this machine's memory (the kernels'
    own limit, whose count of a block's points this follows)."""
    from hpclab import machine
    from hpclab.kernels.topology import padded_row

    have = machine.memory_bytes()
    if not have:
        return asked
    plane = 3 * 8 * (L + 3) * padded_row(L + 3)  # the three fields, one plane each
    return max(0, min(asked, int(have / 2 / ranks // plane) - 3))


def flat_side(budget, step=256):
    """The side of the planes the bench blocks: the smallest multiple of ``step`` whose three
    planes of u hold at least four times the cache budget, twice a core's share of the last
    level (a rank alone on a machine may have more than its share); 0: no budget."""
    if not budget:
        return 0
    L = step
    while 3 * (L + 2) ** 2 * 8 < 4 * budget:
        L += step
    return L


def _ours(L, sweeps=10):
    """Runs under mpiexec: compute-phase MLUP/s per rank of C and Cython, and STREAM add's
    GB/s per rank (its slowest rank's time) on arrays as large as one rank's field."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi.kernels import NEVER, _jacobi, node_ranks
    from hpclab.chapters.stream import kernels as stream

    comm = MPI.COMM_WORLD
    budget = _jacobi.cache()

    def sweep(impl, cache, streaming=None):
        return _sweep_mlups(comm, impl, (L, L, L), sweeps, cache, streaming)

    ranks = node_ranks(comm)

    def streams():
        comm.Barrier()
        return L**3 / comm.allreduce(_jacobi.streams(L, sweeps, 5, ranks), op=MPI.MAX) / 1e6

    n = (L + 2) ** 3
    parts = {
        "c": lambda: sweep("c", budget), "cython": lambda: sweep("cython", budget),
        # the C sweep without spatial blocking: what the blocking gains
        "c_plain": lambda: sweep("c", 0),
        # the C sweep with plain stores only: what the streaming stores gain
        "c_cached": lambda: sweep("c", budget, NEVER), "streams": streams,
        # on huge pages, as the sweeps' fields
        "stream_add": lambda: 24 * n / stream.add_seconds_slowest(comm, n, hugepages=True)
        / 1e9,
        "devito": lambda: _devito_mlups(comm, L, sweeps),
    }
    out = in_random_order(comm, parts)
    if out["devito"] is None:
        del out["devito"]
    if comm.Get_rank() == 0:
        protocol.emit(out)


def run(args):
    ranks = args.ranks or launch.usable_cores()
    bind = [] if args.no_bind else launch.bind_to_core()
    print(__doc__.split("\n\n", 1)[1])
    print(_blocking())
    out = {}
    for L in args.L:
        print(f"\nranks: {ranks}, binding: {' '.join(bind) or 'none'}; L = {L}; "
              f"{args.rounds} rounds")
        out.update(_run_size(args, L, ranks, bind))
    if args.flat_planes:
        out.update(_run_flat(args, ranks, bind))
    return out


def _run_flat(args, ranks, bind):
    """C with and without blocking, on planes beyond the cache budget."""
    from hpclab.bench import compare_rounds, rounds as bench_rounds, spread, table
    from hpclab.chapters.jacobi.kernels import _jacobi

    L = args.flat_side or flat_side(_jacobi.cache())
    if not L:
        print("\nno cache budget on this machine: no blocked sweep to compare")
        return {}
    nx = flat_planes(L, ranks, args.flat_planes)
    least = min(FLAT_LEAST, args.flat_planes)
    if nx < least:
        print(f"\nplanes of {L} x {L} points (beyond the cache budget of "
              f"{_jacobi.cache() / 2**20:.1f} MiB): fewer than {least} per rank fit in "
              f"half of this machine's memory on {ranks} ranks, so no blocked sweep to compare "
              "(--flat-side: narrower planes)")
        return {}
    if nx < args.flat_planes:
        print(f"\n{args.flat_planes} planes per rank asked; {nx} fit in half of this "
              f"machine's memory on {ranks} ranks")
    print(f"\nranks: {ranks}; {nx} planes of {L} x {L} points per rank (three planes: "
          f"{3 * (L + 2) ** 2 * 8 / 2**20:.0f} MiB, the budget "
          f"{_jacobi.cache() / 2**20:.1f} MiB; blocks of "
          f"{_jacobi.block_rows(_jacobi.cache(), L, L)} rows); {args.rounds} rounds")
    rounds = bench_rounds("hpclab.chapters.jacobi.kernels.bench", [str(L), str(nx)],
                          args.rounds, ranks, TIMEOUT, bind, "jacobi sweeps, blocked or not")
    table("Compute phase, MLUP/s per rank: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in ("c", "c_plain")]], ("c", "c_plain"),
          fmt="{:.0f}")
    ratio = np.median([o["c"] / o["c_plain"] for o in rounds])
    beyond = L >= flat_side(_jacobi.cache())  # the default's four times the budget, or more
    print(f"C / C without blocking = {ratio:.3f} on planes "
          + ("beyond the budget" if beyond else "narrower than the default (--flat-side: a "
             "quick look, not a measurement beyond the cache)"))
    return {f"c/c_plain flat={nx}x{L}x{L}": compare_rounds(rounds, "c", "c_plain",
                                                           "MLUP/s per rank", False)}


def _blocking():
    """One line on the spatial blocking in force (the budget from this machine's caches)."""
    from hpclab import machine
    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.chapters.jacobi.kernels import _jacobi

    budget = _jacobi.cache()
    if not budget:
        return "spatial blocking: off (this machine does not report its caches)"
    return (f"spatial blocking: the three planes of u a sweep reads may fill "
            f"{budget / 2**20:.1f} MiB ({jacobi.CACHE_SHARE:g} of a core's "
            f"{machine.last_level_share_bytes() / 2**20:.1f} MiB share of the last-level "
            "cache); rows per block at L = 128, 256, 384: "
            + ", ".join(str(_jacobi.block_rows(budget, n, n)) for n in (128, 256, 384)))


def _run_size(args, L, ranks, bind):
    from hpclab.bench import rounds as bench_rounds, spread, table

    rounds = bench_rounds("hpclab.chapters.jacobi.kernels.bench", [str(L)],
                          args.rounds, ranks, TIMEOUT, bind, "jacobi sweeps against STREAM add")

    for o in rounds:
        o["roof24"] = o["stream_add"] * 1e9 / 24 / 1e6
        o["roof18"] = o["stream_add"] * 1e9 / 18 / 1e6
    names = ("c", "c_plain", "c_cached", "cython", "streams", "roof24", "roof18")
    has_devito = all("devito" in o for o in rounds)
    if has_devito:
        names = ("c", "c_plain", "c_cached", "cython", "devito") + names[4:]
    else:
        print(DEVITO_HINT)
    table("Compute phase, MLUP/s per rank: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.0f}")

    def ratio(a, b):
        return np.median([o[a] / o[b] for o in rounds])

    from hpclab.chapters.jacobi.kernels import stores_at

    streamed = stores_at(L, ranks) == "streaming"
    roof = "roof18" if streamed else "roof24"
    print(f"stores: {_streaming_words(L, ranks)}; the roof of the sweep's stores: {roof}")
    print(f"C / {roof} = {ratio('c', roof):.3f}, C with plain stores / roof24 = "
          f"{ratio('c_cached', 'roof24'):.3f}; Cython / C = {ratio('cython', 'c'):.3f} "
          "(target >= 0.9)")
    print(f"streams / {roof} = {ratio('streams', roof):.3f}: the memory's share; "
          f"C / streams = {ratio('c', 'streams'):.3f}: the stencil's own cost on top")
    print(f"C / C without blocking = {ratio('c', 'c_plain'):.3f}: what the blocking gains "
          "at this size")
    print(f"C / C with plain stores = {ratio('c', 'c_cached'):.3f}: what the streaming stores "
          "gain at this size" if streamed else "C with plain stores is the same sweep here "
          f"(C / it = {ratio('c', 'c_cached'):.3f}: the machine's noise)")
    pairs = [("c", roof), ("c_cached", "roof24"), ("cython", "c"), ("streams", roof),
             ("c", "streams"), ("c", "c_plain"), ("c", "c_cached")]
    if has_devito:
        pairs += [("c", "devito"), ("cython", "devito")]
        print(f"C / Devito = {ratio('c', 'devito'):.3f}, Cython / Devito = "
              f"{ratio('cython', 'devito'):.3f} (target >= 1.05; Devito {_devito_version()}, "
              "float64, opt='advanced', one thread per rank, the same binding)")
        print(_pages_words())
    from hpclab.bench import compare_rounds

    return {f"{a}/{b} L={L}": compare_rounds(rounds, a, b, "MLUP/s per rank", False)
            for a, b in pairs}


def _streaming_words(L, ranks):
    """Whether the sweeps stream their stores at L³ points per rank on ``ranks`` ranks of
    one node, and why."""
    from hpclab.chapters.jacobi.kernels import _jacobi, streaming_words

    return streaming_words(L, _jacobi.streaming(), ranks, _jacobi.streaming_caches())


def _pages_words():
    """What the page size does to the comparison with Devito, from this machine's policy for
    transparent huge pages."""
    from hpclab import machine

    policy = machine.transparent_hugepages()
    if policy == "madvise":
        return ("pages: transparent huge pages only where asked for (madvise); our fields ask, "
                "Devito's allocator (posix_memalign) does not, so part of the difference is the "
                "page size (on 4 KiB pages our sweep ran 9-30% slower)")
    if policy == "always":
        return "pages: transparent huge pages for every large array, ours and Devito's alike"
    return f"pages: transparent huge pages {policy or 'unknown'}: 4 KiB pages on both sides"


def _devito_version():
    from importlib.metadata import version

    return version("devito")


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda L, nx="0": _flat(int(L), int(nx)) if int(nx)
                  else _ours(int(L)))


if __name__ == "__main__":
    sys.exit(main())
