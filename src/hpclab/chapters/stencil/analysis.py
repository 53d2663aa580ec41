"""Stencil experiment: finite-difference derivatives of order 2 to 16 (report 003, FD_D2).

``derivative``  every operator (d²/dx₁², d²/dx₂², d²/dx₃², the Laplacian) at the profile's
                orders on cubes of n points, baseline and blocked, C and Cython, most ranks;
``convergence`` the C Laplacian of every order on small cubes, one rank;
``scaling``     the C Laplacian of order 8, P = 1 .. the most ranks.

Records: one row per repetition and metric (``apply, compute, halo`` in seconds per
application, ``error`` relative to the largest exact value) with columns ``kind, operator,
order, n, blocked, block3, block2, grid, oversubscribed``. What this module computes from
them: the observed order of convergence with its interval (:func:`convergence_orders`), the
rates in report 003's units (:func:`rates`), and what blocking gained
(:func:`blocking_gains`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import profiles, stats
from hpclab.chapters.stencil import fd

# the sweep (what every rank runs) is hpclab.chapters.stencil.sweep; its names are
# imported here for the pages, the labs and the tests
from hpclab.chapters.stencil.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    IMPLS,
    KERNEL,
    NAME,
    NPROCS,
    OPERATORS,
    WAVE_UNITS,
    lab_points,
    measure,
    run,
    run_mpi,
    tasks,
    thick_enough,
)
from hpclab.chapters.stream.analysis import (  # noqa: F401 (the inputs of the roofline)
    add_bandwidth as stream_bandwidth,
    dgemm_peak,  # noqa: F401
)

# errors below this share of the exact value are round-off, not truncation: a fit of the
# order leaves them out (the kernel's own check allows 64 machine epsilons per term)
ROUND_OFF = 1e-11
# the operator names of the records as fd's counting functions take them
_FD_OPERATOR = {"d2x1": 1, "d2x2": 2, "d2x3": 3, "laplacian": "laplacian"}


def convergence_orders(df):
    """Per order: the slope of log(error) against log(h) (h = 1 / (n + 1)) fitted through
    the sizes whose error is above round-off, with its 95% t interval; a DataFrame with
    ``order, points, observed, low, high, words``. A slope needs three sizes for an
    interval (a line through two points has no scatter to estimate): with fewer it is
    left empty and the words say why."""
    d = df[(df["kind"] == "convergence") & (df["metric"] == "error")]
    rows = []
    for order, g in d.groupby("order"):
        err = g.groupby("n")["value"].median()
        kept = err[err > ROUND_OFF]
        row = {"order": int(order), "points": len(kept), "observed": np.nan,
               "low": np.nan, "high": np.nan}
        if len(kept) < 3:
            row["words"] = (f"{len(kept)} size(s) above round-off ({ROUND_OFF:g}): too few for "
                            "an order with an interval" if len(kept) < len(err) else
                            f"{len(kept)} sizes: too few for an order with an interval")
        else:
            x = np.log(1.0 / (kept.index.to_numpy(dtype=float) + 1))
            y = np.log(kept.to_numpy())
            slope, intercept = np.polyfit(x, y, 1)
            resid = y - (slope * x + intercept)
            se = np.sqrt(resid @ resid / (len(x) - 2) / np.sum((x - x.mean()) ** 2))
            half = float(stats.t_quantile(0.975, len(x) - 2)) * se
            row.update(observed=slope, low=slope - half, high=slope + half)
            inside = row["low"] <= order <= row["high"]
            row["words"] = (f"observed order {slope:.2f} [{slope - half:.2f}, "
                            f"{slope + half:.2f}] from {len(kept)} sizes: the expected "
                            f"{order} is {'inside' if inside else 'outside'} the interval")
        rows.append(row)
    return pd.DataFrame(rows)


def rates(df, kind="derivative"):
    """Median seconds per application and the rates of report 003 per (impl, operator,
    order, n, blocked): MLUP/s (mega-points per second), GFlop/s and GB/s as hpcscan counts
    them (every stencil point loaded, the result stored, 8-byte words), and GB/s counted as
    memory must move it at least (u and w once: 24 bytes a point with plain stores, which
    first read the line they write; 16 where the run streamed its stores past the cache,
    ``stores``, plain where records do not say)."""
    d = df[(df["kind"] == kind) & (df["metric"] == "apply")]
    if "stores" not in d.columns:
        d = d.assign(stores="plain")
    d = d.assign(stores=d["stores"].fillna("plain"))
    keys = ["impl", "operator", "order", "n", "blocked", "block3", "block2", "nprocs",
            "stores"]
    out = d.groupby(keys)["value"].median().rename("seconds").reset_index()
    points = out["n"].astype(float) ** 3
    out["mlups"] = points / out["seconds"] / 1e6
    op = out["operator"].map(_FD_OPERATOR)
    out["gflops"] = [fd.flops_per_point(o, k) for o, k in zip(op, out["order"])] \
        * points / out["seconds"] / 1e9
    out["gbs_hpcscan"] = [fd.bytes_per_point(o, k) for o, k in zip(op, out["order"])] \
        * points / out["seconds"] / 1e9
    out["gbs_minimum"] = [fd.bytes_per_point(o, k, counted="minimum", stores=st) for o, k, st
                          in zip(op, out["order"], out["stores"])] * points / out["seconds"] / 1e9
    return out


def blocking_gains(df, impl="c"):
    """Baseline time over blocked time per (operator, order, n, blocks), with the 95%
    interval of the ratio of medians (:func:`hpclab.stats.compare`) and words computed
    from it: "blocked faster" only where the whole interval lies above 1, "blocked
    slower" where it lies below, else "no difference shown"."""
    d = df[(df["kind"] == "derivative") & (df["metric"] == "apply") & (df["impl"] == impl)]
    rows = []
    for (operator, order, n), g in d.groupby(["operator", "order", "n"]):
        base = g[~g["blocked"].astype(bool)]["value"]
        for (b3, b2), blk in g[g["blocked"].astype(bool)].groupby(["block3", "block2"]):
            try:
                c = stats.compare(base, blk["value"], names=("baseline", "blocked"))
            except ValueError as exc:  # too few repetitions, or no scatter
                rows.append({"operator": operator, "order": order, "n": n, "block3": b3,
                             "block2": b2, "gain": np.nan, "low": np.nan, "high": np.nan,
                             "words": str(exc)})
                continue
            words = ("blocked faster" if c.low > 1 else "blocked slower" if c.high < 1
                     else "no difference shown")
            rows.append({"operator": operator, "order": order, "n": n, "block3": b3,
                         "block2": b2, "gain": c.ratio, "low": c.low, "high": c.high,
                         "words": words})
    return pd.DataFrame(rows)


