"""The chapter's program on report 002's cluster, simulated by SimGrid's SMPI: the same
``kernels/mpilibs.c``, compiled by ``smpicc``, on the platform ``hamburg`` (its FDR
InfiniBand from the report's Table 2.1, the links within a node from its HPCC run), set
beside the report's IMB Exchange (Table 5.3) and HPCC ring (Section 6.6)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import simulate
from hpclab.chapters.mpilibs import libraries, sweep

PLATFORM = "hamburg"


def program():
    return simulate.compile_program("mpilibs", [libraries.SOURCE])


def on_platform(test, nprocs, sizes, iterations=10, repetitions=2, platform=PLATFORM,
                timeout=600):
    """Simulated times of one test on nprocs ranks placed in core order: a DataFrame of
    nbytes and seconds (the median of the repetitions: the simulated clock repeats itself)."""
    spec = simulate.platform(platform)
    args = [test, repetitions, 1, *(f"{n}:{iterations}" for n in sizes)]
    out = simulate.smpirun(program(), spec, nprocs, args,
                           what=f"simulated {test} on {nprocs} ranks of {spec['name']}",
                           timeout=timeout)
    _, results = sweep.parse(out, f"simulated {test}")
    df = pd.DataFrame(results)
    return df.groupby("nbytes", as_index=False)["seconds"].median()


def exchange_beside_report(platform=PLATFORM):
    """IMB Exchange as report 002 ran it (Table 5.3: 40 processes on 2 nodes and 160 on 8),
    simulated at every size of the table, beside each library's published average: the
    simulated time (µs) and its ratio to each."""
    from hpclab import reference

    ex = reference.load("hamburg_imb_exchange")
    rows = []
    for (nodes, nprocs), g in ex.groupby(["nodes", "nprocs"]):
        t = g.pivot(index="nbytes", columns="mpi", values="t_avg_us")
        sim = on_platform("exchange", int(nprocs), [int(n) for n in t.index],
                          platform=platform).set_index("nbytes")["seconds"] * 1e6
        for nbytes, row in t.iterrows():
            rows.append({"nodes": int(nodes), "nprocs": int(nprocs), "nbytes": int(nbytes),
                         "simulated_us": float(sim.loc[nbytes]),
                         **{f"{mpi} (µs)": float(v) for mpi, v in row.items()}})
    return pd.DataFrame(rows)


def exchange_words(table):
    """How far the simulated Exchange is from each published library, as the range of the
    ratio simulated / published over the sizes, per configuration."""
    parts = []
    libs = [c for c in table.columns if c.endswith("(µs)")]
    for (nodes, nprocs), g in table.groupby(["nodes", "nprocs"]):
        bits = []
        for lib in libs:
            r = g["simulated_us"] / g[lib]
            r = r[np.isfinite(r) & (g[lib] > 0)]
            bits.append(f"{r.min():.2g} to {r.max():.2g} times {lib[:-5]}'s")
        parts.append(f"on {nprocs} ranks of {nodes} nodes the simulated time is "
                     + " and ".join(bits) + " published time")
    return ("Over the sizes of report 002's Table 5.3, " + "; ".join(parts) + ". The simulated "
            "network is the vendor's reference, with no protocol, no copy and no contention "
            "in a node: a ratio under 1 is what a library and its node added")
