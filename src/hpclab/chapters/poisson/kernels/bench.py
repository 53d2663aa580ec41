"""Poisson bench: one CG iteration of C and Cython against the STREAM-derived bound.

In every round, one mpiexec on P ranks (default: the cores, bound) runs the C and Cython
solvers for a fixed number of iterations on an N x N mesh and STREAM's add on every rank at
once (one thread each, arrays as large as one rank's vectors), interleaved. The bound is
88 bytes per mesh point and iteration (96 with write-allocate of q) over STREAM add's
bandwidth, both counted as STREAM counts (no write-allocate). Prints milliseconds per
iteration and the bound as median over rounds [min-max], and the ratios.
"""
from __future__ import annotations

import sys

import numpy as np

from hpclab import launch, profiles, protocol

TIMEOUT = profiles.timeout("poisson", "standard")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=None, help="default: the usable cores")
    p.add_argument("--N", type=int, default=2048, help="mesh points per dimension")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")


def _ours(N, iterations):
    """Runs under mpiexec: ms per iteration of C and Cython, and STREAM add's GB/s summed
    over the ranks on arrays as large as one rank's vectors."""
    from mpi4py import MPI

    from hpclab.chapters.poisson import kernels as poisson
    from hpclab.chapters.stream import kernels as stream

    comm = MPI.COMM_WORLD
    out = {}
    for impl in ("c", "cython"):
        t = poisson.RUNNERS[impl](comm, n=N, iterations=iterations, repetitions=3)
        out[impl] = float(np.min(t[0])) * 1e3
    n = (N // comm.Get_size() + 2) * (N + 2)
    t = stream.run_c(n=n, ntimes=6, threads=1, comm=comm)
    per_rank = 24 * n / float(np.min(t[stream.KERNEL.metric_names.index("add")]))
    out["stream_add"] = comm.allreduce(per_rank) / 1e9
    if comm.Get_rank() == 0:
        protocol.emit(out)


def run(args):
    from hpclab.chapters.poisson.declaration import KERNEL

    ranks = args.ranks or launch.usable_cores()
    bind = [] if args.no_bind else launch.bind_to_core()
    print(__doc__.split("\n\n", 1)[1])
    print(f"ranks: {ranks}, binding: {' '.join(bind) or 'none'}; N = {args.N}, "
          f"{args.iterations} iterations; {args.rounds} rounds")
    from hpclab.bench import rounds as bench_rounds, spread, table

    rounds = bench_rounds("hpclab.chapters.poisson.kernels.bench",
                          [str(args.N), str(args.iterations)],
                          args.rounds, ranks, TIMEOUT, bind,
                          "poisson iterations against STREAM add")

    per, wa = KERNEL.extra["bytes_per_point"], KERNEL.extra["bytes_per_point_write_allocate"]
    for o in rounds:
        o["bound88"] = per * args.N**2 / (o["stream_add"] * 1e9) * 1e3
        o["bound96"] = wa * args.N**2 / (o["stream_add"] * 1e9) * 1e3
    names = ("c", "cython", "bound88", "bound96")
    table("One CG iteration, ms: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.2f}")
    print(f"C / bound ({per} B) = {np.median([o['c'] / o['bound88'] for o in rounds]):.3f}, "
          f"C / bound ({wa} B) = {np.median([o['c'] / o['bound96'] for o in rounds]):.3f} "
          f"(target <= 1.1); Cython / C = "
          f"{np.median([o['cython'] / o['c'] for o in rounds]):.3f} (target <= 1.1)")
    from hpclab.bench import compare_rounds

    names = {"bound88": f"bound{per}", "bound96": f"bound{wa}"}
    return {f"{a}/{names.get(b, b)} N={args.N}":
            compare_rounds(rounds, a, b, "ms per iteration", True)
            for a, b in (("c", "cython"), ("c", "bound88"), ("c", "bound96"))}


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda N, iterations: _ours(int(N), int(iterations)))


if __name__ == "__main__":
    sys.exit(main())
