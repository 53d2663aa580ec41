import numpy as np
import pandas as pd
import pytest

from hpclab import chapters, models
from hpclab.chapters.amdahl import model as amdahl_model
from hpclab.chapters.jacobi import model as jacobi_model
from hpclab.chapters.poisson import model as poisson_model
from hpclab.chapters.ring import model as ring_model

# the shared laws and the chapters' own models
ALL = {**models.MODELS, **chapters.models()}

SIZES = np.array([0] + [2**k for k in range(23)], dtype=float)


def noisy(y, rel, seed):
    return y * (1 + rel * np.random.default_rng(seed).standard_normal(np.shape(y)))


CASES = [
    (models.HOCKNEY, SIZES, {"lambda": 0.6e-6, "B": 9e9}),
    (models.EFFECTIVE_BANDWIDTH, SIZES[1:], {"lambda": 1.5e-6, "B": 1.2e10}),
    (ring_model.MODEL, np.arange(1, 17, dtype=float), {"lambda": 2e-6}),
    (amdahl_model.MODEL, np.arange(1, 25, dtype=float), {"s": 0.08}),
    (amdahl_model.GUSTAFSON, np.arange(1, 25, dtype=float), {"s": 0.3}),
]


@pytest.mark.parametrize("model,x,truth", CASES, ids=[c[0].name for c in CASES])
def test_fit_recovers_known_parameters_and_its_intervals_cover_them(model, x, truth):
    """Over 100 noisy data sets, estimates are close and the 95% intervals hold the truth
    about 95% of the time (a single draw may miss, by design of a 95% interval)."""
    hits = []
    for seed in range(100):
        y = noisy(model(x, *truth.values()), 0.02, seed=seed)
        fit = models.fit(model, x, y, sigma="relative")
        for name, true in truth.items():
            assert abs(fit[name] / true - 1) < 0.1
            assert fit.stderr[name] > 0
            hits.append(fit.ci95[name][0] <= true <= fit.ci95[name][1])
        assert fit.r2 > 0.95
        assert fit.dof == x.size - len(truth)
        np.testing.assert_allclose(fit.residuals, y - fit.predict(x))
    assert 0.88 < np.mean(hits) < 0.995, np.mean(hits)


def _jacobi_table():
    # small blocks too, where the latency and bandwidth terms matter next to the compute
    rows = [(L, N, k) for L in (4, 8, 16, 32, 64) for N, k in ((1, 0), (2, 1), (4, 2), (8, 3),
                                                               (12, 3), (24, 3), (48, 3))]
    return pd.DataFrame(rows, columns=["L", "N", "k"])


def _cg_table():
    return pd.DataFrame([(n, p) for n in (32, 64, 128, 256, 512, 1024)
                         for p in (1, 2, 3, 4, 8, 16)], columns=["N", "P"])


MULTI = [
    (jacobi_model.MODEL, _jacobi_table, {"t_update": 8.8e-9, "B": 6e9, "lambda": 1e-6}),
    (poisson_model.MODEL, _cg_table, {"t_point": 4e-9, "t_row": 1e-8, "t_reduce": 3e-6}),
]


@pytest.mark.parametrize("model,table,truth", MULTI, ids=[c[0].name for c in MULTI])
def test_models_of_several_variables_recover_known_parameters(model, table, truth):
    """The same estimates, intervals and residuals for a table of inputs; the intervals
    cover the truth about 95% of the time."""
    X = table()
    hits = []
    for seed in range(60):
        y = noisy(model(X, *truth.values()), 0.02, seed=seed)
        fit = models.fit(model, X, y, sigma="relative")
        for name, true in truth.items():
            assert abs(fit[name] - true) < 5 * fit.stderr[name], (name, fit[name], true)
            hits.append(fit.ci95[name][0] <= true <= fit.ci95[name][1])
        assert fit.dof == len(X) - len(truth) and fit.npoints == len(X)
        np.testing.assert_allclose(fit.residuals, y - fit.predict(X))
    assert 0.85 < np.mean(hits) < 0.995, np.mean(hits)
    # a dict of columns and an (inputs, points) array are the same table
    as_dict = {k: X[k].to_numpy() for k in model.inputs}
    y = model(X, *truth.values())
    a = models.fit(model, as_dict, y)
    b = models.fit(model, X[list(model.inputs)].to_numpy().T, y)
    for name in truth:
        assert a[name] == pytest.approx(truth[name], rel=1e-6) == b[name]