def weights_list(orders=fd.ORDERS):
    """The weights of each order as exact fractions, a Markdown list (see
    :func:`weights_table` for the counts)."""
    words = {}
    for order in orders:
        c = fd.second_derivative(order, exact=True)
        r = order // 2
        sub = str(r).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
        words[f"order {order}"] = (f"c₀ = {c[r]}; c₁ … c{sub} = "
                                   + ", ".join(str(v) for v in c[r + 1:]))
    return words_list(words)


def weights_table(orders=fd.ORDERS):
    """The centred weights c_0 .. c_r of d²/dx² for each order as exact fractions (Fornberg,
    :func:`hpclab.chapters.stencil.fd.second_derivative`), with the points one output reads
    and the flops hpcscan counts, for the page: one row per order."""
    rows = []
    for order in orders:
        c = fd.second_derivative(order, exact=True)
        r = order // 2
        rows.append({"order": order, "c_0": str(c[r]),
                     "c_1 .. c_r": ", ".join(str(v) for v in c[r + 1:]),
                     "points (one axis)": fd.stencil_points(1, order),
                     "points (Laplacian)": fd.stencil_points("laplacian", order),
                     "flops (Laplacian)": fd.flops_per_point("laplacian", order)})
    return pd.DataFrame(rows).set_index("order")


