"""The record format every experiment writes.

A run is a tidy table, one row per measured repetition, with the columns::

    experiment, kernel, impl, nprocs, nthreads, <parameter columns...>, rep, metric, value, unit

and its metadata once, in a JSON file beside the CSV: ``machine.describe()``,
the profile, the package version, the git commit when known, the UTC time and
the command line. :func:`save` writes both atomically (temporary file, then a
hard link that fails rather than overwrite) under a fresh name, so an earlier
run is never lost.

In memory a run is a :class:`Run`: its records and its metadata, together. Every
row carries the run's id (column ``run``), so rows keep pointing at their
metadata however a chapter filters or merges them, and :meth:`Run.combine` joins
several runs into one that holds every run's metadata.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
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


def timings(kernel, impl, nprocs, nthreads, params, times, experiment=None):
    """Records of one kernel call: ``times`` is the (metric x repetition) array that
    every ``run_<impl>`` returns, its rows named by the kernel's declaration.

    ``kernel`` is a declaration (:class:`hpclab.kernels.registry.Kernel`) or its slug.
    With a declaration's ``record_metric = (column, metric)`` the metric names go into
    ``column`` and every row's metric is ``metric`` (STREAM: ``op`` and ``time``).
    """
    from hpclab.kernels.registry import get

    decl = get(kernel) if isinstance(kernel, str) else kernel
    times = np.asarray(times, dtype=float)
    if times.ndim != 2 or times.shape[0] != len(decl.metrics):
        raise RecordError(f"{decl.slug} returns {len(decl.metrics)} metric row(s) "
                          f"({', '.join(decl.metric_names)}), got an array of shape "
                          f"{times.shape}")
    out = []
    for metric, values in zip(decl.metrics, times):
        if decl.record_metric:
            column, name = decl.record_metric
            extra, name = {column: metric.name}, name
        else:
            extra, name = {}, metric.name
        out += rows(experiment or decl.slug, decl.slug, impl, nprocs, nthreads,
                    {**params, **extra}, values, name, metric.unit)
    return out


def frame(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """A DataFrame with the record columns in their order (parameters in the middle)."""
    import pandas as pd  # here, not above: the ranks that only measure never load pandas

    df = pd.DataFrame.from_records(list(records))
    validate(df)
    first = ["run"] if "run" in df.columns else []
    params = [c for c in df.columns if c not in REQUIRED + first]
    return df[first + LEADING + params + TRAILING].reset_index(drop=True)


def table(run_or_df: Run | pd.DataFrame) -> pd.DataFrame:
    """The records of a :class:`Run`, or the DataFrame itself."""
    return run_or_df.records if isinstance(run_or_df, Run) else run_or_df


class Run:
    """One run: its records (a DataFrame, one row per repetition) and its metadata.

    ``records, meta = run`` unpacks it. Every row's ``run`` column holds
    ``meta["run_id"]``; :meth:`combine` keeps each run's metadata under its id in
    ``meta["runs"]``, so :meth:`meta_of` finds the metadata of any row.
    """

    def __init__(self, records, meta):
        self.path = None  # the CSV in results/ once saved or loaded
        meta = dict(meta)
        meta.setdefault("run_id", uuid.uuid4().hex[:12])
        import pandas as pd

        df = frame(records.to_dict("records") if isinstance(records, pd.DataFrame) else records)
        if "run" not in df.columns:
            df.insert(0, "run", meta["run_id"])
        self.records = df
        self.meta = meta

    def __iter__(self):
        return iter((self.records, self.meta))

    def __len__(self):
        return len(self.records)

    def __repr__(self):
        return (f"Run({self.meta.get('experiment')}, {len(self.records)} records, "
                f"run_id={self.meta['run_id']})")

    @property
    def runs(self):
        """run id -> metadata of every run this one holds (itself, or the combined)."""
        return dict(self.meta.get("runs") or {self.meta["run_id"]: self.meta})

    def meta_of(self, run_id):
        """The metadata of the run a row came from (its ``run`` column)."""
        try:
            return self.runs[run_id]
        except KeyError:
            raise KeyError(f"no run {run_id!r} here; runs: {', '.join(self.runs)}") from None

    @classmethod
    def combine(cls, *runs, **extra):
        """One run of several: all records, and every run's metadata under its id.

        The combined metadata takes the first run's top-level fields (experiment,
        profile, machine) plus ``extra``, and ``runs``: id -> metadata.
        """
        if not runs:
            raise RecordError("nothing to combine")
        held = {}
        for r in runs:
            held.update(r.runs)
        meta = {k: v for k, v in runs[0].meta.items() if k not in ("runs", "run_id")}
        meta.update(extra, runs=held)
        import pandas as pd

        df = pd.concat([r.records for r in runs], ignore_index=True)
        return cls(df, meta)

    def save(self, out_dir=None, publish=None, name=None):
        """Write the records and metadata (see :func:`save`); the CSV path. ``publish``: a
        folder that also receives them as ``<experiment>-records.csv`` and ``.json`` (or
        ``<name>-records``), names that stay the same from build to build, so that a book
        page can offer them for download."""
        # a run saved once (or loaded from results/) is not written to results/ again
        saved = getattr(self, "path", None)
        path = saved if saved is not None and out_dir is None else save(self.records, self.meta,
                                                                         out_dir)
        self.path = path
        if publish is not None:
            folder = Path(publish)
            folder.mkdir(parents=True, exist_ok=True)
            stem = f"{name or self.records['experiment'].iloc[0]}-records"
            (folder / f"{stem}.csv").write_text(self.records.to_csv(index=False))
            (folder / f"{stem}.json").write_text(
                json.dumps({**self.meta, "records": f"{stem}.csv"}, indent=2, default=str) + "\n")
        return path


def samples(run_or_df: Run | pd.DataFrame, metric: str, **where: Any) -> np.ndarray:
    """The repetitions of one metric for the rows matching ``where`` (column=value), in the
    order of their repetition."""
    t = table(run_or_df)
    t = t[t["metric"] == metric]
    for k, v in where.items():
        t = t[t[k] == v]
    if "rep" in t.columns:
        t = t.sort_values("rep", kind="stable")
    return t["value"].to_numpy(dtype=float)


def validate(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` when it follows the record format; a RecordError that says what is wrong."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise RecordError(f"records lack the columns {missing}; every record needs {REQUIRED}")
    if df.empty:
        raise RecordError("no records: the experiment measured nothing")
    if df["value"].isna().any():
        raise RecordError("records contain NaN values")
    return df


def results_dir() -> Path:
    """Where runs are saved by default: $HPCLAB_RESULTS_DIR, else results/ of this checkout."""
    env = os.environ.get("HPCLAB_RESULTS_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").exists() and (parent / "book").is_dir():
            return parent / "results"
    return Path("results")


def git_commit(path: str | Path | None = None) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             cwd=path or Path(__file__).parent, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def metadata(experiment: str, profile: str,
             extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON metadata of a run."""
    from hpclab import __version__, machine, mpirun, sharing

    return {
        "experiment": experiment,
        "profile": profile,
        "hpclab_version": __version__,
        "git_commit": git_commit(),
        "utc_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(sys.argv),
        "machine": machine.describe(),
        # the MPI libraries' settings in the environment (how a waiting rank polls, which
        # transport): they change what is measured
        "mpi_settings": mpirun.mpi_settings(),
        # on a course's shared server, the cores other users kept busy as the run was saved
        **({"shared_server": sharing.other_users()} if sharing.on_shared_server() else {}),
        # the book build under way (hpclab.inputs): pages of one build share its runs
        **({"build": os.environ["HPCLAB_BUILD"]} if os.environ.get("HPCLAB_BUILD") else {}),
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


def save(df: Run | pd.DataFrame, meta: Mapping[str, Any] | None = None,
         out_dir: str | Path | None = None) -> Path:
    """Write ``<experiment>-<UTC time>-<id>.csv`` and ``.json`` into out_dir.

    ``df`` is a :class:`Run` (then ``meta`` is its own) or a DataFrame with its
    metadata. Returns the CSV path. Never overwrites: every run gets a fresh name.
    """
    if isinstance(df, Run):
        df, meta = df.records, df.meta
    if meta is None:
        raise RecordError("save needs the run's metadata (or a Run)")
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


def load(path: str | Path) -> Run:
    """Read a run back as a :class:`Run` (``df, meta = load(path)`` unpacks it).
    ``path`` is the CSV or JSON."""
    path = Path(path)
    csv, js = path.with_suffix(".csv"), path.with_suffix(".json")
    import pandas as pd

    # a run id is text: read as the CSV's type guess, one of hex digits only (0.35% of ids) or
    # with an "e" among them came back as a number, and no longer matched its metadata
    df = validate(pd.read_csv(csv, dtype={"run": str}))
    meta = json.loads(js.read_text()) if js.exists() else {}
    if "run" in df.columns and "run_id" not in meta and df["run"].nunique() == 1:
        meta["run_id"] = str(df["run"].iloc[0])
    run = Run(df, meta)
    run.path = csv
    return run


def latest(experiment: str, out_dir: str | Path | None = None) -> Run | None:
    """The newest saved run of an experiment measured here (:func:`hpclab.inputs.resolve`:
    this host and MPI library, not simulated, not oversubscribed, this book build when one
    is under way), or None."""
    from hpclab import inputs

    return inputs.resolve(experiment, out_dir=out_dir).run
