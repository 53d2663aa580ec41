"""Stencil bench: the Laplacian of order 4, 8 and 12 against Devito's generated code.

Each round is one mpiexec of one rank (its OpenMP threads bound to cores, close) that
applies the Laplacian to an L³ grid of doubles with each of: the C kernel unblocked and
blocked, the Cython kernel, and, when Devito is importable (``pip install devito`` in this
environment: never a dependency of hpclab), Devito's operator ``Eq(w, u.laplace)`` with
``space_order`` = the order, float64 (Devito's default is float32), opt='advanced', the same
threads. The parts run in an order drawn anew every round. A part's rate is its best of five
timed batches, in MLUP/s; the table prints the median over rounds [min-max] and the ratios,
above 1 meaning ours is faster. Devito's result is first compared with numpy's on a small
random grid: its generated code prints the weights with fewer digits than a double holds,
so the check allows 1e-7 of the largest value.
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


def _ours(L, order, threads, blocks, applications):
    """Runs under mpiexec (one rank): the MLUP/s of every part, emitted by the rank."""
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

    parts = {"c": lambda: ours("c"), "c_blocked": lambda: ours("c", b3, b2),
             "cython": lambda: ours("cython")}
    if importlib.util.find_spec("devito") is not None:
        wrong = devito_check(order, threads)
        if wrong:
            raise SystemExit(wrong)
        parts["devito"] = lambda: _devito_mlups(L, order, threads, applications)
    protocol.emit(in_random_order(comm, parts))


def run(args):
    import importlib.util

    from hpclab.bench import BenchFailed, compare_rounds, spread, table

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
                env = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"}
                rounds = []
                for r in range(args.rounds):
                    res = launch.mpirun([sys.executable, "-m", __name__, "_ours", str(L),
                                         str(order), str(t), f"{b3}x{b2}",
                                         str(args.applications)], n=1, timeout=TIMEOUT,
                                        env=env, what=f"stencil bench L={L} order {order}")
                    rounds.append(protocol.last(res.stdout, "the stencil bench"))
                    print(f"L={L} order {order} threads {t}: round {r + 1}/{args.rounds} done",
                          file=sys.stderr)
                names = [k for k in ("c", "c_blocked", "cython", "devito") if k in rounds[0]]
                table(f"Laplacian order {order}, L = {L}, {t} thread(s), MLUP/s: median over "
                      "rounds [min-max]", [[spread([o[k] for o in rounds]) for k in names]],
                      names, fmt="{:.0f}")
                size = f"L={L} order={order} threads={t}"
                out[f"c_blocked/c {size}"] = compare_rounds(rounds, "c_blocked", "c", "MLUP/s",
                                                            False)
                out[f"c/cython {size}"] = compare_rounds(rounds, "c", "cython", "MLUP/s", False)
                if "devito" in names:
                    for ours in ("c", "c_blocked", "cython"):
                        key = f"{ours}/devito {size}"
                        out[key] = compare_rounds(rounds, ours, "devito", "MLUP/s", False)
                    best = max(out[f"c/devito {size}"]["ratio"],
                               out[f"c_blocked/devito {size}"]["ratio"])
                    print(f"ours (C, the better of unblocked and blocked) / Devito = "
                          f"{best:.3f} (target >= 1.0)")
                    if best < 1.0:
                        below.append(size)
    if below:
        print(f"below Devito at: {'; '.join(below)}")
    if not out:
        raise BenchFailed("stencil: nothing was compared", out)
    return out


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda L, order, threads, blocks, applications: _ours(
        int(L), int(order), int(threads), tuple(int(v) for v in blocks.split("x")),
        int(applications)))


if __name__ == "__main__":
    sys.exit(main())