def convergence_display(conv):
    """The convergence table of the page: observed order and interval per order (numbers
    only: the words go below it as a list, which a phone's width wraps)."""
    table = conv.set_index("order")[["points", "observed", "low", "high"]].round(2)
    return table.astype(object).where(table.notna(), "–")  # no fit: a dash, not NaN


def words_list(words):
    """{label: words} as a Markdown list, for what does not fit a table's cell."""
    return "\n".join(f"* **{label}**: {text}" for label, text in words.items())


def stores_words(stores, meta=None):
    """How the C kernel stored its output, in the page's words: ``stores`` as the run
    recorded it, the threshold from the run's machine (``meta``)."""
    from hpclab import machine
    from hpclab.chapters.stencil.kernels import NEVER, streaming_threshold

    if stores == "streaming":
        above = streaming_threshold((meta or {}).get("machine") or None)
        where = (f"{above / 2**20:.0f} MiB, the node's caches (for each core a share of the "
                 f"last level, at most {machine.STREAMING_L2_CAP} times its L2)" if above < NEVER
                 else "the threshold of the machine it ran on")
        return ("past the cache (streaming stores: u read, w written without reading its "
                f"line), as it does where the two arrays of the node's ranks together pass "
                f"{where}")
    return "with plain stores (each first reads the line it writes: u read, w read and written)"


def roofline_mlups(stream_gbs, operator="laplacian", order=8, stores="plain"):
    """The rate memory allows at STREAM add's bandwidth (GB/s, as STREAM counts it: 24 bytes
    an element) if each point of u is read once and w written once (``stores``: "plain",
    with the read of its line first; "streaming", past the cache): {threads: MLUP/s}. A
    bound in the regime where the planes the stencil reads stay in cache; where they do not,
    the traffic grows and the rate falls below it."""
    per = fd.bytes_per_point(operator, order, counted="minimum", stores=stores)
    # add moves 32 bytes an element with write-allocate, of which STREAM counts 24
    return {t: gbs * 1e9 * 32 / 24 / per / 1e6 for t, gbs in stream_gbs.items()}


def propagator_table(df):
    """The propagator's runs: per (order, n, dt_fraction) the median error, steps, seconds
    per step and the run's cost (steps x seconds per step), one row each."""
    d = df[df["kind"] == "propagator"]
    wide = d.pivot_table(index=["order", "n", "mode", "dt_fraction", "nprocs"],
                         columns="metric", values="value", aggfunc="median").reset_index()
    wide["seconds"] = wide["steps"] * wide["step"]
    return wide[["order", "n", "mode", "dt_fraction", "nprocs", "steps", "step", "error",
                 "seconds"]]


def cheapest_under(table, limit=0.01):
    """The row of :func:`propagator_table` with the smallest cost among those whose error is
    under ``limit``, and the words that say it (or that none is), report 003's criterion."""
    ok = table[table["error"] < limit]
    if ok.empty:
        return None, (f"none of the {len(table)} configurations run here reaches an error "
                      f"under {limit:.0%}")
    best = ok.loc[ok["seconds"].idxmin()]
    return best, (f"order {int(best['order'])} on {int(best['n'])}³ points at "
                  f"{best['dt_fraction']:.0%} of the stable step ({int(best['steps'])} steps, "
                  f"error {best['error']:.1e}), the cheapest of the {len(ok)} of "
                  f"{len(table)} configurations under {limit:.0%}")


