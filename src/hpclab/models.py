"""Performance models and least-squares fits with uncertainties.

A :class:`Model` is a function of one variable with named parameters; :func:`fit`
fits it with :func:`scipy.optimize.curve_fit` (Hockney's, a straight line in λ and 1/B, in
closed form when its optimum lies in the domain) and returns a :class:`Fit`
holding the estimates, their standard errors, 95% confidence intervals (Student
t with n - p degrees of freedom), the residuals and R². Times spanning decades
(a ping-pong from 0 B to 4 MiB) are best fitted with ``sigma="relative"``, which
minimises relative rather than absolute errors.

Models:

========================  ===============================  ==================
name                      formula                          x
========================  ===============================  ==================
``hockney``               T(n) = λ + n / B                 bytes n >= 0
``effective_bandwidth``   B_eff(n) = n / (λ + n / B)       bytes n > 0
``saturation``            B(n) = min(n b1, Bmax)           threads n >= 1
``saturation_smooth``     B(n) = Bmax (1 - exp(-n b1/Bmax))  threads n >= 1
========================  ===============================  ==================

A chapter's own models live in its folder (``hpclab.chapters.<slug>.model``: ``MODEL``
and any other :class:`Model` there); :func:`get` finds them by name. A model of several
variables takes ``x`` as a table: a DataFrame or dict with one column per input (its
``inputs``), or an array of shape (inputs, points). Everything else is the same:
estimates, standard errors, intervals, residuals and R².

:class:`Roofline` bounds the performance of a kernel by its arithmetic
intensity and a measured memory bandwidth (and a peak rate, when known).

:func:`fit_two_segment` fits Hockney twice, below and above a breakpoint chosen
from the data (an MPI library switches from the eager to the rendezvous
protocol at some message size, and one line cannot follow both).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from hpclab.stats import (
    NONNEGATIVE,
    POSITIVE,
    Domain,
    estimate_words,
    t_quantile,
)


class FitError(ValueError):
    """The data cannot be fitted: too few points, bad values, or no convergence."""


class FitWarning(UserWarning):
    """A fit that was asked for could not be made; the result says why."""


@dataclass(frozen=True)
class Model:
    """A one-variable performance model."""

    name: str
    formula: str
    func: Callable
    params: tuple
    guess: Callable
    # where each parameter can physically lie (hpclab.stats.Domain): fits stay inside, and
    # quoting an estimate says when its interval reaches past an end
    domains: tuple
    x_min: float
    x_min_inclusive: bool
    x_name: str
    y_name: str
    inputs: tuple = ()          # names of the inputs of a model of several variables
    # maps fitted parameters to one representative of the set that draws the same curve on
    # the model's domain (None: every parameter set draws its own curve)
    canonical: Callable | None = None

    def __call__(self, x, *params):
        return self.func(as_inputs(self, x), *params)

    @property
    def bounds(self):
        """(lows, highs) of the parameters, from their domains, for bounded least squares."""
        return ([d.low for d in self.domains], [d.high for d in self.domains])

    def domain(self, param) -> Domain:
        """The physical domain of one parameter."""
        return self.domains[self.params.index(param)]


def as_inputs(model, x):
    """x as the model's function takes it: a 1D array, or (inputs, points) for a model
    of several variables (from a DataFrame, a dict of columns or an array)."""
    if not model.inputs:
        return np.asarray(x, dtype=float)
    if hasattr(x, "keys"):
        missing = [k for k in model.inputs if k not in x.keys()]
        if missing:
            raise FitError(f"{model.name} needs the inputs {', '.join(model.inputs)}; "
                           f"missing {', '.join(missing)}")
        cols = [np.asarray(x[k], dtype=float).ravel() for k in model.inputs]
        if len({c.size for c in cols}) > 1:
            raise FitError(f"{model.name}: the inputs have different lengths")
        return np.vstack(cols)
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 2 or arr.shape[0] != len(model.inputs):
        raise FitError(f"{model.name} takes a table of {', '.join(model.inputs)} (a DataFrame, "
                       f"a dict, or an array of shape ({len(model.inputs)}, points)), got "
                       f"shape {arr.shape}")
    return arr


def _hockney(n, lam, bandwidth):
    return lam + n / bandwidth


def _hockney_guess(x, y):
    slope, intercept = np.polyfit(x, y, 1)
    slope = slope if slope > 0 else np.ptp(y) / max(np.ptp(x), 1.0) or 1e-12
    return [max(intercept, np.min(y) * 0.5), 1.0 / slope]


def _beff(n, lam, bandwidth):
    return n / (lam + n / bandwidth)


def _beff_guess(x, y):
    bandwidth = float(np.max(y))
    i = int(np.argmin(x))
    lam = max(x[i] / y[i] - x[i] / bandwidth, 1e-12)
    return [lam, bandwidth]


def _saturation(n, b1, bmax):
    return np.minimum(n * b1, bmax)


def _saturation_smooth(n, b1, bmax):
    return bmax * -np.expm1(-n * b1 / bmax)


def _saturation_guess(x, y):
    i = int(np.argmin(x))
    return [y[i] / x[i], float(np.max(y))]


HOCKNEY = Model("hockney", "T(n) = λ + n/B", _hockney, ("lambda", "B"), _hockney_guess,
                (NONNEGATIVE, POSITIVE), 0.0, True, "message size n", "time T")
EFFECTIVE_BANDWIDTH = Model("effective_bandwidth", "B_eff(n) = n/(λ + n/B)", _beff,
                            ("lambda", "B"), _beff_guess, (NONNEGATIVE, POSITIVE),
                            0.0, False, "message size n", "bandwidth B_eff")

def _saturation_canonical(b1, bmax):
    # every b1 >= Bmax draws the same min(n·b1, Bmax) for n >= 1 (a second thread that
    # measures no more than the first leaves b1 unidentified above Bmax): report b1 = Bmax
    return min(b1, bmax), bmax


SATURATION = Model("saturation", "B(n) = min(n·b1, Bmax)", _saturation, ("b1", "Bmax"),
                   _saturation_guess, (POSITIVE, POSITIVE), 1.0, True, "threads n",
                   "bandwidth B", canonical=_saturation_canonical)
SATURATION_SMOOTH = Model("saturation_smooth", "B(n) = Bmax·(1 − exp(−n·b1/Bmax))",
                          _saturation_smooth, ("b1", "Bmax"), _saturation_guess,
                          (POSITIVE, POSITIVE), 1.0, True, "threads n", "bandwidth B")

# the laws shared by the chapters; a chapter's own model is its ``model.py`` (``MODEL``),
# and :func:`get` finds both
MODELS = {m.name: m for m in (HOCKNEY, EFFECTIVE_BANDWIDTH, SATURATION, SATURATION_SMOOTH)}


def get(name: str) -> Model:
    """The model called ``name``: a shared law of :data:`MODELS`, else a chapter's own
    (a :class:`Model` of ``hpclab.chapters.<slug>.model``)."""
    if name in MODELS:
        return MODELS[name]
    from hpclab import chapters

    own = chapters.models()
    if name not in own:
        raise ValueError(f"unknown model {name!r}: choose one of "
                         f"{', '.join(sorted({*MODELS, *own}))}")
    return own[name]


def saturation_threads(fit):
    """Threads at which a saturation fit reaches Bmax: Bmax / b1 (n* of the min model)."""
    return fit["Bmax"] / fit["b1"]


@dataclass(frozen=True)
class Roofline:
    """The roofline bound P(I) = min(peak, I · B) of a kernel of arithmetic intensity I.

    ``bandwidth`` in bytes per second (e.g. a measured triad bandwidth), ``peak``
    in floating-point operations per second, or None when unknown (then only
    the memory bound applies). ``source`` says where the bandwidth came from.
    """

    bandwidth: float
    peak: float | None = None
    source: str = ""

    def __post_init__(self):
        if not np.isfinite(self.bandwidth) or self.bandwidth <= 0:
            raise ValueError(f"the bandwidth must be positive, got {self.bandwidth!r}")
        if self.peak is not None and (not np.isfinite(self.peak) or self.peak <= 0):
            raise ValueError(f"the peak must be positive or None, got {self.peak!r}")

    def bound(self, intensity):
        """Attainable flop/s at arithmetic intensity (flops per byte)."""
        intensity = np.asarray(intensity, dtype=float)
        if np.any(intensity < 0):
            raise ValueError("arithmetic intensity must be >= 0 flops per byte")
        memory = intensity * self.bandwidth
        return memory if self.peak is None else np.minimum(memory, self.peak)

    def time(self, flops, nbytes):
        """Least time of a kernel that does `flops` and moves `nbytes`."""
        t = np.asarray(nbytes, dtype=float) / self.bandwidth
        if self.peak is not None:
            t = np.maximum(t, np.asarray(flops, dtype=float) / self.peak)
        return t

    @property
    def ridge(self):
        """Intensity where the bound turns from memory to compute (None without a peak)."""
        return None if self.peak is None else self.peak / self.bandwidth


def effective_bandwidth(n, lam, bandwidth):
    """B_eff(n) = n / (λ + n/B): what a message of n bytes achieves under Hockney's model."""
    return _beff(np.asarray(n, dtype=float), lam, bandwidth)


