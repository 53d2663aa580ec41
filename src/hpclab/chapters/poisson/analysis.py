"""Poisson experiment: the convergence study of report 000 and strong scaling of one CG
iteration.

``convergence``  full solves (until ||r|| <= 1e-6 ||r0||) for every N of the profile's
                 ``convergence``, C, on one rank and on all of them;
``strong``       a fixed number of iterations (the profile's ``iterations``) for every N of
                 ``strong`` on P = 1 .. cores ranks, interleaved and not, C;
``compare``      the same at N = ``compare`` for every implementation.

Records: one row per repetition and metric (``iteration, matvec, halo, reduce, update`` in
seconds per iteration, ``iterations``, ``residual``, ``error``, ``rss``, ``rss_base``) with
columns ``kind, n, interleave, iterations_cap, oversubscribed``. The time of one iteration is
predicted from pieces measured elsewhere (:func:`predict`) before it is compared.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import machine, models, profiles, records, stats

# the sweep (what every rank runs) is hpclab.chapters.poisson.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.pingpong.analysis import hockney_model as pingpong_model  # noqa: F401
from hpclab.chapters.poisson.model import MODEL
from hpclab.chapters.poisson.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    BYTES,
    BYTES_WA,
    GIB,
    IMPL_NAMES,
    IMPLS,
    KERNEL,
    MIB,
    NAME,
    NPROCS,
    lab_n,
    measure,
    run,
    run_mpi,
    solution,
    tasks,
)
from hpclab.chapters.stream.analysis import add_bandwidth as stream_bandwidth  # noqa: F401

# ----------------------------------------------------------------------------- analysis

KEYS = ["kind", "impl", "n", "interleave", "nprocs"]


def samples(df, metric, **where):
    """The repetitions of one metric for the rows matching ``where`` (column=value)."""
    return records.samples(df, metric, **where)


def wide(df):
    """One row per measurement: the median of every metric."""
    t = records.table(df)
    w = t.pivot_table(index=KEYS, columns="metric", values="value", aggfunc="median")
    return w.reset_index()


def convergence_table(df, t31):
    """The study as report 000's Table 3.1 prints it, with the published values beside ours
    for the N it lists: iterations on one rank and on all, the error, its ratio and the
    observed order log2(ratio)."""
    w = wide(df)
    w = w[w["kind"] == "convergence"]
    one = w[w["nprocs"] == 1].set_index("n")
    many = w[w["nprocs"] == w["nprocs"].max()].set_index("n")
    t = pd.DataFrame({"N": one.index, "DOF": one.index ** 2,
                      "error": one["error"].to_numpy(),
                      "iterations": one["iterations"].astype(int).to_numpy()})
    t["ratio"] = t["error"].shift(1) / t["error"]
    t["order"] = np.log2(t["ratio"])
    pmax = int(many["nprocs"].max()) if not many.empty else 1
    t[f"iterations on {pmax} ranks"] = many["iterations"].reindex(t["N"]).astype(int).to_numpy()
    pub = t31.set_index("N")
    t["Table 3.1 iterations"] = pub["cg_iterations"].reindex(t["N"]).to_numpy()
    t["Table 3.1 error"] = pub["err_linf"].reindex(t["N"]).to_numpy()
    t["time [s]"] = (one["iteration"] * one["iterations"]).to_numpy()
    return t


def convergence_display(table):
    """The study with human column names at the report's precision; — where Table 3.1
    lists no such N."""
    t = table.copy()
    many = next(c for c in t.columns if c.startswith("iterations on "))
    out = pd.DataFrame({"N": t["N"]})
    nb = "\u2011"  # a hyphen the table does not break the number at
    out["error"] = t["error"].map(lambda v: f"{v:.4e}".replace("-", nb))
    out["ratio"] = t["ratio"].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    out["order"] = t["order"].map(lambda v: "—" if pd.isna(v) else f"{v:.2f}")
    out["iterations"] = t["iterations"]
    out[many.replace("iterations on", "on")] = t[many]
    out["Table 3.1 iterations"] = t["Table 3.1 iterations"].map(
        lambda v: "—" if pd.isna(v) else f"{int(v)}")
    out["Table 3.1 error"] = t["Table 3.1 error"].map(
        lambda v: "—" if pd.isna(v) else f"{v:.4e}".replace("-", nb))
    return out.set_index("N")


def power_law(x, y):
    """Least squares of log y = log C + p log x: (p, its 95% interval, points). Fewer than
    three points would be a line through its parameters, not a fit."""
    from scipy import stats as sps

    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3:
        raise models.FitError(f"{x.size} points for 2 parameters is not a fit")
    res = sps.linregress(np.log(x), np.log(y))
    half = stats.t_quantile(0.975, x.size - 2) * res.stderr
    return res.slope, (res.slope - half, res.slope + half), x.size


def orders(table):
    """The convergence order in h (error ∝ h^p) and the growth of the iterations (∝ N^q),
    each with its 95% interval."""
    h = 1.0 / (table["N"] + 1)
    p = power_law(h, table["error"])
    q = power_law(table["N"], table["iterations"])
    return {"p": p[0], "p_low": p[1][0], "p_high": p[1][1], "q": q[0], "q_low": q[1][0],
            "q_high": q[1][1], "points": p[2]}


def memory_table(df, min_mib=1.0):
    """VmRSS against the predicted four vectors of N² doubles, per N (one rank), for the N
    whose vectors take at least ``min_mib`` MiB: smaller ones fit in memory the process
    already holds, so VmRSS cannot see them."""
    w = wide(df)
    w = w[(w["kind"] == "convergence") & (w["nprocs"] == 1)]
    w = w[4 * 8 * w["n"] ** 2 / MIB >= min_mib].set_index("n")
    t = pd.DataFrame({"N": w.index})
    t["predicted 4·N²·8 [MiB]"] = 4 * 8 * t["N"] ** 2 / MIB
    t["VmRSS growth [MiB]"] = ((w["rss"] - w["rss_base"]) / MIB).to_numpy()
    t["VmRSS [MiB]"] = (w["rss"] / MIB).to_numpy()
    t["growth / predicted"] = t["VmRSS growth [MiB]"] / t["predicted 4·N²·8 [MiB]"]
    return t.set_index("N").round(3)


def parts(df, n=None, interleave=True):
    """Seconds per iteration by part (compute of q = A p, halo, reductions, updates, the
    rest) per P at one strong N (default the largest)."""
    w = wide(df)
    w = w[(w["kind"] == "strong") & (w["interleave"] == interleave) & (w["impl"] == "c")]
    n = n or int(w["n"].max())
    w = w[w["n"] == n].set_index("nprocs")
    t = pd.DataFrame({"A p": w["matvec"] - w["halo"], "halo": w["halo"],
                      "Allreduce": w["reduce"], "updates": w["update"]})
    t["other"] = np.maximum(w["iteration"] - t.sum(axis=1), 0)
    t.index.name = "P"
    return t


# the metrics whose sum, repetition by repetition, is each part of the model (:func:`parts`)
PART_METRICS = {"memory": (("matvec", 1), ("halo", -1), ("update", 1)),
                "Allreduce": (("reduce", 1),), "halo": (("halo", 1),)}


def part_interval(df, part, P, n, model_s, interleave=True):
    """(ratio, low, high): one part of the model ("memory": A p and the updates,
    "Allreduce" or "halo") at P ranks and mesh n of the strong sweep (C), the measured seconds
    per iteration of every repetition over the model's ``model_s``, with the 95% interval of
    their median (:func:`hpclab.stats.over_model`)."""
    if part not in PART_METRICS:
        raise ValueError(f"part is one of {', '.join(PART_METRICS)}, not {part!r}")
    where = {"kind": "strong", "impl": "c", "n": n, "nprocs": P, "interleave": interleave}
    per_rep = sum(sign * samples(df, metric, **where) for metric, sign in PART_METRICS[part])
    return stats.over_model(per_rep, model_s)


def predicted_iteration(n, p, lam, bandwidth, stream_gbs, per_point=BYTES):
    """Seconds per iteration from the pieces: per_point · N² bytes over STREAM add with P
    threads (all ranks share the memory), two Allreduce of ⌈log2 P⌉ latencies each, and for
    P > 1 two halo rows of 8 (N + 2) bytes, one each way to each neighbour, at PingPong's λ
    and B. Returns (total, memory, reductions, halo)."""
    b = stream_gbs.get(p, stream_gbs[max(stream_gbs)]) * 1e9
    memory = per_point * n * n / b
    reduce = 2 * np.ceil(np.log2(p)) * lam if p > 1 else 0.0
    halo = 2 * (lam + 8 * (n + 2) / bandwidth) if p > 1 else 0.0
    return memory + reduce + halo, memory, reduce, halo


def predict(df, lam, bandwidth, stream_gbs):
    """Predicted (88 and 96 bytes per point) beside measured seconds per iteration for every
    strong run of the C solver (interleaved), with the measured/predicted ratio and its 95%
    interval. The model is the C solver's: a sweep that also ran the Python one (a lab's) is
    read for C alone."""
    rows = []
    w = wide(df)
    strong = w[(w["kind"] == "strong") & w["interleave"] & (w["impl"] == "c")]
    for (n, p), _ in strong.groupby(["n", "nprocs"]):
        s = samples(df, "iteration", kind="strong", impl="c", n=n, nprocs=p, interleave=True)
        total, memory, reduce, halo = predicted_iteration(n, p, lam, bandwidth, stream_gbs)
        wa = predicted_iteration(n, p, lam, bandwidth, stream_gbs, BYTES_WA)[0]
        # one run: the median, no interval (NaN)
        ratio, low, high = stats.over_model(s, total)
        rows.append({"N": n, "P": p, "predicted [ms]": total * 1e3,
                     "with write-allocate [ms]": wa * 1e3, "measured [ms]": ratio * total * 1e3,
                     "measured / predicted": ratio, "low": low, "high": high,
                     "memory share": memory / total})
    out = pd.DataFrame(rows)
    for col, name in (("predicted [ms]", "predicted speed-up"),
                      ("measured [ms]", "measured speed-up")):
        one = out[out["P"] == 1].set_index("N")[col]
        out[name] = out["N"].map(one) / out[col]
    return out


def prediction_display(pred):
    t = pred.copy()
    t["95% interval"] = [f"{a:.2f}–{b:.2f}" for a, b in zip(t["low"], t["high"])]
    t = t.drop(columns=["low", "high", "memory share"])
    return t.round(3).set_index(["N", "P"])


def speedup(df, n, kind="strong", impl="c", interleave=True):
    """S(P) = T(1)/T(P) per P with the 95% interval of the ratio of medians."""
    one = samples(df, "iteration", kind=kind, n=n, nprocs=1, impl=impl, interleave=interleave)
    rows = []
    for p in sorted(records.table(df)["nprocs"].unique()):
        tp = samples(df, "iteration", kind=kind, n=n, nprocs=p, impl=impl,
                     interleave=interleave)
        try:
            c = stats.compare(one, tp, ("P=1", f"P={p}"))
        except ValueError:  # fewer than two runs, or runs with no scatter at all
            continue
        rows.append({"P": int(p), "speed-up": c.ratio, "low": c.low, "high": c.high,
                     "efficiency": c.ratio / p})
    return pd.DataFrame(rows)


def speedup_points(df, sizes=None):
    """Speed-up per P and N as :func:`hpclab.plots.scaling` draws it (median, interval)."""
    w = wide(df)
    sizes = sizes or sorted(w[w["kind"] == "strong"]["n"].unique())
    out = []
    for n in sizes:
        s = speedup(df, int(n))
        out.append(pd.DataFrame({"P": s["P"], "mesh": f"N = {int(n)}", "median": s["speed-up"],
                                 "best": s["high"], "worst": s["low"]}))
    return pd.concat(out, ignore_index=True)


def interleave_words(df):
    """What interleaving buys the C solver at the largest strong N on the most ranks, in
    words the interval allows."""
    w = wide(df)
    w = w[(w["kind"] == "strong") & (w["impl"] == "c")]
    n, p = int(w["n"].max()), int(w["nprocs"].max())
    if p < 2:
        return "with one rank there is no halo to hide, so interleaving cannot show here"
    a = samples(df, "iteration", kind="strong", impl="c", n=n, nprocs=p, interleave=False)
    b = samples(df, "iteration", kind="strong", impl="c", n=n, nprocs=p, interleave=True)
    return f"at N = {n} on {p} ranks, " + stats.said(
        a, b, ("the version that is not interleaved", "the interleaved one"),
        "time per iteration")


def implementation_table(df):
    """Milliseconds per iteration of every implementation at the compare N, per P."""
    w = wide(df)
    w = w[w["kind"] == "compare"]
    t = w.pivot_table(index="nprocs", columns="impl", values="iteration") * 1e3
    t = t[[i for i in IMPLS if i in t.columns]]
    t.columns = [IMPL_NAMES[c] + " [ms]" for c in t.columns]
    t.index.name = "P"
    return t.round(3)


def fit_model(df):
    """The CG_ITERATION model fitted to every strong (interleaved) run of the C solver:
    t_point per mesh point, t_row per halo row point, t_reduce per Allreduce round."""
    w = wide(df)
    w = w[(w["kind"] == "strong") & w["interleave"] & (w["impl"] == "c")]
    return models.fit(MODEL, pd.DataFrame({"N": w["n"], "P": w["nprocs"]}),
                      w["iteration"])


# ----------------------------------------------------------------------------- report 000

def scaling_reference(sc, table="4.1", min_seconds=10):
    """Speed-up and efficiency against one process on one node for every mesh of one of
    report 000's tables, P = nodes × processes per node. Times below ``min_seconds`` are
    dropped: printed to the second, they carry more than 5% rounding."""
    t = sc[sc["table"].str.startswith(table + "(")].copy()
    base = t[(t["nodes"] == 1) & (t["mpi_per_node"] == 1) & (t["threads_per_process"] == 1)]
    t["T1"] = t["N"].map(base.set_index("N")["wall_s"])
    t = t[t["wall_s"] >= min_seconds].copy()
    t["P"] = t["mpi_total"]
    t["speed-up"] = t["T1"] / t["wall_s"]
    t["efficiency"] = t["speed-up"] / t["P"]
    return t


def packed_vs_spread(sc, table="4.1", N=16384):
    """P processes on one node against one process on each of P nodes (report 000's
    anti-diagonals): both times and their ratio, per P."""
    t = sc[sc["table"].str.startswith(table + "(") & (sc["N"] == N)]
    rows = []
    for p in sorted(t["mpi_per_node"].unique()):
        packed = t[(t["nodes"] == 1) & (t["mpi_per_node"] == p)]["wall_s"]
        spread = t[(t["nodes"] == p) & (t["mpi_per_node"] == 1)]["wall_s"]
        if p > 1 and len(packed) and len(spread):
            rows.append({"P": int(p), "P on one node [s]": int(packed.iloc[0]),
                         "1 on each of P nodes [s]": int(spread.iloc[0]),
                         "ratio": packed.iloc[0] / spread.iloc[0]})
    return pd.DataFrame(rows).set_index("P").round(2)


def binding_spread(sc, min_seconds=10):
    """Tables 4.1 to 4.3 side by side (three binding settings, the same runs otherwise):
    per mesh, nodes and processes per node, the times and the largest relative difference
    between them, over the entries of at least ``min_seconds`` in all three."""
    t = sc[sc["table"].str.match(r"4\.[123]\(")]
    t = t.assign(binding=t["table"].str[:3])
    w = t.pivot_table(index=["N", "nodes", "mpi_per_node"], columns="binding", values="wall_s")
    w = w.dropna()
    w = w[(w >= min_seconds).all(axis=1)]
    w["spread"] = (w.max(axis=1) - w.min(axis=1)) / w.min(axis=1)
    return w


def cluster_history(hist, N=4096):
    """Table 5.1 with the speed-ups recomputed from the printed times, and each process's
    share of the four vectors (why some runs beat P)."""
    t = hist.copy()
    serial = t[t["config"] == "serial (1 core)"].set_index("cluster")["wall_s"]
    t["speed-up recomputed"] = t["cluster"].map(serial) / t["wall_s"]
    t["P"] = t["nodes"] * t["procs_per_node"]
    t["MiB per process"] = 4 * 8 * N * N / t["P"] / MIB
    t["differs"] = (t["speed-up recomputed"] - t["speedup_published"]).abs() > 0.01
    return t


RUN_LABELS = {"serial (1 core)": "serial", "1 node all cores": "1 node",
              "32 nodes 1 core per node": "32 × 1 core", "32 nodes all cores": "32 × all cores"}


def cluster_display(t):
    """Table 5.1 one run per line: P, time, published and recomputed speed-up, and MiB of
    the four vectors per process."""
    d = t[t["wall_s"].notna()].copy()
    d["run"] = d["config"].map(RUN_LABELS)
    d = d[["cluster", "run", "P", "wall_hhmmss", "speedup_published", "speed-up recomputed",
           "MiB per process"]]
    d = d.rename(columns={"wall_hhmmss": "time", "speedup_published": "speed-up",
                          "speed-up recomputed": "recomputed", "MiB per process": "MiB each"})
    return d.round({"recomputed": 2, "MiB each": 1}).set_index(["cluster", "run"])


def network_table(sc, N=8192, per_node=(1, 32)):
    """Seconds at one N over the three networks of Tables 6.1 to 6.3 and Stampede2's
    Table 4.1, for 1 .. 16 nodes with 1 and with 32 processes per node."""
    t = sc[sc["table"].str.match(r"(4\.1|6\.\d)\(") & (sc["N"] == N)
           & (sc["threads_per_process"] == 1) & sc["mpi_per_node"].isin(per_node)]
    t = t.assign(where=t["cluster"] + ", " + t["network"])
    out = t.pivot_table(index=["nodes", "mpi_per_node"], columns="where", values="wall_s")
    out.index.names = ["nodes", "processes per node"]
    out.columns.name = None
    return out.astype(int)


def network_ratio(sc, N=8192, nodes=16, per_node=32):
    """Dell zenith's time over 10 Gbps Ethernet against over Omni-Path for one run, with the
    range the 1-second rounding of both allows: (ratio, low, high, Ethernet s, OPA s)."""
    t = network_table(sc, N, (per_node,)).loc[(nodes, per_node)]
    eth = float(t["Dell zenith, 10 Gbps Ethernet"])
    opa = float(t["Dell zenith, 100 Gbps Omni-Path"])
    return eth / opa, (eth - 0.5) / (opa + 0.5), (eth + 0.5) / (opa - 0.5), eth, opa


def hybrid_table(sc, N=8192, nodes=1):
    """Tables 7.1/7.2: one node's seconds per split of its 32 cores (one thread each) or 64
    hyperthreads between MPI processes and OpenMP threads."""
    t = sc[sc["table"].str.match(r"7\.\d\(") & (sc["N"] == N) & (sc["nodes"] == nodes)]
    t = t.assign(hw=np.where(t["table"].str.startswith("7.1"), "32 threads, 1 per core [s]",
                             "64 threads, 2 per core [s]"))
    out = t.pivot_table(index="mpi_per_node", columns="hw", values="wall_s")
    out.index.name = "MPI processes per node"
    out.columns.name = None
    return out.apply(lambda col: col.map(lambda v: "—" if pd.isna(v) else f"{int(v)}"))


def _memory_words(mem):
    if mem.empty:
        return ("This profile's meshes are too small for VmRSS to see their vectors; the "
                "standard profile goes up to N = 1024")
    from hpclab.kernels.topology import padded_row

    n = int(mem.index[-1])
    row = mem.iloc[-1]
    stored = padded_row(n + 2)
    return (f"At N = {n} the prediction is {row['predicted 4·N²·8 [MiB]']:.1f} MiB, or "
            f"{4 * 8 * (n + 2) * stored / MIB:.1f} MiB with the ring of halo points the "
            f"kernel stores around each vector and its rows padded to whole cache lines "
            f"({stored} doubles), and VmRSS grew by {row['VmRSS growth [MiB]']:.1f} "
            f"MiB. The process itself, Python and MPI included, holds "
            f"{row['VmRSS [MiB]']:.0f} MiB")


def _network_numbers(sc):
    if sc is None:
        return {}
    r, low, high, eth, opa = network_ratio(sc)
    r1 = network_ratio(sc, per_node=1)
    hy = hybrid_table(sc)
    return {"net_ratio": r, "net_low": low, "net_high": high, "net_eth": eth, "net_opa": opa,
            "net1_ratio": r1[0], "net1_low": r1[1], "net1_high": r1[2],
            "hy_1x32": float(hy.loc[1, "32 threads, 1 per core [s]"]),
            "hy_32x1": float(hy.loc[32, "32 threads, 1 per core [s]"]),
            "hy_1x64": float(hy.loc[1, "64 threads, 2 per core [s]"])}


def _binding_numbers(sc):
    if sc is None:
        return {}
    b = binding_spread(sc, min_seconds=60)
    return {"bind_n": len(b), "bind_median": float(b["spread"].median()) * 100,
            "bind_max": float(b["spread"].max()) * 100}


# what report 000 measures that a machine needs more than one node or many cores for
CANNOT_SHOW = (("the network between nodes", {"nodes": 2}),
               ("a node's 32 cores split between processes and threads", {"cores": 32}),
               ("scaling to 48 ranks", {"cores": 48}))


def numbers(sweep_run, t31, hist, machines, lam, bandwidth, pp_source, stream_gbs, stream_source,
            reference_scaling=None):
    """Every number the chapter's text quotes, computed (name -> value)."""
    df = records.table(sweep_run)
    conv = convergence_table(df, t31)
    o = orders(conv)
    w = wide(df)
    pmax = int(w["nprocs"].max())
    listed = conv.dropna(subset=["Table 3.1 iterations"])
    match = listed[(listed["iterations"] == listed["Table 3.1 iterations"])
                   & (listed["error"].map(lambda v: f"{v:.4e}")
                      == listed["Table 3.1 error"].map(lambda v: f"{v:.4e}"))]
    same_iters = bool((conv["iterations"] == conv[f"iterations on {pmax} ranks"]).all())
    big = conv.iloc[-1]
    mem = memory_table(df)
    mb = mem.iloc[-1] if not mem.empty else pd.Series(dtype=float)
    pred = predict(df, lam, bandwidth, stream_gbs)
    p1 = pred[(pred["N"] == pred["N"].max()) & (pred["P"] == 1)].iloc[0]
    pp = pred[(pred["N"] == pred["N"].max()) & (pred["P"] == pred["P"].max())].iloc[0]
    s = speedup(df, int(pred["N"].max()))
    smax = s.iloc[-1]
    h = cluster_history(hist)
    odd = h[h["differs"]].iloc[0] if h["differs"].any() else None
    pvs = packed_vs_spread(reference_scaling) if reference_scaling is not None else None
    st = h[(h["cluster"] == "Stampede2") & (h["config"] == "32 nodes 1 core per node")].iloc[0]
    l3 = float(machines.set_index("cluster").loc["Stampede2", "L3_MB_per_socket"])
    n4096 = 4 * 8 * 4096 ** 2 / MIB
    if not listed.empty and len(match) == len(listed):
        t31_words = (f"the study reproduces Table 3.1 for N = "
                     f"{', '.join(str(int(v)) for v in listed['N'])}: the same number of "
                     "iterations and the same error to the five digits printed")
    elif listed.empty:
        t31_words = ("this profile stops below N = 1024, the smallest mesh of Table 3.1; the "
                     "standard profile reaches it")
    else:
        t31_words = (f"{len(match)} of the {len(listed)} meshes Table 3.1 lists match it in "
                     "iterations and error")
    return {
        "pmax": pmax, "t31_words": t31_words,
        "cannot_words": machine.cannot_show(sweep_run.meta.get("machine"), CANNOT_SHOW),
        "same_iters": ("the same on every rank count measured" if same_iters else
                       "not the same on every rank count (see the table)"),
        "p": o["p"], "q": o["q"],
        "order_points": o["points"],
        "p_words": stats.estimate_words(o["p"], o["p_low"], o["p_high"], "", "convergence order",
                                        3, name="p", basis=f"{o['points']} meshes"),
        "q_words": stats.estimate_words(o["q"], o["q_low"], o["q_high"], "", "growth exponent",
                                        3, name="q", basis=f"{o['points']} meshes"),
        "N_big": int(big["N"]), "iters_big": int(big["iterations"]),
        "err_big": float(big["error"]), "mem_N": int(mem.index[-1]) if not mem.empty else 0,
        "mem_pred": float(mb.get("predicted 4·N²·8 [MiB]", np.nan)),
        "mem_growth": float(mb.get("VmRSS growth [MiB]", np.nan)),
        "mem_rss": float(mb.get("VmRSS [MiB]", np.nan)),
        "mem_words": _memory_words(mem),
        "order_words": ("an interval that holds 2, the second order the 5-point stencil "
                        "promises" if o["p_low"] <= 2 <= o["p_high"] else
                        "an interval that misses 2 by "
                        f"{min(abs(o['p_low'] - 2), abs(o['p_high'] - 2)):.3f}: close to the "
                        "second order the 5-point stencil promises, but not exactly it"),
        "lam_us": lam * 1e6, "B_GBs": bandwidth / 1e9, "pp_source": pp_source,
        "stream_source": stream_source, "stream1": stream_gbs[1],
        "stream_gain": stream_gbs.get(pmax, stream_gbs[max(stream_gbs)]) / stream_gbs[1],
        "halo_kib": 8 * (int(w["n"].max()) + 2) / 1024,
        "n_super": int((h["speedup_published"] > h["P"]).sum()),
        **_binding_numbers(reference_scaling),
        **_network_numbers(reference_scaling),
        "bytes": BYTES, "bytes_wa": BYTES_WA,
        "Npred": int(p1["N"]), "pred1_ms": float(p1["predicted [ms]"]),
        "meas1_ms": float(p1["measured [ms]"]),
        "Pp": int(pp["P"]), "predp_ms": float(pp["predicted [ms]"]),
        "measp_ms": float(pp["measured [ms]"]), "S_P": int(smax["P"]),
        "S_words": stats.estimate_words(float(smax["speed-up"]), float(smax["low"]),
                                        float(smax["high"]), "", "speed-up",
                                        name="the speed-up"),
        "ratio1_words": stats.estimate_words(
            float(p1["measured / predicted"]), float(p1["low"]), float(p1["high"]), "",
            "ratio of times", value_unit="times the prediction", name="the ratio"),
        "ratiop_words": stats.estimate_words(
            float(pp["measured / predicted"]), float(pp["low"]), float(pp["high"]), "",
            "ratio of times", name="the ratio"),
        "S_pred": float(pp["predicted speed-up"]),
        "interleave_words": interleave_words(df),
        "odd_cluster": odd["cluster"] if odd is not None else "none",
        "odd_pub": float(odd["speedup_published"]) if odd is not None else float("nan"),
        "odd_re": float(odd["speed-up recomputed"]) if odd is not None else float("nan"),
        "st_S": float(st["speedup_published"]), "st_mib": float(st["MiB per process"]),
        "st_l3": l3, "n4096_mib": n4096,
        "pvs_first_P": int(pvs.index[0]) if pvs is not None else 0,
        "pvs_first": float(pvs.iloc[0]["ratio"]) if pvs is not None else np.nan,
        "pvs_last_P": int(pvs.index[-1]) if pvs is not None else 0,
        "pvs_last": float(pvs.iloc[-1]["ratio"]) if pvs is not None else np.nan,
    }


