"""Amdahl experiment: the phases of the matrix addition against the number of ranks P.

Four sweeps, one list of tasks (``kind`` column):

``strong``     the profile's shapes on P = 1 .. cores, every distribution, C; the other
               implementations at the first shape and the profile's ``compare``
               distributions;
``weak``       the first extent grows with P (the profile's ``weak`` shape times P), no
               topology, C, each grown shape also on one rank (for Gustafson's scaled
               speed-up);
``synthetic``  :func:`hpclab.chapters.amdahl.kernels.synthetic` with the profile's known serial
               fraction on P = 1 .. ``procs`` ranks; it sleeps, so P may exceed the cores
               and the rows say ``oversubscribed``.

Records: one row per repetition and phase (metrics ``create, distribute, add, collect,
total``; ``serial, parallel, total`` for the synthetic program) with columns ``kind,
distribution, nx, ny, nz, shape, hugepages, oversubscribed`` (and ``serial_fraction,
work, jitter`` for the synthetic one).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import machine, models, profiles, records, stats as hstats

# the sweep (what every rank runs) is hpclab.chapters.amdahl.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.amdahl.model import MODEL
from hpclab.chapters.amdahl.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    DISTRIBUTIONS,
    IMPLS,
    KERNEL,
    KINDS,
    NAME,
    NPROCS,
    SERIAL_PHASES,
    check,
    lab_shape,
    measure,
    run,
    run_mpi,
    shape_name,
    tasks,
)
from hpclab.chapters.stream.analysis import add_bandwidth as stream_add  # noqa: F401

# ----------------------------------------------------------------------------- analysis

def phases(df, kind="strong"):
    """Median, best and worst seconds per implementation, distribution, shape, P and
    phase."""
    t = records.table(df)
    t = t[(t["kind"] == kind) & (t["impl"] != "synthetic")]
    g = t.groupby(["impl", "distribution", "shape", "nprocs", "metric"])["value"]
    return g.agg(median="median", best="min", worst="max", reps="count").reset_index()


def _reps(df, kind, impl, distribution, shape, nprocs):
    t = records.table(df)
    t = t[(t["kind"] == kind) & (t["impl"] == impl) & (t["distribution"] == distribution)
          & (t["shape"] == shape) & (t["nprocs"] == nprocs)]
    if t.empty:
        raise ValueError(f"no {kind} records of {impl} {distribution} {shape} at P = {nprocs}")
    return t.pivot_table(index=["run", "rep"], columns="metric", values="value")


def phase_runs(df, nprocs=1, impl="c", distribution="none", shape=None, kind="strong"):
    """One row per run (repetition) with a column per phase, in seconds."""
    return _reps(df, kind, impl, distribution, shape or first_shape(df), nprocs).reset_index(
        drop=True)


def term_interval(df, term, P, predicted_add_s):
    """(ratio, low, high): one phase at P ranks (C, the lab's distribution over planes)
    against Amdahl's model, with its 95% interval: the addition's repetitions over
    ``predicted_add_s`` taken as exact (:func:`hpclab.stats.over_model`); a serial phase's
    over its repetitions on one rank, the model's value, both measured
    (:func:`hpclab.stats.compare`). The interval is NaN with fewer than two repetitions."""
    runs = phase_runs(df, nprocs=P)
    if term not in runs.columns or term == "total":
        raise ValueError(f"term is one of create, distribute, add, collect, not {term!r}")
    if term == "add":
        return hstats.over_model(runs["add"].to_numpy(float), predicted_add_s)
    one = phase_runs(df, nprocs=1)[term].to_numpy(float)
    try:
        c = hstats.compare(runs[term].to_numpy(float), one)
    except ValueError:
        return float(np.median(runs[term]) / np.median(one)), float("nan"), float("nan")
    return c.ratio, c.low, c.high


def work_seconds(df, impl, P, shape, distribution="3d"):
    """Seconds of distribute + add + collect in each repetition (C, Cython or Python) at P
    ranks: the part of the program a lab's own addition does (rank 0's arrays are made
    before its clock starts). ``shape``: the array's (nx, ny, nz) or its name."""
    name = shape if isinstance(shape, str) else shape_name(*(int(v) for v in shape))
    runs = phase_runs(df, nprocs=int(P), impl=impl, distribution=distribution, shape=name)
    return (runs["distribute"] + runs["add"] + runs["collect"]).to_numpy(float)


