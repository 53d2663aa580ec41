"""STREAM lab: call the student's triad on fresh arrays and check it."""
from __future__ import annotations

import numpy as np


def stream_triad_check(triad, n, threads=1, scalar=None, seed=1):
    """Call ``triad(a, b, c, scalar, threads)`` on arrays of n doubles and check it
    (``scalar``: STREAM's, :data:`hpclab.chapters.stream.kernels.SCALAR`, by default).

    Returns a dict: ``correct`` (a equals b + scalar * c to rounding),
    ``inputs_untouched`` (b and c unchanged), ``seconds`` (one call), and what its source
    says of its threads (:func:`stream_triad_source`).
    """
    import time

    if scalar is None:
        from hpclab.chapters.stream.kernels import SCALAR as scalar
    rng = np.random.default_rng(seed)
    b, c = rng.standard_normal(n), rng.standard_normal(n)
    b0, c0 = b.copy(), c.copy()
    a = np.full(n, np.nan)
    t0 = time.perf_counter()
    triad(a, b, c, float(scalar), int(threads))
    seconds = time.perf_counter() - t0
    # a fused multiply-add (the default where the CPU has one, e.g. on ARM) rounds once, the
    # reference twice: both are within a few units in the last place of the larger term
    bound = 4 * np.finfo(float).eps * (np.abs(b0) + np.abs(scalar * c0))
    correct = bool(np.all(np.abs(a - (b0 + scalar * c0)) <= bound))  # NaN: not written
    return {"correct": correct,
            "inputs_untouched": bool(np.array_equal(b, b0) and np.array_equal(c, c0)),
            "seconds": seconds, **stream_triad_source(triad)}


def stream_triad_source(triad):
    """What the source of a ``%%cython`` triad says about its threads, read from the
    ``.pyx`` file the cell compiled (:func:`hpclab.mpicython.source_of`: in the grader, what
    the kernel found). A dict, each value None when there is no source to read:

    ``threaded``: whether its loop runs on OpenMP threads with the count it is given
    (``prange(..., num_threads=threads)`` or ``parallel(num_threads=threads)``);
    ``schedule``: the schedule its ``prange`` names ("" when it names none: OpenMP's static);
    ``split``: whether its threads share the iterations out (a ``prange``, or ``threadid()``
    in a ``parallel`` block) rather than each running the whole loop.
    """
    import re

    from hpclab.mpicython import body_span, source_of, without_strings

    out = {"threaded": None, "schedule": None, "split": None}
    text = source_of(triad)
    if not text:
        return out
    # the function's own lines, its strings blanked (the schedule, a string, is read from the
    # same lines as written: blanking keeps the lines)
    lines = [line.split("#", 1)[0] for line in without_strings(text).splitlines()]
    first, end = body_span(lines, getattr(triad, "__name__", "triad"))
    body = "\n".join(lines[first:end])
    named = "\n".join(line.split("#", 1)[0] for line in text.splitlines()[first:end])
    parallel = bool(re.search(r"\b(?:prange|parallel)\s*\(", body))
    out["threaded"] = parallel and bool(
        re.search(r"\bnum_threads\s*=\s*(?:int\s*\(\s*)?threads\b", body))
    schedule = re.search(r"\bprange\s*\((?:[^()]|\([^()]*\))*?\bschedule\s*=\s*['\"](\w+)",
                         named, re.S)
    out["schedule"] = schedule.group(1) if schedule else ""
    out["split"] = not parallel or bool(re.search(r"\b(?:prange|threadid)\s*\(", body))
    return out


def stream_recording(triad, calls):
    """``triad`` that also appends ``(threads, n, start, end)`` to ``calls`` at every call:
    the threads it was given (its default, 1, when none), the elements of ``a``, and
    ``time.perf_counter()`` just before and just after the call. Its name, module and code
    are the triad's, so the checks that read its source read the same. Given a triad that
    records already, it records the one inside."""
    import functools
    import time

    triad = getattr(triad, "__wrapped__", triad)

    @functools.wraps(triad)
    def recording(*args, **kwargs):
        threads = args[4] if len(args) > 4 else kwargs.get("threads", 1)
        a = args[0] if args else kwargs.get("a")
        start = time.perf_counter()
        try:
            return triad(*args, **kwargs)
        finally:
            end = time.perf_counter()
            try:
                calls.append((int(threads), len(a), start, end))
            except (TypeError, ValueError):  # not a count or not an array: the triad says so
                pass

    return recording


def _windows(calls, n, count):
    """Every run of ``count`` consecutive calls of the triad on ``n`` elements (``calls`` as
    :func:`stream_recording` keeps them), the latest first."""
    on_n = [call for call in calls if call[1] == n]
    return [on_n[k:k + count] for k in range(len(on_n) - count, -1, -1)] if count else []