def versus_order4(best, o4):
    """The gain of ``best`` (the cheapest configuration under the limit: a row of
    :func:`hpclab.chapters.stencil.exercises.propagator_runs`, a dict) over ``o4`` (order 4's
    cheapest under it, or None), in words, with the range their repeated runs allow: order
    4's fastest run over best's slowest, and its slowest over best's fastest (the runs of two
    configurations chosen from many, so a range of what was run, not an interval). A gain is
    claimed only when that range lies above 1, from at least two runs of each; rows without
    their runs' range (or with one run) get none."""
    if int(best["order"]) == 4:
        return "order 4 itself"
    if o4 is None:
        return "order 4 never got under the limit here"
    ratio = o4["seconds"] / best["seconds"]
    name = f"order {int(best['order'])}"
    said = f"order 4's best took {ratio:.3g}x as long as {name}'s"
    ranged = all(k in row for row in (best, o4) for k in ("seconds_min", "seconds_max"))
    if not ranged or min(int(row.get("runs") or 2) for row in (best, o4)) < 2:
        return f"{said} (these rows carry no range of repeated runs, so no difference is claimed)"
    low, high = o4["seconds_min"] / best["seconds_max"], o4["seconds_max"] / best["seconds_min"]
    runs = (f"of {name}'s {int(best['runs'])} and order 4's {int(o4['runs'])} runs"
            if best.get("runs") and o4.get("runs") else "of their runs")
    span = f"{low:.3g} to {high:.3g}x between the fastest and slowest {runs}"
    if low > 1:
        return f"{said} ({span}: {name} was the cheaper in every pairing of their runs)"
    if high < 1:
        return f"{said} ({span}: order 4 was the cheaper in every pairing of their runs)"
    return f"{said} ({span}: the runs overlap, so this machine does not tell the two apart)"


def strong_scaling(df):
    """The scaling runs: per rank count the median seconds per application (C Laplacian of
    order 8), the speed-up and parallel efficiency against one rank, with the process grid."""
    d = df[(df["kind"] == "scaling") & (df["metric"] == "apply")]
    d = d.assign(stores=d["stores"].fillna("plain") if "stores" in d.columns else "plain")
    t = d.groupby(["nprocs", "grid", "stores"])["value"].median().rename("seconds").reset_index()
    one = float(t.loc[t["nprocs"] == 1, "seconds"].iloc[0])
    t["speedup"] = one / t["seconds"]
    t["efficiency"] = t["speedup"] / t["nprocs"]
    return t


def strong_scaling_words(t):
    """Words on the strong-scaling table of :func:`strong_scaling`: the efficiency at the most
    ranks, and where one lies above 1 (outside what an efficiency can be), what makes it so."""
    top = t.loc[t["nprocs"].idxmax()]
    words = (f"On {int(top['nprocs'])} ranks the speed-up is {top['speedup']:.2f} and the "
             f"parallel efficiency {top['efficiency']:.2f}.")
    above = t[t["efficiency"] > 1]
    if not above.empty:
        r = above.iloc[0]
        words += (f" An efficiency above 1 ({r['efficiency']:.2f} at P = {int(r['nprocs'])}) is "
                  "superlinear: the P ranks' blocks are smaller than the one rank's grid and "
                  "may fit a cache it did not, or the one-rank run was slowed by other work. "
                  "Read it as the cache's (or the machine's) effect, not the ranks' work.")
    if "stores" in t.columns and t["stores"].nunique() > 1:
        from hpclab import machine

        how = "; ".join(f"{s} at P = {machine.listing([str(int(p)) for p in sorted(g['nprocs'])])}"
                        for s, g in t.groupby("stores"))
        words += (f" The C kernel's stores change with P here ({how}): a rank's arrays pass "
                  "the streaming threshold at some counts and not at others, so part of the "
                  "change in time is the bytes a point moves, not the ranks' work.")
    return words


def convergence_figure(df, ax=None):
    """The Laplacian's relative error against h per order (log-log), from the convergence
    runs."""
    from hpclab import plots

    d = df[(df["kind"] == "convergence") & (df["metric"] == "error")]
    if ax is None:
        _, (ax,) = plots.new()
    for i, (order, g) in enumerate(d.groupby("order")):
        err = g.groupby("n")["value"].median()
        label, color, marker, dash = plots.style(f"order {order}", i)
        ax.loglog(1.0 / (err.index.to_numpy(dtype=float) + 1), err.to_numpy(), color=color,
                  marker=marker, ls=dash, label=label)
    ax.axhline(ROUND_OFF, color="0.6", ls=":", lw=1)
    ax.set_xlabel("grid spacing h")
    ax.set_ylabel("relative error")
    ax.legend(fontsize="small", ncol=2)
    return ax


