"""Command line: ``python -m hpclab run <experiment> [--profile P] [--out DIR]``.

Run it under MPI, on a laptop or in a batch job::

    mpiexec -n 2 python -m hpclab run pingpong --profile quick --out results
    srun python -m hpclab run pingpong --profile full --out $SCRATCH/hpclab

Rank 0 writes ``<experiment>-<time>-<id>.csv`` and ``.json`` (the records and
their metadata) into the output folder; nothing is ever overwritten.
"""
from __future__ import annotations

import argparse
import json
import sys

from hpclab import profiles


def _parser():
    from hpclab.experiments import EXPERIMENTS

    p = argparse.ArgumentParser(prog="python -m hpclab", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run an experiment under mpiexec/srun and save its records")
    r.add_argument("experiment", choices=EXPERIMENTS)
    r.add_argument("--profile", choices=profiles.PROFILES, default=None,
                   help="sweep size (default: $HPCLAB_PROFILE or standard)")
    r.add_argument("--out", default="results", help="folder for the records (default: results)")
    r.add_argument("--impl", action="append", default=None,
                   help="implementation to run; repeat for several (default: all)")
    r.add_argument("--hugepages", action="store_true",
                   help="ask for transparent huge pages for the message buffers")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("machine", help="print what this machine is (JSON)")
    sub.add_parser("list", help="list the experiments")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == "list":
        from hpclab.experiments import EXPERIMENTS

        print("\n".join(EXPERIMENTS))
        return 0
    if args.command == "machine":
        from hpclab import machine

        print(json.dumps(machine.describe(), indent=2, default=str))
        return 0
    return _run(args)


def _run(args):
    import os

    import mpi4py

    from hpclab.launch import THREAD_LEVEL

    # under srun or a plain mpiexec nobody set it: only the main thread calls MPI here
    mpi4py.rc.thread_level = os.environ.get("MPI4PY_RC_THREAD_LEVEL", THREAD_LEVEL)
    from mpi4py import MPI

    from hpclab import experiments, records
    from hpclab.kernels import KernelError

    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    exp = experiments.get(args.experiment)
    if comm.Get_size() < exp.MIN_PROCS:
        if rank0:
            print(f"error: {args.experiment} needs at least {exp.MIN_PROCS} MPI ranks, this job "
                  f"has {comm.Get_size()}.\n  Run: mpiexec -n {exp.NPROCS} python -m hpclab run "
                  f"{args.experiment}", file=sys.stderr)
        return 2
    impls = tuple(args.impl) if args.impl else exp.IMPLS
    try:
        df = exp.run_mpi(comm, profile=args.profile, impls=impls, hugepages=args.hugepages,
                         progress=rank0 and not args.quiet)
    except (KernelError, ValueError) as exc:
        if rank0:
            print(f"error: {exc}", file=sys.stderr)
        return 1
    if rank0:
        path = records.save(df, df.attrs["meta"], args.out)
        print(f"{len(df)} records -> {path} (+ {path.with_suffix('.json').name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