# ----------------------------------------------------------------------- simulated cluster

def simulated(profile=None, platform="stampede2"):
    """CG iterations of the C solver on a simulated cluster (:mod:`hpclab.simulate`) at the
    profile's ``simulated`` N and rank counts: a records.Run, or None without SimGrid."""
    from hpclab import simulate
    from hpclab.chapters.poisson import simulation

    if not simulate.available():
        return None
    s = profiles.get(NAME, profile)["simulated"]
    return simulation.on_platform(platform, ranks=s["ranks"], n=s["n"],
                                  iterations=s["iterations"], repetitions=2, profile=profile)


def simulated_speedup(df):
    """Simulated seconds per iteration (median), speed-up over P = 1 and efficiency, per P."""
    t = records.table(df)
    it = t[t["metric"] == "iteration"].groupby("nprocs")["value"].median()
    out = pd.DataFrame({"P": it.index.astype(int), "ms per iteration": it.to_numpy() * 1e3})
    out["speed-up"] = it.iloc[0] / it.to_numpy()
    out["efficiency"] = out["speed-up"] / out["P"]
    return out.reset_index(drop=True)


def simulated_figure(sp, n, ref, spec):
    """The simulated speed-up (``simulated_speedup``) beside report 000's one-node speed-ups
    (``scaling_reference``), with the ideal line and the node boundary marked."""
    from hpclab import plots

    one_node = ref[ref["nodes"] == 1]
    both = pd.concat([
        sp.assign(median=sp["speed-up"], mesh=f"N = {n}, simulated"),
        one_node.assign(median=one_node["speed-up"],
                        mesh="N = " + one_node["N"].astype(str) + ", report 000 (1 node)")])
    both = both.assign(best=both["median"], worst=both["median"])
    ax = plots.scaling(both.sort_values("P"), "P", "mesh", ideal=lambda p: p, logx=True,
                       logy=True, integer_x=False, line=True, xlabel="ranks P",
                       ylabel="speed-up of one CG iteration",
                       title="Simulated Stampede2-like cluster and report 000")
    ax.axvline(spec["cores_per_socket"] * spec["sockets_per_node"] + 0.5, color="0.5", ls=":")
    return ax


