"""The standard figures, one function each; every function returns its Axes.

They take the tidy summaries of :mod:`hpclab.experiments` and the fits of
:mod:`hpclab.models`, never raw files, so the book, the labs and a cluster
user's own script draw the same pictures.
"""
from __future__ import annotations

import zlib

import matplotlib.pyplot as plt
import numpy as np

from hpclab import models

IMPL_STYLE = {"c": ("C", "C0", "o"), "cython": ("Cython", "C1", "s"),
              "python": ("mpi4py buffers", "C2", "^"), "pickle": ("mpi4py pickle", "C3", "v")}


def _ax(ax, figsize=(6.4, 4.2)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


_EXTRA = [("C4", "D"), ("C5", "P"), ("C6", "X"), ("C7", "*")]


def _label(impl):
    """Name, colour and marker of a series: the implementations have fixed ones, any other
    series (a published dataset, say) gets the next free colour."""
    if impl in IMPL_STYLE:
        return IMPL_STYLE[impl]
    color, marker = _EXTRA[zlib.crc32(str(impl).encode()) % len(_EXTRA)]
    return impl, color, marker


def size_axis(ax, which="x"):
    """Label a log2 axis of message sizes with B / KiB / MiB."""
    ticks = [1, 16, 256, 4096, 65536, 1 << 20, 1 << 24]
    names = ["1 B", "16 B", "256 B", "4 KiB", "64 KiB", "1 MiB", "16 MiB"]
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    getattr(ax, f"set_{which}ticks")(ticks, names)


def latency(summary, fit=None, impls=None, ax=None, unit=1e-6, title=None):
    """One-way time against message size (log-log), per implementation, with a fitted model.

    Zero-byte messages are drawn at 1/2 byte so that they stay on the log axis.
    """
    ax = _ax(ax)
    for impl in impls or list(dict.fromkeys(summary["impl"])):
        s = summary[summary["impl"] == impl]
        name, color, marker = _label(impl)
        x = np.where(s["nbytes"] > 0, s["nbytes"], 0.5)
        ax.errorbar(x, s["median"] / unit,
                    yerr=[(s["median"] - s["best"]) / unit, (s["worst"] - s["median"]) / unit],
                    fmt=marker, ms=4, color=color, label=name, capsize=2)
    if fit is not None:
        xs = np.geomspace(0.5, summary["nbytes"].max(), 400)
        ax.plot(xs, fit.predict(xs) / unit, "k-", lw=1, label=_fit_label(fit))
        if isinstance(fit, models.TwoSegmentFit):
            ax.axvline(np.sqrt(fit.breakpoint_low * fit.breakpoint_high), color="0.6", ls=":",
                       lw=1, label="breakpoint")
    size_axis(ax)
    ax.set_yscale("log")
    ax.set_xlabel("message size")
    ax.set_ylabel("one-way time [µs]" if unit == 1e-6 else f"one-way time [{unit:g} s]")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def _fit_label(fit):
    if isinstance(fit, models.TwoSegmentFit):
        return "two-segment Hockney fit"
    return f"{fit.model.formula} fit"


def residuals(fit, ax=None, title=None):
    """Relative residuals (measured / model - 1) of a fit against x."""
    ax = _ax(ax, (6.4, 2.8))
    x = np.where(fit.x > 0, fit.x, 0.5)
    rel = fit.y / fit.predict(fit.x) - 1.0
    ax.axhline(0, color="k", lw=0.8)
    ax.plot(x, 100 * rel, "o", ms=4, color="C0")
    size_axis(ax)
    ax.set_xlabel("message size")
    ax.set_ylabel("measured / model − 1 [%]")
    ax.grid(True, alpha=0.3)
    if title:
        ax.set_title(title)
    return ax


def bandwidth(summary, fit=None, impls=None, ax=None, title=None):
    """Achieved bandwidth (MB/s = 10^6 B/s) against size, with B_eff(n) = n/(λ + n/B)."""
    ax = _ax(ax)
    for impl in impls or list(dict.fromkeys(summary["impl"])):
        s = summary[(summary["impl"] == impl) & (summary["nbytes"] > 0)]
        name, color, marker = _label(impl)
        ax.plot(s["nbytes"], s["bandwidth_MBps"], marker=marker, ms=4, color=color, label=name)
    if fit is not None:
        xs = np.geomspace(1, summary["nbytes"].max(), 400)
        ax.plot(xs, xs / fit.predict(xs) / 1e6, "k--", lw=1, label="B_eff from the fit")
    size_axis(ax)
    ax.set_xlabel("message size")
    ax.set_ylabel("bandwidth [MB/s]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


def relative_to(summary, baseline="c", ax=None, title=None):
    """Each implementation's median time divided by the baseline's, against size."""
    ax = _ax(ax, (6.4, 3.4))
    base = summary[summary["impl"] == baseline].set_index("nbytes")["median"]
    for impl in dict.fromkeys(summary["impl"]):
        s = summary[summary["impl"] == impl].set_index("nbytes")["median"]
        ratio = (s / base).dropna()
        name, color, marker = _label(impl)
        ax.plot(np.where(ratio.index > 0, ratio.index, 0.5), ratio.values, marker=marker, ms=4,
                color=color, label=name)
    size_axis(ax)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_xlabel("message size")
    ax.set_ylabel(f"time / {_label(baseline)[0]} time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return ax


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
