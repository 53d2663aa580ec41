"""Bench of grading: a generated class of correct submissions, graded one at a time and
side by side, in one run.

    python autograder/bench.py [--lab LAB] [--students 40] [--jobs N]

LAB is the book's first lab unless given (the one a class grades first).

Each student hands in the lab's solution notebook. The class is graded twice from scratch in
course folders of their own, once with ``--jobs 1`` and once with ``--jobs N`` (default: one
per core), and the bench prints the wall seconds per submission of each and the speed-up.
A timing, so a bench and never a test: the machine's noise lands in both runs alike only
when nothing else runs beside them.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def grade_class(lab, students, jobs, where):
    work = Path(where) / f"jobs{jobs}"
    for i in range(students):
        dest = work / "submitted" / f"student{i:03d}" / lab
        dest.mkdir(parents=True)
        shutil.copy(ROOT / "solutions" / lab / f"{lab}.ipynb", dest)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(HERE / "grade.py"), "grade", lab, "--workdir",
                        str(work), "--jobs", str(jobs)], capture_output=True, text=True)
    seconds = time.monotonic() - t0
    from nbgrader.api import Gradebook

    full = 0
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        for sub in gb.assignment_submissions(lab):
            auto = [g for n in sub.notebooks for g in n.grades if g.auto_score is not None]
            full += bool(auto) and all(g.score == g.max_score for g in auto)
    if r.returncode != 0 or full != students:
        print(r.stdout[-3000:], r.stderr[-3000:], file=sys.stderr)
    return seconds, full


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from hpclab.kernels import registry

    p.add_argument("--lab", default=registry.chapter_order()[0],
                   help="the lab whose solution each student hands in (default: the book's "
                   "first)")
    p.add_argument("--students", type=int, default=40)
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    args = p.parse_args(argv)
    if args.students < 1 or args.jobs < 1:
        raise SystemExit("--students and --jobs take a positive count")
    with tempfile.TemporaryDirectory(prefix="hpclab-grading-bench-") as where:
        results = {}
        for jobs in dict.fromkeys((1, args.jobs)):
            seconds, full = grade_class(args.lab, args.students, jobs, where)
            results[jobs] = seconds
            print(f"{args.lab}: {args.students} correct submissions, {jobs} at a time: "
                  f"{seconds:.0f} s, {seconds / args.students:.1f} s per submission, "
                  f"{full} with full autograded marks", flush=True)
    if len(results) == 2:
        print(f"speed-up of {args.jobs} at a time over one at a time: "
              f"{results[1] / results[args.jobs]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
