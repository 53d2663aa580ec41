"""Benchmarks: our kernels next to an outside reference, in one run, as ratios.

    python -m hpclab.bench pingpong [--rounds 3] [--max-size 4194304]

PingPong: the C, Cython and mpi4py kernels of hpclab against
``python -m mpi4py.bench pingpong`` (mpi4py's own benchmark, numpy buffers,
the buffer API). Each round runs both under ``mpiexec -n 2``, one after the
other, so a drift of the machine hits both; the table shows the median over
rounds and the ratios. Iteration counts follow osu_latency for both (100 + 10,000
up to 8 KiB, 10 + 1,000 above). mpi4py.bench times every round trip on its own
and allocates with numpy (huge pages from 4 MiB); hpclab times whole batches
and allocates page-aligned buffers without huge-page advice — the ratios
include those differences, and the table says so.
"""
from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np

from hpclab import launch

SMALL = 8192


def _ours(sizes, impls, repetitions):
    """Runs under mpiexec: median one-way time per (impl, size); JSON on rank 0."""
    from mpi4py import MPI

    from hpclab.kernels import pingpong

    comm = MPI.COMM_WORLD
    out = {}
    for n in sizes:
        for impl in impls:
            t = pingpong.RUNNERS[impl](comm, n, repetitions=repetitions)
            out[f"{impl}:{n}"] = float(np.median(t))
    if comm.Get_rank() == 0:
        print("HPCLAB-JSON " + json.dumps(out))


def _parse_mpi4py_bench(text):
    times = {}
    for line in text.splitlines():
        m = re.match(r"\s*(\d+)\s+[\d.]+\s+\|\s+([\d.eE+-]+)", line)
        if m:
            times[int(m.group(1))] = float(m.group(2))
    return times


def pingpong(rounds=3, max_size=4 << 20, impls=("c", "cython", "python"), repetitions=5):
    sizes = [1 << k for k in range(int(np.log2(max_size)) + 1)]
    ours, ref = [], []
    for r in range(rounds):
        res = launch.mpirun([sys.executable, "-m", "hpclab.bench", "_ours", "--sizes",
                             ",".join(map(str, sizes)), "--impls", ",".join(impls),
                             "--repetitions", str(repetitions)], n=2, timeout=1800,
                            what="hpclab ping-pong kernels")
        line = next(ln for ln in res.stdout.splitlines() if ln.startswith("HPCLAB-JSON "))
        ours.append(json.loads(line.split(" ", 1)[1]))
        res = launch.mpirun([sys.executable, "-m", "mpi4py.bench", "pingpong", "-m", "1", "-n",
                             str(max_size), "-s", "100", "-l", "10000", "--large-size", str(SMALL),
                             "--skip-large", "10", "--loop-large", "1000", "--huge-size",
                             str(max_size)], n=2, timeout=1800, what="mpi4py.bench pingpong")
        ref.append(_parse_mpi4py_bench(res.stdout))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
    head = f"{'size [B]':>10} " + " ".join(f"{i + ' [us]':>12}" for i in impls)
    head += f" {'mpi4py.bench':>13} " + " ".join(f"{i + '/bench':>13}" for i in impls)
    print("PingPong one-way time, median of", rounds, "rounds (MB = 10^6 B)")
    print(head)
    for n in sizes:
        bench = np.median([r[n] for r in ref if n in r])
        mine = {i: np.median([o[f"{i}:{n}"] for o in ours]) for i in impls}
        row = f"{n:>10} " + " ".join(f"{mine[i] * 1e6:>12.3f}" for i in impls)
        row += f" {bench * 1e6:>13.3f} " + " ".join(f"{mine[i] / bench:>13.3f}" for i in impls)
        print(row)
    small = [n for n in sizes if n <= 8]
    large = [n for n in sizes if n >= 1 << 20]
    for label, group in (("0-8 B latency", small), ("1-4 MiB time", large)):
        if not group:
            continue
        for i in impls:
            ratio = np.median([np.median([o[f"{i}:{n}"] for o in ours]) /
                               np.median([r[n] for r in ref]) for n in group])
            print(f"{label}: {i} / mpi4py.bench = {ratio:.3f}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hpclab.bench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("pingpong", help="C, Cython, mpi4py against mpi4py.bench")
    pp.add_argument("--rounds", type=int, default=3)
    pp.add_argument("--max-size", type=int, default=4 << 20)
    inner = sub.add_parser("_ours", help=argparse.SUPPRESS)
    inner.add_argument("--sizes", required=True)
    inner.add_argument("--impls", required=True)
    inner.add_argument("--repetitions", type=int, default=5)
    args = p.parse_args(argv)
    if args.what == "_ours":
        _ours([int(s) for s in args.sizes.split(",")], args.impls.split(","), args.repetitions)
    else:
        pingpong(args.rounds, args.max_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
