"""PingPong bench: C, Cython and mpi4py against osu_latency, IMB-MPI1 PingPong and mpi4py.bench.

Every program runs under the same ``mpiexec -n 2`` with the ranks bound to cores as the
README recommends, interleaved in every round, from 0 B to 4 MiB; the table shows the
median one-way time over the rounds with its min and max, and the ratios of the medians.

The references, and what makes a comparison fair:

* ``osu_latency`` (OSU micro-benchmarks) and ``IMB-MPI1 PingPong`` (Intel MPI Benchmarks)
  are the published methods our kernel follows; give their paths (``--osu``, ``--imb``,
  or ``OSU=...``/``IMB=...``, e.g. ``make bench OSU=/path/to/osu_latency``).
* ``python -m mpi4py.bench pingpong`` ships with mpi4py, so it always runs, but it is not a
  like-for-like reference. Its buffers come from ``numpy.empty`` and are never written:
  Linux maps every page of such a buffer to one shared zero page, so the sender reads the
  same 4 KiB over and over, from cache, and large messages look faster than any buffer
  that holds data. Below 8 KiB its time also includes two ``MPI.Wtime`` calls and a Python
  call per round trip (osu_latency reads the clock once per batch). Ratios against it are
  printed, with that reason beside them.
"""
from __future__ import annotations

import os
import re
import sys

import numpy as np

from hpclab import launch, profiles, protocol

SMALL = 8192
# one program's whole sweep may take as long as one measurement of the full profile
TIMEOUT = profiles.timeout("pingpong", "full")
SIZES = [0] + [1 << k for k in range(23)]


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--max-size", type=int, default=4 << 20)
    p.add_argument("--osu", default=os.environ.get("OSU"), help="path to osu_latency (or OSU=)")
    p.add_argument("--imb", default=os.environ.get("IMB"), help="path to IMB-MPI1 (or IMB=)")
    p.add_argument("--no-bind", action="store_true", help="do not bind ranks to cores")


def _ours(sizes, impls):
    """Runs under mpiexec: median one-way time per (impl, size), handed to the parent."""
    from mpi4py import MPI

    from hpclab.chapters.pingpong import kernels as pingpong

    comm = MPI.COMM_WORLD
    out = {}
    for n in sizes:
        for impl in impls:
            t = pingpong.RUNNERS[impl](comm, n, repetitions=5)[0]
            out[f"{impl}:{n}"] = float(np.median(t))
    if comm.Get_rank() == 0:
        protocol.emit(out)


def parse_mpi4py_bench(text):
    """size -> one-way seconds from ``python -m mpi4py.bench pingpong``'s table."""
    times = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+\s+\|\s+([\d.eE+-]+)", line)
        if m:
            times[int(m.group(1))] = float(m.group(2))
    return times


def parse_osu_latency(text):
    """size -> one-way seconds from osu_latency's ``# Size  Latency (us)`` table."""
    times = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)\s*$", line)
        if m:
            times[int(m.group(1))] = float(m.group(2)) * 1e-6
    return times


def parse_imb_pingpong(text):
    """size -> one-way seconds from IMB-MPI1's PingPong table (t[usec] is one way)."""
    times, inside = {}, False
    for line in text.splitlines():
        if "Benchmarking PingPong" in line:
            inside = True
        elif "Benchmarking" in line:
            inside = False
        if not inside:
            continue
        m = re.match(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            times[int(m.group(1))] = float(m.group(3)) * 1e-6
    return times


def _reference_commands(args, max_size):
    refs = {"mpi4py.bench": ([sys.executable, "-m", "mpi4py.bench", "pingpong", "-m", "0", "-n",
                              str(max_size), "-s", "100", "-l", "10000", "--large-size",
                              str(SMALL), "--skip-large", "10", "--loop-large", "1000",
                              "--huge-size", str(max_size)], parse_mpi4py_bench)}
    if args.osu:
        # osu_latency always runs 0 B .. 4 MiB (5.x has no size option for pt2pt)
        refs["osu_latency"] = ([args.osu], parse_osu_latency)
    if args.imb:
        log = int(np.log2(max_size))
        refs["IMB PingPong"] = ([args.imb, "PingPong", "-msglog", f"0:{log}"],
                                parse_imb_pingpong)
    return refs


def run(args, impls=("c", "cython", "python")):
    max_size = args.max_size
    sizes = [n for n in SIZES if n <= max_size]
    bind = [] if args.no_bind else launch.bind_to_core()
    refs = _reference_commands(args, max_size)
    print(__doc__.split("\n\n", 2)[1].replace("``", ""))
    print(f"ranks: 2, binding: {' '.join(bind) or 'none'}; sizes 0 B to {max_size} B; "
          f"{args.rounds} rounds")
    missing = [name for name, flag in (("osu_latency", args.osu), ("IMB-MPI1", args.imb))
               if not flag]
    if missing:
        print(f"not given: {', '.join(missing)} (--osu/--imb PATH, or OSU=/IMB= with make bench)")
    ours, theirs = [], {name: [] for name in refs}
    for r in range(args.rounds):
        res = launch.mpirun([sys.executable, "-m", "hpclab.chapters.pingpong.kernels.bench",
                             "_ours",
                             ",".join(map(str, sizes)), ",".join(impls)], n=2, timeout=TIMEOUT,
                            mpi_args=bind, what="hpclab ping-pong kernels")
        ours.append(protocol.last(res.stdout, "the hpclab kernels"))
        for name, (cmd, parse) in refs.items():
            res = launch.mpirun(cmd, n=2, timeout=TIMEOUT, mpi_args=bind, what=name)
            theirs[name].append(parse(res.stdout))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    from hpclab.bench import spread, table

    columns = ["size [B]"] + [f"{i} [µs]" for i in impls] + [f"{n} [µs]" for n in refs]
    rows = []
    for n in sizes:
        row = [n] + [spread([o[f"{i}:{n}"] * 1e6 for o in ours]) for i in impls]
        row += [spread([t[n] * 1e6 for t in theirs[name] if n in t]) if
                all(n in t for t in theirs[name]) else "-" for name in refs]
        rows.append(row)
    table("One-way time: median over rounds [min-max]", rows, columns)
    groups = (("0-8 B latency", "0-8 B", [n for n in sizes if n <= 8]),
              ("1-4 MiB time", "1-4 MiB", [n for n in sizes if n >= 1 << 20]))
    from hpclab.bench import compare

    found = {}
    for name in refs:
        for label, size, group in groups:
            group = [n for n in group if all(n in t for t in theirs[name])]
            if not group:
                continue
            for i in impls:  # each round: the median over the group's sizes, in µs
                found[f"{i}/{name} {size}"] = compare(
                    [np.median([o[f"{i}:{n}"] for n in group]) * 1e6 for o in ours],
                    [np.median([t[n] for n in group]) * 1e6 for t in theirs[name]],
                    "µs one way, median over the sizes", lower_is_better=True)
            print(f"{label}, {name}'s time over ours (above 1: ours is faster): "
                  + ", ".join(f"{i} {found[f'{i}/{name} {size}']['ratio']:.3f}"
                              for i in impls))
    if "mpi4py.bench" in refs:
        print("mpi4py.bench's buffers are never written (zero page) and it times each round "
              "trip from Python: a ratio below 1 against it at large sizes measures that, not "
              "a slower kernel (the PingPong chapter measures the zero-page effect).")
    return found


def main(argv=None):
    from hpclab.bench import script

    return script(__name__, argv, lambda sizes, impls: _ours(
        [int(s) for s in sizes.split(",")], impls.split(",")))


if __name__ == "__main__":
    sys.exit(main())
