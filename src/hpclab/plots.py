"""The standard figures, one function each, in one style.

Every function draws on an Axes (``ax=``) or a new figure of its own and returns the
Axes; a book page calls it and ends the line with ``;``. The style: the Okabe-Ito
colour-blind-safe palette, a marker and a line style per series (series stay apart in
grey), a unit on every axis, fitted lines with their 95% band, and sizes that stay
legible when the figure is shown 400 px wide. :func:`machine_note` writes the machine a
figure was measured on under it.

They take the tidy summaries of the chapters' analyses (``hpclab.chapters.<slug>.analysis``)
and the fits of :mod:`hpclab.models`, never raw files, so the book, the labs and a cluster
user's own script draw the same pictures.
"""
from __future__ import annotations

import textwrap
import zlib

import matplotlib.pyplot as plt
import numpy as np

from hpclab import models

# Okabe & Ito's palette (without its yellow, too pale on white), and a marker and dash per
# position, so that series stay apart without colour
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
DASHES = ["-", "--", "-.", ":", (0, (5, 1, 1, 1)), (0, (3, 1)), (0, (1, 1))]
RC = {"font.size": 12, "axes.titlesize": 12, "axes.labelsize": 12, "legend.fontsize": 10,
      "xtick.labelsize": 11, "ytick.labelsize": 11, "lines.markersize": 5,
      "axes.grid": True, "grid.alpha": 0.3, "figure.dpi": 100}
WIDTH, HEIGHT = 5.2, 3.6  # inches, at RC's 100 dpi
# the least font size any figure uses: a figure of WIDTH inches shown in a phone's 352 px
# column (a 400 px screen) prints MIN_PT as MIN_PT · 352 / (72 · WIDTH) ≥ 9 CSS px, with a
# little room for labels outside the axes (tests/test_site.py checks every figure of the
# built site as it is shown)
MIN_PT = 10

IMPL_NAMES = {"c": "C", "cython": "Cython", "python": "mpi4py buffers",
              "pickle": "mpi4py pickle"}
ORDER = ["c", "cython", "python", "pickle"]


def _styled(func):
    """Draw with the package's sizes and grid. (Set on each figure rather than through
    ``plt.rc_context``, whose exit stops Jupyter's inline backend from showing later
    figures; the caller's own rcParams are left alone.)"""
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        saved = {k: plt.rcParams[k] for k in RC}
        dict.update(plt.rcParams, RC)
        try:
            return func(*args, **kwargs)
        finally:
            dict.update(plt.rcParams, saved)

    return wrapper


def style(key, index=None):
    """(label, colour, marker, dash) of a series: implementations keep theirs on every
    figure; any other series takes the position ``index`` (or one derived from its name)."""
    if index is None:
        index = ORDER.index(key) if key in ORDER else \
            len(ORDER) + zlib.crc32(str(key).encode()) % (len(PALETTE) - len(ORDER))
    i = index % len(PALETTE)
    return IMPL_NAMES.get(key, str(key)), PALETTE[i], MARKERS[i], DASHES[i]


@_styled
def new(nrows=1, height=HEIGHT, width=WIDTH, sharex=False):
    """A figure of nrows panels stacked (stacked, not side by side: phones are narrow)."""
    fig, axes = plt.subplots(nrows, 1, figsize=(width, height * nrows), layout="constrained",
                             sharex=sharex, squeeze=False)
    return fig, list(axes[:, 0])


def _ax(ax, height=HEIGHT):
    if ax is None:
        _, (ax,) = new(1, height)
    return ax


def _finish(ax, title=None, legend=True):
    if title:
        ax.set_title(title)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend()
    return ax


def machine_note(ax, meta, width=70):
    """Write which machine (and when) a figure was measured on under it."""
    text = "\n".join(textwrap.wrap(caption(meta), width))
    ax.figure.text(0.0, -0.01, text, ha="left", va="top", fontsize=MIN_PT, color="0.3",
                   transform=ax.figure.transFigure)
    return ax


def size_axis(ax, which="x"):
    """Label a log2 axis of message sizes with B / KiB / MiB."""
    ticks = [1, 16, 256, 4096, 65536, 1 << 20, 1 << 24]
    names = ["1 B", "16 B", "256 B", "4 KiB", "64 KiB", "1 MiB", "16 MiB"]
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    getattr(ax, f"set_{which}ticks")(ticks, names)


