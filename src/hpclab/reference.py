"""Published measurements from ``book/data/reference/*.csv``, with their citations.

>>> df = load("ulysses_imb_pingpong")
>>> cite("ulysses_imb_pingpong")
'Sarti (2018), Multicore and Multinode Performance (Ulysses), Table 1 [report 004]'
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

REQUIRED = ("source",)


def data_dir() -> Path:
    """The reference folder: $HPCLAB_REFERENCE_DIR, else book/data/reference of this checkout."""
    env = os.environ.get("HPCLAB_REFERENCE_DIR")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        cand = parent / "book" / "data" / "reference"
        if cand.is_dir():
            return cand
    raise FileNotFoundError(
        "book/data/reference not found: run from a checkout of hpclab or set HPCLAB_REFERENCE_DIR")


def names() -> list[str]:
    """The datasets available."""
    return sorted(p.stem for p in data_dir().glob("*.csv"))


def load(name: str) -> pd.DataFrame:
    """One dataset as a DataFrame; every row has a ``source`` citation."""
    path = data_dir() / f"{name}.csv"
    if not path.exists():
        raise ValueError(f"no reference dataset {name!r}: choose one of {', '.join(names())}")
    df = pd.read_csv(path)
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing or df["source"].isna().any():
        raise ValueError(f"{path} must cite a source on every row")
    return df


def cite(name_or_frame: str | pd.DataFrame) -> str:
    """The distinct citations of a dataset (or of a slice of one), joined by '; '."""
    df = load(name_or_frame) if isinstance(name_or_frame, str) else name_or_frame
    return "; ".join(dict.fromkeys(df["source"]))
