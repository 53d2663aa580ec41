"""Comparisons put into words only where the interval supports them."""
import numpy as np
import pytest

from hpclab import stats


def test_a_clear_difference_is_claimed_with_its_interval():
    rng = np.random.default_rng(1)
    c = stats.compare(2.0 + 0.02 * rng.standard_normal(9), 1.0 + 0.01 * rng.standard_normal(9),
                      ("slow", "fast"))
    assert c.differs and 1.9 < c.low <= c.ratio <= c.high < 2.1
    assert c.words().startswith(f"slow took {c.ratio:.2f} times the time of fast (95% interval")


def test_overlapping_samples_give_no_claim():
    rng = np.random.default_rng(2)
    a, b = 1.0 + 0.1 * rng.standard_normal(5), 1.02 + 0.1 * rng.standard_normal(5)
    c = stats.compare(a, b, ("irecv", "sendrecv"))
    assert not c.differs and c.low < 1 < c.high
    assert c.words().startswith("no difference in time between irecv and sendrecv")


@pytest.mark.parametrize("a,b,match", [([1.0], [1.0, 2.0], "at least 2"),
                                       ([1.0, -1.0], [1.0, 2.0], "positive")])
def test_too_little_or_impossible_data_is_refused(a, b, match):
    with pytest.raises(ValueError, match=match):
        stats.compare(a, b)


def test_said_gives_the_words_or_says_why_there_are_none():
    from hpclab import stats

    assert stats.said([2.0, 2.1, 1.9], [1.0, 1.05, 0.95], ("a", "b")).startswith("a took 2.00")
    assert "moved" in stats.said([2.0, 2.1], [1.0, 1.1], ("a", "b"), "bandwidth", verb="moved")
    assert stats.said([1.0], [2.0, 3.0], ("a", "b")).startswith("a and b cannot be compared")


def test_ratio_or_nan_is_the_comparisons_and_nan_when_there_is_none():
    """The three numbers a lab's answer or a table holds are compare's, its interval around
    the ratio; with one measurement, or none that differ, all three are NaN, not an error."""
    a, b = [2.0, 2.1, 1.9, 2.05, 1.95, 2.02], [1.0, 1.05, 0.95, 1.02, 0.98, 1.01]
    ratio, low, high = stats.ratio_or_nan(a, b)
    c = stats.compare(a, b)
    assert (ratio, low, high) == (c.ratio, c.low, c.high) and low < ratio < high
    assert all(np.isnan(stats.ratio_or_nan([1.0], [1.0, 2.0])))
    assert all(np.isnan(stats.ratio_or_nan([1.0, 1.0], [2.0, 2.0])))


def test_two_runs_each_give_an_interval_wider_than_their_own_range():
    """A bootstrap of two values cannot reach beyond them; the t interval on the logs can,
    and with one degree of freedom or so it must be wide."""
    a, b = [1.23, 1.25], [1.00, 1.01]
    c = stats.compare(a, b)
    assert c.ratio == pytest.approx(1.24 / 1.005)
    assert c.low < min(a) / max(b) and c.high > max(a) / min(b), c
    med, low, high = stats.median_interval([2.0, 2.1])
    assert med == pytest.approx(2.05) and low < 1.9 and high > 2.2
    many = stats.compare(1.24 + 0.01 * np.sin(np.arange(9)), 1.005 + 0.005 * np.cos(np.arange(9)))
    assert many.high - many.low < c.high - c.low  # nine runs each: the bootstrap, narrower


def test_identical_repetitions_have_no_interval():
    with pytest.raises(ValueError, match="all identical"):
        stats.compare([1.0, 1.0], [2.0, 2.0])
    with pytest.raises(ValueError, match="all identical"):
        stats.median_interval([3.0] * 6)
    assert "all identical" in stats.said([1.0, 1.0, 1.0], [2.0, 2.0, 2.0], ("a", "b"))


def test_an_estimate_whose_interval_reaches_zero_says_so():
    ok = stats.estimate_words(8.59, 4.1, 13.08, "GB/s", "bandwidth")
    assert ok == "8.59 GB/s (95% interval 4.10 to 13.08 GB/s)"
    bad = stats.estimate_words(8.59, -18.86, 36.04, "GB/s", "bandwidth")
    # the bound outside the domain is never printed: the words say what the data allow
    assert bad.startswith("8.59 GB/s, not determined by these data: its 95% interval reaches "
                          "0 GB/s, which no bandwidth can be"), bad
    assert "-18.86" not in bad and "from above, by 36.04 GB/s" in bad