def over_prediction(seconds, predicted_s):
    """(ratio, low, high): the median of repeated times over a prediction taken as exact,
    with the 95% interval of the median (:func:`hpclab.stats.over_model`; NaN without one)."""
    return hstats.over_model(seconds, predicted_s)


def tiny_shape(P, distribution="3d"):
    """An array of two elements per rank and dimension on the process grid of P ranks:
    almost nothing to carry, so a run's time is what its calls cost, whatever they carry."""
    from hpclab.chapters.amdahl.kernels import process_grid

    return tuple(2 * int(g) for g in process_grid(distribution, int(P)))


def first_shape(df):
    t = records.table(df)
    strong = t[t["kind"] == "strong"]
    return str(strong["shape"].iloc[0])


def serial_fraction(df, impl="c", distribution="none", shape=None, kind="strong", nprocs=1):
    """s from the phase times: (create + distribute + collect) / total, per repetition at
    P = nprocs; the mean with its 95% t-interval over the repetitions (none from one)."""
    from hpclab.stats import t_quantile

    shape = shape or first_shape(df)
    w = _reps(df, kind, impl, distribution, shape, nprocs)
    s = (w[list(SERIAL_PHASES)].sum(axis=1) / w["total"]).to_numpy()
    mean = float(s.mean())
    low = high = np.nan
    if s.size >= 2:
        half = t_quantile(0.975, s.size - 1) * s.std(ddof=1) / np.sqrt(s.size)
        low, high = mean - half, mean + half
    words = hstats.estimate_words(
        mean, low, high, "", "serial fraction", 3, name="s", domain=MODEL.domain("s"),
        basis=f"{s.size} repetition{'s' if s.size != 1 else ''}")
    return {"s": mean, "low": low, "high": high, "reps": int(s.size), "words": words}


def amdahl_speedup(s, nprocs):
    """Amdahl's law S(P) = 1 / (s + (1 - s) / P)."""
    return 1.0 / (s + (1.0 - s) / np.asarray(nprocs, dtype=float))


def speedups(df, impl="c", distribution="none", shape=None, kind="strong", metric="total"):
    """S(P) = T(1) / T(P) of the medians, per P: column ``median`` holds that ratio of the
    medians (over the repetitions), ``worst`` and ``best`` the low and high ends of its 95%
    interval (NaN with fewer than two runs, or none that differ), ``reps`` the runs at P."""
    from hpclab import stats

    shape = shape or first_shape(df)
    one = _reps(df, kind, impl, distribution, shape, 1)[metric].to_numpy()
    t = records.table(df)
    procs = sorted(t[(t["kind"] == kind) & (t["impl"] == impl)]["nprocs"].unique())
    out = []
    for p in procs:
        tp = _reps(df, kind, impl, distribution, shape, p)[metric].to_numpy()
        row = {"nprocs": int(p), "median": float(np.median(one) / np.median(tp)),
               "best": np.nan, "worst": np.nan, "reps": int(tp.size)}
        try:  # NaN: fewer than two runs, or runs with no scatter at all
            c = stats.compare(one, tp)
            row["best"], row["worst"] = c.high, c.low
        except ValueError:
            pass
        out.append(row)
    return pd.DataFrame(out)


def predicted(df, impl="c", distribution="none", shape=None):
    """Amdahl's S(P) predicted from s measured at P = 1, before P > 1 is looked at:
    (P values, {label: S}) with the interval of s as two more lines."""
    s = serial_fraction(df, impl, distribution, shape)
    t = records.table(df)
    p = np.arange(1, int(t[t["kind"] == "strong"]["nprocs"].max()) + 1)
    return s, p, amdahl_speedup(s["s"], p)


def fit_s(points, what="speed-ups"):
    """Amdahl's s fitted to speed-ups S(P) for P > 1 (P = 1 is S = 1 whatever s is, so it
    carries nothing). Needs two such P at least (one degree of freedom), else a
    :class:`hpclab.models.FitError` that says it would not be a fit."""
    pts = points[points["nprocs"] > 1]
    if pts["nprocs"].nunique() < 2:
        raise models.FitError(
            f"Amdahl's s from {what} at {pts['nprocs'].nunique()} rank count(s) above one is "
            "not a fit: one parameter needs two informative points at least (a machine with "
            "three or more cores)")
    return models.fit(MODEL, pts["nprocs"].to_numpy(float),
                      pts["median"].to_numpy(float))


