"""STREAM bench: C and Cython against McCalpin's stream.c and likwid-bench, side by side.

McCalpin's ``stream.c`` (``--stream-c PATH`` or ``STREAM_C=PATH``; it cannot be shipped)
is compiled with our compiler, flags, OpenMP and array size and run interleaved with our
C and Cython builds in every round; ``likwid-bench -t stream`` joins when installed.
Prints the best trial's rate of each, the median over rounds with min and max, and the
ratios.
"""
from __future__ import annotations

import os
import re
import sys

import numpy as np

from hpclab import launch, profiles

# one reference run may take as long as one measurement of the full profile
TIMEOUT = profiles.timeout("stream", "full")


def add_arguments(p):
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="default: the usable cores")
    p.add_argument("--n", type=int, default=None, help="doubles per array (default: STREAM's rule)")
    p.add_argument("--ntimes", type=int, default=10)
    p.add_argument("--bind", default="close", choices=("close", "spread"))
    p.add_argument("--stream-c", default=os.environ.get("STREAM_C"),
                   help="McCalpin's stream.c (or STREAM_C=)")


def run(args):
    return stream(args.rounds, args.threads, args.n, args.ntimes, args.stream_c, args.bind)


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
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "OMP_PLACES": "cores",
           "OMP_PROC_BIND": bind}
    proc = launch.run_process([str(exe)], timeout=TIMEOUT, env=env, what="stream.c")
    rates = {k.lower(): float(v) * 1e6 for k, v in STREAM_ROW.findall(proc.stdout)}
    if "triad" not in rates or "Solution Validates" not in proc.stdout:
        raise SystemExit(f"stream.c did not validate:\n{proc.stdout[-2000:]}")
    return rates


def _run_likwid(nbytes, threads):
    proc = launch.run_process(["likwid-bench", "-t", "stream", "-w",
                               f"N:{nbytes}B:{threads}"], timeout=TIMEOUT, what="likwid-bench")
    m = re.search(r"^MByte/s:\s+([0-9.]+)", proc.stdout, re.MULTILINE)
    return float(m.group(1)) * 1e6 if m else None


def stream(rounds=3, threads=None, n=None, ntimes=10, source=None, bind="close"):
    """C and Cython STREAM against McCalpin's stream.c (when given) and likwid-bench's
    triad (when installed), same threads, binding and array size, interleaved in
    every round; the best rate of each, median over rounds, and the ratios."""
    import shutil
    import tempfile

    from hpclab.bench import spread
    from hpclab.chapters.stream.kernels import BYTES_PER_ELEMENT, OPS, min_elements
    from hpclab.chapters.stream.sweep import run_threads

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
    print(f"{'GB/s, best trial: median [min-max] of rounds':<46}"
          + "".join(f"{op:>20}" for op in OPS))
    medians = {}
    for name, runs in rates.items():
        if not runs:
            continue
        medians[name] = {op: float(np.median([r[op] for r in runs])) for op in runs[0]}
        cells = []
        for op in OPS:
            if op in runs[0]:
                lo, mid, hi = spread([r[op] / 1e9 for r in runs])
                cells.append(f"{mid:.2f} [{lo:.2f}-{hi:.2f}]")
            else:
                cells.append("-")
        print(f"{name:<46}" + "".join(f"{c:>20}" for c in cells))
    from hpclab.bench import compare

    found = {}
    for ref in ("stream.c", "likwid"):
        if ref in medians:
            for impl in ("c", "cython"):
                ratios = "  ".join(f"{op} {medians[impl][op] / medians[ref][op]:.3f}"
                                   for op in OPS if op in medians[ref])
                print(f"{impl} / {ref}: {ratios}")
                for op in OPS:
                    if op in medians[ref]:
                        found[f"{impl}/{ref} {op} n={n}"] = compare(
                            [r[op] / 1e9 for r in rates[impl]], [r[op] / 1e9 for r in rates[ref]],
                            "GB/s, best trial", lower_is_better=False)
    print("cython / c: " + "  ".join(f"{op} {medians['cython'][op] / medians['c'][op]:.3f}"
                                      for op in OPS))
    for op in OPS:
        found[f"cython/c {op} n={n}"] = compare([r[op] / 1e9 for r in rates["cython"]],
                                                [r[op] / 1e9 for r in rates["c"]],
                                                "GB/s, best trial", lower_is_better=False)
    if "likwid" in medians:
        print("likwid-bench's 'stream' is a triad, a = b*s + c, run repeatedly over the same "
              "arrays; its rate is an average over those runs.")
    return found


if __name__ == "__main__":
    import argparse

    _p = argparse.ArgumentParser(prog="python -m hpclab.chapters.stream.kernels.bench")
    add_arguments(_p)
    run(_p.parse_args())
    sys.exit(0)
