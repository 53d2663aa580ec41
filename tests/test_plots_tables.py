"""The package's figures and tables: one style, units on every axis, bands on fits,
human column names (drawn with the Agg backend; no browser needed)."""
import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from hpclab import models, plots, tables  # noqa: E402
from hpclab.chapters.ring import model as ring_model  # noqa: E402

SIZES = np.array([0] + [2**k for k in range(16)], dtype=float)


def _summary(impls=("c", "python")):
    rows = []
    for i, impl in enumerate(impls):
        t = models.HOCKNEY(SIZES, 1e-6 * (1 + i), 5e9)
        rows.append(pd.DataFrame({"impl": impl, "nbytes": SIZES, "median": t, "best": t * 0.95,
                                  "worst": t * 1.1, "bandwidth_MBps": SIZES / t / 1e6}))
    return pd.concat(rows, ignore_index=True)


def test_every_series_has_its_own_colour_marker_and_dash():
    seen = {plots.style(k, i)[1:] for i, k in enumerate(["a", "b", "c", "d", "e", "f", "g"])}
    assert len(seen) == 7
    assert plots.style("c")[0] == "C" and plots.style("python")[0] == "mpi4py buffers"


def test_message_figures_have_units_and_a_band():
    s = _summary()
    two = models.fit_two_segment(s.loc[s.impl == "c", "nbytes"], s.loc[s.impl == "c", "median"]
                                 * (1 + 0.01 * np.sin(np.arange(len(SIZES)))))
    ax = plots.latency_with_residuals(s, two, meta={"machine": {}, "profile": "quick"})
    assert ax.get_ylabel() == "one-way time [µs]" and ax.collections, "no band drawn"
    assert plots.bandwidth(s).get_ylabel() == "bandwidth [GB/s]"
    assert "[ratio]" in plots.relative_to(s).get_ylabel()
    assert ax.figure.get_size_inches()[0] <= 6, "wider than a phone shows legibly"


