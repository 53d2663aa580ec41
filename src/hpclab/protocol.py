"""How a child process hands results to its parent: one line per result,
``HPCLAB-JSON {...}`` on standard output.

Every child that hpclab starts (the correctness runner under ``mpiexec``, a
threaded STREAM run, a bench) prints its results this way, whatever else it
prints, and the parent reads them back with :func:`parse`; other output (a
progress bar, an MPI warning) is ignored.
"""
from __future__ import annotations

import json
import sys

PREFIX = "HPCLAB-JSON "


def emit(obj, file=None):
    """Print one result for the parent (flushed at once, so that a run stopped by its
    timeout still hands over what it finished)."""
    print(PREFIX + json.dumps(obj, default=str), file=file or sys.stdout, flush=True)


def parse(text):
    """Every result a child printed, in order."""
    return [json.loads(line[len(PREFIX):]) for line in (text or "").splitlines()
            if line.startswith(PREFIX)]


def last(text, what="the child process"):
    """The last result a child printed; a RuntimeError that shows its output when none."""
    results = parse(text)
    if not results:
        raise RuntimeError(f"{what} printed no result:\n{(text or '(nothing)')[-2000:]}")
    return results[-1]
