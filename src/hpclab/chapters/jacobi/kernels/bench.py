"""Jacobi bench: the compute phase of C and Cython against the STREAM-derived roof.

In every round, one mpiexec on P ranks (default: the cores, bound) runs the C and Cython
sweeps (cubes, L^3 points per rank) and STREAM's add on every rank at once (one thread each),
interleaved. The roof is STREAM add's bandwidth per rank over the bytes one lattice update
moves: 24 (read u and f, write the new value), which is how STREAM counts add too (both also
read the written line first, write-allocate, so both move a third more than counted), or 32
if add's bandwidth were the real one. Beside them runs a pass with the sweep's memory
traffic and none of its stencil (unew = u(next plane) + f, "streams"): what the memory allows
this access pattern, so the gap between it and C is the stencil's cached loads and arithmetic.
Prints MLUP/s per rank of the compute phase and of the roofs as median over rounds [min-max],
and the ratios (each round's, then the median).
"""
from __future__ import annotations

import sys

import numpy as np

from hpclab import launch, profiles, protocol

TIMEOUT = profiles.timeout("jacobi", "full")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=None, help="default: the usable cores")
    p.add_argument("--L", type=int, default=128, help="points per rank and dimension")
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")


def _ours(L, sweeps=10):
    """Runs under mpiexec: compute-phase MLUP/s per rank of C and Cython, and STREAM add's
    GB/s per rank on arrays as large as one rank's field."""
    from mpi4py import MPI

    from hpclab.chapters.jacobi import kernels as jacobi
    from hpclab.chapters.jacobi.kernels import _jacobi
    from hpclab.chapters.stream import kernels as stream

    comm = MPI.COMM_WORLD
    dims = jacobi.process_grid("cube", comm.Get_size())
    out = {}
    for impl in ("c", "cython"):
        t = jacobi.RUNNERS[impl](comm, "cube", L * dims[0], L * dims[1], L * dims[2],
                                 sweeps=sweeps, repetitions=5)
        out[impl] = L**3 / float(np.min(t[1])) / 1e6
    comm.Barrier()
    out["streams"] = L**3 / comm.allreduce(_jacobi.streams(L, sweeps, 5), op=MPI.MAX) / 1e6
    n = (L + 2) ** 3
    t = stream.run_c(n=n, ntimes=6, threads=1, comm=comm)
    out["stream_add"] = 24 * n / float(np.min(t[stream.KERNEL.metric_names.index("add")])) / 1e9
    if comm.Get_rank() == 0:
        protocol.emit(out)


def run(args):
    ranks = args.ranks or launch.usable_cores()
    bind = [] if args.no_bind else launch.bind_to_core()
    print(__doc__.split("\n\n", 1)[1])
    print(f"ranks: {ranks}, binding: {' '.join(bind) or 'none'}; L = {args.L}; "
          f"{args.rounds} rounds")
    from hpclab.bench import rounds as bench_rounds, spread, table

    rounds = bench_rounds("hpclab.chapters.jacobi.kernels.bench", [str(args.L)],
                          args.rounds, ranks, TIMEOUT, bind, "jacobi sweeps against STREAM add")

    for o in rounds:
        o["roof24"] = o["stream_add"] * 1e9 / 24 / 1e6
        o["roof32"] = o["stream_add"] * 1e9 / 32 / 1e6
    names = ("c", "cython", "streams", "roof24", "roof32")
    table("Compute phase, MLUP/s per rank: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.0f}")

    def ratio(a, b):
        return np.median([o[a] / o[b] for o in rounds])

    print(f"C / roof (24 B) = {ratio('c', 'roof24'):.3f} (target >= 0.95), "
          f"C / roof (32 B) = {ratio('c', 'roof32'):.3f}; Cython / C = "
          f"{ratio('cython', 'c'):.3f} (target >= 0.9)")
    print(f"streams / roof (24 B) = {ratio('streams', 'roof24'):.3f}: the memory's share; "
          f"C / streams = {ratio('c', 'streams'):.3f}: the stencil's own cost on top")
    from hpclab.bench import compare_rounds

    return {f"{a}/{b} L={args.L}": compare_rounds(rounds, a, b, "MLUP/s per rank", False)
            for a, b in (("c", "roof24"), ("c", "streams"), ("cython", "c"))}


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda L: _ours(int(L)))


if __name__ == "__main__":
    sys.exit(main())
