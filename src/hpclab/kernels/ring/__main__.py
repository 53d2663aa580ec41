"""Run the ring in this MPI job: ``mpiexec -n P python -m hpclab.kernels.ring``.

Without --check: one variant, the time per ring printed by rank 0 (used by
demonstrate_deadlock()). With --check: every implementation and safe variant
at every payload, one JSON line per run on rank 0 (used by the correctness
runs of the ring experiment). Exits non-zero when a ring came home wrong.
"""
import argparse
import json
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m hpclab.kernels.ring",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--variant", default="irecv")
    parser.add_argument("--impl", default="c", choices=("c", "cython", "python"))
    parser.add_argument("--nbytes", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--allow-deadlock", action="store_true")
    parser.add_argument("--check", action="store_true",
                        help="run every implementation and safe variant")
    parser.add_argument("--payloads", default="4,4096",
                        help="comma-separated message sizes for --check")
    args = parser.parse_args(argv)

    from mpi4py import MPI

    from hpclab.kernels import KernelError, ring

    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    if args.check:
        payloads = [int(p) for p in args.payloads.split(",") if p]
        failures = 0
        for nbytes in payloads:
            for variant in ring.SAFE_VARIANTS:
                if (variant == "send" and comm.Get_size() > 1
                        and not ring.send_is_buffered(comm, nbytes)):
                    if rank0:
                        print(json.dumps({"impl": "-", "variant": variant, "nbytes": nbytes,
                                          "nprocs": comm.Get_size(), "ok": None,
                                          "message": "not buffered: skipped"}), flush=True)
                    continue
                for impl in ring.IMPLEMENTATIONS:
                    try:
                        ring.RUNNERS[impl](comm, variant, nbytes, warmup=1,
                                           iterations=args.iterations, repetitions=2)
                        ok, message = True, ""
                    except KernelError as exc:
                        ok, message = False, str(exc)
                        failures += 1
                    if rank0:
                        print(json.dumps({"impl": impl, "variant": variant, "nbytes": nbytes,
                                          "nprocs": comm.Get_size(), "ok": ok,
                                          "message": message}), flush=True)
        return 1 if failures else 0
    try:
        times = ring.RUNNERS[args.impl](comm, args.variant, args.nbytes, warmup=0,
                                        iterations=args.iterations,
                                        repetitions=args.repetitions,
                                        allow_deadlock=args.allow_deadlock)
    except (KernelError, ValueError, TypeError) as exc:
        if rank0:
            print(f"error: {exc}", file=sys.stderr)
        return 1
    if rank0:
        print(f"ok: {args.variant} ring ({args.impl}) of {comm.Get_size()} ranks, "
              f"{args.nbytes} B messages, {min(times) * 1e6:.3f} us per ring")
    return 0


if __name__ == "__main__":
    sys.exit(main())