def synthetic_points(df, metric="total"):
    """The synthetic program: one speed-up per repetition, T(1) (median) / T(P), from the
    times as slept (``total``) or as the sleeps asked for (``asked``)."""
    t = records.table(df)
    t = t[(t["kind"] == "synthetic") & (t["metric"] == metric)]
    if t.empty:
        raise ValueError("no synthetic records")
    one = float(t[t["nprocs"] == 1]["value"].median())
    pts = t.assign(median=one / t["value"])[["nprocs", "rep", "median", "oversubscribed",
                                             "serial_fraction"]]
    return pts.reset_index(drop=True)


def synthetic_oversleep(df):
    """Per run of the synthetic program (nprocs, rep): how many seconds longer it slept
    than its sleeps asked for, the system's time to wake a sleeper."""
    t = records.table(df)
    t = t[t["kind"] == "synthetic"]
    wide = t.pivot_table(index=["nprocs", "rep"], columns="metric", values="value")
    return (wide["total"] - wide["asked"]).rename("oversleep").reset_index()


def synthetic_slack(df):
    """How far the oversleep alone can move the fitted s from the s the program was given.

    A run on P ranks takes T_P = A_P + d_P against T_1 = A_1 + d_1 on one rank (A asked, d
    overslept, A_P <= A_1), so 1/S = T_P / T_1 moves by at most (d_P + d_1) / A_1, and
    s = (1/S - 1/P) / (1 - 1/P) by at most twice that for P >= 2: 4 max(d) / min(A_1).
    """
    t = records.table(df)
    t = t[(t["kind"] == "synthetic") & (t["metric"] == "asked") & (t["nprocs"] == 1)]
    return 4 * float(synthetic_oversleep(df)["oversleep"].max()) / float(t["value"].min())


def synthetic_fit(df, metric="total"):
    """s fitted to every repetition's speed-up of the synthetic program (a Fit), and the s
    it was given. ``metric="asked"`` fits the times its sleeps asked for: the seeded
    scatter without the machine."""
    pts = synthetic_points(df, metric)
    return fit_s(pts, f"synthetic speed-ups ({metric})"), float(pts["serial_fraction"].iloc[0])


def gustafson(df, impl="c"):
    """Weak scaling: the scaled speed-up T_1(P·n) / T_P(P·n) measured, beside Gustafson's
    S = P - s_P (P - 1) with s_P the serial share of the run on P ranks."""
    t = records.table(df)
    w = t[(t["kind"] == "weak") & (t["impl"] == impl)]
    out = []
    for shape, g in w.groupby("shape"):
        procs = sorted(g["nprocs"].unique())
        p = int(max(procs))
        one = _reps(df, "weak", impl, "none", shape, 1)
        many = _reps(df, "weak", impl, "none", shape, p)
        s_p = float((many[list(SERIAL_PHASES)].sum(axis=1) / many["total"]).mean())
        out.append({"nprocs": p, "shape": shape,
                    "scaled_speedup": float(one["total"].median() / many["total"].median()),
                    "s_P": s_p, "gustafson": p - s_p * (p - 1)})
    return pd.DataFrame(out).sort_values("nprocs").reset_index(drop=True)


def addition_bandwidth(df, impl="c", distribution="none", shape=None,
                       write_allocate=False):
    """GB/s of the addition phase per P: the bytes every rank moves (24 per element, 32
    with write-allocate) over the slowest rank's time."""
    shape = shape or first_shape(df)
    per = KERNEL.extra["bytes_per_element_write_allocate" if write_allocate
                       else "bytes_per_element"]
    ph = phases(df)
    ph = ph[(ph["impl"] == impl) & (ph["distribution"] == distribution)
            & (ph["shape"] == shape) & (ph["metric"] == "add")].copy()
    n = np.prod([int(v) for v in shape.split("x")])
    for c in ("median", "best", "worst"):
        ph[c + "_gbs"] = per * n / ph[c] / 1e9
    return ph[["nprocs", "median_gbs", "best_gbs", "worst_gbs"]].rename(
        columns={"median_gbs": "median", "best_gbs": "best", "worst_gbs": "worst"})


# ----------------------------------------------------------------------------- the chapter

