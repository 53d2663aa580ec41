"""STREAM lab: call the student's triad on fresh arrays and check it."""
from __future__ import annotations

import numpy as np


def stream_triad_check(triad, n, threads=1, scalar=None, seed=1):
    """Call ``triad(a, b, c, scalar, threads)`` on arrays of n doubles and check it
    (``scalar``: STREAM's, :data:`hpclab.chapters.stream.kernels.SCALAR`, by default).

    Returns a dict: ``correct`` (a equals b + scalar * c to rounding),
    ``inputs_untouched`` (b and c unchanged), ``seconds`` (one call).
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
    return {"correct": bool(np.allclose(a, b0 + scalar * c0, rtol=1e-12, atol=0)),
            "inputs_untouched": bool(np.array_equal(b, b0) and np.array_equal(c, c0)),
            "seconds": seconds}
