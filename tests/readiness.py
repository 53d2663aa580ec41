"""Skipping a test of what a chapter cannot measure on this machine
(:func:`hpclab.chapters.unready`: the MPI libraries' chapter without ``make mpilibs``), unless
``HPCLAB_REQUIRE_READY`` is set: CI sets it, and there what did not set up is a failure."""
import os

import pytest

from hpclab import chapters


def skip_if_unready(slug, what, why=None):
    """Skip (or, with HPCLAB_REQUIRE_READY set, fail) the calling test when chapter ``slug``
    cannot measure here; ``what``: what the test checks, for its message; ``why``: the reason
    the caller already has from :func:`hpclab.chapters.unready` (else asked here)."""
    why = why or chapters.unready(slug)
    if why and os.environ.get("HPCLAB_REQUIRE_READY"):
        pytest.fail(f"{what}: {why}, and HPCLAB_REQUIRE_READY is set (as in CI)")
    if why:
        pytest.skip(f"{what}: {why}")
