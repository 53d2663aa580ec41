"""The PingPong chapter on a simulated cluster: its C kernel under SimGrid's SMPI, through
the driver beside this file (``smpi_driver.c``) and :mod:`hpclab.simulate`."""
from __future__ import annotations

from hpclab import simulate

# simulated counts: the clock is deterministic, so a few round trips say all
COUNTS = {"warmup": 1, "iterations": 10, "repetitions": 2}
# the two ranks can be placed by name (--placement)
PLACEMENTS = True


def on_platform(platform_name, profile=None, placement=None, sizes=None, timeout=600, **counts):
    """Simulated ping-pong between two ranks: the PingPong chapter's records."""
    from hpclab import profiles, records

    spec = simulate.platform(platform_name)
    placement = placement or ("internode" if spec["nodes"] > 1 else None)
    c = {**COUNTS, **counts}
    sizes = list(sizes if sizes is not None else profiles.get("pingpong", profile)["sizes"])
    results = simulate.run_driver("pingpong", spec, 2,
                                  [c["warmup"], c["iterations"], c["repetitions"], *sizes],
                                  placement=placement, timeout=timeout)
    rows = []
    for res in results:
        params = {"nbytes": res["nbytes"], "warmup": c["warmup"], "iterations": c["iterations"],
                  "hugepages": False, "placement": placement or ""}
        rows += records.rows("pingpong", "pingpong", "c", 2, 1, params, res["times"], "time", "s")
    if len(results) != len(sizes):
        raise simulate.SimulationError(f"the simulated pingpong returned {len(results)} of "
                                       f"{len(sizes)} sizes")
    return records.Run(records.frame(rows), simulate.meta("pingpong", spec, profile, {
        "nprocs": 2, "placement_name": placement, "implementations": ["c"]}))


def run(platform_name, ranks=None, profile=None, placement=None, **kw):
    """``python -m hpclab simulate pingpong``."""
    if ranks and list(ranks) != [2]:
        raise ValueError("the simulated ping-pong runs on 2 ranks; choose where with "
                         "--placement")
    return on_platform(platform_name, profile=profile, placement=placement, **kw)


def summary(run):
    """Lines that say what a simulation found: for ping-pong, the Hockney fit of its records
    beside the link it ran over."""
    from hpclab import models

    g = run.records.groupby("nbytes")["value"].median()
    fit = models.fit(models.HOCKNEY, g.index.to_numpy(float), g.to_numpy(), sigma="relative")
    spec = simulate.platform(run.meta["platform"])
    where = run.meta.get("placement_name") or ("internode" if spec["nodes"] > 1
                                                else "intrasocket")
    link = spec[where]
    return [f"Hockney fit: lambda = {fit.params['lambda'] * 1e6:.3f} us, "
            f"B = {fit.params['B'] / 1e9:.3f} GB/s; the {where} link of {spec['name']}: "
            f"{link['latency_us']:g} us, {link['bandwidth_MBps'] / 1e3:g} GB/s"]
