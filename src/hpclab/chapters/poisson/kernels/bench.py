"""Poisson bench: one CG iteration of C and Cython against a bound nothing can beat.

In every round, one mpiexec on P ranks (default: the cores, bound) runs the C and Cython
solvers for a fixed number of iterations on an N x N mesh, a streams-only pass on every
rank at once and STREAM's add (one thread each, arrays as large as one rank's vectors),
interleaved. The streams-only pass is the bound: an iteration's vector traffic without the
stencil (q = 4 p with p.q, then the solver's own x += a p, r -= a q with r.r and p = r + b p)
and CG's two global sums of p.q and r.r (an MPI_Allreduce each, where every rank waits for
the slowest, as in the solvers), no halo. A solver that makes these three passes over its
vectors and these two reductions, as both solvers timed here (C and Cython) do, cannot take
less, so neither may be faster, and the bench fails when one is, in every round. (Fusing
further moves less: x's update can wait for p's, which reads p anyway, 8 bytes less, and would
need a bound with that traffic.) The same pass without the reductions ("traffic") is shown
beside it: what the ranks' drift between two reductions costs. Its traffic is counted as 96
bytes per mesh point (read p, write q and read its lines first, write-allocate; read x, r,
p, q, write x, r; read r, p, write p), and confirmed from STREAM add's bandwidth counted as
add really moves it (32 bytes per element with write-allocate). The lab's model, 88 bytes
over STREAM add's bandwidth as STREAM counts it, is printed beside them: a model, not a
bound. Prints milliseconds per iteration as median over rounds [min-max], and the ratios.
"""
from __future__ import annotations

import sys

import numpy as np

from hpclab import launch, profiles, protocol
from hpclab.bench import in_random_order

TIMEOUT = profiles.timeout("poisson", "standard")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=None, help="default: the usable cores")
    p.add_argument("--N", type=int, default=2048, help="mesh points per dimension")
    p.add_argument("--iterations", type=int, default=50)
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")


def _ours(N, iterations):
    """Runs under mpiexec: ms per iteration of C and Cython and of the streams-only pass (the
    slowest rank's), and STREAM add's GB/s of all ranks (its slowest rank's time) on arrays
    as large as one rank's vectors."""
    from mpi4py import MPI

    from hpclab.chapters.poisson import kernels as poisson
    from hpclab.chapters.poisson.kernels import _poisson
    from hpclab.chapters.stream import kernels as stream

    comm = MPI.COMM_WORLD
    rows = -(-N // comm.Get_size())  # the largest block's rows
    n = (rows + 2) * (N + 2)

    def solve(impl):
        t = poisson.RUNNERS[impl](comm, n=N, iterations=iterations, repetitions=3)
        return float(np.min(t[0])) * 1e3

    def streams(reduce):
        comm.Barrier()
        try:
            mine, problem = _poisson.streams(rows, N, iterations, 3,
                                             comm if reduce else None), None
        except _poisson.PoissonError as err:  # every rank stops, none is left in the allreduce
            mine, problem = float("inf"), str(err)
        problems = [p for p in comm.allgather(problem) if p]
        if problems:
            raise SystemExit(problems[0])
        return comm.allreduce(mine, op=MPI.MAX) * 1e3

    parts = {"c": lambda: solve("c"), "cython": lambda: solve("cython"),
             "bound": lambda: streams(True), "traffic": lambda: streams(False),
             "stream_add": lambda: 24 * n * comm.Get_size()
             / stream.add_seconds_slowest(comm, n) / 1e9}
    out = in_random_order(comm, parts)
    if comm.Get_rank() == 0:
        protocol.emit(out)


# bytes per mesh point and iteration the streams-only pass moves, write-allocate of q included
BOUND_BYTES = 96


def beaten(rounds, impls=("c", "cython")):
    """The implementations faster than the bound in every round (each round's ratio of the
    bound's time to theirs above 1): a bound that is beaten is not one."""
    return [i for i in impls if min(o["bound"] / o[i] for o in rounds) > 1]


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

    per = KERNEL.extra["bytes_per_point"]
    for o in rounds:
        o[f"model{per}"] = per * args.N**2 / (o["stream_add"] * 1e9) * 1e3
        # bytes per point the bound moves, at add's bandwidth as add moves it (32 B counted 24)
        o["bound_bytes"] = o["bound"] * 1e-3 * o["stream_add"] * 1e9 * 32 / 24 / args.N**2
    names = ("c", "cython", "bound", "traffic", f"model{per}")
    table("One CG iteration, ms: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.2f}")

    def ratio(a, b):
        return np.median([o[b] / o[a] for o in rounds])

    print(f"C / bound = {ratio('c', 'bound'):.3f} (target >= 0.9), Cython / bound = "
          f"{ratio('cython', 'bound'):.3f}; C / Cython = {ratio('c', 'cython'):.3f} (target "
          f">= 1); as time ratios, above 1 is faster; C / traffic (the bound without its two "
          f"reductions) = {ratio('c', 'traffic'):.3f}")
    low, mid, high = spread([o["bound_bytes"] for o in rounds])
    print(f"the bound moves {mid:.0f} [{low:.0f}-{high:.0f}] bytes per point at STREAM add's "
          f"bandwidth (counted: {BOUND_BYTES}); the model's {per} bytes over add's bandwidth as "
          f"STREAM counts it: C / model = {ratio('c', f'model{per}'):.3f}")
    from hpclab.bench import BenchFailed, compare_rounds

    out = {f"{a}/{b} N={args.N}": compare_rounds(rounds, a, b, "ms per iteration", True)
           for a, b in (("c", "cython"), ("c", "bound"), ("cython", "bound"),
                        ("c", "traffic"), ("c", f"model{per}"))}
    fast = beaten(rounds)
    if fast:
        raise BenchFailed(f"poisson: {' and '.join(fast)} beat the bound in every round: the "
                          f"bound is wrong (the streams-only pass moves less than {BOUND_BYTES} "
                          "bytes per point) or a solver skips work; see the table above", out)
    return out


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda N, iterations: _ours(int(N), int(iterations)))


if __name__ == "__main__":
    sys.exit(main())