def test_a_table_without_an_input_is_refused():
    with pytest.raises(models.FitError, match="needs the inputs L, N, k; missing k"):
        models.fit(jacobi_model.MODEL, {"L": [1, 2, 3, 4], "N": [1, 2, 3, 4]}, [1, 2, 3, 4])
    with pytest.raises(models.FitError, match="shape \\(2, points\\)"):
        models.fit(poisson_model.MODEL, np.ones((3, 5)), np.ones(5))


@pytest.mark.parametrize("model,n", [(models.HOCKNEY, 2), (amdahl_model.MODEL, 1),
                                     (jacobi_model.MODEL, 3)])
def test_as_many_points_as_parameters_is_not_a_fit(model, n):
    x = _jacobi_table().iloc[:n] if model.inputs else np.arange(1, n + 1, dtype=float)
    with pytest.raises(models.FitError, match="is not a fit"):
        models.fit(model, x, np.arange(1, n + 1, dtype=float))


def test_hockney_intervals_cover_the_truth_about_95_percent_of_the_time():
    truth = (0.6e-6, 9e9)
    y0 = models.HOCKNEY(SIZES, *truth)
    hits = []
    for seed in range(200):
        fit = models.fit(models.HOCKNEY, SIZES, noisy(y0, 0.03, seed), sigma="relative")
        hits.append([fit.ci95["lambda"][0] <= truth[0] <= fit.ci95["lambda"][1],
                     fit.ci95["B"][0] <= truth[1] <= fit.ci95["B"][1]])
    coverage = np.mean(hits, axis=0)
    assert np.all((coverage > 0.88) & (coverage < 0.995)), coverage


def test_exact_data_gives_exact_parameters():
    fit = models.fit("hockney", SIZES, models.HOCKNEY(SIZES, 1e-6, 5e9))
    assert fit["lambda"] == pytest.approx(1e-6, rel=1e-6)
    assert fit["B"] == pytest.approx(5e9, rel=1e-6)


def test_two_segment_finds_the_protocol_switch():
    y = np.where(SIZES <= 65536, 0.5e-6 + SIZES / 4e9, 8e-6 + SIZES / 1.1e10)
    two = models.fit_two_segment(SIZES, noisy(y, 0.01, seed=3))
    assert (two.breakpoint_low, two.breakpoint_high) == (65536, 131072)
    assert two.left["lambda"] == pytest.approx(0.5e-6, rel=0.1)
    assert two.right["B"] == pytest.approx(1.1e10, rel=0.05)
    one = models.fit("hockney", SIZES, two.y, sigma="relative")
    assert np.sum((two.residuals / two.y) ** 2) < np.sum((one.residuals / one.y) ** 2) / 10
    assert set(two.table()["segment"]) == {"n <= 65536", "n >= 131072"}


def test_effective_bandwidth_tends_to_B_and_starts_at_latency():
    n = np.array([1.0, 1e12])
    b = models.effective_bandwidth(n, 1e-6, 1e10)
    assert b[0] == pytest.approx(1 / (1e-6 + 1e-10))
    assert b[1] == pytest.approx(1e10, rel=1e-3)


@pytest.mark.parametrize("x,y,match", [
    ([1, 2], [1e-6, 2e-6], "at least 3 points"),
    ([-1, 2, 3, 4], [1, 2, 3, 4], "must be >= 0"),
    ([1, 2, np.nan, 4], [1, 2, 3, 4], "NaN"),
    ([1, 2, 3, 4], [1, 2, np.inf, 4], "NaN or infinite"),
    ([1, 2, 3], [1, 0, 3], "must be positive"),
    ([5, 5, 5, 5], [1, 2, 3, 4], "distinct"),
    ([1, 2, 3], [1, 2], "x has 3 values but y has 2"),
])
def test_degenerate_input_says_what_is_wrong(x, y, match):
    with pytest.raises(models.FitError, match=match):
        models.fit(models.HOCKNEY, x, y)


def test_effective_bandwidth_rejects_zero_sizes():
    with pytest.raises(models.FitError, match="must be > 0"):
        models.fit(models.EFFECTIVE_BANDWIDTH, [0, 1, 2, 3], [1, 1, 2, 3])


def test_two_segment_needs_enough_sizes():
    with pytest.raises(models.FitError, match="at least 6 distinct sizes"):
        models.fit_two_segment([1, 2, 3, 4, 5], [1, 2, 3, 4, 5])


