"""Sweep sizes per experiment for the profiles quick | standard | full.

``quick`` is for tests and CI (seconds per experiment), ``standard`` for the
default ``make book`` on a 2-core laptop (the whole book in about ten
minutes), ``full`` for a workstation or a cluster node. The profile comes from
the ``profile=`` argument, else ``$HPCLAB_PROFILE``, else ``standard``.

The settings themselves live in each kernel's declaration
(``chapters/<slug>/declaration.py``, ``profiles=``); :func:`check` says what is
wrong with them.
"""
from __future__ import annotations

import os
from typing import Any

from hpclab.kernels import registry

PROFILES = registry.PROFILES
DEFAULT = "standard"


def name(profile: str | None = None) -> str:
    """The profile in force: the argument, else $HPCLAB_PROFILE, else 'standard'."""
    chosen = profile or os.environ.get("HPCLAB_PROFILE") or DEFAULT
    if chosen not in PROFILES:
        raise ValueError(f"unknown profile {chosen!r}: choose one of {', '.join(PROFILES)} "
                         "(argument --profile or HPCLAB_PROFILE)")
    return chosen


def get(experiment: str, profile: str | None = None) -> dict[str, Any]:
    """The settings of an experiment under a profile (a fresh dict)."""
    kernels = registry.kernels()
    if experiment not in kernels:
        raise ValueError(f"unknown experiment {experiment!r}: choose one of "
                         f"{', '.join(sorted(kernels))}")
    settings = kernels[experiment].profiles[name(profile)]
    return {k: list(v) if isinstance(v, list) else v for k, v in settings.items()}


def timeout(experiment: str, profile: str | None = None) -> float:
    """Seconds one measurement of an experiment may take under a profile."""
    return get(experiment, profile)["timeout"]


def check() -> list[str]:
    """Every declared kernel's profile problems (an empty list when all are fine)."""
    return [p for k in registry.kernels().values() for p in k.check_profiles()]