def fit_band(fit, x):
    """(prediction, low, high) of a fit at x: the 95% band of the fitted line (delta
    method with the fit's covariance and Student t quantile)."""
    from hpclab.stats import t_quantile

    x = np.asarray(x, dtype=float)
    names = list(fit.params)
    p = np.array([fit.params[k] for k in names])
    pred = fit.model(x, *p)
    grads = []
    for i, v in enumerate(p):
        h = abs(v) * 1e-6 or 1e-12
        q = p.copy()
        q[i] = v + h
        grads.append((fit.model(x, *q) - pred) / h)
    J = np.array(grads)
    var = np.einsum("in,ij,jn->n", J, fit.covariance, J)
    t = t_quantile(0.975, max(fit.dof, 1))
    half = t * np.sqrt(np.clip(var, 0, np.inf))
    return pred, pred - half, pred + half


def fit_line(ax, fit, x, scale=1.0, label=None, color="k", dash="-", band=True):
    """A fitted model over x with its 95% band (scaled by ``scale`` for the axis unit)."""
    pred, lo, hi = fit_band(fit, x)
    ax.plot(x, pred * scale, color=color, ls=dash, lw=1.2, label=label)
    if band and fit.dof > 0:
        if ax.get_yscale() == "log":  # a band below zero has no place on a log axis
            lo = np.maximum(lo, pred * 1e-3)
        ax.fill_between(x, lo * scale, hi * scale, color=color, alpha=0.15, lw=0)
    return ax


def _errorbar(ax, x, median, best, worst, key, index=None, scale=1.0, label=None, line=False):
    """The median with a bar from the lowest to the highest of best and worst: for a time
    the best run is the lowest, for a rate (MLUP/s, GB/s) the highest."""
    name, color, marker, dash = style(key, index)
    median, best, worst = (np.asarray(v, dtype=float) for v in (median, best, worst))
    low, high = np.minimum(best, worst), np.maximum(best, worst)
    ax.errorbar(x, median * scale, yerr=[(median - low) * scale, (high - median) * scale],
                fmt=marker, ls=dash if line else "none", color=color, label=label or name,
                capsize=2, ms=5, mfc=color if index is None or index % 2 == 0 else "white")


# ----------------------------------------------------------------------------- messages

@_styled
def latency(summary, fit=None, impls=None, ax=None, unit=1e-6, title=None):
    """One-way time against message size (log-log), per implementation, with a fitted model
    and its band. Zero-byte messages are drawn at 1/2 byte to stay on the log axis."""
    ax = _ax(ax)
    ax.set_yscale("log")
    for impl in impls or list(dict.fromkeys(summary["impl"])):
        s = summary[summary["impl"] == impl]
        x = np.where(s["nbytes"] > 0, s["nbytes"], 0.5)
        _errorbar(ax, x, s["median"], s["best"], s["worst"], impl, scale=1 / unit)
    if fit is not None:
        xs = np.geomspace(0.5, summary["nbytes"].max(), 400)
        if isinstance(fit, models.TwoSegmentFit):
            mid = np.sqrt(fit.breakpoint_low * fit.breakpoint_high)
            for seg, part in ((fit.left, xs <= mid), (fit.right, xs > mid)):
                fit_line(ax, seg, xs[part], 1 / unit)
            ax.axvline(mid, color="0.5", ls=":", lw=1, label="breakpoint")
            ax.plot([], [], "k-", label="two-segment Hockney fit")
        else:
            fit_line(ax, fit, xs, 1 / unit, label=f"{fit.model.formula} fit")
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel("one-way time [µs]" if unit == 1e-6 else f"one-way time [{unit:g} s]")
    return _finish(ax, title)