PHASE_LABELS = {"create": "create (rank 0)", "distribute": "distribute",
                "add": "add (every rank)", "collect": "collect (rank 0)"}


def phase_bars(df, impl="c", distribution="none", shape=None):
    """Median seconds of each phase (columns) per P (rows), for a stacked bar figure."""
    shape = shape or first_shape(df)
    ph = phases(df)
    ph = ph[(ph["impl"] == impl) & (ph["distribution"] == distribution)
            & (ph["shape"] == shape) & (ph["metric"] != "total")]
    return ph.pivot(index="nprocs", columns="metric", values="median")[list(PHASE_LABELS)]


def roofline_points(df, stream_gbs, impl="c", distribution="none", shape=None):
    """The addition phase's bandwidth per P (24 and 32 bytes per element) beside STREAM
    add with as many threads, and their ratio."""
    b24 = addition_bandwidth(df, impl, distribution, shape)
    b32 = addition_bandwidth(df, impl, distribution, shape, write_allocate=True)
    out = b24.rename(columns={"median": "add_24", "best": "best_24", "worst": "worst_24"})
    out["add_32"] = b32["median"].to_numpy()
    out["stream_add"] = out["nprocs"].map(lambda p: stream_gbs.get(int(p), np.nan))
    out["ratio"] = out["best_24"] / out["stream_add"]
    return out.reset_index(drop=True)


def topology_table(df, nprocs=None):
    """Median distribution and total time in ms at one P (default the largest), C: a row per
    shape and distribution (two columns, so that it reads on a phone too)."""
    ph = phases(df)
    ph = ph[ph["impl"] == "c"]
    nprocs = nprocs or int(ph["nprocs"].max())
    ph = ph[(ph["nprocs"] == nprocs) & ph["metric"].isin(["distribute", "total"])]
    t = ph.pivot_table(index=["shape", "distribution"], columns="metric", values="median")
    t = (t[["distribute", "total"]] * 1e3).round(1)
    t.columns = [f"{m} [ms]" for m in t.columns]
    return t


def topology_words(df, nprocs=None, metric="distribute"):
    """Each topology's distribution time against no topology at one P, in the words its
    bootstrap interval allows."""
    from hpclab import stats

    t = records.table(df)
    t = t[(t["kind"] == "strong") & (t["impl"] == "c") & (t["metric"] == metric)]
    nprocs = nprocs or int(t["nprocs"].max())
    t = t[t["nprocs"] == nprocs]
    out = {}
    for shape, g in t.groupby("shape", sort=False):
        base = g[g["distribution"] == "none"]["value"]
        for d in DISTRIBUTIONS[1:]:
            other = g[g["distribution"] == d]["value"]
            try:  # left out: fewer than two runs, or runs with no scatter at all
                out[(shape, d)] = stats.compare(other, base, names=(f"the {d} grid",
                                                                    "no topology"))
            except ValueError:
                pass
    return out


def process_grids(nprocs=(2, 4, 12, 24, 48)):
    """The process grid MPI_Dims_create gives each distribution, and which of the report's
    shapes then gets contiguous blocks."""
    from hpclab.chapters.amdahl.kernels import process_grid

    rows = []
    for p in nprocs:
        rows.append({"P": p, **{d: "x".join(map(str, process_grid(d, p)))
                                for d in DISTRIBUTIONS[1:]}})
    return pd.DataFrame(rows).set_index("P")


def orfeo_table(topo):
    """Report 001's Table 2 in ms, with the spread of each row."""
    t = topo.pivot(index="matrix_shape", columns="topology", values="mean_runtime_s") * 1e3
    t = t[["1D Cartesian", "2D Cartesian", "3D Cartesian", "none"]]
    t["spread [ms]"] = t.max(axis=1) - t.min(axis=1)
    t.columns = [c if c.endswith("]") else f"{c} [ms]" for c in t.columns]
    return t.loc[["2400x100x100", "1200x200x100", "800x300x100"]].round(2)


def orfeo_s(ref):
    """The report's s, its range of P, and Amdahl's S at 12, 24 and 48 processes."""
    row = ref[ref["quantity"] == "amdahl_serial_fraction_s"].iloc[0]
    s = float(row["value"])
    return {"s": s, "low": int(row["nprocs_low"]), "high": int(row["nprocs_high"]),
            "ceiling": 1 / s, **{f"S{p}": float(amdahl_speedup(s, p)) for p in (12, 24, 48)},
            **{f"E{p}": float(amdahl_speedup(s, p)) / p * 100 for p in (12, 24, 48)}}