FRACTION_CASES = [
    # (value, low, high, what the words must say, what they must not)
    (0.792, -0.054, 1.637, "covers every value a serial fraction can take", "-0.054"),
    (0.792, 0.054, 1.637, "only bound s from below, by 0.054", "1.637"),
    (0.05, -0.02, 0.12, "only bound s from above, by 0.120", "-0.020"),
    (0.0, -0.02, 0.12, "at the bound: the fit stopped at 0", "-0.020"),
    (1.0, 0.9, 1.1, "at the bound: the fit stopped at 1, the most", "1.100"),
    (1.2, 1.1, 1.3, "which no serial fraction can be", "95% interval"),
    (0.31, 0.30, 0.32, "(95% interval 0.300 to 0.320)", "not determined"),
    (0.31, float("nan"), float("nan"), "no interval", "95% interval"),
]


@pytest.mark.parametrize("value, low, high, says, never", FRACTION_CASES)
def test_a_serial_fraction_is_quoted_inside_its_domain(value, low, high, says, never):
    words = stats.estimate_words(value, low, high, "", "serial fraction", 3, name="s",
                                 domain=stats.FRACTION, basis="2 repetitions")
    assert says in words and never not in words, words


def test_an_interval_past_the_domain_names_what_it_rests_on_and_why():
    words = stats.estimate_words(0.8, 0.7, 0.9, "", "ratio", name="the ratio",
                                 domain=stats.Domain(1.0, np.inf), basis="3 runs",
                                 why="the two ran on other cores")
    assert "which no ratio can be" in words and words.endswith("the two ran on other cores")
    inside = stats.estimate_words(1.8, 1.7, 1.9, "", "ratio", domain=stats.Domain(1.0, np.inf),
                                  why="the two ran on other cores")
    assert "other cores" not in inside
    assert "not determined by 3 runs" in stats.estimate_words(
        1.2, 0.8, 1.5, "", "ratio", domain=stats.Domain(1.0, np.inf), basis="3 runs")


@pytest.mark.parametrize("domain, inside, outside", [
    (stats.POSITIVE, [1e-9, 5.0], [0.0, -1.0, np.nan]),
    (stats.NONNEGATIVE, [0.0, 5.0], [-1e-12, np.inf]),
    (stats.FRACTION, [0.0, 0.5, 1.0], [-0.01, 1.01]),
])
def test_a_domain_holds_what_it_says(domain, inside, outside):
    assert all(v in domain for v in inside) and not any(v in domain for v in outside)
    lo, hi = domain.cut(-5.0, 5.0)
    assert lo in domain or domain.low_open and lo == domain.low
    assert hi in domain


def test_an_estimate_whose_interval_spans_orders_of_magnitude_says_it_is_barely_bounded():
    wide = stats.estimate_words(0.16, 0.00063, 39520.82, "", "ratio", name="the ratio")
    assert wide.startswith("0.16 (95% interval 0.00063 to 39,520.82)"), wide
    assert "barely bound the ratio" in wide and "0.00 to" not in wide
    assert "more than a factor of 1,000" in wide
    assert "a factor of 21," in stats.estimate_words(0.42, 0.09, 1.85, "GB/s", "bandwidth")
    assert stats.estimate_words(0.5, float("nan"), float("nan"), "GB/s", "bandwidth") \
        == "0.50 GB/s (no interval: too few runs)"


def test_a_comparison_from_two_runs_each_says_it_barely_bounds_the_ratio():
    c = stats.compare([1.0, 3.0], [1.0, 1.2], names=("a", "b"))
    words = c.words()
    assert words.startswith("no difference in time between a and b"), words
    assert "barely bound the ratio" in words and "0.00 to" not in words
    assert "e+" in words or "," in words  # a huge bound in few digits
    tight = stats.compare([2.0, 2.1, 2.05, 1.98, 2.02], [1.0, 1.05, 0.99, 1.01, 1.02], ("a", "b"))
    assert "barely" not in tight.words()


def test_a_term_against_its_model_is_judged_by_its_interval():
    """over_model: the median's ratio with the interval of median_interval, over the model;
    verdict: a difference only when the whole interval is on one side of 1."""
    v = np.array([1.0, 1.1, 1.2, 1.05, 1.15, 1.12])
    ratio, low, high = stats.over_model(v, 0.5)
    med, lo, hi = stats.median_interval(v)
    assert np.allclose([ratio, low, high], [med / 0.5, lo / 0.5, hi / 0.5])
    assert stats.verdict(low, high) == "slower than the model"
    assert stats.verdict(*stats.over_model(v, 2.0)[1:]) == "faster than the model"
    assert stats.verdict(*stats.over_model(v, med)[1:]) == "no difference shown"
    one = stats.over_model([1.0], 0.5)
    assert one[0] == 2.0 and np.isnan(one[1:]).all() and stats.verdict(*one[1:]) == "cannot tell"
    assert np.isnan(stats.over_model(v, 0.0)).all()  # no model time: nothing to compare