@_styled
def residuals(fit, ax=None, title=None, sizes=True, xlabel="message size"):
    """Relative residuals (measured / model − 1, in %) of a fit against x."""
    ax = _ax(ax, HEIGHT * 0.7)
    several = bool(getattr(getattr(fit, "model", None), "inputs", ()))
    x = np.asarray(np.arange(np.shape(fit.x)[-1]) if several else fit.x, dtype=float)
    if sizes:
        x = np.where(x > 0, x, 0.5)
    rel = fit.y / fit.predict(fit.x) - 1.0
    ax.axhline(0, color="k", lw=0.8)
    _, color, marker, _ = style("c")
    ax.plot(x, 100 * rel, marker, ls="none", color=color)
    if sizes:
        size_axis(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("measured / model − 1 [%]")
    return _finish(ax, title, legend=False)


@_styled
def latency_with_residuals(summary, fit, impls=("c",), title=None, meta=None):
    """:func:`latency` above the :func:`residuals` of the same fit (stacked)."""
    fig, (top, bottom) = new(2, sharex=False)
    latency(summary, fit=fit, impls=list(impls), ax=top, title=title)
    residuals(fit, ax=bottom, title="residuals of the fit")
    if meta:
        machine_note(bottom, meta)
    return top


@_styled
def bandwidth(summary, fit=None, impls=None, ax=None, title=None):
    """Achieved bandwidth in GB/s (10⁹ B/s) against size, with B_eff(n) = n/(λ + n/B)."""
    ax = _ax(ax)
    for impl in impls or list(dict.fromkeys(summary["impl"])):
        s = summary[(summary["impl"] == impl) & (summary["nbytes"] > 0)]
        name, color, marker, dash = style(impl)
        ax.plot(s["nbytes"], s["nbytes"] / s["median"] / 1e9, marker=marker, ls=dash,
                color=color, label=name)
    if fit is not None:
        xs = np.geomspace(1, summary["nbytes"].max(), 400)
        ax.plot(xs, xs / fit.predict(xs) / 1e9, "k--", lw=1, label="B_eff from the fit")
    size_axis(ax)
    ax.set_xlabel("message size")
    ax.set_ylabel("bandwidth [GB/s]")
    return _finish(ax, title)


@_styled
def relative_to(summary, baseline="c", ax=None, title=None):
    """Each implementation's median time divided by the baseline's, against size."""
    ax = _ax(ax)
    base = summary[summary["impl"] == baseline].set_index("nbytes")["median"]
    for impl in dict.fromkeys(summary["impl"]):
        s = summary[summary["impl"] == impl].set_index("nbytes")["median"]
        ratio = (s / base).dropna()
        name, color, marker, dash = style(impl)
        ax.plot(np.where(ratio.index > 0, ratio.index, 0.5), ratio.values, marker=marker,
                ls=dash, color=color, label=name)
    size_axis(ax)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xlabel("message size")
    ax.set_ylabel(f"time / {style(baseline)[0]} time [ratio]")
    return _finish(ax, title)


# ----------------------------------------------------------------------------- scaling

@_styled
def scaling(points, x, series, fits=None, ax=None, xlabel="", ylabel="", title=None,
            scale=1.0, ideal=None, integer_x=True, logx=False, logy=False, line=False,
            sizes=False):
    """A measured quantity against a scaling variable, one series per group, each with its
    fitted model and band.

    Parameters
    ----------
    points : DataFrame
        Columns ``x``, ``series``, ``median``, ``best`` and ``worst`` (a summary).
    fits : dict, optional
        series value -> :class:`hpclab.models.Fit` of that series (drawn with its band).
    scale : float
        Factor from the data's unit to the axis unit (1e6: seconds to µs).
    ideal : callable, optional
        ``ideal(x)`` drawn as a grey reference (perfect scaling, say).
    sizes : bool
        x is a message size in bytes (log2 axis with B/KiB/MiB, log y).
    line : bool or collection
        Join the points of every series (True) or of the series named.
    """
    ax = _ax(ax)
    if sizes or logy:
        ax.set_yscale("log")
    keys = list(dict.fromkeys(points[series]))  # in the order of the table
    for i, key in enumerate(keys):
        s = points[points[series] == key].sort_values(x)
        joined = line if isinstance(line, bool) else key in line
        _errorbar(ax, s[x], s["median"], s["best"], s["worst"], key, index=i, scale=scale,
                  line=joined)
        fit = (fits or {}).get(key)
        if fit is not None and fit.dof > 0:
            _, color, _, dash = style(key, i)
            xs = (np.geomspace(max(float(np.min(fit.x)), 1), float(s[x].max()), 200) if sizes
                  else np.linspace(max(float(np.min(fit.x)) * 0.5, 0), float(s[x].max()), 200))
            fit_line(ax, fit, xs, scale, color=color, dash=dash)
    if ideal is not None:
        xs = np.linspace(float(points[x].min()), float(points[x].max()), 100)
        ax.plot(xs, ideal(xs) * scale, color="0.6", ls=":", label="ideal")
    if not (sizes or logy):
        _cut_long_bars(ax, points, x, scale, ideal)
    if sizes:
        size_axis(ax)
    elif logx:
        ax.set_xscale("log")
    if integer_x and not (logx or sizes):
        ax.set_xticks(sorted(int(v) for v in points[x].unique()))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return _finish(ax, title)


BAR_CUT = 3.0  # an axis shows bars up to this many times the largest median (or ideal)


def _cut_long_bars(ax, points, x, scale, ideal=None):
    """A bar from a handful of runs can reach a thousand times its median (a t interval with
    one degree of freedom) and squash every point to the axis. Such bars are cut at
    BAR_CUT times the largest median, marked with a triangle at the edge, and the axis says
    so."""
    med = np.abs(points["median"].to_numpy(float)) * scale
    top = np.nanmax(med) if med.size else np.nan
    if ideal is not None:
        top = max(top, float(np.max(ideal(points[x].to_numpy(float)))) * scale)
    hi = np.fmax(points["best"].to_numpy(float), points["worst"].to_numpy(float)) * scale
    if not np.isfinite(top) or top <= 0 or not np.any(hi > BAR_CUT * top):
        return
    cap = BAR_CUT * top
    lows = np.fmin(points["best"].to_numpy(float), points["worst"].to_numpy(float)) * scale
    ax.set_ylim(min(0.0, float(np.nanmin(lows))) if np.isfinite(np.nanmin(lows)) else 0.0,
                cap)
    cut = hi > cap
    ax.plot(points[x].to_numpy(float)[cut], np.full(int(cut.sum()), cap), ls="none",
            marker="^", ms=7, color="0.3", clip_on=False)
    ax.annotate("▲ interval cut at the axis (too few runs to bound it)", (0.01, 0.99),
                xycoords="axes fraction", ha="left", va="top", fontsize=MIN_PT, color="0.3")


@_styled
def model_lines(x, lines, ax=None, xlabel="", ylabel="", title=None, marks=()):
    """Curves given as {label: y(x)} (a published model, say), with vertical marks
    ``[(x, text), ...]`` (a node boundary)."""
    ax = _ax(ax)
    for i, (label, y) in enumerate(lines.items()):
        _, color, marker, dash = style(label, i)
        ax.plot(x, y, marker=marker, ms=3, ls=dash, color=color, label=label)
    for pos, text in marks:
        ax.axvline(pos, color="0.5", ls=":")
        ax.annotate(text, (pos, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", fontsize=MIN_PT, color="0.3")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return _finish(ax, title)


@_styled
def thread_scaling(summary, impl, ops, binds=("close", "spread"), ax=None, title=None):
    """Best trial's bandwidth (GB/s) against OpenMP threads: a colour per operation, a line
    style per binding (solid and filled: the first; dashed and open: the second); the bar
    reaches down to the worst trial."""
    ax = _ax(ax)
    s = summary[(summary["impl"] == impl) & (summary["membind"] == -1)]
    for i, op in enumerate(ops):
        _, color, marker, _ = style(op, i)
        for j, bind in enumerate(binds):
            t = s[(s["op"] == op) & (s["bind"] == bind)].sort_values("nthreads")
            ax.errorbar(t["nthreads"], t["best"], yerr=[t["best"] - t["worst"], 0 * t["best"]],
                        fmt=marker, ls="-" if j == 0 else "--", color=color, capsize=2,
                        mfc=color if j == 0 else "white", label=f"{op}, {bind}")
    ax.set_xticks(sorted(int(v) for v in s["nthreads"].unique()))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("OpenMP threads")
    ax.set_ylabel("bandwidth [GB/s]")
    return _finish(ax, title)


@_styled
def roofline(roofs, kernels=None, ax=None, title=None, intensity=(1e-2, 1e2)):
    """Attainable GFLOP/s against arithmetic intensity for each :class:`Roofline` in
    ``roofs`` ({label: roofline}): the memory slope and, where known, the compute ceiling
    and the ridge; ``kernels`` ({name: flops per byte}) marked."""
    ax = _ax(ax)
    x = np.logspace(np.log10(intensity[0]), np.log10(intensity[1]), 300)
    for i, (label, roof) in enumerate(roofs.items()):
        _, color, _, dash = style(label, i)
        ax.loglog(x, roof.bound(x) / 1e9, color=color, ls=dash, label=label)
        if roof.peak is not None:
            ax.plot([roof.ridge], [roof.peak / 1e9], "o", color=color, ms=4)
    for name, i_k in (kernels or {}).items():
        if i_k > 0:
            ax.axvline(i_k, color="0.6", ls=":")
            ax.annotate(name, (i_k, 0.02), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", fontsize=MIN_PT, color="0.3")
    ax.set_xlabel("arithmetic intensity [flop/byte]")
    ax.set_ylabel("attainable [GFLOP/s]")
    return _finish(ax, title)


@_styled
def stacked(table, ax=None, xlabel="", ylabel="", title=None, scale=1.0, labels=None):
    """Stacked bars: one bar per row of ``table`` (index on x), one segment per column
    (the phases of a program, say); ``labels`` renames the columns for the legend."""
    ax = _ax(ax)
    bottom = np.zeros(len(table))
    x = np.arange(len(table))
    for i, col in enumerate(table.columns):
        label = (labels or {}).get(col, col)
        _, color, _, _ = style(label, i)
        values = table[col].to_numpy(float) * scale
        ax.bar(x, values, bottom=bottom, color=color, label=label, width=0.6)
        bottom += values
    if len(bottom) and np.nanmax(bottom) > 0:  # room above the bars for the legend
        ax.set_ylim(0, np.nanmax(bottom) * 1.45)
    ax.set_xticks(x)
    ax.set_xticklabels([str(v) for v in table.index])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper center", ncol=3)
    return ax


@_styled
def surfaces(x, y, panels, xlabel="x₁", ylabel="x₂"):
    """Mesh plots of functions on a 2D mesh, one panel each, stacked: ``panels`` maps a
    title to (z, z-axis label). Returns the Axes."""
    fig = plt.figure(figsize=(WIDTH, HEIGHT * len(panels)), layout="constrained")
    axes = []
    for i, (title, (z, zlabel)) in enumerate(panels.items()):
        ax = fig.add_subplot(len(panels), 1, i + 1, projection="3d")
        ax.plot_surface(x, y, z, cmap="viridis", linewidth=0.2, edgecolor="0.3",
                        antialiased=True)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_zlabel(zlabel, labelpad=8)
        ax.set_title(title)
        ax.ticklabel_format(axis="z", style="sci", scilimits=(-2, 3))
        axes.append(ax)
    return axes


# ----------------------------------------------------------------------------- text

def caption(meta):
    """'Measured on <machine>, <MPI>, <time>' for a figure, from a run's metadata."""
    from hpclab import machine

    m = meta.get("machine", {})
    return (f"Measured on {machine.summary(m)}; profile {meta.get('profile')}, "
            f"{meta.get('utc_time')}, THP {m.get('transparent_hugepages')}.")


def put(name, value):
    """Glue a computed value for a book page's text (myst-nb); numpy scalars become plain
    Python numbers, which is what glue's format specs (``{glue:text}`x:.2f```) need."""
    from myst_nb import glue

    if not isinstance(value, str):
        value = int(value) if isinstance(value, (int, np.integer)) else float(value)
    glue(name, value, display=False)


def glue_all(numbers):
    """Glue every entry of {name: value} (see :func:`put`)."""
    for name, value in numbers.items():
        put(name, value)


@_styled
def simulated_vs_published(steps, published, marks=(), ax=None, xlabel="", ylabel="",
                           title=None):
    """Simulated values (``steps``: a column per series, indexed by x) as solid lines with
    markers, and published ones (``published``: {series: (x, y)}) dashed in the same
    colour; vertical marks ``[(x, text), ...]``. The legend sits under the axes."""
    ax = _ax(ax)
    for i, col in enumerate(steps.columns):
        _, color, marker, _ = style(col, i)
        ax.plot(steps.index, steps[col], marker=marker, ms=4, ls="-", color=color,
                label=f"{col}, simulated")
        if col in published:
            x, y = published[col]
            ax.plot(x, y, ls="--", color=color, label=f"{col}, published")
    for pos, text in marks:
        ax.axvline(pos, color="0.5", ls=":")
        ax.annotate(text, (pos, 0), xycoords=("data", "axes fraction"), xytext=(3, 4),
                    textcoords="offset points", fontsize=MIN_PT, color="0.3", rotation=90)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, fontsize=MIN_PT)
    return ax