def test_bad_sigma_is_rejected():
    with pytest.raises(models.FitError, match="sigma"):
        models.fit(models.HOCKNEY, [1, 2, 3], [1, 2, 3], sigma="weird")


@pytest.mark.parametrize("model", [models.SATURATION, models.SATURATION_SMOOTH])
def test_saturation_models_recover_known_parameters(model):
    rng = np.random.default_rng(3)
    n = np.repeat(np.arange(1, 17, dtype=float), 3)
    truth = {"b1": 12e9, "Bmax": 80e9}
    y = model(n, *truth.values()) * (1 + 0.01 * rng.standard_normal(n.size))
    f = models.fit(model, n, y)
    for name, value in truth.items():
        lo, hi = f.ci95[name]
        assert lo <= value <= hi and abs(f[name] / value - 1) < 0.05, (name, f.table())
    if model is models.SATURATION:
        assert 6 < models.saturation_threads(f) < 7.5


def test_saturation_reached_by_one_thread_reports_b1_at_the_ceiling():
    # a loaded machine: two threads measure no more than one, so every b1 >= Bmax draws the
    # same curve; the fit must not report a ceiling below one thread's bandwidth
    n = np.array([1, 1, 1, 2, 2, 2], dtype=float)
    y = np.array([10.0, 10.2, 9.9, 9.7, 9.8, 9.6]) * 1e9
    f = models.fit(models.SATURATION, n, y)
    assert 0 < f["b1"] <= f["Bmax"], f.table()
    assert models.saturation_threads(f) == 1.0
    np.testing.assert_allclose(f.predict(n), np.full(n.size, f["Bmax"]))


def test_roofline_bounds_by_memory_then_peak():
    r = models.Roofline(bandwidth=20e9, peak=100e9, source="test")
    assert r.ridge == 5.0
    np.testing.assert_allclose(r.bound([0.1, 5, 50]), [2e9, 100e9, 100e9])
    triad = 2 / 24
    assert np.isclose(r.time(2e6, 24e6), 24e6 / 20e9)
    assert np.isclose(models.Roofline(bandwidth=20e9).bound(triad), triad * 20e9)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        models.Roofline(bandwidth=0)
    with pytest.raises(ValueError, match="intensity"):
        r.bound(-1)


@pytest.mark.parametrize("model", list(ALL.values()), ids=list(ALL))
def test_every_parameter_declares_its_physical_domain_and_fits_stay_inside(model):
    assert len(model.domains) == len(model.params)
    for param in model.params:
        d = model.domain(param)
        assert d.low >= 0, f"{model.name}.{param}: no performance parameter is negative"

# what each parameter physically is: a fraction, a time or rate that is strictly positive, or
# a time that may be zero (a latency, a per-call cost)
PHYSICAL = {"s": (0.0, 1.0, False), "B": (0.0, np.inf, True), "Bmax": (0.0, np.inf, True),
            "b1": (0.0, np.inf, True), "t_update": (0.0, np.inf, True),
            "lambda": (0.0, np.inf, False), "t_point": (0.0, np.inf, False),
            "t_row": (0.0, np.inf, False), "t_reduce": (0.0, np.inf, False)}


@pytest.mark.parametrize("model", list(ALL.values()), ids=list(ALL))
def test_each_domain_is_the_physical_one(model):
    for param in model.params:
        d = model.domain(param)
        assert (d.low, d.high, d.low_open) == PHYSICAL[param], (model.name, param, d)
        assert (d.low + 1 if d.high == np.inf else (d.low + d.high) / 2) in d
        assert d.low - 1e-9 not in d and (d.high == np.inf or d.high + 1e-9 not in d)
        assert (d.low in d) is not d.low_open


def test_a_fit_pushed_against_its_domain_says_so_in_words():
    """Times that fall as fast as the ideal speed-up: Amdahl's s would be negative, the
    bounded fit stops at 0, and the words say 'at the bound' with no negative number."""
    x = np.arange(1, 7, dtype=float)
    fit = models.fit(amdahl_model.MODEL, x, noisy(x * 1.02, 0.01, seed=1))
    assert fit["s"] in amdahl_model.MODEL.domain("s")
    words = fit.words("s", "serial fraction", digits=3)
    assert "at the bound" in words and "do not determine s" in words, words
    assert "-" not in words.replace("−", "-").split("at the bound")[0]