def rates_figure(df, bound=None, bound_label="memory roofline (STREAM add)", ax=None):
    """MLUP/s of the Laplacian against its order, one line per implementation and blocking
    (the derivative runs), with the memory roofline ``bound`` (MLUP/s, or None) as a
    horizontal line named ``bound_label``."""
    from hpclab import plots

    r = rates(df)
    r = r[r["operator"] == "laplacian"]
    if ax is None:
        _, (ax,) = plots.new()
    for i, ((impl, blocked, b3, b2), g) in enumerate(
            r.groupby(["impl", "blocked", "block3", "block2"])):
        label = f"{impl}, " + (f"blocked {int(b3)}x{int(b2)}" if blocked else "baseline")
        label, color, marker, dash = plots.style(label, i)
        g = g.sort_values("order")
        ax.plot(g["order"], g["mlups"], color=color, marker=marker, ls=dash, label=label)
    if bound is not None:
        ax.axhline(bound, color="0.4", ls=":", lw=1.2, label=bound_label)
    ax.set_xlabel("order of accuracy")
    ax.set_ylabel("MLUP/s")
    ax.set_xticks(sorted(r["order"].unique()))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="small")
    return ax


def rates_display(df):
    """The rates table of the page: the C and Cython Laplacian per order, baseline and each
    blocking, rounded."""
    r = rates(df)
    r = r[r["operator"] == "laplacian"].copy()
    r["blocks"] = [f"{int(a)}x{int(b)}" if blocked else "none"
                   for a, b, blocked in zip(r["block3"], r["block2"], r["blocked"])]
    cols = ["mlups", "gflops", "gbs_hpcscan", "gbs_minimum"]
    return r.set_index(["impl", "order", "blocks", "stores"])[cols].round(1).rename(columns={
        "mlups": "MLUP/s", "gflops": "GFlop/s", "gbs_hpcscan": "GB/s (hpcscan)",
        "gbs_minimum": "GB/s (minimum)"})


def blocking_display(df):
    """The blocking table of the page (C), rounded."""
    g = blocking_gains(df)
    if g.empty:
        return g
    return g.set_index(["operator", "order", "block3", "block2"])[
        ["gain", "low", "high", "words"]].round(2)


def propagator_display(df):
    """The propagator table of the page: error and cost per order and share of the step."""
    t = propagator_table(df)
    return t.set_index(["order", "n", "dt_fraction"])[["steps", "error", "seconds"]].rename(
        columns={"error": "error (max over steps)", "seconds": "seconds (steps x step)"})


def _c_order8(r):
    """The C order-8 Laplacian's baseline rows of a rates table: the page's example."""
    return r[(r["impl"] == "c") & (r["operator"] == "laplacian") & (r["order"] == 8)
             & (~r["blocked"].astype(bool))]


def roof(df, meta, ranks, stream=None):
    """The page's roofline at STREAM add's bandwidth for ``ranks`` and the C order-8
    Laplacian's rate against it, for the stores that run made: {"roof_bound": MLUP/s,
    "roof_words": words}. ``stream`` as for :func:`numbers`."""
    from hpclab import machine

    out = {}
    if stream is None:
        from hpclab.chapters.stream.analysis import add_bandwidth

        stream = add_bandwidth()
    gbs, source = stream
    threads = max(t for t in gbs if t <= ranks) if any(t <= ranks for t in gbs) else min(gbs)
    one = _c_order8(rates(df))
    n = int(one["n"].iloc[0])
    got = float(one["mlups"].iloc[0])
    # the bound of the stores the run made: past the cache, w's lines are not read first
    stores = str(one["stores"].iloc[0])
    per = fd.bytes_per_point("laplacian", 8, counted="minimum", stores=stores)
    bound = roofline_mlups({threads: gbs[threads]}, stores=stores)[threads]
    out["roof_bound"] = bound
    out["roof_label"] = f"memory roofline (STREAM add, {per} bytes a point: C's stores)"
    per_rank = 2 * 8 * (n / ranks + 8) * (n + 8) ** 2
    llc = machine.last_level_share_bytes(meta.get("machine")) if meta.get("machine") else None
    fits = llc is not None and per_rank <= llc * 2
    arrays = f"its two arrays ({per_rank / 2**20:.1f} MiB per rank)"
    if fits and stores == "streaming":
        verdict = (f"a bound that need not hold here: w goes to memory, but u "
                   f"({per_rank / 2 / 2**20:.1f} MiB per rank) may stay in the caches")
    elif fits:
        verdict = f"a bound that does not hold here: {arrays} fit in the caches"
    elif got > bound:
        verdict = (f"above a bound that {arrays}, beyond the cache, should not pass: the "
                   "STREAM measurement is the thing to check")
    else:
        verdict = f"under it, as memory bounds it: {arrays} are beyond the cache"
    out["roof_words"] = (
        f"From {source}, STREAM add moves {gbs[threads]:.1f} GB/s with {threads} thread(s). "
        f"The C kernel stored its output {stores_words(stores, meta)}: at {per} bytes a point "
        f"that allows {bound:,.0f} MLUP/s, a bound while the planes a point reads stay in "
        f"cache. The C order-8 Laplacian ran at {got:,.0f} MLUP/s on "
        f"{n}³ points, {got / bound:.2g} times the bound, {verdict}.")

    return out


