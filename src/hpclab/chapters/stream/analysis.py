"""STREAM experiment: memory bandwidth against threads, binding, memory placement and ranks.

Three modes, one record format (metric ``time`` in seconds, one row per
operation and counted trial; columns ``op, mode, bind, cpunodebind, membind,
n, ntimes, hugepages, rank``):

``threads``  one process per thread count 1 .. cores and per ``OMP_PROC_BIND``
             (close, spread; ``OMP_PLACES=cores``), started fresh so the OpenMP
             runtime reads the binding. With more than one NUMA node, also
             close and distant memory under ``numactl --cpunodebind/--membind``.
``star``     every MPI rank runs STREAM on its own arrays with one thread, all
             starting each kernel together (HPCC's StarSTREAM).
``single``   rank 0 alone while the others wait without polling (SingleSTREAM).

Array sizes follow STREAM's rule in the standard and full profiles: each array
at least four times all caches together (for ``star``, all ranks' arrays together).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import launch, models, profiles, records

# the sweep (what every rank runs) is hpclab.chapters.stream.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.stream.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    IMPLS,
    KERNEL,
    METRIC,
    MIN_PROCS,
    NAME,
    NPROCS,
    UNIT,
    array_elements,
    measure,
    numa_pairs,
    run,
    run_mpi,
    run_threads,
    tasks,
)

# ----------------------------------------------------------------------------- analysis

def bandwidths(df):
    """The records with a ``bandwidth`` column in bytes per second (STREAM's byte counts)."""
    from hpclab.chapters.stream.kernels import BYTES_PER_ELEMENT

    df = records.table(df)
    t = df[df["metric"] == METRIC].copy()
    t["bandwidth"] = t["op"].map(BYTES_PER_ELEMENT) * t["n"] / t["value"]
    return t


def summary(df, mode="threads"):
    """Best (STREAM's number), median and worst bandwidth in GB/s per implementation,
    operation, threads, binding and memory placement."""
    b = bandwidths(df)
    b = b[b["mode"] == mode]
    keys = ["impl", "op", "nthreads", "bind", "cpunodebind", "membind"]
    g = b.groupby(keys)["bandwidth"]
    out = g.agg(best="max", median="median", worst="min", trials="count").reset_index()
    for c in ("best", "median", "worst"):
        out[c] = out[c] / 1e9
    return out


def slower_with_threads(summary, impl="c", op="triad"):
    """Words when more threads gave less bandwidth than one thread (the whole range of their
    trials below the whole range of one thread's, in the default placement), else None.
    More threads do not slow memory down by themselves, so such a sweep is not a measurement
    of the machine alone; what else ran cannot be told from the sweep. (``loaded_words``
    judges the best rates alone, of a run another lab takes as its input.)"""
    s = summary[(summary["impl"] == impl) & (summary["op"] == op) & (summary["membind"] == -1)]
    found = []
    for bind, g in s.groupby("bind"):
        g = g.set_index("nthreads")
        if 1 not in g.index:
            continue
        one = g.loc[1]
        for n, row in g.drop(index=1).iterrows():
            if row["best"] < one["worst"]:
                found.append(f"{n} threads ({bind} binding) got {row['worst']:.3g} to "
                             f"{row['best']:.3g} GB/s, one thread {one['worst']:.3g} to "
                             f"{one['best']:.3g}")
    if not found:
        return None
    return ("More threads, less bandwidth: " + "; ".join(found) + ". Threads do not slow memory "
            "down by themselves: another program shared the cores or the memory during the run, "
            "or the threads shared a core, and this sweep cannot tell which. Run it again on an "
            "idle machine before you read (e) to (g) from it.")


def mpi_summary(df):
    """StarSTREAM (per rank, and all ranks together) and SingleSTREAM in GB/s."""
    b = bandwidths(df)
    rows = []
    for (impl, op), g in b[b["mode"] == "star"].groupby(["impl", "op"]):
        per_trial = g.groupby("rep")["bandwidth"].sum()  # ranks started each trial together
        per_rank = g.groupby("rank")["bandwidth"].max()
        rows.append({"impl": impl, "op": op, "ranks": int(g["nprocs"].iloc[0]),
                     "star_per_rank": per_rank.mean() / 1e9, "star_total": per_trial.max() / 1e9})
    star = pd.DataFrame(rows)
    single = (b[b["mode"] == "single"].groupby(["impl", "op"])["bandwidth"].max() / 1e9)
    if star.empty:
        return single.rename("single").reset_index()
    return star.merge(single.rename("single").reset_index(), on=["impl", "op"], how="left")


def fit_saturation(df, impl="c", op="triad", bind=None, smooth=False):
    """The saturation model fitted to every counted trial's bandwidth against threads
    (both bindings unless ``bind`` is given). Bandwidth in bytes per second."""
    b = bandwidths(df)
    b = b[(b["mode"] == "threads") & (b["impl"] == impl) & (b["op"] == op)
          & (b["membind"] == b["cpunodebind"])]
    if bind is not None:
        b = b[b["bind"] == bind]
    if b.empty:
        raise ValueError(f"no threaded STREAM records of {impl} {op}")
    model = models.SATURATION_SMOOTH if smooth else models.SATURATION
    return models.fit(model, b["nthreads"].to_numpy(float), b["bandwidth"].to_numpy(float))


def roofline(df, impl="c", peak=None):
    """A :class:`hpclab.models.Roofline` from the best measured triad bandwidth (all
    threads), for the chapters whose kernels are bound by memory."""
    s = summary(df)
    s = s[(s["impl"] == impl) & (s["op"] == "triad") & (s["membind"] == s["cpunodebind"])]
    if s.empty:
        raise ValueError(f"no threaded STREAM triad records of {impl}")
    best = s.loc[s["best"].idxmax()]
    return models.Roofline(bandwidth=float(best["best"]) * 1e9, peak=peak,
                           source=f"STREAM triad, {impl}, {int(best['nthreads'])} thread(s), "
                                  f"{best['bind']}")


# ----------------------------------------------------------------------------- the chapter

LOOPS = {"copy": "c[j] = a[j]", "scale": "b[j] = s*c[j]", "add": "c[j] = a[j] + b[j]",
         "triad": "a[j] = b[j] + s*c[j]"}


def kernel_table():
    """STREAM's four loops with their bytes, flops and flops per byte (STREAM's counts)."""
    from hpclab.chapters.stream.kernels import BYTES_PER_ELEMENT, FLOPS_PER_ELEMENT, OPS

    return pd.DataFrame({"loop": LOOPS, "bytes per element": BYTES_PER_ELEMENT,
                         "flops per element": FLOPS_PER_ELEMENT,
                         "flops per byte": {op: FLOPS_PER_ELEMENT[op] / BYTES_PER_ELEMENT[op]
                                            for op in OPS}}).rename_axis("kernel").round(3)


def intensities(ops=("copy", "triad")):
    """Flops per byte of STREAM's loops, for marking them on a roofline."""
    from hpclab.chapters.stream.kernels import BYTES_PER_ELEMENT, FLOPS_PER_ELEMENT

    return {op: FLOPS_PER_ELEMENT[op] / BYTES_PER_ELEMENT[op] for op in ops}


def _dgemm_rate(n, repeats):
    import time as _time

    a = np.random.default_rng(0).standard_normal((n, n))
    b = np.random.default_rng(1).standard_normal((n, n))
    best = np.inf
    for _ in range(repeats + 1):  # the first warms the library up
        t0 = _time.perf_counter()
        c = a @ b
        best = min(best, _time.perf_counter() - t0)
    if not np.allclose(c[0, :4], a[0] @ b[:, :4]):
        raise RuntimeError("the matrix product is wrong")
    return 2.0 * n**3 / best


def dgemm_peak(profile=None):
    """Floating-point rate of numpy's matrix product (the BLAS it links, all cores): the
    compute ceiling this machine's roofline uses (flop/s, and what measured it)."""
    n = 1000 if profiles.name(profile) == "quick" else 3000
    import numpy

    blas = "numpy's BLAS"
    try:
        cfg = numpy.show_config(mode="dicts")
        blas = f"numpy's BLAS ({cfg['Build Dependencies']['blas']['name']})"
    except Exception:  # the layout of show_config differs between numpy versions
        pass
    return _dgemm_rate(n, 3), f"{blas}, {n}x{n} DGEMM, best of 3, {launch.usable_cores()} cores"


def rooflines(df, ul, nodeperf, profile=None):
    """{label: Roofline} of this machine (measured triad and DGEMM) and of a Ulysses node
    (its 20-thread triad and its nodeperf DGEMM at the published share of peak)."""
    peak, how = dgemm_peak(profile)
    mine = roofline(df, peak=peak)
    mine = models.Roofline(mine.bandwidth, mine.peak, mine.source + "; peak: " + how)
    best = nodeperf.loc[nodeperf["percent_of_peak"].idxmax()]
    ul_peak = best["mflops"] * 1e6 / (best["percent_of_peak"] / 100)
    ul_triad = ul.set_index(["op", "threads"])["best_rate_MBps"][("triad", 20)] * 1e6
    from hpclab import reference

    ul_roof = models.Roofline(bandwidth=ul_triad, peak=ul_peak,
                              source=reference.cite(ul) + "; " + reference.cite(nodeperf))
    return {"this machine (measured triad, DGEMM)": mine,
            "Ulysses node (report 004)": ul_roof}


def close_distant(df):
    """Best triad bandwidth with the memory on the threads' node and on the other (GB/s),
    or None on a machine with one NUMA node."""
    s = summary(df)
    d = s[(s["membind"] >= 0) & (s["op"] == "triad")]
    if d.empty:
        return None
    d = d.assign(memory=np.where(d["membind"] == d["cpunodebind"], "close", "distant"))
    return d.pivot_table(index="nthreads", columns=["impl", "memory"], values="best").round(2)


def ulysses_table(ul):
    """Report 004's best STREAM rates in GB/s by operation and threads."""
    from hpclab.chapters.stream.kernels import OPS

    t = ul.pivot(index="op", columns="threads", values="best_rate_MBps").reindex(OPS) / 1e3
    t.columns = [f"{c} thread(s) [GB/s]" for c in t.columns]
    return t.round(2)


def versus_reference(df, ul, impl="c"):
    """This machine's best rates per operation and thread count, and Ulysses', as one
    summary for :func:`hpclab.plots.scaling` (bytes per second, like the fits), and the
    series to join with lines (this machine's; Ulysses' are four kernels at two points)."""
    s = summary(df)
    mine = s[(s["impl"] == impl) & (s["bind"] == "close") & (s["membind"] == -1)]
    mine = mine.sort_values("op", key=lambda c: c.map({op: i for i, op in enumerate(LOOPS)}))
    mine = mine.assign(series="this machine: " + mine["op"], median=mine["best"] * 1e9,
                       best=mine["best"] * 1e9, worst=mine["worst"] * 1e9)
    ref = ul.assign(series="Ulysses (report 004)", nthreads=ul["threads"],
                    median=ul["best_rate_MBps"] * 1e6)
    ref = ref.assign(best=ref["median"], worst=ref["median"])
    cols = ["series", "nthreads", "median", "best", "worst"]
    return (pd.concat([mine[cols], ref[cols]], ignore_index=True),
            list(mine["series"].unique()))


def mpi_table(df, impl="c"):
    """SingleSTREAM and StarSTREAM in GB/s per operation."""
    from hpclab.chapters.stream.kernels import OPS

    ms = mpi_summary(df)
    t = ms[ms["impl"] == impl].set_index("op").reindex(OPS)
    return t[["ranks", "single", "star_per_rank", "star_total"]].round(2).rename(
        columns={"single": "Single [GB/s]", "star_per_rank": "Star per rank [GB/s]",
                 "star_total": "Star, all ranks [GB/s]"})


def hamburg_table(hh):
    """Report 002's HPCC STREAM: Single and Star per rank, per node, and their ratio."""
    t = hh.assign(per_node=hh["star_GBps"] * hh["ranks"] / hh["nodes"],
                  ratio=hh["star_GBps"] / hh["single_GBps"]).set_index("op")
    return t[["single_GBps", "star_GBps", "per_node", "ratio"]].round(3).rename(columns={
        "single_GBps": "Single [GB/s]", "star_GBps": "Star per rank [GB/s]",
        "per_node": "Star per node [GB/s]", "ratio": "Star / Single"})


def shaheen_table(sh):
    """Report 003's memory bandwidth tests against the peak, with the share recomputed."""
    t = sh.assign(share=sh["bandwidth_GBps"] / sh["peak_GBps"] * 100)
    return t[["test", "threads", "bandwidth_GBps", "peak_GBps", "percent_of_peak",
              "share"]].round(1).rename(columns={
        "bandwidth_GBps": "bandwidth [GB/s]", "peak_GBps": "peak [GB/s]",
        "percent_of_peak": "published share [%]", "share": "recomputed share [%]"}).set_index(
        "test")


def trial_comparison(df, a, b, names):
    """Bandwidth of every trial of ``a`` against ``b`` (each ``(impl, op, threads)``, close
    binding): the sentence :meth:`hpclab.stats.Comparison.words` allows."""
    from hpclab import stats as hstats

    t = bandwidths(df)
    t = t[(t["mode"] == "threads") & (t["bind"] == "close") & (t["membind"] == t["cpunodebind"])]

    def trials(impl, op, threads):
        return t[(t["impl"] == impl) & (t["op"] == op) & (t["nthreads"] == threads)]["bandwidth"]

    return hstats.said(trials(*a), trials(*b), names, "bandwidth", verb="moved")


def numbers(run, sat, ul, hh, sh, roofs, nodeperf):
    """Every number the chapter's text quotes, computed (name -> value)."""
    df, meta = run
    s = summary(df)
    n = int(meta["doubles_per_array"])
    cores = meta["cores"]
    best = s.set_index(["impl", "op", "nthreads", "bind"])["best"]
    knee = models.saturation_threads(sat)
    threads_measured = int(s["nthreads"].max())
    counts = int(s.loc[(s["impl"] == "c") & (s["op"] == "triad"), "nthreads"].nunique())
    tested = counts > len(models.SATURATION.params)
    saturated = tested and knee < threads_measured - 0.25
    gain = best[("c", "triad", cores, "close")] - best[("c", "triad", 1, "close")]
    numa = meta["numa_nodes"]
    ul_t = ul.set_index(["op", "threads"])["best_rate_MBps"] / 1e3
    ms = mpi_summary(df)
    mc = ms[ms["impl"] == "c"].set_index("op")
    h = hamburg_table(hh)
    h_raw = hh.set_index("op")
    sh_share = sh["bandwidth_GBps"] / sh["peak_GBps"] * 100
    mine, ul_roof = roofs.values()
    triad_i = intensities()["triad"]
    return {
        "n_elems": f"{n:,}", "array_mb": n * 8 / 1e6, "cache_mb": meta["cache_bytes"] / 1e6,
        "array_over_cache": n * 8 / meta["cache_bytes"], "ntimes": meta["settings"]["ntimes"],
        "cores": cores, "triad_1": best[("c", "triad", 1, "close")],
        "triad_all": best[("c", "triad", cores, "close")],
        "speedup_all": best[("c", "triad", cores, "close")] / best[("c", "triad", 1, "close")],
        "cmp_threads": trial_comparison(df, ("c", "triad", cores), ("c", "triad", 1),
                                        (f"{cores} threads", "one thread")),
        "cmp_cython": trial_comparison(df, ("cython", "triad", cores), ("c", "triad", cores),
                                       ("the Cython triad", "the C triad")),
        "cmp_copy": trial_comparison(df, ("c", "copy", cores), ("c", "triad", cores),
                                     ("copy", "triad")),
        "cy_over_c": (best[("cython", "triad", cores, "close")]
                      / best[("c", "triad", cores, "close")]),
        "copy_vs_triad": best[("c", "copy", cores, "close")] / best[("c", "triad", cores, "close")],
        "b1": sat["b1"] / 1e9, "knee": knee, "bmax": sat["Bmax"] / 1e9,
        "threads_measured": threads_measured,
        "saturation_verdict": (
            f"this machine has {counts} thread counts, no more than the model's two parameters, "
            "so the fit passes through the means at each and tests nothing: it is shown for the "
            f"method. What the data say: one thread moves {best[('c', 'triad', 1, 'close')]:.1f} "
            f"GB/s and {cores} threads {best[('c', 'triad', cores, 'close')]:.1f} GB/s (best "
            f"trials), so the ceiling is at least {best[('c', 'triad', cores, 'close')]:.1f} GB/s "
            "and is not measured here" if not tested else
            f"the bandwidth saturates: the fitted ceiling is reached at {knee:.1f} threads, below "
            f"the {threads_measured} measured, and more threads on this machine would not move "
            "more data" if saturated else
            f"the bandwidth has not saturated within the {threads_measured} cores: the model puts "
            f"the knee at {knee:.1f} threads, too close to (or beyond) the last measured point to "
            "tell a ceiling from the last measurement, so the data say only that B_max is at "
            "least the bandwidth of all cores; the ceiling itself is not measured here"),
        "numa": numa,
        "numa_text": (
            "This machine has more than one NUMA node, so the experiment ran STREAM under numactl "
            "with the threads on one node and the memory on the same or the other node"
            if numa > 1 else "This machine has a single NUMA node: every core is as close to "
            "every byte as any other, so there is no distant memory to measure here, and the "
            "published measurements below take its place"),
        "ul_1": ul_t[("triad", 1)], "ul_20": ul_t[("triad", 20)],
        "ul_ratio": ul_t[("triad", 20)] / ul_t[("triad", 1)],
        "ul_knee": ul_t[("triad", 20)] / ul_t[("triad", 1)],
        "ours_vs_ul_1": best[("c", "triad", 1, "close")] / ul_t[("triad", 1)],
        "my_star_ratio": mc.loc["triad", "star_per_rank"] / mc.loc["triad", "single"],
        "my_ranks": int(mc.loc["triad", "ranks"]),
        "hh_ratio": h.loc["triad", "Star / Single"],
        "hh_node": h.loc["triad", "Star per node [GB/s]"],
        "hh_cores": int(h_raw.loc["triad", "cores_per_node"]),
        "hh_knee": h.loc["triad", "Star per node [GB/s]"] / h.loc["triad", "Single [GB/s]"],
        "sh_best": sh_share.max(), "sh_worst": sh_share.min(),
        "ul_peak": ul_roof.peak / 1e9, "ul_ridge": ul_roof.ridge,
        "ul_triad_share": ul_roof.bound(triad_i) / ul_roof.peak * 100,
        "my_triad_gflops": mine.bound(triad_i) / 1e9, "my_peak": mine.peak / 1e9,
        "my_ridge": mine.ridge, "nodeperf_low": nodeperf["percent_of_peak"].min(),
        "ul_dgemm": nodeperf["mflops"].max() / 1e3,
        "ul_dgemm_share": nodeperf["percent_of_peak"].max(),
        "nodeperf_low_gflops": nodeperf["mflops"].min() / 1e3,
        "here_story": (
            f"This machine shows the whole curve as well: its bandwidth stops growing at about "
            f"{knee:.1f} threads" if saturated else "This machine shows the first half of that "
            f"curve at most: from one thread to {cores} its triad gains {gain:.1f} GB/s (best "
            "trials), and where its ceiling lies it cannot measure"),
    }


def _close_add(run_):
    s = summary(records.table(run_))
    return s[(s["impl"] == "c") & (s["op"] == "add") & (s["bind"] == "close")
             & (s["membind"] == s["cpunodebind"])]


def _has_close_add(run_):
    return None if not _close_add(run_).empty else "no C add runs with close binding"


def measurement(profile=None, engines=None, out_dir=None):
    """(run, where it came from): the STREAM run this machine's other chapters take
    (:func:`hpclab.inputs.measured`: saved here, of this host and MPI library, not
    simulated, of this book build when one is under way), else the whole experiment
    measured now and saved, so that the next page takes the same. ``out_dir``: the results
    folder (default: :func:`hpclab.records.results_dir`)."""
    from hpclab import inputs

    return inputs.measured(
        NAME, lambda: run(profile=profile, engines=engines, progress=False), profile=profile,
        out_dir=out_dir, accept=_has_close_add)


def add_bandwidth(profile=None, procs=None):
    """STREAM add bandwidth in GB/s per thread count (1 .. cores, close binding), best trial:
    the one bandwidth rule of every chapter that predicts from STREAM. From
    :func:`measurement` inside a book build (one measurement for every page), else from the
    newest saved STREAM run of this machine (of ``profile`` when one is given: a lab in the
    standard profile must not take a quick run's cache-sized arrays), else from the whole
    STREAM experiment measured now at ``profile`` and saved, so that the next lab takes the
    same.
    ``procs`` keeps the thread counts up to it. Returns ({threads: GB/s}, where it came
    from)."""
    from hpclab import inputs

    saved = None if inputs.build_id() else inputs.resolve(NAME, profile, accept=_has_close_add)
    if saved is not None and saved.run is not None:
        r, source = saved.run, saved.source
    else:
        r, source = measurement(profile)
    gbs = {int(x.nthreads): float(x.best) for x in _close_add(r).itertuples()
           if procs is None or int(x.nthreads) <= procs}
    loaded = loaded_words(gbs)
    return gbs, source + (f"; {loaded}" if loaded else "")


def loaded_words(gbs, drop=0.5):
    """Words for a STREAM run that more threads made much slower (best trial under ``drop``
    times the best of fewer threads): memory does not lose half its bandwidth to one more
    thread of a machine with a core for each; other work on the machine takes it. Empty
    when the run looks sound."""
    best, fewer = {}, 0.0
    for threads in sorted(gbs):
        if fewer and gbs[threads] < drop * fewer:
            best[threads] = fewer
        fewer = max(fewer, gbs[threads])
    if not best:
        return ""
    t = min(best)
    return (f"with {t} threads its add reached {gbs[t]:.3g} GB/s, under half of the "
            f"{best[t]:.3g} GB/s of fewer threads: that run was most likely measured while "
            "other work used the cores, and predictions from it will be off; measure STREAM "
            "again on an idle machine (python -m hpclab run stream) and run the lab again")


def report_references():
    """The published nodes' STREAM triad for the class report, in GB/s:
    [(label, {"triad": value})]. Ulysses: 20 threads (report 004); the Hamburg SCC node: its
    ranks times StarSTREAM's per-rank triad (report 002)."""
    from hpclab import reference

    st = reference.load("ulysses_stream").set_index(["op", "threads"])["best_rate_MBps"]
    rows = [("Ulysses (report 004)", {"triad": float(st[("triad", 20)]) / 1e3})]
    hh = reference.load("hamburg_hpcc_stream")
    triad = hh[hh["op"].str.lower() == "triad"]
    if len(triad):
        t = triad.iloc[0]
        rows.append((f"Hamburg SCC node: {int(t['cores_per_node'])} ranks x StarSTREAM "
                     "(report 002)", {"triad": float(t["star_GBps"]) * int(t["cores_per_node"])}))
    return rows
