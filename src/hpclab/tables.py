"""Tables for pages and labs: human column names with units, intervals beside estimates,
integers shown as integers, no bare 0/1 index.

Every function returns a DataFrame ready to display (a Styler only where formatting
cannot live in the values).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import models

# how a parameter is shown: (name, unit, factor from SI)
UNITS = {"lambda": ("λ", "µs", 1e6), "B": ("B", "GB/s", 1e-9), "b1": ("b1", "GB/s", 1e-9),
         "Bmax": ("Bmax", "GB/s", 1e-9), "s": ("s", "", 1.0), "t_update": ("t", "ns", 1e9),
         "t_point": ("t", "ns", 1e9), "t_row": ("r", "ns", 1e9), "t_reduce": ("a", "µs", 1e6)}


def _label(param):
    name, unit, _ = UNITS.get(param, (param, "", 1.0))
    return f"{name} [{unit}]" if unit else name


def domain_note(domain, value, lo, hi):
    """A fit table's note on an estimate or interval that leaves the parameter's domain
    (short enough that pandas shows it whole: 50 characters at most), and the interval cut
    to it; the decision is :meth:`hpclab.stats.Domain.classify`, as in the page's words."""
    where = domain.classify(value, lo, hi)
    if where in ("no estimate", "no interval"):
        return "", (lo, hi)
    if where == "outside":
        return "outside its domain: not determined", (lo, hi)
    if where == "at end":
        return "at the bound of its domain: not determined", domain.cut(lo, hi)
    if where == "inside":
        return "", (lo, hi)
    return f"interval cut to {domain.text()}: not determined", domain.cut(lo, hi)


def fits(*fits, names=None, digits=3):
    """Estimates with standard errors and 95% intervals, one row per parameter (and segment
    of a two-segment fit), in the units of :data:`UNITS`, with the points and degrees of
    freedom behind each.

    An interval that reaches past the parameter's physical domain (a latency below zero, a
    serial fraction above one) is cut to it, and a note says the fit does not determine
    the parameter. ``names`` labels the fits (default: the model's name, or the segment of
    a two-segment fit)."""
    rows, flagged = [], False
    for k, fit in enumerate(fits):
        for label, f in _parts(fit, names[k] if names else None):
            for p, value in f.params.items():
                _, _, factor = UNITS.get(p, (p, "", 1.0))
                note, (lo, hi) = domain_note(f.model.domain(p), value, *f.ci95[p])
                flagged = flagged or bool(note)
                rows.append({"fit": label, "parameter": _label(p), "estimate": value * factor,
                             "std. error": f.stderr[p] * factor, "95% low": lo * factor,
                             "95% high": hi * factor, "points": f.npoints, "dof": f.dof,
                             "note": note})
    t = pd.DataFrame(rows).set_index(["fit", "parameter"])
    if not flagged:
        t = t.drop(columns="note")
    return t.round({"estimate": digits, "std. error": digits, "95% low": digits,
                    "95% high": digits})


def _parts(fit, label=None):
    """(label, fit) of each segment: a two-segment fit's two lines, labelled by their sizes
    after ``label`` (alone when there is none), or the fit itself (``label``, else its model's
    name)."""
    if isinstance(fit, models.TwoSegmentFit):
        prefix = f"{label}, " if label else ""
        return [(f"{prefix}n ≤ {fit.breakpoint_low:,.0f} B", fit.left),
                (f"{prefix}n ≥ {fit.breakpoint_high:,.0f} B", fit.right)]
    return [(label or fit.model.name, fit)]


def residuals(*fits, names=None, digits=1):
    """Every point of each fit (and segment) with its residual as a share of the model's
    value: what a reader needs to judge a fit beyond its parameters."""
    rows = []
    for k, fit in enumerate(fits):
        for seg, f in _parts(fit, names[k] if names else None):
            model = f.model(f.x, *f.params.values())
            for x, y, m in zip(np.atleast_1d(f.x), f.y, model):
                x = float(x)
                rows.append({"fit": seg, f.model.x_name: int(x) if x.is_integer() else x,
                             "residual [% of the model]": (y - m) / m * 100})
    t = pd.DataFrame(rows)
    x_cols = [c for c in t.columns if c not in ("fit", "residual [% of the model]")]
    return integers(t.set_index(["fit", *x_cols]).round(digits))


def by(df, index, columns, values, unit="", factor=1.0, index_name=None, digits=3,
       column_names=None):
    """A pivot with the unit in every column header, e.g. one-way time per size and
    implementation."""
    t = df.pivot_table(index=index, columns=columns, values=values, aggfunc="first") * factor
    t = t[list(dict.fromkeys(df[columns]))]  # columns in the order the data has them
    names = column_names or {}
    t.columns = [f"{names.get(c, c)} [{unit}]" if unit else str(names.get(c, c))
                 for c in t.columns]
    t.index.name = index_name or index
    return t.round(digits)


def integers(df):
    """Columns that hold whole numbers as integers (no 30.0)."""
    out = df.copy()
    for c in out.columns:
        v = out[c]
        if pd.api.types.is_float_dtype(v) and v.notna().all() and np.all(np.mod(v, 1) == 0):
            out[c] = v.astype(int)
    return out


def correctness(checks, group=("nprocs", "oversubscribed")):
    """Runs and right answers per rank count: a correctness matrix summed up."""
    t = (checks.groupby(list(group))["correct"].agg(runs="count", right="sum").reset_index())
    t = integers(t).rename(columns={"nprocs": "ranks", "oversubscribed": "more ranks than cores"})
    return t.set_index("ranks")