def numbers(measured, conv, stream=None):
    """The page's computed numbers and words, {name: value} for glue. ``stream``: STREAM add
    GB/s per thread count and where it came from (default: the declared input, measured when
    missing)."""
    from hpclab import machine, reference

    df, meta = measured
    out = {}
    sizes = sorted(int(n) for n in df.loc[df["kind"] == "convergence", "n"].unique())
    out["conv_sizes"] = machine.listing([f"{n}³" for n in sizes])
    out["round_off"] = f"{ROUND_OFF:g} of the exact value"
    d = df[df["kind"] == "derivative"]
    ranks = int(d["nprocs"].max())
    out["rates_ranks"] = ranks

    out.update(roof(df, meta, ranks, stream))
    n = int(_c_order8(rates(df))["n"].iloc[0])

    # report 003's order-12 Laplacian in the minimum count (single precision: 4-byte words)
    fd2 = reference.load("shaheen_hpcscan_fd_d2").set_index(["mode", "quantity"])["value"]
    node = reference.load("shaheen_node").set_index("quantity")["value"]
    counted = fd.bytes_per_point("laplacian", 12, word=4)
    least = fd.bytes_per_point("laplacian", 12, word=4, counted="minimum")
    blocked = fd2[("CacheBlk", "max_bandwidth_GBps")] * least / counted
    base = fd2[("Baseline", "max_bandwidth_GBps")] * least / counted
    peak = float(node["peak_memory_bandwidth"])
    cores = int(node["sockets"]) * int(node["cores_per_socket"])
    out["report_fd_words"] = (
        f"Report 003 measured the order-12 Laplacian at "
        f"{fd2[('Baseline', 'max_bandwidth_GBps')]:g} GB/s without blocking and "
        f"{fd2[('CacheBlk', 'max_bandwidth_GBps')]:g} GB/s with it, "
        f"{fd2[('CacheBlk', 'max_bandwidth_GBps')] / peak:.0f} times the node's peak memory "
        f"bandwidth of {peak:g} GB/s. Its single-precision points are 4 bytes, and all {cores} "
        f"cores of a node ran the loop. In the \"minimum\" count the same runs move {least:g} "
        f"bytes a point (against {counted:g} counted), so they reach {blocked:.0f} GB/s blocked "
        f"and {base:.0f} GB/s baseline")

    # blocking
    g = blocking_gains(df)
    counts = g["words"].value_counts() if not g.empty else {}
    l2 = machine.cache_bytes(2, meta.get("machine")) if meta.get("machine") else None
    planes = 9 * (n + 8) ** 2 * 8  # the 2r + 1 = 9 planes an order-8 axis-3 derivative reads
    inside = l2 is not None and planes <= l2
    out["blocking_words"] = (
        f"Of the {len(g)} comparisons of the C kernel, {counts.get('blocked faster', 0)} show "
        f"blocking faster, {counts.get('blocked slower', 0)} slower and "
        f"{len(g) - counts.get('blocked faster', 0) - counts.get('blocked slower', 0)} no "
        f"difference (or too few repetitions to tell). On {n}³ points the nine planes an "
        f"order-8 derivative along axis 3 reads take {planes / 2**10:,.0f} KiB, "
        + (f"within this core's L2 cache of {l2 / 2**10:,.0f} KiB: there is little for "
           "blocking to keep that the cache does not keep already." if inside else
           (f"beyond this core's L2 cache of {l2 / 2**10:,.0f} KiB: blocks of planes let them "
            "stay in cache." if l2 else "and this machine does not report its L2 cache.")))

    # the propagator
    t = propagator_table(df)
    best, words = cheapest_under(t)
    out["propagator_words"] = f"Here: {words}."
    pr = reference.load("shaheen_hpcscan_propa")
    pr = pr[pr["implementation"] == "Ac2Standard"]
    chosen = pr[pr["quantity"] == "elapsed_s"].sort_values("value").iloc[0]
    o4 = pr[(pr["quantity"] == "slowdown_vs_o8") & (pr["fd_order"] == 4)].iloc[0]
    out["report_propa_words"] = (
        f"Report 003 found order {int(chosen['fd_order'])} on {int(chosen['N'])}³ points at "
        f"{chosen['dt_percent_of_stability']:g}% of the stable step to be the cheapest run under "
        f"1% error. Order 4 needed {int(o4['N'])}³ points and {o4['value']:g} times as long for "
        "the same accuracy")

    # the report's efficiencies
    sh = reference.load("shaheen_hpcscan_scaling").set_index(["scaling", "fd_order"])
    e = sh["parallel_efficiency_percent"]
    out["report_eff_words"] = (
        f"{e[('strong', 4)]:.0f}% at order 4 to {e[('strong', 12)]:.0f}% at order 12 in strong "
        f"scaling and from {e[('weak', 4)]:.0f}% to {e[('weak', 12)]:.0f}% in weak scaling")
    return out