def test_a_latency_below_the_data_is_at_the_bound_not_negative():
    """Hockney through points whose line would cross below zero: λ stops at 0."""
    n = np.array([1e4, 1e5, 1e6, 1e7])
    y = -2e-7 + n / 5e9  # a line with a negative intercept
    fit = models.fit(models.HOCKNEY, n, y)
    assert fit["lambda"] >= 0
    words = fit.words("lambda", "latency", "µs", 1e6, name="λ")
    assert "at the bound" in words and "not determine λ" in words, words


def test_fit_words_quote_an_estimate_well_inside_its_domain_plainly():
    x = np.arange(1, 9, dtype=float)
    fit = models.fit(amdahl_model.MODEL, x, noisy(amdahl_model.MODEL(x, 0.3), 0.01, seed=2))
    words = fit.words("s", "serial fraction", digits=3)
    assert words.startswith(f"{fit['s']:.3f} (95% interval "), words


def test_models_are_found_by_name_shared_or_a_chapters_own():
    assert {"hockney", "saturation", "ring", "amdahl", "gustafson", "jacobi",
            "cg_iteration"} <= set(ALL)
    for name, model in ALL.items():
        assert models.get(name) is model
    assert models.fit("ring", np.arange(1, 9.0), 2e-6 * np.arange(1, 9.0))["lambda"] > 0
    with pytest.raises(ValueError, match="unknown model 'rign': choose one of .*ring"):
        models.get("rign")


@pytest.mark.parametrize("sigma", [None, "relative"])
def test_hockney_in_closed_form_is_the_bounded_least_squares_fit(sigma, monkeypatch):
    # T = λ + n/B is a line in (λ, 1/B): the closed form must give what the bounded
    # curve_fit gives, estimates and standard errors, whenever the line's optimum is inside
    # the domain (a flat segment or a negative intercept still goes to curve_fit)
    rng = np.random.default_rng(7)
    x = np.logspace(0, 7, 25)
    closed, bounded = [], []
    for _ in range(20):
        y = (2e-6 + x / 5e9) * (1 + 0.05 * rng.standard_normal(x.size))
        w = None if sigma is None else y
        # only the draws whose optimum the closed form gives (the others go to curve_fit)
        closed.append(models.fit(models.HOCKNEY, x, y, sigma=sigma)
                      if models._hockney_line(x, y, w) is not None else None)
    assert sum(c is not None for c in closed) >= 10
    monkeypatch.setattr(models, "_hockney_line", lambda *a: None)
    rng = np.random.default_rng(7)
    for _ in range(20):
        y = (2e-6 + x / 5e9) * (1 + 0.05 * rng.standard_normal(x.size))
        bounded.append(models.fit(models.HOCKNEY, x, y, sigma=sigma))
    for a, b in zip(closed, bounded):
        if a is None:
            continue
        w = 1.0 if sigma is None else 1.0 / a.y
        # the same optimum, to the iterative fit's tolerance; never a worse one
        assert np.sum((a.residuals * w) ** 2) <= np.sum((b.residuals * w) ** 2) * (1 + 1e-9)
        for k in ("lambda", "B"):
            assert a.params[k] == pytest.approx(b.params[k], rel=1e-3)
            assert a.stderr[k] == pytest.approx(b.stderr[k], rel=1e-3)


def test_hockney_outside_its_domain_is_left_to_the_bounded_fit():
    x = np.array([1.0, 2, 3, 4, 5])
    assert models._hockney_line(x, 3e-6 - x * 1e-8, None) is None   # falling: B < 0
    assert models._hockney_line(x, -1e-6 + x * 1e-6, None) is None  # λ < 0
    fit = models.fit(models.HOCKNEY, x, 3e-6 - x * 1e-8)
    assert fit.params["lambda"] > 0 and fit.params["B"] > 0


def test_a_fit_table_says_when_the_points_do_not_determine_an_estimate():
    """Small messages whose times do not grow with size leave B undetermined (its fit stops
    on the bound 1/B = 0): the table says so beside it, and says nothing of the estimates
    the points do determine."""
    n = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                  32768, 65536, 131072, 262144, 524288, 1048576], float)
    t = np.where(n < 4096, 3e-6 - n * 1e-10, 2e-6 + n / 5e9)
    table = models.fit_two_segment(n, t).table().set_index(["segment", "parameter"])["note"]
    left, right = (s for s in table.index.get_level_values("segment").unique())
    assert "not determined" in table[(left, "B")]
    assert table[(right, "B")] == "" and table[(right, "lambda")] == ""
