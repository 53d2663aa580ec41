"""The record format every experiment writes.

A run is a tidy table, one row per measured repetition, with the columns::

    experiment, kernel, impl, nprocs, nthreads, <parameter columns...>, rep, metric, value, unit

and its metadata once, in a JSON file beside the CSV: ``machine.describe()``,
the profile, the package version, the git commit when known, the UTC time and
the command line. :func:`save` writes both atomically (temporary file, then a
hard link that fails rather than overwrite) under a fresh name, so an earlier
run is never lost.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pandas as pd

LEADING = ["experiment", "kernel", "impl", "nprocs", "nthreads"]
TRAILING = ["rep", "metric", "value", "unit"]
REQUIRED = LEADING + TRAILING


class RecordError(ValueError):
    """A table that does not follow the record format."""


def rows(experiment, kernel, impl, nprocs, nthreads, params, values, metric, unit):
    """One record per repetition: ``values[r]`` becomes the row with ``rep = r``."""
    base = {"experiment": experiment, "kernel": kernel, "impl": impl, "nprocs": int(nprocs),
            "nthreads": int(nthreads), **params}
    return [{**base, "rep": r, "metric": metric, "value": float(v), "unit": unit}
            for r, v in enumerate(np.asarray(values, dtype=float).ravel())]


def frame(records):
    """A DataFrame with the record columns in their order (parameters in the middle)."""
    df = pd.DataFrame.from_records(list(records))
    validate(df)
    params = [c for c in df.columns if c not in REQUIRED]
    return df[LEADING + params + TRAILING].reset_index(drop=True)


def validate(df):
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise RecordError(f"records lack the columns {missing}; every record needs {REQUIRED}")
    if df.empty:
        raise RecordError("no records: the experiment measured nothing")
    if df["value"].isna().any():
        raise RecordError("records contain NaN values")
    return df


def results_dir():
    """Where runs are saved by default: $HPCLAB_RESULTS_DIR, else results/ of this checkout."""
    env = os.environ.get("HPCLAB_RESULTS_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").exists() and (parent / "book").is_dir():
            return parent / "results"
    return Path("results")


def git_commit(path=None):
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=path or Path(__file__).parent, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def metadata(experiment, profile, extra=None):
    """The JSON metadata of a run."""
    from hpclab import __version__, machine

    return {
        "experiment": experiment,
        "profile": profile,
        "hpclab_version": __version__,
        "git_commit": git_commit(),
        "utc_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(sys.argv),
        "machine": machine.describe(),
        **(extra or {}),
    }


def _atomic_new(path, data):
    """Write data to path atomically; raise FileExistsError rather than overwrite."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)
    finally:
        os.unlink(tmp)


def save(df, meta, out_dir=None):
    """Write ``<experiment>-<UTC time>-<id>.csv`` and ``.json`` into out_dir.

    Returns the CSV path. Never overwrites: every run gets a fresh name.
    """
    validate(df)
    out = Path(out_dir) if out_dir is not None else results_dir()
    out.mkdir(parents=True, exist_ok=True)
    experiment = str(df["experiment"].iloc[0])
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for _ in range(100):
        stem = f"{experiment}-{stamp}-{uuid.uuid4().hex[:6]}"
        csv, js = out / f"{stem}.csv", out / f"{stem}.json"
        if csv.exists() or js.exists():
            continue
        try:
            _atomic_new(js, json.dumps({**meta, "records": csv.name}, indent=2, default=str) + "\n")
        except FileExistsError:
            continue
        _atomic_new(csv, df.to_csv(index=False))
        return csv
    raise RecordError(f"could not find a fresh file name in {out}")


def load(path):
    """Read a run back: (DataFrame, metadata dict). ``path`` is the CSV or JSON."""
    path = Path(path)
    csv, js = path.with_suffix(".csv"), path.with_suffix(".json")
    df = validate(pd.read_csv(csv))
    meta = json.loads(js.read_text()) if js.exists() else {}
    return df, meta


def latest(experiment, out_dir=None):
    """The newest saved run of an experiment, or None."""
    out = Path(out_dir) if out_dir is not None else results_dir()
    runs = sorted(out.glob(f"{experiment}-*.csv"))
    return load(runs[-1]) if runs else None