def _phase_words(df, shape, metric, impls, nprocs):
    from hpclab import stats

    a, b = (_reps(df, "strong", i, "none", shape, nprocs)[metric] for i in impls)
    names = {"c": "C", "cython": "Cython", "python": "mpi4py + numpy"}
    phase = {"create": "creation of the values", "add": "addition"}.get(metric, metric)
    return stats.said(a, b, tuple(f"the {names[i]} {phase}" for i in impls))


def _total_words(df, shape):
    """The whole mpi4py + numpy run against the whole C run on one rank, from the
    repetitions (stats.compare's words)."""
    from hpclab import stats

    a, b = (_reps(df, "strong", i, "none", shape, 1)["total"] for i in ("python", "c"))
    return stats.said(a, b, ("the whole mpi4py + numpy run", "the whole C run"))


def _growth_words(df, shape, pmax):
    from hpclab import stats

    one = _reps(df, "strong", "c", "none", shape, 1)
    many = _reps(df, "strong", "c", "none", shape, pmax)
    comm = lambda w: w["distribute"] + w["collect"]  # noqa: E731
    return stats.said(comm(many), comm(one),
                      (f"distributing and collecting on {pmax} ranks", "the same on one rank"))


# what report 001's Amdahl study shows that a machine needs enough cores and sockets for
CANNOT_SHOW = (("the report's 12-process socket", {"cores": 12}),
               ("the jump to the second socket", {"sockets": 2}),
               ("a fit of s with spare degrees of freedom", {"cores": 4}))


