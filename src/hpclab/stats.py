"""Comparisons a page may put into words only when the measurements support them.

:func:`compare` returns the ratio of two sets of repeated measurements (medians) with a
95% bootstrap interval, and the sentence that interval allows: a difference is claimed
only when the interval excludes 1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP = 4000
CONFIDENCE = 0.95


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
        interval = f"95% interval {self.low:.2f} to {self.high:.2f}, {self.n_a} and {self.n_b} runs"
        if not self.differs:
            return (f"no difference in {quantity} between {self.a} and {self.b} that the "
                    f"measurements can show (ratio {self.ratio:.2f}, {interval})")
        return f"{self.a} {verb} {self.ratio:.2f} times the {quantity} of {self.b} ({interval})"


def compare(a, b, names=("a", "b"), seed=0):
    """Ratio of the medians of two samples with a percentile-bootstrap interval.

    At least two values per sample are needed; with fewer the interval would be a guess,
    and a ValueError says so.
    """
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    if a.size < 2 or b.size < 2:
        raise ValueError(f"a comparison needs at least 2 measurements of each, got {a.size} "
                         f"and {b.size}")
    if np.any(a <= 0) or np.any(b <= 0) or not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("measurements must be positive and finite")
    rng = np.random.default_rng(seed)
    ra = np.median(rng.choice(a, (BOOTSTRAP, a.size)), axis=1)
    rb = np.median(rng.choice(b, (BOOTSTRAP, b.size)), axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ra / rb, [tail, 100 - tail])
    return Comparison(float(np.median(a) / np.median(b)), float(low), float(high), a.size,
                      b.size, *names)


def said(a, b, names, quantity="time", verb="took"):
    """:meth:`Comparison.words` of :func:`compare`, or, when the measurements cannot be
    compared (fewer than two of either), a sentence that says so and why."""
    try:
        return compare(a, b, names).words(quantity, verb=verb)
    except ValueError as exc:
        return f"{names[0]} and {names[1]} cannot be compared here ({exc})"


def median_interval(values, seed=0):
    """(median, low, high): the median of repeated measurements with its 95% percentile-
    bootstrap interval. At least two values are needed."""
    v = np.asarray(values, dtype=float).ravel()
    if v.size < 2:
        raise ValueError(f"an interval needs at least 2 measurements, got {v.size}")
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(v, (BOOTSTRAP, v.size)), axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(boot, [tail, 100 - tail])
    return float(np.median(v)), float(low), float(high)
