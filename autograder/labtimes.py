"""How long each lab's cells take on this machine, in the profile a student works in.

    python autograder/labtimes.py [LAB ...] [--profile standard] [--longer 5]

Runs each lab's solution notebook (a student's finished work) top to bottom, in the book's
order, in a temporary folder whose ``results/`` the labs share (a later lab takes its inputs
from an earlier one's records, as on a student's machine; nothing lands in this checkout's
results/). It prints every cell that took longer than ``--longer`` seconds, each lab's total,
and the cells that measure (a timed section) beside the budget of one: three minutes on a
2-core laptop in the default profile. A timing, so a bench and never a test: run it on an
idle machine, and read it beside what else ran.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUDGET_S = 180.0  # a timed section of a lab, in the default profile


def _measures(cell):
    """Whether a given cell measures: the lab tags it ``measures`` (it runs a chapter's sweep
    or simulation, times the student's kernel, or measures an earlier lab's input that is not
    saved: what the budget of a timed section is about)."""
    return "measures" in cell.metadata.get("tags", [])


def time_lab(lab, profile, work, longer):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    nb = nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb", as_version=4)
    folder = work / lab
    folder.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, timeout=1800, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(folder)}})
    env = dict(os.environ, HPCLAB_PROFILE=profile, HPCLAB_RESULTS_DIR=str(work / "results"))
    rows, errors = [], []
    with client.setup_kernel(env=env):
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            t0 = time.monotonic()
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {i}")
            try:
                client.execute_cell(cell, i)
            except (CellTimeoutError, DeadKernelError) as exc:  # the lab stops, the rest go on
                rows.append((gid, time.monotonic() - t0, _measures(cell)))
                errors.append(f"{gid}: {type(exc).__name__}: {str(exc)[:200]} (the lab stopped)")
                break
            seconds = time.monotonic() - t0
            rows.append((gid, seconds, _measures(cell)))
            errors += [f"{gid}: {o.get('ename')}: {o.get('evalue')}" for o in cell.outputs
                       if o.get("output_type") == "error"]
    total = sum(s for _, s, _ in rows)
    print(f"\n{lab}: {total / 60:.1f} min in all, profile {profile}")
    for gid, seconds, measures in rows:
        if seconds >= longer:
            over = "  OVER the 3-minute budget" if measures and seconds > BUDGET_S else ""
            print(f"  {gid:28s} {seconds:7.1f} s{'  (measures)' if measures else ''}{over}")
    for e in errors:
        print(f"  raised: {e[:300]}")
    return {"lab": lab, "total_s": total, "errors": errors,
            "longest_timed_s": max((s for _, s, m in rows if m), default=0.0)}


def main(argv=None):
    from hpclab import launch
    from hpclab.kernels import registry

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    order = [lab for lab in registry.chapter_order()
             if (ROOT / "solutions" / lab / f"{lab}.ipynb").exists()]
    p.add_argument("labs", nargs="*", help=f"labs to time (default: all, {', '.join(order)})")
    p.add_argument("--profile", default="standard", help="the profile (default: standard, "
                   "what a student's notebook uses unless HPCLAB_PROFILE says otherwise)")
    p.add_argument("--longer", type=float, default=5.0,
                   help="print the cells that took at least this many seconds (default 5)")
    args = p.parse_args(argv)
    unknown = sorted(set(args.labs) - set(order))
    if unknown:
        p.error(f"no lab {', '.join(unknown)}: choose from {', '.join(order)}")
    labs = [lab for lab in order if lab in args.labs] if args.labs else order
    print(f"{launch.usable_cores()} usable cores; labs in the book's order: {', '.join(labs)}")
    with tempfile.TemporaryDirectory(prefix="hpclab-labtimes-") as tmp:
        out = [time_lab(lab, args.profile, Path(tmp), args.longer) for lab in labs]
    print(f"\n{'lab':10s} {'total [min]':>12s} {'longest timed cell [s]':>23s}")
    for r in out:
        flag = "  over 3 min" if r["longest_timed_s"] > BUDGET_S else ""
        print(f"{r['lab']:10s} {r['total_s'] / 60:12.1f} {r['longest_timed_s']:23.1f}{flag}"
              + (f"  ({len(r['errors'])} cell(s) raised)" if r["errors"] else ""))
    return 1 if any(r["errors"] for r in out) else 0


if __name__ == "__main__":
    sys.exit(main())
