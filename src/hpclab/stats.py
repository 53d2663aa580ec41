"""Comparisons a page may put into words only when the measurements support them.

:func:`compare` returns the ratio of two sets of repeated measurements (medians) with a
95% interval, and the sentence that interval allows: a difference is claimed only when the
interval excludes 1.

The interval is a percentile bootstrap when every sample has at least
:data:`MIN_BOOTSTRAP` values. With fewer, a bootstrap cannot reach beyond the values that
were measured (two runs give at most their own range, however far apart the truth may be),
so the interval is Student's t on the logarithms instead (Welch's for two samples), around
the same ratio of medians: with two runs each it is wide, as it should be. Repetitions that
are all identical carry no estimate of their scatter; a ValueError says so rather than
print an interval of zero width.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 4000
CONFIDENCE = 0.95
MIN_BOOTSTRAP = 5  # values per sample below which the t interval on the logs is used


@dataclass(frozen=True)
class Comparison:
    """``ratio = median(a) / median(b)`` and its interval."""

    ratio: float
    low: float
    high: float
    n_a: int
    n_b: int
    a: str = "a"
    b: str = "b"

    @property
    def differs(self):
        """True when the interval excludes 1 (a difference the data support)."""
        return self.low > 1 or self.high < 1

    def words(self, quantity="time", verb="took"):
        """The sentence the interval allows, e.g. 'a took 1.52 times b's time (95% interval
        1.40 to 1.66)' or 'no difference between a and b that the measurements can show'
        (``verb``: 'moved' for a bandwidth, say)."""
        interval = (f"95% interval {_bound(self.low, 2)} to {_bound(self.high, 2)}, "
                    f"{self.n_a} and {self.n_b} runs")
        wide = (f": its ends differ by {_factor(self.high / self.low)}, so these runs barely "
                "bound the ratio" if self.high / self.low > WIDE else "")
        if not self.differs:
            return (f"no difference in {quantity} between {self.a} and {self.b} that the "
                    f"measurements can show (ratio {self.ratio:.2f}, {interval}){wide}")
        return (f"{self.a} {verb} {self.ratio:.2f} times the {quantity} of {self.b} "
                f"({interval}){wide}")


def _sample(values):
    v = np.asarray(values, dtype=float).ravel()
    if not (np.all(np.isfinite(v)) and np.all(v > 0)):
        raise ValueError("measurements must be positive and finite")
    return v


NO_SCATTER = ("the repeated measurements are all identical, so their scatter cannot be "
              "estimated: repeat with more runs or a finer timer")


def t_quantile(q, dof):
    """The ``q`` quantile of Student's t with ``dof`` degrees of freedom (scipy.special's
    stdtrit: the same numbers as scipy.stats.t.ppf, without the second or so that
    importing scipy.stats costs every notebook and grader that draws a fit)."""
    from scipy import special

    return special.stdtrit(dof, q)


def _log_t_half_width(*samples):
    """Half-width of the 95% t interval of the difference of the samples' mean logs (of
    the one sample's mean log), Welch's degrees of freedom."""
    parts = [np.var(np.log(v), ddof=1) / v.size for v in samples]
    se2 = float(sum(parts))
    if se2 == 0.0:
        raise ValueError(NO_SCATTER)
    dof = se2 ** 2 / sum(p ** 2 / (v.size - 1) for p, v in zip(parts, samples))
    return float(t_quantile(0.5 + CONFIDENCE / 2, dof)) * np.sqrt(se2)


def _boot_medians(v, rng):
    return np.median(rng.choice(v, (BOOTSTRAP, v.size)), axis=1)


def _percentiles(boot):
    """The central 95% of bootstrap values, (low, high)."""
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(low), float(high)


def compare(a, b, names=("a", "b"), seed=0):
    """Ratio of the medians of two samples with its 95% interval: percentile bootstrap when
    both have at least :data:`MIN_BOOTSTRAP` values, else Welch's t on the logarithms.

    At least two values per sample are needed; with fewer the interval would be a guess,
    and a ValueError says so (as it does for samples with no scatter at all).
    """
    a, b = np.asarray(a, dtype=float).ravel(), np.asarray(b, dtype=float).ravel()
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a comparison needs at least 2 measurements of each, got {a.size} "
                         f"and {b.size}")
    a, b = _sample(a), _sample(b)
    ratio = float(np.median(a) / np.median(b))
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        raise ValueError(NO_SCATTER)
    if min(a.size, b.size) < MIN_BOOTSTRAP:
        h = _log_t_half_width(a, b)
        low, high = ratio * np.exp(-h), ratio * np.exp(h)
    else:
        rng = np.random.default_rng(seed)
        low, high = _percentiles(_boot_medians(a, rng) / _boot_medians(b, rng))
    return Comparison(ratio, float(low), float(high), a.size, b.size, *names)


def ratio_or_nan(a, b):
    """(ratio, low, high) of :func:`compare` for ``a`` over ``b``; NaN for all three when they
    cannot be compared (fewer than two of either, or no scatter), for a table or an answer
    that must hold three numbers either way."""
    try:
        c = compare(a, b)
    except ValueError:
        return float("nan"), float("nan"), float("nan")
    return c.ratio, c.low, c.high


def said(a, b, names, quantity="time", verb="took"):
    """:meth:`Comparison.words` of :func:`compare`, or, when the measurements cannot be
    compared (fewer than two of either), a sentence that says so and why."""
    try:
        return compare(a, b, names).words(quantity, verb=verb)
    except ValueError as exc:
        return f"{names[0]} and {names[1]} cannot be compared here ({exc})"


def median_interval(values, seed=0):
    """(median, low, high): the median of repeated measurements with its 95% interval,
    percentile bootstrap from :data:`MIN_BOOTSTRAP` values on, t on the logarithms below.
    At least two values, not all identical, are needed."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size < 2:
        raise ValueError(f"an interval needs at least 2 measurements, got {v.size}")
    v = _sample(v)
    med = float(np.median(v))
    if v.size < MIN_BOOTSTRAP or np.ptp(v) == 0:
        h = _log_t_half_width(v)
        return med, med * float(np.exp(-h)), med * float(np.exp(h))
    return (med, *_percentiles(_boot_medians(v, np.random.default_rng(seed))))


