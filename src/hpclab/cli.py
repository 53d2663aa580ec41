"""Command line of hpclab.

``python -m hpclab run <experiment> [--profile P] [--out DIR]`` runs a chapter's
sweep under MPI, on a laptop or in a batch job::

    mpiexec -n 2 python -m hpclab run <experiment> --profile quick --out results
    srun python -m hpclab run <experiment> --profile full --out $SCRATCH/hpclab

More ranks than cores on a node stop it before anything is measured, with a message naming
the cores, unless ``--oversubscribe`` (then the records say ``oversubscribed``). Rank 0
writes ``<experiment>-<time>-<id>.csv`` and ``.json`` (the records and their metadata) into
the output folder; nothing is ever overwritten.

``python -m hpclab simulate <kernel> --platform <name>`` runs a kernel's C code on
a simulated cluster (SimGrid SMPI, see :mod:`hpclab.simulate`) and saves the records.

``python -m hpclab check <kernel> [--upto N]`` (not under mpiexec: it starts its
own) runs the kernel's correctness matrix at 1 .. N ranks and exits non-zero on
a wrong answer. ``list`` names the kernels, ``machine`` describes this machine.

``python -m hpclab inputs <experiment> [--results DIR]`` prints, for every measurement the
chapter takes from another (its declared inputs), the saved record it resolves to and why,
or what would be measured (:mod:`hpclab.inputs`); with ``--measure`` it measures and saves
what no saved record gives, as the chapter's page or lab would on first use.
"""
from __future__ import annotations

import argparse
import json
import sys

from hpclab import profiles


def _parser():
    from hpclab import simulate
    from hpclab.kernels import registry

    p = argparse.ArgumentParser(prog="python -m hpclab", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run an experiment under mpiexec/srun and save its records")
    r.add_argument("experiment", choices=registry.chapter_order())
    r.add_argument("--profile", choices=profiles.PROFILES, default=None,
                   help="sweep size (default: $HPCLAB_PROFILE or standard)")
    r.add_argument("--out", default="results", help="folder for the records (default: results)")
    r.add_argument("--impl", action="append", default=None,
                   help="implementation to run; repeat for several (default: all)")
    r.add_argument("--hugepages", action="store_true",
                   help="ask for transparent huge pages for the message buffers")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--oversubscribe", action="store_true",
                   help="run even with more ranks than cores on a node (a correctness run: "
                        "its timings mean nothing, and its records say oversubscribed)")
    c = sub.add_parser("check", help="run a kernel's correctness matrix under mpiexec")
    c.add_argument("kernel", choices=registry.extensions())
    c.add_argument("--upto", type=int, default=None,
                   help="largest rank count (default: the kernel's; above the cores is fine)")
    c.add_argument("--ranks", default=None, help="comma-separated rank counts instead")
    c.add_argument("--profile", choices=profiles.PROFILES, default=None)
    c.add_argument("--out", default=None, help="also save the records into this folder")
    c.add_argument("--inject-fault", action="store_true", help=argparse.SUPPRESS)
    s = sub.add_parser("simulate", help="run a kernel's C code on a simulated cluster "
                       "(SimGrid SMPI; not under mpiexec)")
    s.add_argument("kernel", choices=simulate.chapters())
    s.add_argument("--platform", required=True,
                   help=f"platform name ({', '.join(simulate.platform_names())}) from "
                   "hpclab/simulate/platforms")
    s.add_argument("--ranks", default=None,
                   help="comma-separated rank counts (default: the platform's socket and node "
                   "boundaries)")
    s.add_argument("--placement", default=None,
                   help="where the two ranks of a two-rank kernel sit: intrasocket, "
                   "intersocket, internode")
    s.add_argument("--profile", choices=profiles.PROFILES, default=None)
    s.add_argument("--out", default="results", help="folder for the records (default: results)")
    i = sub.add_parser("inputs", help="what a chapter takes from other chapters' records: "
                       "the record each declared input resolves to and why")
    i.add_argument("experiment", choices=registry.chapter_order())
    i.add_argument("--results", default=None,
                   help="folder of saved runs (default: results/ of this checkout, or "
                   "$HPCLAB_RESULTS_DIR)")
    i.add_argument("--profile", choices=profiles.PROFILES, default=None,
                   help="take only runs of this profile (default: any)")
    i.add_argument("--measure", action="store_true",
                   help="measure and save each input no saved run gives (not under mpiexec: "
                   "it starts its own), then print where each came from")
    sub.add_parser("machine", help="print what this machine is (JSON)")
    sub.add_parser("list", help="list the experiments")
    sub.add_parser("srun-mpi", help="print the srun --mpi= plugin this environment's MPI "
                   "needs (pmi2 or pmix)")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.command == "list":
        from hpclab.kernels import registry

        for slug in registry.chapter_order():
            print(f"{slug:<10} {registry.get(slug).summary}")
        return 0
    if args.command == "check":
        return _check(args)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "srun-mpi":
        from hpclab import launch

        plugin, warning = launch.srun_mpi_plugin()
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
        print(plugin)
        return 0
    if args.command == "inputs":
        from hpclab import inputs

        if args.measure:
            lines = inputs.measure(args.experiment, args.profile, args.results)
            print("\n".join(lines) or f"{args.experiment} declares no inputs from other "
                  "chapters")
            return 0
        print(inputs.report(args.experiment, args.results, args.profile))
        return 0
    if args.command == "machine":
        from hpclab import machine

        print(json.dumps(machine.describe(), indent=2, default=str))
        return 0
    return _run(args)