def stream_threads_problem(calls, n, cores, runs, times=None):
    """What is wrong with the threads of the ``runs`` calls of the triad on ``n`` elements
    that were timed (``calls`` as :func:`stream_recording` keeps them), in the student's
    terms; None when each ran on all ``cores``. The timed calls are the last ``runs`` of
    them, or, given the student's ``times``, the runs of calls whose clocks hold those times
    (:func:`stream_times_problem`): a call made after the timing, to look at the result,
    is not one of them."""
    windows = _windows(calls, n, runs)
    if not windows:
        made = sum(1 for call in calls if call[1] == n)
        return (f"your triad was called {made} times on arrays of n_big = {n:,} elements in "
                f"this cell, not the {runs} of my_times: time each call of "
                "triad(a, b, c, 3.0, CORES) on the arrays a, b, c the cell makes")
    windows = windows[:1] if times is None else (
        [w for w in windows if _clock_problem(w, times) is None] or windows[:1])
    if any(all(call[0] == cores for call in w) for w in windows):
        return None
    wrong = sorted({call[0] for call in windows[0] if call[0] != cores})
    if max(wrong) > cores:
        return (f"your timed calls ran on {', '.join(map(str, wrong))} threads, on {cores} "
                "cores: threads beyond the cores take turns on them, and the time is of their "
                "sharing. Time with all cores, one thread each: "
                "triad(a, b, c, 3.0, CORES)")
    return (f"your timed calls ran on {', '.join(map(str, wrong))} thread(s), not all {cores} "
            "cores: without its last argument the triad runs on one (its default). Time "
            "triad(a, b, c, 3.0, CORES)")


def stream_times_problem(calls, n, times):
    """What is wrong with ``times``, the student's times of ``len(times)`` consecutive calls
    of the triad on ``n`` elements (``calls`` as :func:`stream_recording` keeps them, with
    the clock read just inside each call), in the student's terms; None when some run of
    such calls holds them: each time holds its call and nothing of the calls before or after
    it. Clock against clock, not a time against a bound: a time read just outside a call is
    at least the call's own, and less than from the end of the call before it to the start
    of the call after it."""
    windows = _windows(calls, n, len(times))
    if not windows or any(len(call) < 4 for w in windows for call in w):
        return None  # no such calls: stream_threads_problem names that
    said = [_clock_problem(w, times) for w in windows]
    return None if None in said else said[0]


def _clock_problem(timed, times, slack=5e-6):
    """What is wrong with ``times`` as the times of the calls ``timed``; None when each
    holds its call and lies within the calls around it."""
    t = np.asarray(times, dtype=float)
    start = np.array([call[2] for call in timed])
    end = np.array([call[3] for call in timed])
    inner = end - start
    shorter = np.flatnonzero(t < inner - slack)
    if shorter.size:
        k = int(shorter[0])
        return (f"my_times[{k}] = {t[k]:.3g} is less than that call of triad took "
                f"({inner[k]:.3g} s): give each time in seconds, time.perf_counter() read just "
                "before the call and just after it")
    k_inside = np.arange(1, t.size - 1)
    window = start[k_inside + 1] - end[k_inside - 1]
    longer = k_inside[t[k_inside] > window + slack]
    if not longer.size:
        return None
    k = int(longer[0])
    ratio = float(np.median(t[longer] / inner[longer]))
    if np.all(np.diff(t) > 0) and t[-1] >= end[-1] - start[0] - slack:
        why = ("your times grow from run to run, each from one start before the first call: "
               "read t0 inside the loop, just before each call")
    elif 300 < ratio < 3000:
        why = "that looks like milliseconds: give the times in seconds"
    elif 3e5 < ratio < 3e6:
        why = "that looks like microseconds: give the times in seconds"
    else:
        why = ("time each call on its own, in seconds, with time.perf_counter() (wall-clock "
               "time, not the CPU time of all threads)")
    return (f"my_times[{k}] = {t[k]:.3g} is longer than the time from the end of the call "
            f"before it to the start of the call after it ({window[k - 1]:.3g} s): {why}")


def stream_cache_elements(at_most=None):
    """Doubles per array for a triad whose three arrays fill half of this machine's
    last-level cache (1 MiB assumed when the machine does not say), at most ``at_most``,
    and words on why."""
    from hpclab import machine

    llc = machine.last_level_cache_bytes()
    n = max(1024, (llc or 1 << 20) // (2 * 24))
    where = (f"this machine's last-level cache of {llc / 2**20:g} MiB" if llc else
             "a cache of 1 MiB (this machine does not report its caches)")
    if at_most is not None and n > at_most:
        return int(at_most), (f"{int(at_most):,} doubles per array, a quarter of n_big: n_big "
                              f"is inside {where} too (the quick profile), so this part "
                              "cannot show what the cache changes")
    return n, f"{n:,} doubles per array: the three arrays fill half of {where}"


def stream_time_triad(triad, n, threads, batches=10, min_seconds=2e-3):
    """Time ``triad(a, b, c, 3.0, threads)`` on written arrays of n doubles: one untimed
    call, then ``batches`` batches of as many calls as make one batch last at least
    ``min_seconds``. Returns the time of one call in each batch (seconds, a list)."""
    import time

    a, b, c = np.zeros(n), np.full(n, 2.0), np.full(n, 0.5)
    triad(a, b, c, 3.0, int(threads))
    t0 = time.perf_counter()
    triad(a, b, c, 3.0, int(threads))
    one = max(time.perf_counter() - t0, 1e-7)
    calls = max(1, int(min_seconds / one))
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            triad(a, b, c, 3.0, int(threads))
        out.append((time.perf_counter() - t0) / calls)
    return out
