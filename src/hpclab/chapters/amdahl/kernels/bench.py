"""Amdahl bench: the addition phase of C and Cython against STREAM add, side by side.

In every round, one mpiexec on P ranks (default: the cores, bound) runs the C and
Cython matrix programs and STREAM's add on every rank at once (one thread each, the
arrays each rank adds in the matrix program), interleaved. Prints the addition's
bandwidth (24 bytes per element: read a and b, write c; STREAM's count) as median
over rounds [min-max], and the ratios C / STREAM add and Cython / C.

Both sides ask for transparent huge pages (``--small-pages``: neither does). With 4 KiB
pages the arrays a process allocates first can add several per cent slower than the same
loop over arrays it allocates later (the pages' layout, not the loop: the spread goes
with 2 MiB pages), and the matrix program and STREAM allocate in different orders; huge
pages compare the two loops over the same kind of memory.
"""
from __future__ import annotations

import sys

import numpy as np

from hpclab import launch, profiles, protocol
from hpclab.bench import in_random_order

TIMEOUT = profiles.timeout("amdahl", "full")
BYTES = 24


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ranks", type=int, default=None, help="default: the usable cores")
    p.add_argument("--shape", default="2400x100x100", help="NXxNYxNZ (default: report 001's)")
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")
    p.add_argument("--small-pages", action="store_true",
                   help="4 KiB pages for both sides (default: both ask for huge pages)")


def _ours(shape, hugepages, repetitions=5):
    """Runs under mpiexec: the best addition time of C and Cython and of STREAM add on
    the same per-rank arrays, each repetition's slowest rank as the addition phase is timed;
    GB/s of all ranks together, handed to the parent."""
    from mpi4py import MPI

    from hpclab.chapters.amdahl import kernels as amdahl
    from hpclab.chapters.stream import kernels as stream

    comm = MPI.COMM_WORLD
    nx, ny, nz = shape
    n = nx * ny * nz
    per_rank = -(-n // comm.Get_size())

    def add(impl):
        t = amdahl.RUNNERS[impl](comm, "none", nx, ny, nz, repetitions=repetitions,
                                 hugepages=hugepages)
        return BYTES * n / float(np.min(t[amdahl.PHASES.index("add")])) / 1e9

    def stream_add():
        seconds = stream.add_seconds_slowest(comm, per_rank, ntimes=repetitions + 1,
                                             hugepages=hugepages)
        return BYTES * per_rank * comm.Get_size() / seconds / 1e9

    out = in_random_order(comm, {"c": lambda: add("c"), "cython": lambda: add("cython"),
                                 "stream_add": stream_add})
    if comm.Get_rank() == 0:
        protocol.emit(out)


def run(args):
    nx, ny, nz = (int(v) for v in args.shape.lower().split("x"))
    ranks = args.ranks or launch.usable_cores()
    bind = [] if args.no_bind else launch.bind_to_core()
    print(__doc__.split("\n\n", 1)[1].replace("``", ""))
    pages = "4 KiB" if args.small_pages else "huge pages asked"
    print(f"ranks: {ranks}, binding: {' '.join(bind) or 'none'}; shape {nx}x{ny}x{nz}; "
          f"{args.rounds} rounds; pages: {pages} (both sides)")
    from hpclab.bench import rounds as bench_rounds, spread, table

    rounds = bench_rounds("hpclab.chapters.amdahl.kernels.bench",
                          [f"{nx}x{ny}x{nz}", "small" if args.small_pages else "huge"],
                          args.rounds, ranks, TIMEOUT, bind, "amdahl addition against STREAM add")

    names = ("c", "cython", "stream_add")
    table("Addition bandwidth [GB/s], all ranks: median over rounds [min-max]",
          [[spread([o[k] for o in rounds]) for k in names]], names, fmt="{:.2f}")
    c_vs_stream = np.median([o["c"] / o["stream_add"] for o in rounds])
    cy_vs_c = np.median([o["cython"] / o["c"] for o in rounds])
    print(f"C addition / STREAM add = {c_vs_stream:.3f} (target >= 0.95); "
          f"Cython / C = {cy_vs_c:.3f} (target >= 0.95)")
    from hpclab.bench import compare_rounds

    return {f"{a}/{b} shape={nx}x{ny}x{nz}": compare_rounds(rounds, a, b, "GB/s, all ranks", False)
            for a, b in (("c", "stream_add"), ("cython", "c"))}


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda shape, pages: _ours(
        tuple(int(v) for v in shape.split("x")), pages == "huge"))


if __name__ == "__main__":
    sys.exit(main())
