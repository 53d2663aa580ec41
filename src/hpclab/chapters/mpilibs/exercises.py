"""What the MPI libraries lab's checks run on the student's code: the Hockney line and the
two-line split on PingPong times made up here (a known line, a known switch, a known noise),
and the facts the checks need to tell a right answer from the usual wrong ones.

No MPI: the student's functions are pure numpy on a table of sizes and times.
"""
from __future__ import annotations

import numpy as np


def synthetic_pingpong(seed: int, switch: int = 8, n: int = 14, noise: float = 0.03):
    """Sizes 2**3 .. and one-way times (s): λ = 0.4 µs, B = 3 GB/s below the switch (the
    ``switch``-th size), λ = 3 µs, B = 10 GB/s from it on; relative noise."""
    rng = np.random.default_rng(seed)
    sizes = 2.0 ** np.arange(3, 3 + n)
    lam = np.where(np.arange(n) < switch, 0.4e-6, 3e-6)
    bw = np.where(np.arange(n) < switch, 3e9, 10e9)
    times = (lam + sizes / bw) * (1 + noise * rng.standard_normal(n))
    return sizes, times


def _line(sizes, times, weighted=True):
    """(λ, B) of t = λ + n/B by least squares on the residuals relative to t (``weighted``)
    or absolute ones."""
    w = 1 / times if weighted else np.ones_like(times)
    a = np.column_stack([w, sizes * w])
    (lam, inv_b), *_ = np.linalg.lstsq(a, times * w, rcond=None)
    return float(lam), float(1 / inv_b)


def _sse(sizes, times, weighted=True, line=None):
    """The squared errors of a segment's line (``line``: a function like the student's
    hockney_line; default the relative least squares), relative to each time or absolute."""
    lam, bw = (line or _line)(sizes, times)
    r = times - (lam + sizes / bw)
    return float(np.sum((r / times) ** 2 if weighted else r**2))


def _split(sizes, times, min_points=3, weighted=True, line=None, last=True):
    """The index of the first size above the best split; ``weighted``: scored by the errors
    relative to each time (else absolute ones), each segment fitted by ``line``; ``last``:
    the split that leaves ``min_points`` sizes above is tried too (a loop one short is not)."""
    best = None
    for i in range(min_points, len(sizes) - min_points + (1 if last else 0)):
        sse = (_sse(sizes[:i], times[:i], weighted, line)
               + _sse(sizes[i:], times[i:], weighted, line))
        if best is None or sse < best[0]:
            best = (sse, i)
    return best[1]


def best_split(sizes, times, min_points=3) -> float:
    """The first size of the upper segment of the best two-line split (relative least squares,
    at least ``min_points`` sizes each side) of sorted, distinct sizes: the checks' own."""
    sizes, times = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    return float(sizes[_split(sizes, times, min_points)])


def synthetic_tail(seed: int, n: int = 12, noise: float = 0.01):
    """One Hockney line (λ = 0.5 µs, B = 5 GB/s) whose last two sizes take 1.5 times as long
    (messages beyond the cache): a split that leaves two sizes on a side fits them exactly."""
    rng = np.random.default_rng(seed)
    sizes = 2.0 ** np.arange(3, 3 + n)
    times = (0.5e-6 + sizes / 5e9) * (1 + noise * rng.standard_normal(n))
    times[-2:] *= 1.5
    return sizes, times


class _StudentLine:
    """The student's ``hockney_line`` as the checks' segments fit: each segment once (the
    splits of every scoring try the same segments), and those a check will need fitted ahead
    in one request (:meth:`prefetch`; through the grader's bridge a call costs milliseconds,
    and a check's tables have hundreds of segments)."""

    def __init__(self, hockney_line):
        self.hockney_line = hockney_line
        self.fitted: dict = {}

    @staticmethod
    def _key(sizes, times):
        return sizes.tobytes(), times.tobytes()

    def prefetch(self, segments):
        from hpclab import exercises

        todo = {}
        for sizes, times in segments:
            key = self._key(sizes, times)
            if key not in self.fitted:
                todo[key] = (sizes.copy(), times.copy())
        for key, got in zip(todo, exercises.map_calls(self.hockney_line,
                                                      list(todo.values()))):
            self._keep(key, got)

    def _keep(self, key, got):
        lam, bw = got
        self.fitted[key] = (float(lam), float(bw))

    def __call__(self, sizes, times):
        key = self._key(sizes, times)
        if key not in self.fitted:
            self._keep(key, self.hockney_line(sizes.copy(), times.copy()))
        return self.fitted[key]


