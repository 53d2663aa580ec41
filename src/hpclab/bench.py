"""Benchmarks: our kernels next to outside references, in one run, as ratios.

    python -m hpclab.bench                 # every kernel that has a bench
    python -m hpclab.bench <kernel> [--rounds 5] [options of that kernel's bench]
    python -m hpclab.bench <kernel> --json FILE   # and its comparisons, for a script

With ``--json FILE`` a kernel's bench also writes one object: for every comparison it
prints, ``{"<ours>/<reference> <size>": {"ratio": r, "ours": x, "reference": y, "unit": u}}``,
with ``ratio`` > 1 meaning ours is faster (or closer to its bound); without a kernel,
``{"<kernel>": {...}, ...}`` for every bench.

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
import os
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


class BenchFailed(Exception):
    """A bench that measured but found something that must not happen (an implementation
    faster than its bound): its comparisons are still written, then the bench exits 1."""

    def __init__(self, message, comparisons):
        super().__init__(message)
        self.comparisons = comparisons


def _run_one(module, args, failures):
    """``module.run(args)``: its comparisons, with a :class:`BenchFailed`'s message added to
    ``failures``."""
    try:
        return module.run(args)
    except BenchFailed as failed:
        failures.append(str(failed))
        return failed.comparisons


def _failed(failures):
    for message in failures:
        print(f"FAILED: {message}", file=sys.stderr)
    return 1 if failures else 0


def spread(values):
    """min / median / max of a list of numbers, as a short string (µs or as given)."""
    v = np.asarray(values, dtype=float)
    return float(np.min(v)), float(np.median(v)), float(np.max(v))


def compare(ours, reference, unit, lower_is_better):
    """One comparison of a bench's ``--json``, from the rounds' values of both sides (paired
    by round): the medians of each and the median of the rounds' ratios, oriented so that a
    ratio above 1 means ours is faster: reference / ours for times, ours / reference for
    rates (a bound counts as a reference: above 1, ours beats it)."""
    ours, reference = np.asarray(ours, dtype=float), np.asarray(reference, dtype=float)
    if ours.shape != reference.shape or ours.size == 0:
        raise ValueError("a comparison needs the same number of rounds on both sides, and one")
    ratios = reference / ours if lower_is_better else ours / reference
    return {"ratio": float(np.median(ratios)), "ours": float(np.median(ours)),
            "reference": float(np.median(reference)), "unit": unit}


def compare_rounds(rounds, ours, reference, unit, lower_is_better):
    """:func:`compare` of two quantities each round measured (``rounds``: a dict per round,
    as :func:`rounds` returns them; ``ours`` and ``reference``: keys in them)."""
    return compare([o[ours] for o in rounds], [o[reference] for o in rounds], unit,
                   lower_is_better)


def _plain(value):
    """``value`` with every number that is not finite (a reference that gave none) as None:
    strict JSON has no NaN."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def write_json(path, comparisons):
    """Write ``comparisons`` to ``path`` as one JSON object (the folder must exist)."""
    import json

    with open(path, "w") as fh:
        json.dump(_plain(comparisons), fh, indent=2, sort_keys=True, allow_nan=False)
        fh.write("\n")


def _json_folder(p, out):
    """Stop at once (argparse's error) when ``out``'s folder does not exist, not after the
    bench has run."""
    if out and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        p.error(f"--json {out}: its folder does not exist")


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


def in_random_order(comm, parts):
    """Under mpiexec, every rank: run each of ``parts`` ({name: callable}) once, in an order
    rank 0 draws anew every round; {name: what it returned}. Two runs of the same code in one
    bench differed by 9% by their place in a fixed order (the first slower): a drawn order
    spreads that over the rounds instead of charging it to one side."""
    import random

    order = comm.bcast(random.sample(list(parts), len(parts)) if comm.Get_rank() == 0
                       else None, root=0)
    return {name: parts[name]() for name in order}


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
    _json_option(p)
    args = p.parse_args(argv)
    _json_folder(p, args.json)
    failures = []
    found = _run_one(mod, args, failures)
    if args.json:
        write_json(args.json, found)
    return _failed(failures)


def _json_option(p, default=None):
    p.add_argument("--json", metavar="FILE", default=default,
                   help="also write the comparisons to FILE, as one JSON object (ratio > 1: "
                   "ours is faster)")


def main(argv=None):
    import mpi4py

    # the benches start their programs under mpiexec; this process needs no MPI of its own
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    found = benches()
    p = argparse.ArgumentParser(prog="python -m hpclab.bench", description=__doc__.split("\n")[0])
    _json_option(p)
    sub = p.add_subparsers(dest="kernel")
    for slug, module in found.items():
        one = sub.add_parser(slug, help=module.__doc__.split("\n")[0])
        module.add_arguments(one)
        _json_option(one, default=argparse.SUPPRESS)  # given before or after the kernel
    args = p.parse_args(argv)
    out = args.json
    _json_folder(p, out)
    kernel = args.kernel
    results, failures = {}, []
    for slug in [kernel] if kernel else list(found):
        print(f"\n=== {slug} ===")
        results[slug] = _run_one(found[slug], args if kernel else sub.choices[slug].parse_args([]),
                                 failures)
    if out:
        write_json(out, results[kernel] if kernel else results)
        print(f"\ncomparisons written to {out}")
    return _failed(failures)


if __name__ == "__main__":
    sys.exit(main())
