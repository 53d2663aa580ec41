"""The Jacobi chapter on a simulated cluster: its C kernel under SimGrid's SMPI, through
the driver beside this file (``smpi_driver.c``) and :mod:`hpclab.simulate`."""
from __future__ import annotations

from hpclab import simulate


def on_platform(platform_name, ranks=None, L=64, sweeps=10, repetitions=2,
                decomposition="cube", overlap=False, profile=None, timeout=900):
    """Simulated weak scaling of the Jacobi sweep: L points per rank and dimension on P ranks
    filled core by core, the Jacobi chapter's records (kind ``simulated``). The arithmetic is
    timed on this machine, one rank at a time (see :data:`hpclab.simulate.COMPUTE_CONFIG`)."""
    from hpclab.chapters.jacobi.kernels import process_grid

    spec = simulate.platform(platform_name)
    index = simulate.choices("jacobi", "decomposition").index(decomposition)

    def case(p):
        dims = process_grid(decomposition, p)
        nx, ny, nz = (L * q for q in dims)
        return ([index, nx, ny, nz, int(bool(overlap)), sweeps, repetitions, *dims],
                {"decomposition": decomposition, "overlap": bool(overlap), "L": L, "N": 0,
                 "nx": nx, "ny": ny, "nz": nz, "grid": "x".join(map(str, dims))})

    ranks = sorted(set(ranks or simulate.default_ranks(spec)))
    return simulate.computed("jacobi", spec, ranks, repetitions, case, profile, {"L": L},
                             timeout)


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate jacobi``: the profile's ``simulated`` settings."""
    from hpclab import profiles

    sim = profiles.get("jacobi", profile)["simulated"]
    return on_platform(platform_name, ranks=ranks or sim["ranks"], L=sim["L"],
                       sweeps=sim["sweeps"], profile=profile, **kw)
