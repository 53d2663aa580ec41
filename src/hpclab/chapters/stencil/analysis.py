"""Stencil experiment: finite-difference derivatives of order 2 to 16 (report 003, FD_D2).

``derivative``  every operator (d²/dx₁², d²/dx₂², d²/dx₃², the Laplacian) at the profile's
                orders on cubes of n points, baseline and blocked, C and Cython, most ranks;
``convergence`` the C Laplacian of every order on small cubes, one rank;
``scaling``     the C Laplacian of order 8, P = 1 .. the most ranks.

Records: one row per repetition and metric (``apply, compute, halo`` in seconds per
application, ``error`` relative to the largest exact value) with columns ``kind, operator,
order, n, blocked, block3, block2, grid, oversubscribed``. What this module computes from
them: the observed order of convergence with its interval (:func:`convergence_orders`), the
rates in report 003's units (:func:`rates`), and what blocking gained
(:func:`blocking_gains`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import stats
from hpclab.chapters.stencil import fd

# the sweep (what every rank runs) is hpclab.chapters.stencil.sweep; its names are
# imported here for the pages, the labs and the tests
from hpclab.chapters.stencil.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    IMPLS,
    KERNEL,
    NAME,
    NPROCS,
    OPERATORS,
    measure,
    run,
    run_mpi,
    tasks,
)

# errors below this share of the exact value are round-off, not truncation: a fit of the
# order leaves them out (the kernel's own check allows 64 machine epsilons per term)
ROUND_OFF = 1e-11
# the operator names of the records as fd's counting functions take them
_FD_OPERATOR = {"d2x1": 1, "d2x2": 2, "d2x3": 3, "laplacian": "laplacian"}


def convergence_orders(df):
    """Per order: the slope of log(error) against log(h) (h = 1 / (n + 1)) fitted through
    the sizes whose error is above round-off, with its 95% t interval; a DataFrame with
    ``order, points, observed, low, high, words``. A slope needs three sizes for an
    interval (a line through two points has no scatter to estimate): with fewer it is
    left empty and the words say why."""
    d = df[(df["kind"] == "convergence") & (df["metric"] == "error")]
    rows = []
    for order, g in d.groupby("order"):
        err = g.groupby("n")["value"].median()
        kept = err[err > ROUND_OFF]
        row = {"order": int(order), "points": len(kept), "observed": np.nan,
               "low": np.nan, "high": np.nan}
        if len(kept) < 3:
            row["words"] = (f"{len(kept)} size(s) above round-off ({ROUND_OFF:g}): too few for "
                            "an order with an interval" if len(kept) < len(err) else
                            f"{len(kept)} sizes: too few for an order with an interval")
        else:
            x = np.log(1.0 / (kept.index.to_numpy(dtype=float) + 1))
            y = np.log(kept.to_numpy())
            slope, intercept = np.polyfit(x, y, 1)
            resid = y - (slope * x + intercept)
            se = np.sqrt(resid @ resid / (len(x) - 2) / np.sum((x - x.mean()) ** 2))
            half = float(stats.t_quantile(0.975, len(x) - 2)) * se
            row.update(observed=slope, low=slope - half, high=slope + half)
            inside = row["low"] <= order <= row["high"]
            row["words"] = (f"observed order {slope:.2f} [{slope - half:.2f}, "
                            f"{slope + half:.2f}] from {len(kept)} sizes: the expected "
                            f"{order} is {'inside' if inside else 'outside'} the interval")
        rows.append(row)
    return pd.DataFrame(rows)


def rates(df, kind="derivative"):
    """Median seconds per application and the rates of report 003 per (impl, operator,
    order, n, blocked): MLUP/s (mega-points per second), GFlop/s and GB/s as hpcscan counts
    them (every stencil point loaded, the result stored, 8-byte words), and GB/s counted as
    memory must move it at least (u and w once, write-allocate: 24 bytes a point)."""
    d = df[(df["kind"] == kind) & (df["metric"] == "apply")]
    keys = ["impl", "operator", "order", "n", "blocked", "block3", "block2", "nprocs"]
    out = d.groupby(keys)["value"].median().rename("seconds").reset_index()
    points = out["n"].astype(float) ** 3
    out["mlups"] = points / out["seconds"] / 1e6
    op = out["operator"].map(_FD_OPERATOR)
    out["gflops"] = [fd.flops_per_point(o, k) for o, k in zip(op, out["order"])] \
        * points / out["seconds"] / 1e9
    out["gbs_hpcscan"] = [fd.bytes_per_point(o, k) for o, k in zip(op, out["order"])] \
        * points / out["seconds"] / 1e9
    out["gbs_minimum"] = [fd.bytes_per_point(o, k, counted="minimum") for o, k in
                          zip(op, out["order"])] * points / out["seconds"] / 1e9
    return out


def blocking_gains(df, impl="c"):
    """Baseline time over blocked time per (operator, order, n, blocks), with the 95%
    interval of the ratio of medians (:func:`hpclab.stats.compare`) and words computed
    from it: "blocked faster" only where the whole interval lies above 1, "blocked
    slower" where it lies below, else "no difference shown"."""
    d = df[(df["kind"] == "derivative") & (df["metric"] == "apply") & (df["impl"] == impl)]
    rows = []
    for (operator, order, n), g in d.groupby(["operator", "order", "n"]):
        base = g[~g["blocked"].astype(bool)]["value"]
        for (b3, b2), blk in g[g["blocked"].astype(bool)].groupby(["block3", "block2"]):
            try:
                c = stats.compare(base, blk["value"], names=("baseline", "blocked"))
            except ValueError as exc:  # too few repetitions, or no scatter
                rows.append({"operator": operator, "order": order, "n": n, "block3": b3,
                             "block2": b2, "gain": np.nan, "low": np.nan, "high": np.nan,
                             "words": str(exc)})
                continue
            words = ("blocked faster" if c.low > 1 else "blocked slower" if c.high < 1
                     else "no difference shown")
            rows.append({"operator": operator, "order": order, "n": n, "block3": b3,
                         "block2": b2, "gain": c.ratio, "low": c.low, "high": c.high,
                         "words": words})
    return pd.DataFrame(rows)
