"""Sweep sizes per experiment for the profiles quick | standard | full.

``quick`` is for tests and CI (seconds per experiment), ``standard`` for the
default ``make book`` on a 2-core laptop (the whole book in about ten
minutes), ``full`` for a workstation or a cluster node. The profile comes from
the ``profile=`` argument, else ``$HPCLAB_PROFILE``, else ``standard``.
"""
from __future__ import annotations

import os

PROFILES = ("quick", "standard", "full")
DEFAULT = "standard"

_KIB, _MIB = 1 << 10, 1 << 20

SETTINGS = {
    "pingpong": {
        # osu_latency: 0 and powers of two to 4 MiB; 100 + 10,000 round trips up to 8 KiB,
        # 10 + 1,000 above. `scale` divides the iteration counts.
        "quick": {"sizes": [0, 1, 8, 64, 512, 4 * _KIB, 32 * _KIB, 256 * _KIB, _MIB],
                  "scale": 100, "repetitions": 3, "timeout": 60},
        "standard": {"sizes": [0] + [1 << k for k in range(23)], "scale": 1, "repetitions": 5,
                     "timeout": 300},
        "full": {"sizes": [0] + [1 << k for k in range(23)], "scale": 1, "repetitions": 20,
                 "timeout": 900},
    },
    "ring": {
        # payloads in bytes (4: the rank alone); `scale` divides the rings per batch;
        # rank counts 1 .. cores for timings, 1 .. `check_upto` (oversubscribed) for correctness
        "quick": {"payloads": [4, 256, 4 * _KIB], "scale": 50, "repetitions": 2, "check_upto": 4,
                  "timeout": 60},
        "standard": {"payloads": [4, 64, _KIB, 16 * _KIB, 256 * _KIB, _MIB], "scale": 1,
                     "repetitions": 5, "check_upto": 8, "timeout": 300},
        "full": {"payloads": [4] + [1 << k for k in range(4, 23, 2)], "scale": 1,
                 "repetitions": 10, "check_upto": 8, "timeout": 900},
    },
    "stream": {
        # n: doubles per array; None applies STREAM's rule (each array >= 4x all caches).
        # ntimes: trials, the first not counted (STREAM's NTIMES >= 10 outside `quick`).
        "quick": {"n": 1 << 18, "ntimes": 3, "binds": ["close", "spread"], "timeout": 120},
        "standard": {"n": None, "ntimes": 10, "binds": ["close", "spread"], "timeout": 900},
        "full": {"n": None, "ntimes": 20, "binds": ["close", "spread"], "timeout": 1800},
    },
}


def name(profile=None):
    """The profile in force: the argument, else $HPCLAB_PROFILE, else 'standard'."""
    chosen = profile or os.environ.get("HPCLAB_PROFILE") or DEFAULT
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}: choose one of {', '.join(PROFILES)} "
                         "(argument --profile or HPCLAB_PROFILE)")
    return chosen


def get(experiment, profile=None):
    """The settings of an experiment under a profile (a fresh dict)."""
    if experiment not in SETTINGS:
        raise ValueError(f"unknown experiment {experiment!r}: choose one of "
                         f"{', '.join(sorted(SETTINGS))}")
    settings = SETTINGS[experiment][name(profile)]
    return {k: list(v) if isinstance(v, list) else v for k, v in settings.items()}
