"""Benchmarks: our kernels next to an outside reference, in one run, as ratios.

    python -m hpclab.bench pingpong [--rounds 3] [--max-size 4194304]
    python -m hpclab.bench stream [--rounds 3] [--threads N] [--n N] [--stream-c PATH]

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


STREAM_ROW = re.compile(r"^(Copy|Scale|Add|Triad):\s+([0-9.]+)", re.MULTILINE)


def _reference_stream(source, n, ntimes, workdir):
    """Compile McCalpin's stream.c with our compiler, flags and OpenMP; the binary's path."""
    from pathlib import Path

    from hpclab.kernels import build_info

    info = build_info()
    flags = [*info.get("cflags", ["-O3"]), info.get("openmp_flag", "-fopenmp"),
             *[f for f, ok in info.get("kernel_flags", {}).get("stream", {}).items() if ok]]
    exe = Path(workdir) / "stream_ref"
    cmd = [info.get("mpicc") or "mpicc", *flags, "-mcmodel=medium",
           f"-DSTREAM_ARRAY_SIZE={n}", f"-DNTIMES={ntimes}", str(source), "-o", str(exe)]
    proc = launch.run_process(cmd, timeout=300, what="compiling stream.c")
    if proc.returncode:
        raise SystemExit(f"cannot compile {source}:\n{proc.stderr[-2000:]}")
    return exe, " ".join(cmd)


def _run_reference(exe, threads, bind):
    import os

    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores",
           "OMP_PROC_BIND": bind}
    proc = launch.run_process([str(exe)], timeout=1800, env=env, what="stream.c")
    rates = {k.lower(): float(v) * 1e6 for k, v in STREAM_ROW.findall(proc.stdout)}
    if "triad" not in rates or "Solution Validates" not in proc.stdout:
        raise SystemExit(f"stream.c did not validate:\n{proc.stdout[-2000:]}")
    return rates


def _run_likwid(nbytes, threads):
    proc = launch.run_process(["likwid-bench", "-t", "stream", "-w",
                               f"N:{nbytes}B:{threads}"], timeout=600, what="likwid-bench")
    m = re.search(r"^MByte/s:\s+([0-9.]+)", proc.stdout, re.MULTILINE)
    return float(m.group(1)) * 1e6 if m else None


def stream(rounds=3, threads=None, n=None, ntimes=10, source=None, bind="close"):
    """C and Cython STREAM against McCalpin's stream.c (when given) and likwid-bench's
    triad (when installed), same threads, binding and array size, interleaved in
    every round; the best rate of each, median over rounds, and the ratios."""
    import os
    import shutil
    import tempfile

    from hpclab.experiments.stream import run_threads
    from hpclab.kernels.stream import BYTES_PER_ELEMENT, OPS, min_elements

    threads = threads or launch.usable_cores()
    n = n or min_elements()
    source = source or os.environ.get("STREAM_C")
    likwid = shutil.which("likwid-bench")
    rates = {"c": [], "cython": [], "stream.c": [], "likwid": []}
    print(f"STREAM: {n:,} doubles per array ({3 * 8 * n / 1e9:.2f} GB in all), {threads} "
          f"thread(s), OMP_PROC_BIND={bind}, OMP_PLACES=cores, {ntimes} trials, {rounds} rounds")
    with tempfile.TemporaryDirectory() as tmp:
        exe = None
        if source:
            exe, how = _reference_stream(source, n, ntimes, tmp)
            print(f"reference: {how}")
        else:
            print("reference: McCalpin's stream.c not given (--stream-c PATH or STREAM_C=PATH)")
        if not likwid:
            print("likwid-bench not found (Debian: apt-get install likwid): skipped")
        for _ in range(rounds):
            for impl in ("c", "cython"):
                times = np.asarray(run_threads(impl, threads, bind, n, ntimes)["times"])
                per = np.array([BYTES_PER_ELEMENT[op] for op in OPS])[:, None] * n
                rates[impl].append(dict(zip(OPS, (per / times).max(axis=1))))
            if exe is not None:
                rates["stream.c"].append(_run_reference(exe, threads, bind))
            if likwid:
                rates["likwid"].append({"triad": _run_likwid(3 * 8 * n, threads)})
    print(f"{'GB/s (best trial, median of rounds)':<38}" + "".join(f"{op:>9}" for op in OPS))
    medians = {}
    for name, runs in rates.items():
        if not runs:
            continue
        medians[name] = {op: float(np.median([r[op] for r in runs])) for op in runs[0]}
        print(f"{name:<38}" + "".join(f"{medians[name][op] / 1e9:>9.2f}" if op in medians[name]
                                      else f"{'-':>9}" for op in OPS))
    for ref in ("stream.c", "likwid"):
        if ref in medians:
            for impl in ("c", "cython"):
                ratios = "  ".join(f"{op} {medians[impl][op] / medians[ref][op]:.3f}"
                                   for op in OPS if op in medians[ref])
                print(f"{impl} / {ref}: {ratios}")
    if "likwid" in medians:
        print("likwid-bench's 'stream' is a triad, a = b*s + c, run repeatedly over the same "
              "arrays; its rate is an average over those runs.")
    return medians


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m hpclab.bench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    pp = sub.add_parser("pingpong", help="C, Cython, mpi4py against mpi4py.bench")
    pp.add_argument("--rounds", type=int, default=3)
    pp.add_argument("--max-size", type=int, default=4 << 20)
    st = sub.add_parser("stream", help="C and Cython STREAM against stream.c and likwid-bench")
    st.add_argument("--rounds", type=int, default=3)
    st.add_argument("--threads", type=int, default=None, help="default: the usable cores")
    st.add_argument("--n", type=int, default=None, help="doubles per array (default: STREAM's rule)")
    st.add_argument("--ntimes", type=int, default=10)
    st.add_argument("--bind", default="close", choices=("close", "spread"))
    st.add_argument("--stream-c", default=None, help="McCalpin's stream.c (or set STREAM_C)")
    inner = sub.add_parser("_ours", help=argparse.SUPPRESS)
    inner.add_argument("--sizes", required=True)
    inner.add_argument("--impls", required=True)
    inner.add_argument("--repetitions", type=int, default=5)
    args = p.parse_args(argv)
    if args.what == "_ours":
        _ours([int(s) for s in args.sizes.split(",")], args.impls.split(","), args.repetitions)
    elif args.what == "stream":
        stream(args.rounds, args.threads, args.n, args.ntimes, args.stream_c, args.bind)
    else:
        pingpong(args.rounds, args.max_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
