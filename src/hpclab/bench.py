"""Benchmarks: our kernels next to outside references, in one run, as ratios.

    python -m hpclab.bench                 # every kernel that has a bench
    python -m hpclab.bench <kernel> [--rounds 5] [options of that kernel's bench]

A kernel's bench lives beside it (``hpclab.chapters.<slug>.kernels.bench``, with ``add_arguments``
and ``run``). References that cannot be shipped are given by path, as options or through
the environment, so that ``make bench OSU=... IMB=... STREAM_C=...`` reaches them.
Timings belong here, never in the tests: every bench interleaves its programs in each
round, so a drift of the machine hits all of them, and prints min, median and max over
the rounds.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

import numpy as np

from hpclab.kernels import registry


def benches():
    """slug -> bench module, for every declared kernel that has one."""
    out = {}
    for slug in registry.chapter_order():
        name = f"hpclab.chapters.{slug}.kernels.bench"
        if importlib.util.find_spec(name) is not None:
            out[slug] = importlib.import_module(name)
    return out


def spread(values):
    """min / median / max of a list of numbers, as a short string (µs or as given)."""
    v = np.asarray(values, dtype=float)
    return float(np.min(v)), float(np.median(v)), float(np.max(v))


def table(title, rows, columns, fmt="{:.3f}"):
    """Print a table whose cells are (min, median, max) triples ("median [min-max]"),
    numbers or text; every column as wide as its widest cell."""
    def cell(c):
        if isinstance(c, tuple):
            return f"{fmt.format(c[1])} [{fmt.format(c[0])}-{fmt.format(c[2])}]"
        return fmt.format(c) if isinstance(c, float) else str(c)

    text = [list(columns)] + [[cell(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in text) + 2 for i in range(len(columns))]
    print(title)
    for r in text:
        print("".join(f"{c:>{w}}" for c, w in zip(r, widths)))


def rounds(module, args, count, n, timeout, bind, what):
    """Run ``python -m <module> _ours ARGS`` under mpiexec on n ranks ``count`` times and
    return what each round emitted (:mod:`hpclab.protocol`), reporting progress on stderr."""
    from hpclab import launch, protocol

    out = []
    for r in range(count):
        res = launch.mpirun([sys.executable, "-m", module, "_ours", *map(str, args)], n=n,
                            timeout=timeout, mpi_args=bind, what=what)
        out.append(protocol.last(res.stdout, f"the {what}"))
        print(f"round {r + 1}/{count} done", file=sys.stderr)
    return out


def script(module, argv, ours):
    """The entry point of a kernel's bench module: ``python -m <module> _ours ARGS`` runs
    ``ours(*ARGS)`` (the measured part, under mpiexec); anything else is the bench itself,
    with the module's ``add_arguments`` and ``run``."""
    argv = sys.argv[1:] if argv is None else argv
    mod = sys.modules[module]
    if argv and argv[0] == "_ours":
        ours(*argv[1:])
        return 0
    name = mod.__spec__.name if getattr(mod, "__spec__", None) else module  # not "__main__"
    p = argparse.ArgumentParser(prog=f"python -m {name}")
    mod.add_arguments(p)
    mod.run(p.parse_args(argv))
    return 0


def main(argv=None):
    import mpi4py

    # the benches start their programs under mpiexec; this process needs no MPI of its own
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    found = benches()
    p = argparse.ArgumentParser(prog="python -m hpclab.bench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="kernel")
    for slug, module in found.items():
        module.add_arguments(sub.add_parser(slug, help=module.__doc__.split("\n")[0]))
    args = p.parse_args(argv)
    todo = [args.kernel] if args.kernel else list(found)
    for slug in todo:
        if not args.kernel:
            args = sub.choices[slug].parse_args([])
        print(f"\n=== {slug} ===")
        found[slug].run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
