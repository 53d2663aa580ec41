"""Run one ring in this MPI job:
``mpiexec -n P python -m hpclab.chapters.ring.kernels --variant naive``.

Rank 0 prints the time per ring; used by :func:`hpclab.chapters.ring.kernels.demonstrate_deadlock`,
which runs a (possibly deadlocking) variant under a timeout. The correctness matrix of
every variant is ``python -m hpclab check ring``.
"""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hpclab.chapters.ring.kernels",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="irecv")
    parser.add_argument("--impl", default="c", choices=("c", "cython", "python"))
    parser.add_argument("--nbytes", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--allow-deadlock", action="store_true")
    args = parser.parse_args(argv)

    from mpi4py import MPI

    from hpclab.chapters.ring import kernels as ring
    from hpclab.kernels import KernelError

    comm = MPI.COMM_WORLD
    try:
        times = ring.RUNNERS[args.impl](comm, args.variant, args.nbytes, warmup=0,
                                        iterations=args.iterations,
                                        repetitions=args.repetitions,
                                        allow_deadlock=args.allow_deadlock)
    except (KernelError, ValueError, TypeError) as exc:
        if comm.Get_rank() == 0:
            print(f"error: {exc}", file=sys.stderr)
        return 1
    if comm.Get_rank() == 0:
        print(f"ok: {args.variant} ring ({args.impl}) of {comm.Get_size()} ranks, "
              f"{args.nbytes} B messages, {times.min() * 1e6:.3f} us per ring")
    return 0


if __name__ == "__main__":
    sys.exit(main())