def simulated_words(sp, n, spec, sc):
    """The simulated speed-ups in sentences, beside report 000's one-node Table 4.1 at the
    same N when it has one (times under 10 s left out, as elsewhere on the page)."""
    per_node = spec["cores_per_socket"] * spec["sockets_per_node"]
    one = sp[sp["P"] <= per_node]
    top = one.iloc[-1]
    lines = [f"Simulated, N = {n}: speed-up {top['speed-up']:.1f} on {int(top['P'])} ranks of "
             f"one node (efficiency {top['efficiency']:.2f})."]
    beyond = sp[sp["P"] > per_node]
    if len(beyond):
        last = beyond.iloc[-1]
        lines.append(f"On {int(last['P']) // per_node} nodes ({int(last['P'])} ranks): speed-up "
                     f"{last['speed-up']:.1f}, efficiency {last['efficiency']:.2f}.")
    ref = scaling_reference(sc)
    ref = ref[(ref["N"] == n) & (ref["nodes"] == 1)]
    common = sorted(set(ref["P"]) & set(one["P"]) - {1})
    if common:
        p = common[-1]
        pub = float(ref.loc[ref["P"] == p, "speed-up"].iloc[0])
        sim = float(one.loc[one["P"] == p, "speed-up"].iloc[0])
        lines.append(f"At P = {p} on one node report 000 measured a speed-up of {pub:.1f} "
                     f"(Table 4.1, N = {n}); the simulation gives {sim:.1f}, "
                     f"{sim / pub:.2f} times as much.")
    else:
        lines.append(f"Report 000's Table 4.1 has no one-node times of 10 s or more at "
                     f"N = {n} to set beside these (the standard profile simulates N = 4096, "
                     "which it has).")
    lines.append("The simulated ranks compute one at a time, each with a core and the memory "
                 "bandwidth of this machine to itself: a node's shared memory bandwidth is not "
                 "in the model, so the speed-up within a node is an upper bound, not a "
                 "prediction.")
    return "\n".join(lines)


def hpcg_words(h: pd.DataFrame) -> str:
    """Report 002's HPCG results (Table 6.1, ``hamburg_hpcg``) in words: the range of its rates
    over the problem sizes (per process, as HPCG's input gives them), the best, and their
    spread."""
    best = h.loc[h["gflops"].idxmax()]
    low, high = float(h["gflops"].min()), float(h["gflops"].max())
    sizes = h["problem_size"].tolist()
    return (f"Report 002's team ran HPCG, a conjugate gradient with a multigrid "
            f"preconditioner, on its cluster at {len(sizes)} problem sizes per process from "
            f"{min(sizes, key=_cube)} to {max(sizes, key=_cube)}: it reached {low:.1f} to "
            f"{high:.1f} GFLOP/s, the highest at {best['problem_size']}, and the rates, single "
            f"runs without intervals, lie {(high - low) / high * 100:.1f}% apart")


def _cube(size: str) -> int:
    """The points of a problem size written 'NxNxN'."""
    out = 1
    for n in size.split("x"):
        out *= int(n)
    return out