def simulated(profile=None, platform="shaheen"):
    """Strong scaling of the C Laplacian on a simulated Shaheen II (:mod:`hpclab.simulate`,
    :mod:`hpclab.chapters.stencil.simulation`) at the profile's ``simulated`` settings: a
    records.Run, or None without SimGrid."""
    from hpclab import simulate
    from hpclab.chapters.stencil import simulation

    if not simulate.available():
        return None
    s = profiles.get(NAME, profile)["simulated"]
    return simulation.on_platform(platform, ranks=s["ranks"], n=s["n"], orders=s["orders"],
                                  applications=s["applications"],
                                  repetitions=s["repetitions"], profile=profile)


# the grid of report 003's strong scaling, points per axis
REPORT_N = 1000


def simulated_table(df, n, scaling=None):
    """Per order and P: the simulated ms per application, its compute and halo parts (each the
    slowest rank's), the parallel efficiency T(1) / (P T(P)); the efficiency projected to
    report 003's 1000³ grid from the same parts (compute grows as the points, n³, the halo
    as a face, n², its latency too: a model that overstates the halo where latency is much of
    it, on the smallest grids); and report 003's strong-scaling
    efficiency where it published one (8 nodes). ``scaling``: the reference dataset
    ``shaheen_hpcscan_scaling`` (loaded when not given)."""
    from hpclab import records, reference

    if scaling is None:
        scaling = reference.load("shaheen_hpcscan_scaling")
    t = records.table(df)
    w = t.pivot_table(index=["order", "nprocs", "grid"], columns="metric", values="value",
                      aggfunc="median").reset_index()
    grow = REPORT_N / n
    rows = []
    for order, g in w.groupby("order"):
        one = g[g["nprocs"] == 1]
        if one.empty:
            continue
        t1, c1 = float(one["apply"].iloc[0]), float(one["compute"].iloc[0])
        pub = scaling[(scaling["scaling"] == "strong") & (scaling["fd_order"] == order)]
        pub = pub.set_index("nodes")["parallel_efficiency_percent"]
        for r in g.itertuples():
            p = int(r.nprocs)
            projected = (c1 * grow**3) / (p * (r.compute * grow**3 + r.halo * grow**2))
            rows.append({"order": int(order), "P": p, "grid": r.grid,
                         "ms per application": r.apply * 1e3, "compute [ms]": r.compute * 1e3,
                         "halo [ms]": r.halo * 1e3, "efficiency": t1 / (p * r.apply),
                         f"projected to {REPORT_N}³": projected if p > 1 else 1.0,
                         "report 003": float(pub[p]) / 100 if p in pub.index else np.nan})
    return pd.DataFrame(rows)