def _run(args):
    import os

    import mpi4py

    from hpclab import chapters
    from hpclab.kernels import registry

    if not registry.get(args.experiment).extension:
        # a chapter of programs of its own (the MPI libraries): its sweep starts each one under
        # its own launcher, so it runs here, not under mpiexec, and measures what is set up
        from hpclab import ranks

        if ranks.started_by_launcher():
            print(f"error: {args.experiment} starts its own programs under each library's "
                  "launcher: run `python -m hpclab run "
                  f"{args.experiment}` without mpiexec or srun", file=sys.stderr)
            return 2
        return chapters.sweep(args.experiment).main(
            ["--profile", args.profile or profiles.name(), "--out", args.out, "--no-setup"])

    from hpclab.launch import THREAD_LEVEL

    # under srun or a plain mpiexec nobody set it: only the main thread calls MPI here
    mpi4py.rc.thread_level = os.environ.get("MPI4PY_RC_THREAD_LEVEL", THREAD_LEVEL)
    from mpi4py import MPI

    from hpclab import records
    from hpclab.kernels import KernelError

    comm = MPI.COMM_WORLD
    rank0 = comm.Get_rank() == 0
    tasks = _slurm_step_tasks()
    if tasks > 1 and comm.Get_size() == 1:
        # every task of the step is an MPI world of its own: they would all measure alone
        print(f"error: this Slurm job step has {tasks} tasks, but each one started as its own "
              "MPI world of size 1: srun did not connect them to MPI.\n"
              "  Give srun the PMI your MPI speaks: `srun --mpi=pmi2` (the mpich package, "
              "MPICH, Intel MPI), `srun --mpi=pmix` (Open MPI);\n"
              "  `srun --mpi=list` shows what this site offers. Nothing was measured.",
              file=sys.stderr)
        return 2
    exp = chapters.sweep(args.experiment)  # the sweep alone: no rank loads the analysis
    low = exp.KERNEL.min_procs
    if comm.Get_size() < low:
        if rank0:
            print(f"error: {args.experiment} needs at least {low} MPI ranks, this job "
                  f"has {comm.Get_size()}.\n  Run: mpiexec -n {exp.KERNEL.procs('default_procs')} "
                  f"python -m hpclab run {args.experiment}", file=sys.stderr)
        return 2
    from hpclab import launch

    crowded = launch.crowded(comm.allgather(launch.whoami()))
    if crowded and not args.oversubscribe:
        if rank0:
            host, ranks, cores = crowded[0]
            print(f"error: {ranks} MPI ranks on the {cores} cores of {host}: ranks would take "
                  "turns on a core, and every timing would measure the turns. Nothing was "
                  f"measured.\n  Run at most {cores} ranks per node (mpiexec -n {cores} python "
                  f"-m hpclab run {args.experiment}), or add --oversubscribe for a correctness "
                  "run (its records say it was oversubscribed).", file=sys.stderr)
        return 2
    impls = tuple(args.impl) if args.impl else exp.IMPLS
    try:
        run = exp.run_mpi(comm, profile=args.profile, impls=impls, hugepages=args.hugepages,
                          progress=rank0 and not args.quiet)
    except (KernelError, ValueError) as exc:
        if rank0:
            print(f"error: {exc}", file=sys.stderr)
        return 1
    if rank0:
        path = records.save(run, out_dir=args.out)
        print(f"{len(run)} records -> {path} (+ {path.with_suffix('.json').name})")
    return 0


def _simulate(args):
    from hpclab import records, simulate

    try:
        ranks = [int(r) for r in args.ranks.split(",") if r.strip()] if args.ranks else None
    except ValueError:
        print(f"error: --ranks takes comma-separated integers, got {args.ranks!r}",
              file=sys.stderr)
        return 2
    if args.platform not in simulate.platform_names():
        print(f"error: no platform {args.platform!r}: choose from "
              f"{', '.join(simulate.platform_names())}", file=sys.stderr)
        return 2
    if not simulate.available():
        print(f"error: {simulate.INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        run = simulate.run(args.kernel, args.platform, ranks=ranks, profile=args.profile,
                           placement=args.placement)
    except (ValueError, TimeoutError, simulate.SimulationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    path = records.save(run, out_dir=args.out)
    print(f"{len(run)} simulated records ({args.kernel} on {args.platform}) -> {path}")
    for line in simulate.summary(run):
        print(line)
    return 0


def _slurm_step_tasks():
    """The number of tasks of the Slurm job step this process is in (0 outside one)."""
    import os

    if "SLURM_STEP_ID" not in os.environ:
        return 0
    text = os.environ.get("SLURM_STEP_NUM_TASKS") or os.environ.get("SLURM_NTASKS") or "0"
    return int(text) if text.isdigit() else 0


def _check(args):
    from hpclab import check, launch, records
    from hpclab.kernels import KernelError

    ranks = None
    if args.ranks:
        try:
            ranks = [int(r) for r in args.ranks.split(",") if r.strip()]
        except ValueError:
            print(f"error: --ranks takes comma-separated integers, got {args.ranks!r}",
                  file=sys.stderr)
            return 2
    try:
        run = check.run(args.kernel, upto=args.upto, ranks=ranks, profile=args.profile,
                        inject_fault=args.inject_fault, progress=sys.stderr.isatty())
    except KernelError as exc:
        print(f"WRONG: {exc}", file=sys.stderr)
        return 1
    except (ValueError, TimeoutError, launch.MPILaunchError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(check.table(run.records).to_string(index=False))
    print(f"{args.kernel}: every answer right ({len(run)} runs)")
    if args.out:
        path = records.save(run, out_dir=args.out)
        print(f"records -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