@dataclass
class Fit:
    """Result of :func:`fit`."""

    model: Model
    x: np.ndarray
    y: np.ndarray
    params: dict
    stderr: dict
    ci95: dict
    covariance: np.ndarray
    residuals: np.ndarray
    r2: float
    dof: int
    weights: str = "absolute"
    extra: dict = field(default_factory=dict)

    def __getitem__(self, name):
        return self.params[name]

    def predict(self, x):
        return self.model(x, *self.params.values())

    @property
    def npoints(self):
        return int(np.shape(self.x)[-1])

    def interval(self, x, level=0.95):
        """The model's value at ``x`` with its ``level`` confidence interval, (value, low,
        high): the parameters' covariance carried through the model's gradient (delta
        method), with Student's t of the fit's degrees of freedom. Infinite when the fit has
        none to spare (as many points as parameters)."""
        from hpclab.stats import t_quantile

        p = np.array(list(self.params.values()), dtype=float)
        value = float(self.model(x, *p))
        if self.dof < 1 or not np.all(np.isfinite(self.covariance)):
            return value, -np.inf, np.inf
        grad = np.empty(p.size)
        for i in range(p.size):
            h = 1e-6 * (abs(p[i]) or 1.0)
            up, down = p.copy(), p.copy()
            up[i] += h
            down[i] -= h
            grad[i] = (float(self.model(x, *up)) - float(self.model(x, *down))) / (2 * h)
        half = t_quantile(0.5 + level / 2, self.dof) * float(np.sqrt(max(grad @ self.covariance
                                                                        @ grad, 0.0)))
        return value, value - half, value + half

    def words(self, param, quantity, unit="", scale=1.0, digits=2, name=None, **kw):
        """The estimate of ``param`` with its 95% interval in words
        (:func:`hpclab.stats.estimate_words` with the parameter's declared domain): scaled
        by ``scale`` into ``unit``; what the fit rests on is its number of points."""
        lo, hi = self.ci95[param]
        d = self.model.domain(param)
        domain = Domain(d.low * scale, d.high * scale, d.low_open, d.high_open)
        kw.setdefault("basis", f"{self.npoints} points")
        return estimate_words(self.params[param] * scale, lo * scale, hi * scale, unit,
                              quantity, digits, name=name or param, domain=domain, **kw)

    def table(self):
        """Estimates, standard errors and 95% intervals as a DataFrame, with a ``note`` on
        each estimate that its domain puts in doubt (:meth:`Domain.classify`): one at the end
        of its domain or outside it is not determined by these points, one whose interval
        reaches past it is barely bounded by them."""
        notes = []
        for k, v in self.params.items():
            d = self.model.domain(k)
            where = d.classify(v, *self.ci95[k])
            notes.append(TABLE_NOTES.get(where, "").format(domain=d.text()))
        return pd.DataFrame({
            "parameter": list(self.params),
            "estimate": list(self.params.values()),
            "stderr": list(self.stderr.values()),
            "ci95_low": [lo for lo, _ in self.ci95.values()],
            "ci95_high": [hi for _, hi in self.ci95.values()],
            "note": notes,
        })

    def __repr__(self):
        parts = ", ".join(f"{k}={v:.4g} ± {self.stderr[k]:.2g}" for k, v in self.params.items())
        return f"Fit({self.model.name}: {parts}; R²={self.r2:.4f}, n={self.npoints})"


