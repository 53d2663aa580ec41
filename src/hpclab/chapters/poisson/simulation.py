"""The Poisson chapter on a simulated cluster: its C kernel under SimGrid's SMPI, through
the driver beside this file (``smpi_driver.c``) and :mod:`hpclab.simulate`."""
from __future__ import annotations

from hpclab import simulate


def on_platform(platform_name, ranks=None, n=1024, iterations=10, repetitions=2,
                interleave=True, profile=None, timeout=900):
    """Simulated CG solves of the Poisson problem (capped at ``iterations``) on P ranks filled
    core by core: the Poisson chapter's records (kind ``simulated``). The arithmetic is timed
    on this machine, one rank at a time (see :data:`hpclab.simulate.COMPUTE_CONFIG`)."""
    spec = simulate.platform(platform_name)
    ranks = sorted(set(ranks or simulate.default_ranks(spec)))
    if ranks[-1] > n:
        raise ValueError(f"N = {n} has fewer rows than {ranks[-1]} ranks: choose N >= P")

    def case(p):
        return ([n, int(bool(interleave)), iterations, repetitions],
                {"n": n, "interleave": bool(interleave), "iterations_cap": iterations})

    return simulate.computed("poisson", spec, ranks, repetitions, case, profile, {"n": n}, timeout)


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate poisson``: the profile's ``simulated`` settings."""
    from hpclab import profiles

    sim = profiles.get("poisson", profile)["simulated"]
    return on_platform(platform_name, ranks=ranks or sim["ranks"], n=sim["n"],
                       iterations=sim["iterations"], profile=profile, **kw)