def numbers(sweep_run, roof, orfeo_topo, orfeo_ref):
    """Every number the chapter's text quotes, computed (name -> value)."""
    from hpclab import stats

    df = records.table(sweep_run)
    shape = first_shape(df)
    pmax = int(df[df["kind"] == "strong"]["nprocs"].max())
    s = serial_fraction(df, shape=shape)
    measured = speedups(df, shape=shape).set_index("nprocs")
    one = phase_bars(df, shape=shape).loc[1]
    syn_fit, syn_s = synthetic_fit(df)
    asked_fit, _ = synthetic_fit(df, "asked")
    syn_procs = int(df[df["kind"] == "synthetic"]["nprocs"].max())
    try:
        fit_s(speedups(df, shape=shape))
        fit_note = "fitted below"
    except models.FitError as exc:
        fit_note = str(exc)
    g = gustafson(df)
    o = orfeo_s(orfeo_ref)
    t2 = orfeo_table(orfeo_topo)
    words = topology_words(df)
    top = roof.iloc[-1]
    impl_total = {i: phases(df)[(phases(df)["impl"] == i) & (phases(df)["metric"] == "total")
                               & (phases(df)["nprocs"] == 1)
                               & (phases(df)["distribution"] == "none")
                               & (phases(df)["shape"] == shape)]["median"].iloc[0]
                  for i in IMPLS}
    ratio = float(top["ratio"])
    if ratio > 1.1:
        roof_words = ("That is more than STREAM add: the two were not measured side by side, "
                      "and on a shared machine the load at the time decides a ratio like this "
                      "more than either kernel does. `python -m hpclab.bench amdahl` runs both "
                      "in one job, in alternation, and prints their ratio.")
    elif ratio >= 0.9:
        roof_words = ("The parallel part runs as fast as the memory allows: there is nothing "
                      "left to gain in it, and everything to gain in the serial part.")
    else:
        roof_words = ("The parallel part runs below what the memory allows here; even so, "
                      "making it faster would leave the serial part untouched.")
    if g["scaled_speedup"].iloc[-1] < 1.1:
        g_words = "this program gains nothing from a larger problem either"
    elif g["scaled_speedup"].iloc[-1] < 0.9 * g["gustafson"].iloc[-1]:
        g_words = "this program gains less from a larger problem than Gustafson's law promises"
    else:
        g_words = "on this machine the grown problem scales as Gustafson's law says"
    return {
        "impl_add_words": _phase_words(df, shape, "add", ("python", "c"), 1),
        "impl_create_words": _phase_words(df, shape, "create", ("python", "c"), 1),
        "dist_growth_words": _growth_words(df, shape, pmax),
        "roof_words": roof_words, "g_words": g_words,
        "shape": shape, "pmax": pmax, "s": s["s"], "s_words": s["words"],
        "cannot_words": machine.cannot_show(sweep_run.meta.get("machine"), CANNOT_SHOW),
        "create_share": one["create"] / one.sum() * 100,
        "add_share": one["add"] / one.sum() * 100,
        "pred_pmax": float(amdahl_speedup(s["s"], pmax)),
        "meas_pmax_words": stats.estimate_words(
            float(measured.loc[pmax, "median"]), float(measured.loc[pmax, "worst"]),
            float(measured.loc[pmax, "best"]), "", "speed-up", name="the speed-up"),
        "ceiling": 1 / s["s"], "fit_note": fit_note,
        "syn_s": syn_s, "syn_fit": syn_fit["s"], "syn_procs": syn_procs,
        "syn_words": syn_fit.words("s", "serial fraction", digits=3),
        "syn_inside": "inside" if syn_fit.ci95["s"][0] <= syn_s <= syn_fit.ci95["s"][1]
        else "outside",
        "syn_asked": asked_fit["s"],
        "syn_asked_words": asked_fit.words("s", "serial fraction", digits=3),
        "syn_asked_inside": "inside the interval, so the method recovers it"
        if asked_fit.ci95["s"][0] <= syn_s <= asked_fit.ci95["s"][1] else
        "outside the interval: this fit misses it, as a 95% interval does one time in twenty",
        "syn_over_ms": float(synthetic_oversleep(df)["oversleep"].median()) * 1e3,
        "syn_shift": syn_fit["s"] - asked_fit["s"],
        "syn_points": syn_fit.npoints, "syn_dof": syn_fit.dof,
        "g_p": int(g["nprocs"].iloc[-1]), "g_scaled": float(g["scaled_speedup"].iloc[-1]),
        "g_law": float(g["gustafson"].iloc[-1]), "g_sp": float(g["s_P"].iloc[-1]),
        "dist_3d_words": words[(shape, "3d")].words("distribution time")
        if (shape, "3d") in words else "not measured",
        "dist_2d_words": words[(shape, "2d")].words("distribution time")
        if (shape, "2d") in words else "not measured",
        "roof_p": int(top["nprocs"]), "roof_add": float(top["best_24"]),
        "roof_stream": float(top["stream_add"]), "roof_ratio": float(top["ratio"]) * 100,
        "roof_add32": float(top["add_32"]),
        "py_create_ratio": impl_total["python"] / impl_total["c"],
        "total_words": _total_words(df, shape),
        "o_s": o["s"], "o_low": o["low"], "o_high": o["high"], "o_ceiling": o["ceiling"],
        "o_S12": o["S12"], "o_S24": o["S24"], "o_S48": o["S48"], "o_E24": o["E24"],
        "o_E48": o["E48"],
        "o_spread_max": float(t2["spread [ms]"].max()),
        "o_spread_share": float((t2["spread [ms]"] / t2.iloc[:, :4].mean(axis=1)).max() * 100),
    }


def speedup_points(df, shape=None):
    """Measured S(P) of the C program (no topology) as :func:`hpclab.plots.scaling` draws it,
    and Amdahl's prediction from s at P = 1 with the ends of its interval:
    (points, P values, {label: S})."""
    s, p, S = predicted(df, shape=shape)
    pts = speedups(df, shape=shape).assign(series="measured (C, no topology)")
    lines = {f"Amdahl, s = {s['s']:.2f} from P = 1": S}
    if np.isfinite(s["low"]):
        for end in MODEL.domain("s").cut(s["low"], s["high"]):
            lines[f"s = {end:.2f} (end of its 95% interval)"] = amdahl_speedup(end, p)
    return pts, p, lines


def synthetic_plot_points(df):
    """The synthetic program's speed-ups as a summary per P, and its fit."""
    pts = synthetic_points(df)
    g = pts.groupby("nprocs")["median"]
    summary = g.agg(median="median", best="max", worst="min").reset_index()
    fit, known = synthetic_fit(df)
    return summary.assign(series=f"synthetic, s = {known:.2f} set"), {
        f"synthetic, s = {known:.2f} set": fit}