def test_scaling_draws_points_fits_and_bands():
    p = np.arange(1, 5, dtype=float)
    pts = pd.DataFrame({"nprocs": np.tile(p, 2), "variant": ["a"] * 4 + ["b"] * 4,
                        "median": np.r_[2e-6 * p, 3e-6 * p]})
    pts["best"], pts["worst"] = pts["median"] * 0.9, pts["median"] * 1.1
    fit = models.fit(ring_model.MODEL, p, 2e-6 * p * (1 + 0.01 * np.cos(p)))
    ax = plots.scaling(pts, "nprocs", "variant", {"a": fit}, scale=1e6, xlabel="P",
                       ylabel="time [µs]")
    assert len(ax.collections) >= 1 and [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_rates_bar_runs_from_its_worst_to_its_best_run():
    """For a rate the best run is the highest value: the bar must still span worst..best,
    never reach below the slowest run (nor below zero)."""
    pts = pd.DataFrame({"nprocs": [1.0, 2.0], "variant": ["a", "a"],
                        "median": [100.0, 50.0], "best": [400.0, 60.0],
                        "worst": [90.0, 45.0]})
    ax = plots.scaling(pts, "nprocs", "variant")
    segments = ax.containers[0].lines[2][0].get_segments()
    spans = sorted((float(s[:, 1].min()), float(s[:, 1].max())) for s in segments)
    assert spans == [(45.0, 60.0), (90.0, 400.0)]


def test_roofline_has_both_ceilings():
    roof = models.Roofline(bandwidth=20e9, peak=400e9)
    ax = plots.roofline({"node": roof}, kernels={"triad": 2 / 24})
    y = ax.get_lines()[0].get_ydata()
    assert np.isclose(y.max(), 400) and ax.get_xlabel().endswith("[flop/byte]")


def test_fit_tables_carry_units_intervals_and_degrees_of_freedom():
    y = models.HOCKNEY(SIZES, 1e-6, 5e9) * (1 + 0.02 * np.sin(np.arange(len(SIZES))))
    one = models.fit(models.HOCKNEY, SIZES, y, sigma="relative")
    t = tables.fits(one, names=["all sizes"])
    assert list(t.index.get_level_values("parameter")) == ["λ [µs]", "B [GB/s]"]
    assert {"estimate", "std. error", "95% low", "95% high", "points", "dof"} <= set(t.columns)
    assert t.loc[("all sizes", "λ [µs]"), "estimate"] == pytest.approx(1.0, rel=0.1)


def test_a_latency_interval_below_zero_is_flagged_not_shown_as_a_range():
    y = models.HOCKNEY(SIZES, 1e-6, 5e9) * (1 + 0.02 * np.sin(np.arange(len(SIZES))))
    clean = tables.fits(models.fit(models.HOCKNEY, SIZES, y, sigma="relative"))
    assert "note" not in clean.columns
    # large messages only: the intercept is a small difference of large times
    big = SIZES >= 2**11
    noisy = y[big] * (1 + 0.2 * np.array([1, -1, 1, -1, 1]))
    t = tables.fits(models.fit(models.HOCKNEY, SIZES[big], noisy, sigma="relative"))
    lam = t.xs("λ [µs]", level="parameter").iloc[0]
    # cut at zero, the least a latency can be, and flagged: no negative bound is shown
    assert lam["95% low"] == 0 and "not determined" in lam["note"], t
    assert lam["estimate"] >= 0 and len(lam["note"]) <= 50


def test_residuals_list_every_point_of_every_segment():
    y = models.HOCKNEY(SIZES, 1e-6, 5e9)
    y[3] *= 1.1  # one point 10% above the line
    one = models.fit(models.HOCKNEY, SIZES, y, sigma="relative")
    t = tables.residuals(one, names=["all"])
    assert len(t) == len(SIZES) and t.index.names == ["fit", "message size n"]
    worst = t["residual [% of the model]"].abs().idxmax()
    assert worst == ("all", int(SIZES[3])), t


def test_whole_numbers_show_as_integers():
    checks = pd.DataFrame({"nprocs": [1, 1, 2], "oversubscribed": [False] * 3,
                           "correct": [1.0, 1.0, 1.0]})
    t = tables.correctness(checks)
    assert t["runs"].dtype.kind == "i" and t["right"].dtype.kind == "i"
    assert t.index.name == "ranks"


def test_a_bar_that_reaches_far_beyond_its_median_is_cut_and_marked():
    pts = pd.DataFrame({"nprocs": [1.0, 2.0], "series": ["s", "s"], "median": [1.0, 2.4],
                        "best": [1.0, 8.7e10], "worst": [1.0, 1e-9]})
    ax = plots.scaling(pts, "nprocs", "series", ideal=lambda p: p)
    low, high = ax.get_ylim()
    assert high == pytest.approx(plots.BAR_CUT * 2.4) and low <= 0
    assert any("cut at the axis" in t.get_text() for t in ax.texts)
    calm = pts.assign(best=[1.1, 2.6], worst=[0.9, 2.2])
    ax = plots.scaling(calm, "nprocs", "series", ideal=lambda p: p)
    assert not ax.texts and ax.get_ylim()[1] < 4


def test_no_figure_text_is_smaller_than_what_a_phone_can_read():
    """Every font size the figures use is at least plots.MIN_PT, and MIN_PT on a figure of
    plots.WIDTH inches reads as 9 CSS px or more in a phone's 352 px column (the site test
    checks the built figures as they are shown)."""
    import re
    from pathlib import Path

    assert plots.MIN_PT * 352 / (72 * plots.WIDTH) >= 9
    sizes = [v for k, v in plots.RC.items() if k.endswith(("size", "fontsize"))
             and k != "lines.markersize"]
    assert min(sizes) >= plots.MIN_PT, sizes
    source = Path(plots.__file__).read_text()
    literal = [int(n) for n in re.findall(r"fontsize=(\d+)", source)]
    assert all(n >= plots.MIN_PT for n in literal), literal
    fig, (ax,) = plots.new()
    ax.plot([1, 2], [1, 2], label="a")
    ax.legend()
    plots.machine_note(ax, {"machine": {"cpu_model": "x" * 40, "usable_cores": 2},
                            "utc_time": "2026-01-01T00:00:00+00:00"})
    fig.canvas.draw()
    texts = [t for t in fig.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text()]
    assert min(t.get_fontsize() for t in texts) >= plots.MIN_PT
    width = fig.get_tightbbox(fig.canvas.get_renderer()).width  # inches, as saved 'tight'
    assert plots.MIN_PT * 352 / (72 * width) >= 9, \
        f"the machine line widens the figure to {width:.1f} in"


@pytest.mark.parametrize("value, low, high, says, noted", [
    (1.0, 0.5, 2.0, "95% interval", ""),
    (1.0, 0.0, 2.0, "not determined", "interval cut to above 0"),   # reaches an open end
    (1.0, -1.0, 2.0, "not determined", "interval cut to above 0"),
    (-1.0, -2.0, 0.5, "which no bandwidth can be", "outside its domain"),
    (1.0, np.nan, np.nan, "no interval", ""),
])
def test_the_words_and_the_table_note_make_the_same_call(value, low, high, says, noted):
    """One decision (Domain.classify) behind the page's words and a fit table's note."""
    from hpclab import stats, tables

    words = stats.estimate_words(value, low, high, "GB/s", "bandwidth", domain=stats.POSITIVE)
    note, (lo, _) = tables.domain_note(stats.POSITIVE, value, low, high)
    assert says in words, words
    assert note.startswith(noted) if noted else note == "", note
    assert not (noted.startswith("interval cut") and lo < 0)
