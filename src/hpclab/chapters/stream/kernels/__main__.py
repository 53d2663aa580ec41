"""One STREAM run in a fresh process: ``python -m hpclab.chapters.stream.kernels --threads 2``.

The OpenMP runtime reads OMP_PLACES and OMP_PROC_BIND once, when it starts, so
every thread count and binding gets a process of its own (and, for close and
distant memory, its own ``numactl``). MPI is not initialised here. Hands one
result to the parent (:mod:`hpclab.protocol`): the times and the OpenMP
settings in force, or the error.
"""
import argparse
import os
import sys


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hpclab.chapters.stream.kernels",
                                description=__doc__.split("\n")[0])
    p.add_argument("--impl", default="c", choices=("c", "cython"))
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--n", type=int, default=None, help="doubles per array (default: STREAM's rule)")
    p.add_argument("--ntimes", type=int, default=10)
    p.add_argument("--hugepages", action="store_true")
    args = p.parse_args(argv)

    import mpi4py

    mpi4py.rc.initialize = False  # no MPI here: this process only runs threads
    mpi4py.rc.finalize = False
    from hpclab import protocol
    from hpclab.chapters.stream import kernels as stream
    from hpclab.kernels import KernelError

    try:
        times = stream.RUNNERS[args.impl](args.n, args.ntimes, args.threads, args.hugepages)
    except (KernelError, ValueError, TypeError) as exc:
        protocol.emit({"error": str(exc)})
        return 1
    n = args.n if args.n is not None else stream.min_elements()
    protocol.emit({"times": times.tolist(), "n": n, "ntimes": args.ntimes,
                   "threads": args.threads or stream.default_threads(),
                   "openmp": stream.openmp(),
                   "env": {k: os.environ.get(k) for k in ("OMP_PLACES", "OMP_PROC_BIND",
                                                          "OMP_NUM_THREADS")}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