def gustafson_table(df):
    """Weak scaling as the chapter shows it."""
    g = gustafson(df)
    return g.rename(columns={"nprocs": "P", "shape": "shape on P ranks",
                             "scaled_speedup": "scaled speed-up measured",
                             "s_P": "serial share at P",
                             "gustafson": "Gustafson P − s_P(P − 1)"}).round(3).set_index("P")


def roofline_table(roof):
    """The addition's bandwidth per P beside STREAM add."""
    t = roof[["nprocs", "best_24", "add_24", "add_32", "stream_add", "ratio"]].copy()
    t["ratio"] = t["ratio"] * 100
    return t.rename(columns={"nprocs": "P", "best_24": "add, best [GB/s]",
                             "add_24": "add, median [GB/s]",
                             "add_32": "median with write-allocate [GB/s]",
                             "stream_add": "STREAM add [GB/s]",
                             "ratio": "best / STREAM [%]"}).round(1).set_index("P")


def implementation_table(df, shape=None):
    """Median phase times in ms of every implementation at P = 1 (no topology)."""
    shape = shape or first_shape(df)
    ph = phases(df)
    ph = ph[(ph["nprocs"] == 1) & (ph["distribution"] == "none") & (ph["shape"] == shape)]
    t = ph.pivot(index="impl", columns="metric", values="median")[list(PHASE_LABELS)
                                                                    + ["total"]]
    t.index = [{"c": "C", "cython": "Cython", "python": "mpi4py + numpy"}[i] for i in t.index]
    return (t * 1e3).round(1).rename(columns=lambda c: f"{c} [ms]")


# ----------------------------------------------------------------------- simulated cluster

def simulated(profile=None, platform="orfeo"):
    """Strong scaling of the C program (no topology) on a simulated cluster
    (:mod:`hpclab.simulate`) at the profile's ``simulated`` shape and rank counts: a
    records.Run, or None without SimGrid."""
    from hpclab import simulate
    from hpclab.chapters.amdahl import simulation

    if not simulate.available():
        return None
    s = profiles.get(NAME, profile)["simulated"]
    return simulation.on_platform(platform, ranks=s["ranks"], shape=s["shape"],
                                  repetitions=profiles.get(NAME, profile)["repetitions"],
                                  profile=profile)


def simulated_table(df):
    """Per P: the median of every phase in ms, the simulated speed-up S = T(1) / T(P) and
    Amdahl's S(P) from the s measured at P = 1."""
    ph = phases(df, kind="simulated")
    w = ph.pivot_table(index="nprocs", columns="metric", values="median") * 1e3
    w = w[["create", "distribute", "add", "collect", "total"]]
    w.columns = [f"{c} [ms]" for c in w.columns]
    s = serial_fraction(df, kind="simulated", shape=str(df["shape"].iloc[0]))["s"]
    total = w["total [ms]"]
    w["S simulated"] = total.iloc[0] / total
    w["S Amdahl (s at P = 1)"] = amdahl_speedup(s, w.index.to_numpy())
    w.index.name = "P"
    return w.reset_index()


def simulated_words(df, table, orfeo, spec):
    """The simulated serial fraction and speed-ups in sentences computed from them: what
    changed from one rank to the most, split into messages and arithmetic by the phases'
    own times, and where the ranks sit on the platform ``spec`` (simulate.platform)."""
    from hpclab import simulate

    s = serial_fraction(df, kind="simulated", shape=str(df["shape"].iloc[0]))
    top, one = table.iloc[-1], table.iloc[0]
    grow = ""
    if int(top["P"]) > int(one["P"]):
        def both(*cols):
            return tuple(float(sum(r[f"{c} [ms]"] for c in cols)) for r in (one, top))
        grow = " " + simulate.change_words(
            int(one["P"]), int(top["P"]), both("distribute", "collect"), both("create", "add"),
            "distributing and collecting", "creating and adding")
        grow += (f" At P = {int(top['P'])}: {simulate.placement_words(spec, int(top['P']))}. "
                 "Amdahl's law has no term for work that appears only when P > 1.")
    o = orfeo_s(orfeo)
    return (f"Simulated s at P = 1: {s['words']}. At P = {int(top['P'])} Amdahl's "
            f"law with it predicts S = {top['S Amdahl (s at P = 1)']:.2f}; the simulation gives "
            f"S = {top['S simulated']:.2f}.{grow} Report 001 fitted s = {o['s']:.2f} on one "
            f"socket (1 to {o['high']} processes), which caps S at {o['ceiling']:.2f}.")