def simulated_words(table, n, meta):
    """What the simulated scaling shows, computed from its table: the efficiency at the most
    ranks per order beside the projection and the report's, what the latency is of a face's
    time on the platform, and how the halo's share changes with the order."""
    top = table[table["P"] == table["P"].max()].set_index("order")
    p = int(table["P"].max())
    proj_col = f"projected to {REPORT_N}³"
    lines = [f"Simulated on {n}³ points, hosts {meta['speedup']:.0f} times as fast as one core "
             f"here ({meta['core_points_per_s'] / 1e6:,.0f} MPoint/s at order 8, against "
             f"{meta['node_rate_source']}): at P = {p} the efficiency is "
             + ", ".join(f"{top.loc[o, 'efficiency']:.0%} at order {o}" for o in top.index)
             + f". Projected to {REPORT_N}³ points, where a rank's work is "
             f"{(REPORT_N / n) ** 3:,.0f} times larger and its halo "
             f"{(REPORT_N / n) ** 2:,.0f} times: "
             + ", ".join(f"{top.loc[o, proj_col]:.0%}" for o in top.index)
             + "; report 003 measured "
             + ", ".join(f"{top.loc[o, 'report 003']:.0%}" for o in top.index
                         if np.isfinite(top.loc[o, "report 003"]))
             + " (orders " + ", ".join(str(o) for o in top.index) + ")."]
    link = (meta.get("platform_spec") or {}).get("internode")
    grid = str(table.loc[table["P"] == p, "grid"].iloc[0])
    dims = [int(q) for q in grid.split("x")]
    if link and 8 in top.index and max(dims) > 1:
        face = 8 * 4 * np.prod([n // q for q in dims]) / (n // max(dims))  # order 8: r = 4
        lat = link["latency_us"] * 1e-6
        share = lat / (lat + face / (link["bandwidth_MBps"] * 1e6))
        lines.append(f"A face of the {grid} grid carries {face / 1e3:,.0f} kB at order 8, of "
                     f"which the platform's latency is {share:.0%} of the time: the projection "
                     "scales the latency with the face, which overstates the halo"
                     + (" a little." if share < 0.2 else ", and much here."))
    above = table[(table[proj_col] > 1) & (table["P"] > 1)]
    if not above.empty:
        r = above.iloc[0]
        lines.append(f"A projected efficiency above 1 (order {int(r['order'])}, P = "
                     f"{int(r['P'])}: {r[proj_col]:.2f}) is superlinear: the compute per rank "
                     "fell faster than 1 / P, most likely because the blocks of P ranks fit "
                     "this core's cache where the one rank's grid did not, and the projection "
                     "carries that along to a grid whose blocks would not fit.")
    share = (top["halo [ms]"] / (top["halo [ms]"] + top["compute [ms]"])).sort_index()
    if len(share) > 1:
        change = share.iloc[-1] - share.iloc[0]
        lines.append(
            f"The halo is {share.iloc[0]:.0%} of a rank's time at order {share.index[0]} and "
            f"{share.iloc[-1]:.0%} at order {share.index[-1]}: its share "
            + ("is about the same at every order here (one run: a few points are within its "
               "scatter), while the report's efficiencies fall with the order."
               if abs(change) < 0.05 else
               "grows with the order here, as the report's falling efficiencies suggest."
               if change > 0 else
               "falls with the order here, while the report's efficiencies fall with it. One "
               "speed-up, taken at order 8, serves every order, so the simulated hosts keep "
               "this core's growth of the cost per point with the order; a node whose cost "
               "per point grows less (a memory-bound kernel moves about the same bytes at "
               "every order) gives the wider halos of high orders a larger share."))
    return " ".join(lines)
