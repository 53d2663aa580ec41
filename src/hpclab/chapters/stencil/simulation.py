"""The stencil chapter on a simulated cluster: its C kernel (the Laplacian of order 2r with
its halo exchange, r layers wide) under SimGrid's SMPI, through the driver beside this file
(``smpi_driver.c``) and :mod:`hpclab.simulate`.

Report 003 ran one rank of 32 threads on each Shaheen II node, in single precision. A
simulated rank is one thread here, in double precision, timed on this machine, so the
simulated hosts are made as fast as a Shaheen II node by one number: the node's rate for the
report's order-8 propagator (6.2 GPoint/s, from the reference data), halved for doubles (a
memory-bound kernel moves twice the bytes a point; an assumption), over this core's rate for
the order-8 Laplacian on the simulated grid, timed under SMPI on one rank first. Every order
uses that one speed-up (the report gives the node's rate at order 8 only). The halo's packing
happens inside SMPI's MPI calls, which are not timed: a simulated halo is the network's time
alone. The process grid is MPI_Dims_create's (2 x 2 x 2 on eight ranks); the report does not
name the one its scaling used. The grid is far smaller than the report's 1000³ (SMPI runs
every rank in one process here): its halo is a larger part of a rank's work, by 1000 / n, and
:func:`hpclab.chapters.stencil.analysis.simulated_table` also projects the simulated times to
the report's grid.
"""
from __future__ import annotations

import numpy as np

from hpclab import simulate

# report 003's rate of a Shaheen II node for its order-8 propagator (reference data), in
# single precision; a double moves twice the bytes
NODE_RATE_ORDER = 8
PRECISION_FACTOR = 4 / 8


def node_rate():
    """A Shaheen II node's rate for the order-8 propagator in double precision, points per
    second (the published single-precision rate halved: an assumption), and the words of its
    source (report 003, Propa)."""
    from hpclab import reference

    t = reference.load("shaheen_hpcscan_propa")
    row = t[(t["quantity"] == "gpoints_per_s") & (t["fd_order"] == NODE_RATE_ORDER)].iloc[0]
    rate = float(row["value"]) * 1e9 * PRECISION_FACTOR
    return rate, (
        f"report 003's order-{NODE_RATE_ORDER} propagator on one Shaheen II node, "
        f"{row['value']:g} GPoint/s in single precision ({int(row['N'])}³ points, "
        f"{row['mode']}), taken as {rate / 1e9:g} GPoint/s in double")


def _args(order, n, dims, applications, repetitions):
    from hpclab.chapters.stencil.declaration import OPERATORS

    p1, p2, p3 = dims
    return [OPERATORS.index("laplacian"), order, n, n, n, 0, 0, applications, repetitions,
            p3, p2, p1]


def calibrate(spec, n, applications=2, repetitions=3, timeout=600):
    """How much faster a platform host must compute than one core here: a node's rate
    (:func:`node_rate`) over this core's rate for the order-8 Laplacian on n³ points, timed
    under SMPI on one rank. Returns (speed-up, this core's points per second)."""
    results = simulate.run_driver("stencil", spec, 1,
                                  _args(NODE_RATE_ORDER, n, (1, 1, 1), applications,
                                        repetitions),
                                  timeout=timeout, config=simulate.COMPUTE_CONFIG)
    times = np.asarray(results[0]["times"], float).reshape(-1, repetitions)
    ours = n**3 / float(np.median(times[1]))  # the compute metric
    return node_rate()[0] / ours, ours


def on_platform(platform_name, ranks=None, n=64, orders=(4, 8, 12), applications=2,
                repetitions=3, profile=None, timeout=900):
    """Simulated strong scaling of the Laplacian on n³ points at each order, P ranks one per
    node (kind ``simulated``), the hosts as fast as a Shaheen II node (:func:`calibrate`)."""
    from hpclab.chapters.stencil.kernels import process_grid

    spec = simulate.platform(platform_name)
    ranks = sorted(set(ranks or range(1, spec["cores"] + 1)))
    for p in ranks:
        cut = [n // q for q in process_grid(p) if q > 1]
        thin = [o for o in orders if cut and min(cut) < o // 2]
        if thin:
            raise ValueError(f"{p} ranks cut {n}³ points into blocks thinner than the halo of "
                             f"order {max(thin)}: simulate a larger grid")
    speedup, ours = calibrate(spec, n, applications, repetitions, timeout)

    def case(p, order):
        dims = process_grid(p)
        return (_args(order, n, dims, applications, repetitions),
                {"operator": "laplacian", "order": order, "n": n, "blocked": False,
                 "block3": 0, "block2": 0, "grid": "x".join(map(str, dims))})

    rate, source = node_rate()
    return simulate.computed(
        "stencil", spec, [(p, o) for o in orders for p in ranks], repetitions, case, profile,
        {"n": n, "orders": list(orders), "speedup": speedup, "core_points_per_s": ours,
         "node_points_per_s": rate, "node_rate_source": source},
        timeout, config=simulate.compute_config(speedup))


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate stencil``: the profile's ``simulated`` settings."""
    from hpclab import profiles

    sim = profiles.get("stencil", profile)["simulated"]
    return on_platform(platform_name, ranks=ranks or sim["ranks"], n=sim["n"],
                       orders=sim["orders"], applications=sim["applications"],
                       repetitions=sim["repetitions"], profile=profile, **kw)


def summary(run):
    """What the simulated scaling found, in the words of the chapter's page."""
    from hpclab.chapters.stencil import analysis

    table = analysis.simulated_table(run.records, run.meta["n"])
    return [analysis.simulated_words(table, run.meta["n"], run.meta)]