def _segments(sizes, times, min_points):
    """The segments the splits of a table with at least ``min_points`` sizes a side fit:
    every prefix and suffix of ``min_points`` sizes or more."""
    n = len(sizes)
    return [seg for i in range(min_points, n - min_points + 1)
            for seg in ((sizes[:i], times[:i]), (sizes[i:], times[i:]))]


def _line_of(hockney_line):
    """The student's line as the checks' segments fit (so that a wrong line costs the line's
    points, not the split's), or None (the relative least squares) when it cannot fit one."""
    if hockney_line is None:
        return None
    s, t = synthetic_pingpong(0, n=6)
    got = _call(hockney_line, s, t)
    try:
        ok = len(got) == 2 and bool(np.all(np.isfinite(np.asarray(got, dtype=float))))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        return None
    return _StudentLine(hockney_line)


def _call(func, *args):
    """The student's result, or the exception it raised (as a value the check can show)."""
    try:
        return func(*args)
    except Exception as exc:  # noqa: BLE001 (the check says what the student's code raised)
        return exc


def line_check(hockney_line, seeds=(1, 2, 3)) -> dict:
    """The student's ``hockney_line(sizes, times)`` on an exact line and on noisy ones beside
    the relative least squares the lab asks for, and beside the usual slips: absolute
    residuals, the slope 1/B returned as B, the pair swapped."""
    from hpclab import exercises

    sizes = 2.0 ** np.arange(3, 12)
    exact = 0.5e-6 + sizes / 4e9
    out = {"calls_fit": sorted(exercises.names_used(hockney_line)
                               & {"fit_two_segment", "fit", "best_split"}),
           "exact": _call(hockney_line, sizes, exact), "exact_want": (0.5e-6, 4e9),
           "cases": []}
    for seed in seeds:
        s, t = synthetic_pingpong(seed, switch=99, n=12, noise=0.2)
        got = _call(hockney_line, s.copy(), t.copy())
        out["cases"].append({"got": got, "want": _line(s, t),
                             "absolute": _line(s, t, weighted=False)})
    return out


def split_check(split_fit, hockney_line=None, seeds=(4, 5, 6, 7, 8)) -> dict:
    """The student's ``split_fit(sizes, times, min_points)`` on made-up PingPong tables with a
    switch (and on lines whose last two sizes are slower), beside the split the lab asks for
    (each side fitted by the student's ``hockney_line`` when it fits at all, scored by the
    squared errors relative to each time, at least ``min_points`` sizes each side) and beside
    the usual slips: absolute errors, segments shorter than ``min_points``, the last size below
    the switch instead of the first above."""
    from hpclab import exercises

    line = _line_of(hockney_line)
    fit = line or _line
    out: dict = {"calls_fit": sorted(exercises.names_used(split_fit)
                                     & {"fit_two_segment", "best_split"}), "cases": []}
    tables = [(seed, noise, *synthetic_pingpong(seed, noise=noise))
              for seed in seeds for noise in (0.03, 0.25)]
    tables += [(seed, 0.01, *synthetic_tail(seed)) for seed in seeds[:2]]
    s5, t5 = synthetic_pingpong(9)
    if line is not None:  # every segment below, in one request
        line.prefetch([seg for _, _, s, t in tables for seg in _segments(s, t, 2)]
                      + _segments(s5, t5, 5))
    for seed, noise, s, t in tables:
        got = _call(split_fit, s.copy(), t.copy(), 3)
        i = _split(s, t, line=line)
        out["cases"].append({
            "seed": seed, "noise": noise, "sizes": s, "got": got,
            "switch": float(s[i]), "last_below": float(s[i - 1]),
            "below": fit(s[:i], t[:i]), "above": fit(s[i:], t[i:]),
            "absolute": float(s[_split(s, t, weighted=False, line=line)]),
            "short": float(s[_split(s, t, min_points=2, line=line)]),
            "one_short": float(s[_split(s, t, line=line, last=False)])})
    out["min_points_5"] = {"got": _call(split_fit, s5.copy(), t5.copy(), 5),
                           "switch": float(s5[_split(s5, t5, min_points=5, line=line)]),
                           "sizes": s5}
    return out
