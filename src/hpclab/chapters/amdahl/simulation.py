"""The Amdahl chapter on a simulated cluster: its C kernel under SimGrid's SMPI, through
the driver beside this file (``smpi_driver.c``) and :mod:`hpclab.simulate`."""
from __future__ import annotations

from hpclab import simulate


def on_platform(platform_name, ranks=None, shape=(2400, 100, 100), repetitions=3,
                distribution="none", profile=None, timeout=900):
    """Simulated strong scaling of report 001's matrix addition (create on rank 0,
    distribute, add, collect) on P ranks filled core by core: the Amdahl chapter's records
    (kind ``simulated``). The arithmetic and copies are timed on this machine, one rank at a
    time (see :data:`hpclab.simulate.COMPUTE_CONFIG`); the messages cross the platform's
    network."""
    from hpclab.chapters.amdahl.kernels import process_grid

    spec = simulate.platform(platform_name)
    index = simulate.choices("amdahl", "distribution").index(distribution)
    nx, ny, nz = (int(v) for v in shape)

    def case(p):
        dims = (list(process_grid(distribution, p)) + [1, 1])[:3]  # "none": (P,)
        return ([index, nx, ny, nz, repetitions, *dims],
                {"distribution": distribution, "nx": nx, "ny": ny, "nz": nz,
                 "shape": f"{nx}x{ny}x{nz}", "hugepages": False})

    ranks = sorted(set(ranks or simulate.default_ranks(spec)))
    return simulate.computed("amdahl", spec, ranks, repetitions, case, profile,
                             {"shape": [nx, ny, nz]}, timeout)


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate amdahl``: the profile's ``simulated`` settings."""
    from hpclab import profiles

    sim = profiles.get("amdahl", profile)["simulated"]
    return on_platform(platform_name, ranks=ranks or sim["ranks"], shape=sim["shape"],
                       profile=profile, **kw)
