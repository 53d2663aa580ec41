"""The Ring chapter on a simulated cluster: its C kernel under SimGrid's SMPI, through
the driver beside this file (``smpi_driver.c``) and :mod:`hpclab.simulate`."""
from __future__ import annotations

from hpclab import simulate

# simulated counts: the clock is deterministic, so a few rings say all
COUNTS = {"warmup": 1, "iterations": 5, "repetitions": 2}


def on_platform(platform_name, ranks=None, profile=None, variants=("sendrecv",),
                payloads=None, timeout=900, **counts):
    """Simulated two-way ring on P ranks filled core by core: the Ring chapter's records."""
    from hpclab import profiles, records

    order = simulate.choices("ring", "variant")
    spec = simulate.platform(platform_name)
    ranks = sorted(set(ranks or simulate.default_ranks(spec)))
    c = {**COUNTS, **counts}
    payloads = list(payloads if payloads is not None
                    else profiles.get("ring", profile)["payloads"][:1])
    rows = []
    for variant in variants:
        if variant not in order or variant == "naive":
            raise ValueError(f"unknown ring variant {variant!r}: choose from "
                             f"{', '.join(v for v in order if v != 'naive')}")
        for p in ranks:
            args = [order.index(variant), c["warmup"], c["iterations"], c["repetitions"],
                    *payloads]
            results = simulate.run_driver("ring", spec, p, args, timeout=timeout)
            if len(results) != len(payloads):
                raise simulate.SimulationError(f"the simulated ring on {p} ranks returned "
                                               f"{len(results)} of {len(payloads)} payloads")
            for res in results:
                params = {"variant": variant, "nbytes": res["nbytes"], "warmup": c["warmup"],
                          "iterations": c["iterations"], "hugepages": False,
                          "oversubscribed": False}
                rows += records.rows("ring", "ring", "c", p, 1, params, res["times"],
                                     "ring_time", "s")
    return records.Run(records.frame(rows), simulate.meta("ring", spec, profile, {
        "ranks": ranks, "variants": list(variants), "implementations": ["c"]}))


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate ring``."""
    return on_platform(platform_name, ranks=ranks, profile=profile, **kw)
