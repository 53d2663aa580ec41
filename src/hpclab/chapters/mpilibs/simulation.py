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


def on_platform(test, nprocs, sizes, iterations=10, repetitions=1, platform=PLATFORM,
                timeout=600, header=False):
    """Simulated times of one test on nprocs ranks placed in core order: a DataFrame of
    nbytes and seconds (the median of the repetitions); with ``header``, (the program's
    header, that DataFrame). One repetition by default: the simulation times no computation
    (simulate.CONFIG), so its clock repeats itself to the last digit (1, 2 and 3 repetitions
    give the same times), and each repetition of 160 ranks' 4 MiB exchanges costs this machine
    seconds of copying. Fewer iterations would change the times (ranks drift apart over a
    batch as on a real network), so they stay."""
    spec = simulate.platform(platform)
    args = [test, repetitions, 1, *(f"{n}:{iterations}" for n in sizes)]
    out = simulate.smpirun(program(), spec, nprocs, args,
                           what=f"simulated {test} on {nprocs} ranks of {spec['name']}",
                           timeout=timeout)
    head, results = sweep.parse(out, f"simulated {test}")
    df = pd.DataFrame(results).groupby("nbytes", as_index=False)["seconds"].median()
    return (head, df) if header else df


def exchange_beside_report(platform=PLATFORM, timeout=600):
    """IMB Exchange as report 002 ran it (Table 5.3: 40 processes on 2 nodes and 160 on 8),
    simulated at every size of the table, beside each library's published average: the
    simulated time (µs) and its ratio to each."""
    from hpclab import reference

    ex = reference.load("hamburg_imb_exchange")
    rows = []
    for (nodes, nprocs), g in ex.groupby(["nodes", "nprocs"]):
        t = g.pivot(index="nbytes", columns="mpi", values="t_avg_us")
        sim = on_platform("exchange", int(nprocs), [int(n) for n in t.index],
                          platform=platform, timeout=timeout).set_index("nbytes")["seconds"] * 1e6
        for nbytes, row in t.iterrows():
            rows.append({"nodes": int(nodes), "nprocs": int(nprocs), "nbytes": int(nbytes),
                         "simulated_us": float(sim.loc[nbytes]),
                         **{f"{mpi} (µs)": float(v) for mpi, v in row.items()}})
    return pd.DataFrame(rows)


# HPCC b_eff's ring messages: 8 bytes for its latency, 2,000,000 for its bandwidth
RING_SIZES = {"latency": 8, "bandwidth": 2_000_000}


def ring_beside_report(platform=PLATFORM, timeout=600):
    """HPCC's naturally and randomly ordered rings as report 002 ran them (160 ranks on 8
    nodes, Section 6.6), simulated: per quantity (latency at 8 bytes, bandwidth at 2,000,000),
    the random ring's time over the natural one's, simulated and the report's (its random
    latency over its natural one; its natural bandwidth over its random one), and the share
    of each ring's neighbour pairs that cross nodes (ranks placed in core order)."""
    from hpclab import reference

    h = reference.load("hamburg_hpcc").set_index("quantity")
    nprocs = int(h.loc["NaturallyOrderedRingLatency", "ranks"])
    spec = simulate.platform(platform)
    per_node = spec["sockets_per_node"] * spec["cores_per_socket"]
    times, cross = {}, {}
    for test in ("ring", "randomring"):
        head, df = on_platform(test, nprocs, sorted(RING_SIZES.values()), iterations=5,
                               platform=platform, timeout=timeout, header=True)
        times[test] = df.set_index("nbytes")["seconds"]
        order = head["ring"]
        cross[test] = float(np.mean([order[i] // per_node != order[(i + 1) % len(order)]
                                     // per_node for i in range(len(order))]))
    report = {"latency": h.loc["RandomlyOrderedRingLatency", "value"]
              / h.loc["NaturallyOrderedRingLatency", "value"],
              "bandwidth": h.loc["NaturallyOrderedRingBandwidth", "value"]
              / h.loc["RandomlyOrderedRingBandwidth", "value"]}
    rows = [{"quantity": q, "nbytes": n, "natural_us": times["ring"][n] * 1e6,
             "random_us": times["randomring"][n] * 1e6,
             "simulated_ratio": times["randomring"][n] / times["ring"][n],
             "report_ratio": float(report[q])} for q, n in RING_SIZES.items()]
    out = pd.DataFrame(rows)
    out.attrs.update(nprocs=nprocs, cross_natural=cross["ring"], cross_random=cross["randomring"],
                     platform=platform)
    return out


def ring_words(table) -> str:
    """The random ring against the natural one, simulated and published, in words."""
    a = table.attrs
    parts = [f"at {int(r.nbytes):,} bytes (its {r.quantity}) the random ring takes "
             f"{r.simulated_ratio:.2g} times as long as the natural one, against "
             f"{r.report_ratio:.2g} in the report" for r in table.itertuples()]
    spec = simulate.platform(a["platform"])
    inter, intra = spec["internode"], spec["intrasocket"]
    extra = inter["latency_us"] - intra["latency_us"]
    adds = "no latency" if extra <= 0 else f"{extra:.3g} µs of latency"
    return (f"On {a['nprocs']} simulated ranks, " + "; ".join(parts) + ". Of the neighbour "
            f"pairs, {a['cross_natural']:.0%} cross a node in the natural ring and "
            f"{a['cross_random']:.0%} in the random one. The platform's link between nodes has "
            f"a latency of {inter['latency_us']:.3g} µs and {inter['bandwidth_MBps']:,.0f} MB/s, "
            f"its link within a node {intra['latency_us']:.3g} µs and "
            f"{intra['bandwidth_MBps']:,.0f} MB/s: in the model, crossing a node adds {adds}; "
            "what it adds is a link of its own bandwidth that the pairs crossing it share")


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
            "network is the vendor's reference, with no protocol and no copy in a node: a ratio "
            "under 1 leaves room for what the model leaves out, a ratio over 1 is a model "
            "slower than the report's run")


def exchange_figure(table):
    """The simulated Exchange beside each library's published time, one panel per
    configuration of Table 5.3 (log-log), stacked in the book's style."""
    from hpclab import plots

    configs = sorted(set(zip(table["nodes"], table["nprocs"])))
    fig, axes = plots.new(len(configs))
    libs = [c for c in table.columns if c.endswith("(µs)")]
    for ax, (nodes, nprocs) in zip(axes, configs):
        g = table[(table["nodes"] == nodes) & (table["nprocs"] == nprocs)].sort_values("nbytes")
        g = g[g["nbytes"] > 0]  # a log axis
        for i, lib in enumerate(libs):
            _, colour, marker, _ = plots.style(lib, i)
            ax.plot(g["nbytes"], g[lib], marker=marker, color=colour,
                    label=f"{lib[:-5]} (report 002)")
        ax.plot(g["nbytes"], g["simulated_us"], "k--", label="simulated (SMPI)")
        ax.set(xscale="log", yscale="log", xlabel="message size (bytes)",
               ylabel="time per exchange (µs)", title=f"Exchange, {nprocs} ranks, {nodes} nodes")
        ax.legend()
    return fig