# what Fit.table says of an estimate by where it lies against its domain (Domain.classify)
TABLE_NOTES = {
    "outside": "outside its domain ({domain}): not determined by these points",
    "at end": "not determined by these points: the fit stopped on a bound of its domain "
              "({domain})",
    "both": "its interval reaches past its domain ({domain}): barely bounded by these points",
    "below": "its interval reaches past its domain ({domain}): barely bounded by these points",
    "above": "its interval reaches past its domain ({domain}): barely bounded by these points",
    "no interval": "no interval: no points to spare",
}


def _clean(model, x, y, sigma):
    try:
        x = as_inputs(model, x) if model.inputs else np.asarray(x, dtype=float).ravel()
        y = np.asarray(y, dtype=float).ravel()
    except (TypeError, ValueError) as exc:
        raise FitError(f"{model.name}: x and y must be numbers ({exc})") from None
    npoints = x.shape[-1]
    if npoints != y.size:
        raise FitError(f"{model.name}: x has {npoints} values but y has {y.size}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise FitError(f"{model.name}: the data contain NaN or infinite values; drop them first")
    k = len(model.params)
    if npoints < k + 1:
        raise FitError(f"{model.name}: {k} parameter(s) need at least {k + 1} points to estimate "
                       f"an uncertainty, got {npoints} (a curve through as many points as "
                       "it has parameters is not a fit)")
    distinct = np.unique(x, axis=-1).shape[-1] if model.inputs else np.unique(x).size
    if distinct < k:
        raise FitError(f"{model.name}: the {model.x_name} values must take at least {k} distinct "
                       "values to separate the parameters")
    bad = (x < model.x_min if model.x_min_inclusive else x <= model.x_min)
    if model.inputs:
        bad = bad.any(axis=0)
        x_bad = x[:, bad]
        if bad.any():
            raise FitError(f"{model.name}: every input must be >= {model.x_min:g}, got "
                           f"{dict(zip(model.inputs, x_bad[:, 0]))}")
    if bad.any():
        rel = ">=" if model.x_min_inclusive else ">"
        raise FitError(f"{model.name}: {model.x_name} must be {rel} {model.x_min:g}, "
                       f"got {x[bad][0]:g}")
    if np.any(y <= 0):
        raise FitError(f"{model.name}: {model.y_name} must be positive, got {y[y <= 0][0]:g}")
    if isinstance(sigma, str):
        if sigma != "relative":
            raise FitError(f"sigma must be None, 'relative' or an array, got {sigma!r}")
        sigma_arr, label = y.copy(), "relative"
    elif sigma is None:
        sigma_arr, label = None, "absolute"
    else:
        sigma_arr, label = np.asarray(sigma, dtype=float).ravel(), "given"
        if sigma_arr.shape != y.shape or np.any(~np.isfinite(sigma_arr)) or np.any(sigma_arr <= 0):
            raise FitError(f"{model.name}: sigma must be positive and one per point")
    return x, y, sigma_arr, label


def fit(model, x, y, sigma=None, p0=None):
    """Least-squares fit of ``model`` to the points (x, y).

    Parameters
    ----------
    model : Model or str
        A :class:`Model`, or the name of one (see :func:`get`).
    x, y : array_like
        The data; NaN, infinite, out-of-domain x and non-positive y are rejected.
    sigma : None, "relative" or array_like
        Uncertainty of each y: None weighs all points equally, "relative"
        weighs by 1/y (minimises relative errors).
    p0 : sequence, optional
        Starting values; guessed from the data by default.

    Returns
    -------
    Fit
    """
    model = get(model) if isinstance(model, str) else model
    x, y, sigma_arr, label = _clean(model, x, y, sigma)
    line = _hockney_line(x, y, sigma_arr) if model is HOCKNEY else None
    if line is not None:
        popt, pcov = line
        return _result(model, x, y, popt, pcov, label)
    from scipy import optimize  # a third of a second: only the models without a closed form

    start = list(p0) if p0 is not None else list(model.guess(x, y))
    lo, hi = model.bounds
    start = [float(np.clip(v, a + 1e-15 if np.isfinite(a) else a, b)) for v, a, b in
             zip(start, lo, hi)]
    # Fit in scaled units (parameters and y of order one): bandwidths of 1e10 B/s next to
    # latencies of 1e-7 s otherwise ruin the numerical Jacobian and the covariance.
    pscale = np.array([abs(v) if v != 0 and np.isfinite(v) else 1.0 for v in start])
    yscale = float(np.median(np.abs(y))) or 1.0

    def scaled(xx, *q):
        return model.func(xx, *(np.asarray(q) * pscale)) / yscale

    qlo = [a / sc for a, sc in zip(lo, pscale)]
    qhi = [b / sc for b, sc in zip(hi, pscale)]
    try:
        with np.errstate(all="ignore"):
            qopt, qcov = optimize.curve_fit(
                scaled, x, y / yscale, p0=np.asarray(start) / pscale,
                sigma=None if sigma_arr is None else sigma_arr / yscale, absolute_sigma=False,
                bounds=(qlo, qhi), maxfev=20000)
    except (RuntimeError, ValueError, optimize.OptimizeWarning) as exc:
        raise FitError(f"{model.name}: the fit did not converge ({exc})") from None
    popt = qopt * pscale
    pcov = qcov * np.outer(pscale, pscale)
    if model.canonical is not None:
        popt = np.asarray(model.canonical(*popt), dtype=float)
    return _result(model, x, y, popt, pcov, label)


def _hockney_line(x, y, sigma):
    """Hockney's T = λ + n/B is a straight line in (λ, 1/B): its weighted least squares
    has a closed form. Returns (popt, pcov) in (λ, B), the covariance as curve_fit gives it
    (the Jacobian in λ and B at the optimum, scaled by the residuals' variance), or None
    when the line's optimum lies outside the domain (λ < 0 or a slope ≤ 0), where the
    bounded fit decides."""
    w = np.ones_like(y) if sigma is None else 1.0 / sigma
    design = np.column_stack([np.ones_like(x), x]) * w[:, None]
    scale = np.linalg.norm(design, axis=0)
    if not np.all(scale > 0):
        return None
    coef, *_ = np.linalg.lstsq(design / scale, y * w, rcond=None)
    lam, slope = coef / scale
    if not (np.isfinite(lam) and np.isfinite(slope) and lam >= 0 and slope > 0):
        return None
    resid = (y - lam - x * slope) * w
    try:  # the line's covariance in scaled units, then in (λ, B): B = 1/slope
        cov = np.linalg.inv((design / scale).T @ (design / scale)) / np.outer(scale, scale)
    except np.linalg.LinAlgError:
        return None
    cov *= float(resid @ resid) / (x.size - 2)
    to_b = np.diag([1.0, -1.0 / slope**2])
    pcov = to_b @ cov @ to_b.T
    return np.array([lam, 1.0 / slope]), pcov


def _result(model, x, y, popt, pcov, label):
    dof = x.shape[-1] - len(popt)
    stderr = np.sqrt(np.clip(np.diag(pcov), 0, np.inf))
    t = t_quantile(0.975, dof)
    pred = model.func(x, *popt)
    residuals = y - pred
    ss_tot = np.sum((y - y.mean()) ** 2)
    r2 = 1.0 - np.sum(residuals**2) / ss_tot if ss_tot > 0 else float("nan")
    names = model.params
    return Fit(model=model, x=x, y=y,
               params={k: float(v) for k, v in zip(names, popt)},
               stderr={k: float(s) for k, s in zip(names, stderr)},
               ci95={k: (float(v - t * s), float(v + t * s))
                     for k, v, s in zip(names, popt, stderr)},
               covariance=pcov, residuals=residuals, r2=float(r2), dof=int(dof), weights=label)


@dataclass
class TwoSegmentFit:
    """Result of :func:`fit_two_segment`: Hockney below and above the breakpoint.

    Fields: ``left`` and ``right``, the two segments' fits (``fit["lambda"]``, ``fit["B"]``);
    ``breakpoint_low``, the largest size of the left segment, and ``breakpoint_high``, the
    smallest size of the right one (the break lies between them); ``x`` and ``y``, the points
    fitted; ``residuals`` and ``r2``; ``candidates``, every split tried. ``table()`` shows
    both segments with their sizes, ``predict(x)`` the fitted time at x.
    """

    left: Fit
    right: Fit
    breakpoint_low: float   # largest x of the left segment
    breakpoint_high: float  # smallest x of the right segment
    x: np.ndarray
    y: np.ndarray
    residuals: np.ndarray
    r2: float
    candidates: pd.DataFrame

    def predict(self, x):
        x = np.asarray(x, dtype=float)
        return np.where(x <= self.breakpoint_low, self.left.predict(x), self.right.predict(x))

    def table(self):
        left, right = self.left.table(), self.right.table()
        left.insert(0, "segment", f"n <= {self.breakpoint_low:g}")
        right.insert(0, "segment", f"n >= {self.breakpoint_high:g}")
        return pd.concat([left, right], ignore_index=True)

    def __repr__(self):
        return (f"TwoSegmentFit(break between {self.breakpoint_low:g} and "
                f"{self.breakpoint_high:g}; left {self.left!r}; right {self.right!r})")


def rms_relative(fit):
    """Root-mean-square relative residual of a fit (or two-segment fit), in percent."""
    return float(np.sqrt(np.mean((fit.y / fit.predict(fit.x) - 1) ** 2)) * 100)


def fit_two_segment(x, y, sigma="relative", min_points=3):
    """Fit Hockney's model on each side of a breakpoint chosen to minimise the total error.

    Every split between two consecutive distinct sizes that leaves at least
    ``min_points`` sizes on each side is tried; the one with the smallest sum
    of squared (weighted) residuals wins. ``candidates`` holds every split's
    error, so the choice can be shown.
    """
    x, y, _, _ = _clean(HOCKNEY, x, y, None)
    if min_points < 3:
        raise FitError("each segment needs at least 3 points (2 parameters and an uncertainty)")
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    sizes = np.unique(x)
    if sizes.size < 2 * min_points:
        raise FitError(f"a two-segment fit needs at least {2 * min_points} distinct sizes "
                       f"({min_points} per segment), got {sizes.size}")
    sig = y if sigma == "relative" else (None if sigma is None else np.asarray(sigma)[order])
    best, rows = None, []
    for i in range(min_points - 1, sizes.size - min_points):
        cut = sizes[i]
        lmask, rmask = x <= cut, x > cut
        try:
            left = fit(HOCKNEY, x[lmask], y[lmask], sigma=None if sig is None else sig[lmask])
            right = fit(HOCKNEY, x[rmask], y[rmask], sigma=None if sig is None else sig[rmask])
        except FitError:
            continue
        w = np.ones_like(y) if sig is None else 1.0 / np.asarray(sig, dtype=float)
        sse = float(np.sum((left.residuals * w[lmask]) ** 2)
                    + np.sum((right.residuals * w[rmask]) ** 2))
        rows.append({"breakpoint_low": cut, "breakpoint_high": sizes[i + 1], "sse": sse})
        if best is None or sse < best[0]:
            best = (sse, left, right, cut, sizes[i + 1])
    if best is None:
        raise FitError("no split gave two convergent fits")
    _, left, right, lo, hi = best
    pred = np.where(x <= lo, left.predict(x), right.predict(x))
    residuals = y - pred
    ss_tot = np.sum((y - y.mean()) ** 2)
    r2 = float(1 - np.sum(residuals**2) / ss_tot) if ss_tot > 0 else float("nan")
    return TwoSegmentFit(left=left, right=right, breakpoint_low=float(lo),
                         breakpoint_high=float(hi), x=x, y=y, residuals=residuals, r2=r2,
                         candidates=pd.DataFrame(rows))