def over_model(values, model):
    """(ratio, low, high): the median of repeated measurements over a model's value, taken as
    exact, with the 95% interval of :func:`median_interval` over the same value; the
    interval NaN when there is none (fewer than two measurements), all three NaN when the
    model is not a positive time."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0 or not np.isfinite(model) or model <= 0:
        return (float("nan"),) * 3
    try:
        med, low, high = median_interval(v)
    except ValueError:
        return float(np.median(v)) / model, float("nan"), float("nan")
    return med / model, low / model, high / model


VERDICTS = ("slower than the model", "faster than the model", "no difference shown",
            "cannot tell")


def verdict(low, high):
    """Where the 95% interval of a measured/model ratio lies against 1: one of
    :data:`VERDICTS`. A difference only when the whole interval is on one side; an interval
    that holds 1 shows no difference, which is not agreement (it may be wide); no interval
    (NaN), nothing can be told."""
    if not np.isfinite([low, high]).all():
        return VERDICTS[3]
    return VERDICTS[0] if low > 1 else VERDICTS[1] if high < 1 else VERDICTS[2]


WIDE = 10  # an interval whose ends differ by more than this factor barely bounds anything


def _bound(x, digits):
    """A bound as text: fixed digits, or two significant ones where fixed digits would print
    a positive number as 0.00 or a huge one with a dozen digits."""
    if 0 < abs(x) < 10.0 ** -digits or abs(x) >= 1e6:
        return f"{x:.2g}"
    return f"{x:,.{digits}f}"


def _factor(f):
    return f"a factor of {f:,.0f}" if f < 1000 else "more than a factor of 1,000"


@dataclass(frozen=True)
class Domain:
    """Where a quantity can physically lie: ``low`` to ``high``, each end closed (the value
    itself allowed) unless ``*_open``. Models declare one per parameter
    (:attr:`hpclab.models.Model.domains`); :func:`estimate_words` quotes an estimate within
    it."""

    low: float = 0.0
    high: float = np.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, x):
        x = float(x)
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return bool(np.isfinite(x) and above and below)

    @property
    def bounds(self):
        """(low, high) for a bounded least-squares fit."""
        return float(self.low), float(self.high)

    def at_end(self, value, low=np.nan, high=np.nan):
        """The end of the domain that ``value`` sits on, to rounding (where a bounded fit
        stops), or None: "on" means within 1e-4 of the interval's width (or of the value), with
        the interval reaching that end (a bounded fit's Wald interval straddles it)"""
        width = abs(high - low) if np.isfinite(high - low) else 0.0
        scale = max(width, abs(value), 1e-300)
        for end, crosses in ((self.low, not low > self.low), (self.high, not high < self.high)):
            if np.isfinite(end) and crosses and abs(value - end) <= 1e-4 * scale:
                return end
        return None

    def past(self, low, high):
        """(below, above): whether an interval reaches past each end (an open end counts
        when reached)."""
        return (bool(low < self.low or (self.low_open and low <= self.low)),
                bool(high > self.high or (self.high_open and high >= self.high)))

    def classify(self, value, low=np.nan, high=np.nan):
        """Where an estimate and its 95% interval lie against the domain, the one decision
        every quoting of an estimate uses: 'no estimate' (value not finite), 'outside' (the
        value itself is impossible), 'no interval', 'at end' (a bounded fit stopped on an
        end), 'both' (the interval reaches past both ends), 'below', 'above' (past one end;
        an open end counts when reached), or 'inside'."""
        if not np.isfinite(value):
            return "no estimate"
        if value not in self:
            return "outside"
        if not (np.isfinite(low) and np.isfinite(high)):
            return "no interval"
        if self.at_end(value, low, high) is not None:
            return "at end"
        below, above = self.past(low, high)
        return "both" if below and above else "below" if below else "above" if above \
            else "inside"

    def cut(self, low, high):
        """An interval cut to the domain (a 95% interval of a quantity that lies in the domain
        keeps its coverage when cut): (max(low, self.low), min(high, self.high))."""
        return max(float(low), self.low), min(float(high), self.high)

    def text(self):
        """'between 0 and 1', 'above 0', '0 or more', '1 or more'."""
        if np.isfinite(self.high):
            return f"between {self.low:g} and {self.high:g}"
        return f"above {self.low:g}" if self.low_open else f"{self.low:g} or more"


POSITIVE = Domain(0.0, np.inf, low_open=True)   # a time, a bandwidth, a rate, a ratio of them
NONNEGATIVE = Domain(0.0, np.inf)                # a latency: zero is the least it can be
FRACTION = Domain(0.0, 1.0)                      # a serial fraction, a share
UNBOUNDED = Domain(-np.inf, np.inf)              # a difference, an exponent


def estimate_words(value, low, high, unit, quantity, digits=2, points=None, name="it",
                   value_unit=None, domain=POSITIVE, basis=None, why=None):
    """The one way a page or a lab quotes an estimate with its 95% interval: '8.59 GB/s (95%
    interval 4.10 to 13.08 GB/s)' when the whole interval lies in the quantity's physical
    ``domain`` (by default above zero: a latency, a bandwidth, a ratio), and otherwise the
    words that say what the data do and do not determine, never a bound outside the domain:

    - an estimate on an end of the domain (where a bounded fit stopped) is 'at the bound';
    - an interval reaching past an end is cut there and said not to determine ``name``, or,
      when it reaches past both ends, to allow every value the quantity can take;
    - an interval wider than a factor :data:`WIDE` is said to bound ``name`` barely;
    - without an interval (NaN) the value stands alone, said to have none;
    - an estimate outside the domain is said to be impossible, not quoted as a result.

    ``basis`` says what the estimate rests on ('2 repetitions', '3 values of P'): it names
    what did not determine the quantity; ``points`` adds it inside the brackets.
    ``value_unit`` replaces the unit after the value ('µs per step'). ``why`` is added when
    the estimate or its interval leaves the domain: what makes that possible here (two runs
    placed differently, a model that misses a cost)."""
    text = _estimate_text(value, low, high, unit, quantity, digits, points, name, value_unit,
                          domain, basis)
    if why and domain.classify(value, low, high) != "inside":
        text += f"; {why}"
    return text


def _estimate_text(value, low, high, unit, quantity, digits, points, name, value_unit, domain,
                   basis):
    unit_after = f" {unit}" if unit else ""
    vu = value_unit or unit
    value_text = f"{value:,.{digits}f}{' ' + vu if vu else ''}"
    basis = basis or points or "these data"
    where = domain.classify(value, low, high)
    if where == "no estimate":
        return f"not determined ({basis} gave no estimate)"
    if where == "outside":
        return (f"{value_text}, which no {quantity} can be (a {quantity} is "
                f"{domain.text()}): {basis} do not determine {name}")
    if where == "no interval":
        return f"{value_text} (no interval: too few runs)"
    extra = f", {points}" if points else ""
    below, above = domain.past(low, high)
    lo_txt, hi_txt = f"{domain.low:g}", f"{domain.high:g}"
    if where == "at end":
        end = domain.at_end(value, low, high)
        least = end == domain.low
        other = (f"; they allow up to {_bound(min(high, domain.high), digits)}{unit_after}"
                 if least and not above else
                 f"; they allow down to {_bound(max(low, domain.low), digits)}{unit_after}"
                 if not least and not below else "")
        return (f"{value_text}, at the bound: the fit stopped at {end:g}"
                f"{unit_after}, the {'least' if least else 'most'} a {quantity} can be, so "
                f"{basis} do not determine {name}{other}")
    if where == "both":
        return (f"{value_text}, not determined by {basis}: its 95% interval covers every value "
                f"a {quantity} can take ({domain.text()}{unit_after})")
    if below:
        edge = "which no" if domain.low_open else "the least a"
        return (f"{value_text}, not determined by {basis}: its 95% interval reaches "
                f"{lo_txt}{unit_after}, {edge} {quantity} can be, so they only bound "
                f"{name} from above, by {_bound(high, digits)}{unit_after}")
    if above:
        edge = "which no" if domain.high_open else "the most a"
        return (f"{value_text}, not determined by {basis}: its 95% interval reaches "
                f"{hi_txt}{unit_after}, {edge} {quantity} can be, so they only bound "
                f"{name} from below, by {_bound(low, digits)}{unit_after}")
    text = (f"{value_text} (95% interval {_bound(low, digits)} to {_bound(high, digits)}"
            f"{unit_after}{extra})")
    if low > 0 and high / low > WIDE:
        text += f": its ends differ by {_factor(high / low)}, so these runs barely bound {name}"
    return text
