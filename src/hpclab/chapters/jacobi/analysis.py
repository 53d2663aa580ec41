"""Jacobi experiment: time per sweep against the number of ranks P, weak and strong.

``weak``    L points per rank and dimension (the profile's ``weak``), the global grid
            L times the process grid, every decomposition, C; the cube also with overlap;
``strong``  a global N^3 grid (the profile's ``strong``), every decomposition, C, and the
            other implementations at the first N (cubes).

Records: one row per repetition and metric (``sweep, compute, halo`` in seconds per sweep,
``cut`` = k) with columns ``kind, decomposition, overlap, nx, ny, nz, L, N, grid,
oversubscribed``. The model of report 001, ``P(L, N) = L^3 N / (T_s + T_c)``, ``T_c =
16 L^2 k / B + k λ``, is predicted from pieces measured elsewhere (:func:`predict`) before
it is compared with these records.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import machine, profiles, records, stats

# the sweep (what every rank runs) is hpclab.chapters.jacobi.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.jacobi.model import HALO_BYTES_PER_FACE_POINT, MODEL  # noqa: F401
from hpclab.chapters.jacobi.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    DECOMPOSITIONS,
    IMPLS,
    KERNEL,
    NAME,
    NPROCS,
    grid_of,
    lab_points,
    measure,
    run,
    run_mpi,
    tasks,
)
from hpclab.chapters.pingpong.analysis import hockney_model as pingpong_model  # noqa: F401
from hpclab.chapters.stream.analysis import add_bandwidth as stream_bandwidth  # noqa: F401
from hpclab.kernels.topology import padded_row

BYTES_PER_FACE_POINT = HALO_BYTES_PER_FACE_POINT  # two faces of 8-byte doubles


# ----------------------------------------------------------------------------- analysis

def summary(df):
    """Median, best and worst per kind, implementation, decomposition, overlap, grid, P and
    metric, with MLUP/s of the sweeps."""
    t = records.table(df)
    keys = ["kind", "impl", "decomposition", "overlap", "L", "N", "nx", "ny", "nz", "grid",
            "nprocs", "metric"]
    out = t.groupby(keys)["value"].agg(median="median", best="min", worst="max",
                                       reps="count").reset_index()
    out["points"] = out["nx"] * out["ny"] * out["nz"]
    return out


def wide(df):
    """One row per measurement: median sweep, compute and halo seconds, k and MLUP/s."""
    s = summary(df)
    w = s.pivot_table(index=["kind", "impl", "decomposition", "overlap", "L", "N", "grid",
                             "nprocs", "points"], columns="metric", values="median")
    w = w.reset_index()
    w["mlups"] = w["points"] / w["sweep"] / 1e6
    w["halo_share"] = w["halo"] / (w["halo"] + w["compute"])
    w["k"] = w["cut"].astype(int)
    return w


def stores_at(L):
    """How this process's sweeps store at L³ points per rank (kernels.stores_at; for the
    lab, which predicts before it measures)."""
    from hpclab.chapters.jacobi.kernels import stores_at as at

    return at(L)


def run_stores(df):
    """(L, P) -> how a run's weak C sweeps on P ranks stored their new values ("streaming"
    or "plain", the records' ``stores``: the fields of all the node's ranks count, so one
    L may stream on two ranks and not on one); runs saved before the sweeps could stream:
    "plain"."""
    t = records.table(df)
    t = t[(t["kind"] == "weak") & (t["impl"] == "c")]
    if "stores" not in t.columns:
        return {(int(L), int(P)): "plain" for L, P in zip(t["L"], t["nprocs"])}
    first = t.groupby(["L", "nprocs"])["stores"].first().fillna("plain")
    return {(int(L), int(P)): str(v) for (L, P), v in first.items()}


def bytes_per_update(L, stores=None):
    """The bytes one update of a rank with L³ points moves, counted as STREAM add counts its
    own: the cache reads each line add writes before writing it (write-allocate), so add's
    GB/s count 24 bytes for every 32 moved. A sweep with plain stores moves 32 and counts 24,
    as add does. A sweep with streaming stores (``stores`` "streaming", as a run recorded it;
    None: what this process's sweeps do at L, one rank on the node) moves 24 where add moves
    32: 24 · 24 / 32 = 18 of add's bytes."""
    per = KERNEL.extra["bytes_per_update"]
    if (stores or stores_at(L)) == "streaming":
        return per * per / KERNEL.extra["bytes_per_update_write_allocate"]
    return per


def stores_words(L, stores, meta=None):
    """What the page says of the sweep's stores at L³ points per rank (``stores`` as the run
    recorded them) and the bound that follows (plain text, glued)."""
    from hpclab.chapters.jacobi.kernels import (
        NEVER,
        field_bytes,
        mib,
        streaming_threshold,
    )

    size = mib(field_bytes(L))
    described = (meta or {}).get("machine") or None
    above = streaming_threshold(described)
    if above < NEVER:  # a rank alone reaches one last-level cache
        above //= machine.last_level_caches(described)
    counted = (f"the {mib(above)} MiB the sweeps count on the caches keeping for a rank "
               "alone on the node (for each core of its last-level cache a share of it, at "
               f"most {machine.STREAMING_L2_CAP} times its L2)")
    if stores == "streaming":
        why = (f"more than {counted}, so" if above < NEVER and field_bytes(L) > above
               else "and in this run")
        return (f"At L = {L} one rank's three fields take {size} MiB, {why} "
                "the sweeps write their new values past the cache (streaming stores, "
                "which read no line first): where the fields do not fit the cache, 24 bytes "
                "move where add moves 32, and the bound is add's rate over "
                f"{bytes_per_update(L, stores):g} of its bytes")
    if above < NEVER and field_bytes(L) <= above:
        why = f"within {counted}, so the sweeps use plain stores"
    else:
        why = ("and the sweeps of this run used plain stores (a build without vector stores, "
               "a machine that does not report its caches, or a run saved before the sweeps "
               "could stream)")
    return (f"At L = {L} one rank's three fields take {size} MiB, {why}, which read each line "
            "first as add does, and the bound is add's rate over "
            f"{bytes_per_update(L, stores):g} bytes")


def predict(df, lam, bandwidth, stream_gbs):
    """The weak-scaling model before the measurement is looked at, per L, decomposition and
    P: T_s from the one-rank compute time at that L (``from_run``) and from the roofline
    (bytes per update, :func:`bytes_per_update` with the stores the run recorded, over STREAM
    add with one thread, ``from_roof``), T_c = 16 L² k / B + k λ with PingPong's λ and B;
    MLUP/s predicted both ways beside the measured."""
    w = wide(df)
    w = w[(w["kind"] == "weak") & (w["impl"] == "c") & (~w["overlap"])].copy()
    one = w[w["nprocs"] == 1].groupby("L")["compute"].median()
    w["T_s"] = w["L"].map(one)
    stores = run_stores(df)
    per = np.array([bytes_per_update(int(L), stores.get((int(L), int(P)), "plain"))
                    for L, P in zip(w["L"], w["nprocs"])], float)
    w["T_s_roof"] = per * w["L"] ** 3 / (stream_gbs[1] * 1e9)
    w["T_c"] = BYTES_PER_FACE_POINT * w["L"] ** 2 * w["k"] / bandwidth + w["k"] * lam
    cells = w["L"] ** 3 * w["nprocs"]
    w["predicted"] = cells / (w["T_s"] + w["T_c"]) / 1e6
    w["predicted_roof"] = cells / (w["T_s_roof"] + w["T_c"]) / 1e6
    t = records.table(df)
    t = t[(t["kind"] == "weak") & (t["impl"] == "c") & (~t["overlap"]) & (t["metric"] == "sweep")]
    lows, highs = [], []
    for row in w.itertuples():
        s = t[(t["L"] == row.L) & (t["decomposition"] == row.decomposition)
              & (t["nprocs"] == row.nprocs)]["value"].to_numpy(float)
        # the sweep time over the model's (the points at the predicted MLUP/s); MLUP/s
        # falls as the time rises, so the interval of the MLUP/s ratio swaps its ends (NaN
        # with fewer than two runs)
        _, fast, slow = stats.over_model(s, row.points / (row.predicted * 1e6))
        lows.append(1 / slow)
        highs.append(1 / fast)
    w["ratio_low"], w["ratio_high"] = lows, highs
    return w


def term_interval(df, term, P, L, model_s):
    """(ratio, low, high): one term of the model ("compute" or "halo") at P ranks of a weak
    sweep (C, cubes, no overlap, L points per rank and dimension), the measured seconds per
    sweep of every repetition over the model's ``model_s``, with the 95% interval of their
    median (:func:`hpclab.stats.over_model`)."""
    if term not in ("compute", "halo"):
        raise ValueError(f'term is "compute" or "halo", not {term!r}')
    return stats.over_model(records.samples(df, term, kind="weak", impl="c",
                                            decomposition="cube", overlap=False, L=L,
                                            nprocs=P), model_s)


def faces_sent(decomposition, nprocs):
    """Faces the busiest rank sends in one halo exchange (it receives as many)."""
    return sum(neighbours_per_direction(grid_of(decomposition, int(nprocs))))


def halo_bandwidth(df, lam):
    """B from the halo times, for every weak run with a cut: the bytes the busiest rank
    sends (8 L² per face it sends, :func:`faces_sent`; it receives as many at the same time)
    over (halo − k λ). Eq. (8)'s 16 L² k counts two faces per cut direction, which only a
    middle rank of three or more along it sends."""
    w = wide(df)
    w = w[(w["kind"] == "weak") & (w["impl"] == "c") & (w["k"] > 0) & (~w["overlap"])].copy()
    faces = [faces_sent(d, n) for d, n in zip(w["decomposition"], w["nprocs"])]
    w["B_halo"] = (BYTES_PER_FACE_POINT // 2 * w["L"] ** 2 * np.asarray(faces, float)
                   / np.maximum(w["halo"] - w["k"] * lam, 1e-12))
    return w


def neighbours_per_direction(dims):
    """Faces the busiest rank exchanges along each direction of a non-periodic process grid:
    none where the direction is not cut, one where it is cut in two (every rank is at an
    end), two from three ranks on (a middle rank)."""
    return [min(int(q) - 1, 2) for q in dims]


def surface_to_volume(points=120, procs=(2, 4, 8, 12, 24, 48)):
    """Halo doubles per interior point of the busiest rank, per decomposition, for a global
    points³ grid (not periodic: a direction cut in two gives each rank one neighbour there):
    why a cube beats a slab as P grows."""
    rows = []
    for p in procs:
        row = {"P": p}
        for d in DECOMPOSITIONS:
            dims = grid_of(d, p)
            local = [-(-points // q) for q in dims]
            faces = sum(n * np.prod([local[j] for j in range(3) if j != i])
                        for i, n in enumerate(neighbours_per_direction(dims)))
            row[d] = faces / np.prod(local)
        rows.append(row)
    return pd.DataFrame(rows).set_index("P").round(4)


def orfeo_table(t5):
    """Report 001's Table 5 beside eq. (8) and the measured MLUP/s the last column implies."""
    t = t5.copy()
    t["c eq. (8) [MB]"] = 16 * t["L"] ** 2 * t["k"] / 1e6
    t["measured (implied) [MLUP/s]"] = t["nprocs"] * t["P1_MLUPs"] / t["slowdown"]
    t["model / measured"] = t["P_model_MLUPs"] / t["measured (implied) [MLUP/s]"]
    return t


def c_column_words(t5):
    """What the published c column of Table 5 is, row by row, against eq. (8)'s 16·L²·k bytes
    and the 16·L²·N bytes most of its rows print: counted, not asserted."""
    t = t5[t5["k"] > 0]
    eq8 = np.isclose(t["c_MB"], 16 * t["L"] ** 2 * t["k"] / 1e6, rtol=1e-3)
    per_n = np.isclose(t["c_MB"], 16 * t["L"] ** 2 * t["nprocs"] / 1e6, rtol=1e-3)
    words = (f"Of the {len(t)} rows with a cut, {int(per_n.sum())} print c = 16·L²·N bytes and "
             f"{int(eq8.sum())} eq. (8)'s 16·L²·k")
    odd = t[~eq8 & ~per_n]
    if len(odd):
        words += "; " + ", ".join(f"the {r.placement} row at N = {r.nprocs} prints "
                                  f"{r.c_MB:,.2f} MB, which is neither"
                                  for r in odd.itertuples())
    return words


def orfeo_display(t5):
    """Table 5 as the chapter shows it: human column names, published precision."""
    t = orfeo_table(t5)
    t = t[["placement", "nprocs", "grid", "k", "c_MB", "c eq. (8) [MB]", "P_model_MLUPs",
           "slowdown", "measured (implied) [MLUP/s]", "model / measured"]]
    t = t.rename(columns={"nprocs": "N", "c_MB": "c published [MB]",
                          "P_model_MLUPs": "model P(L, N) [MLUP/s]",
                          "slowdown": "N·P1 / P (published)"})
    return t.round({"measured (implied) [MLUP/s]": 1, "model / measured": 3}).set_index(
        ["placement", "N"])


def model_elsewhere(lam, bandwidth, t_update, L=1200, procs=(1, 4, 8, 12, 24, 48)):
    """What the model says for report 001's L = 1200 with a given λ, B and time per update:
    MLUP/s and the slow-down against N times one rank."""
    rows = []
    for p in procs:
        dims = grid_of("cube", p)
        k = sum(q > 1 for q in dims)
        ts = L ** 3 * t_update
        tc = BYTES_PER_FACE_POINT * L ** 2 * k / bandwidth + k * lam
        rows.append({"P": p, "grid": "x".join(map(str, dims)), "k": k,
                     "MLUP/s": L ** 3 * p / (ts + tc) / 1e6, "slow-down": (ts + tc) / ts})
    return pd.DataFrame(rows).set_index("P")


# ----------------------------------------------------------------------------- the chapter

def mlups_points(df, kind="weak", size=None, impl="c", overlap=False):
    """MLUP/s against P per decomposition (median, best, worst over the repetitions) as
    :func:`hpclab.plots.scaling` draws it; size is L (weak) or N (strong), default the
    first."""
    s = summary(df)
    s = s[(s["kind"] == kind) & (s["impl"] == impl) & (s["overlap"] == overlap)
          & (s["metric"] == "sweep")]
    col = "L" if kind == "weak" else "N"
    size = size or int(s[col].min())
    s = s[s[col] == size].copy()
    for c, other in (("median", "median"), ("best", "best"), ("worst", "worst")):
        s[c + "_m"] = s["points"] / s[other] / 1e6
    out = s[["nprocs", "decomposition", "median_m", "best_m", "worst_m"]]
    return out.rename(columns={"median_m": "median", "best_m": "best", "worst_m": "worst"})


def prediction_table(pred):
    """Predicted (from the one-rank run, and from the roofline) against measured MLUP/s."""
    t = pred[["L", "decomposition", "nprocs", "k", "predicted", "predicted_roof", "mlups",
              "halo_share"]].copy()
    t["halo_share"] = t["halo_share"] * 100
    t["measured / predicted"] = t["mlups"] / t["predicted"]
    t["95% interval"] = [f"{a:.2f}–{b:.2f}" if np.isfinite(a) else "—"
                         for a, b in zip(pred["ratio_low"], pred["ratio_high"])]
    return t.rename(columns={"nprocs": "P", "predicted": "predicted [MLUP/s]",
                             "predicted_roof": "from the roofline [MLUP/s]",
                             "mlups": "measured [MLUP/s]", "halo_share": "halo [%]",
                             "decomposition": "grid"}).round(2).set_index(["L", "grid", "P"])


def implementation_table(df):
    """MLUP/s of every implementation at the first strong size (cubes), per P."""
    w = wide(df)
    w = w[(w["kind"] == "strong") & (w["decomposition"] == "cube")]
    w = w[w["N"] == w["N"].min()]
    t = w.pivot_table(index="nprocs", columns="impl", values="mlups").round(1)
    t.columns = [{"c": "C", "cython": "Cython", "python": "mpi4py + numpy"}[c] + " [MLUP/s]"
                 for c in t.columns]
    t.index.name = "P"
    return t


def _halo_words(halo_big, bandwidth):
    """The median halo bandwidth and its ratio to PingPong's fitted B (taken as exact), each
    with the 95% interval of the median, in words (no interval with fewer than two runs)."""
    med = float(halo_big["B_halo"].median()) if not halo_big.empty else float("nan")
    try:
        _, lo, hi = stats.median_interval(halo_big["B_halo"])
    except ValueError:
        lo = hi = float("nan")
    return {"B_halo_words": stats.estimate_words(med / 1e9, lo / 1e9, hi / 1e9, "GB/s",
                                                 "bandwidth", name="the halo bandwidth"),
            "B_halo_vs_pp_words": stats.estimate_words(
                med / bandwidth, lo / bandwidth, hi / bandwidth, "", "ratio of bandwidths",
                value_unit="times PingPong's fitted B", name="the ratio")}


def roof_words(share, L, meta):
    """What the page says of the one-rank compute phase against the memory bound: whether
    that bound applies at all (arrays in the last-level cache), is passed (the two were not
    measured side by side), is reached (within 5%), or what keeps one core from it."""
    from hpclab.chapters.jacobi.kernels import field_bytes

    largest = _largest_cache(meta)
    arrays = field_bytes(L)
    if arrays <= largest:
        return (f"Its three arrays, {arrays / 2**20:.1f} MiB, fit in the {largest / 2**20:.0f} "
                "MiB cache, so the memory bound does not apply at this size.")
    if share > 1:
        return ("That is more than the bound: STREAM add and the sweep did not run side by "
                "side, this machine's memory bandwidth changes from run to run, and the "
                "sweep's fields are on huge pages, which STREAM's arrays need not be (the "
                "Jacobi bench, make bench, measures the two in one job, both on huge pages).")
    if share >= 0.95:
        return "That is the bound, within 5%."
    # (glued as plain text: no markdown)
    return (f"{_target_words(meta)}, and "
            "one core still does not reach the bound: besides the memory traffic, an update "
            "loads six neighbours from cache and does ten floating-point operations. The "
            "Jacobi bench (make bench) separates the two with a pass that moves exactly the "
            "sweep's memory traffic and has no stencil.")


def blocking_table(meta, sizes=(128, 256, 384, 1024)):
    """The spatial blocking of the C and Cython sweeps at each L (planes of L x L points) on
    the run's machine, and its traffic model: the bytes of u one update loads from memory. A
    sweep reads planes i - 1, i and i + 1 of u at once; when the three fit the cache budget
    (kernels.cache_budget: a share of one core's part of the last-level cache), each plane
    comes from memory once (as i + 1) and is reused as i and i - 1: 8 bytes per update. When
    they do not, planes i and i - 1 come again: 24. Blocks of b rows of j, each through every
    plane, fit the budget and read two rows of halo per block again: 8 (b + 2) / b. (f and
    the new value move 16 more bytes in every case, 24 with write-allocate.) Empty when the
    machine does not report its caches."""
    from hpclab.chapters.jacobi.kernels import _jacobi, cache_budget

    budget = cache_budget(meta.get("machine") or None)
    rows = []
    if not budget:
        return pd.DataFrame(rows)
    for L in sizes:
        planes = 3 * (L + 2) * padded_row(L + 2) * 8
        b = _jacobi.block_rows(budget, L, L)
        plain = 8.0 if planes <= budget else 24.0
        rows.append({"L": L, "three planes of u [MiB]": planes / 2**20,
                     "budget [MiB]": budget / 2**20, "rows per block": b,
                     "u from memory, unblocked [B/update]": plain,
                     "u from memory, blocked [B/update]": 8.0 * (b + 2) / b if b < L
                     else plain})
    return pd.DataFrame(rows)


def blocking_words(table):
    """What the page says of the blocking, from :func:`blocking_table`."""
    if table.empty:
        return ("This machine does not report its caches, so the sweeps run unblocked here.")
    fit = table[table["rows per block"] >= table["L"]]
    blocked = table[table["rows per block"] < table["L"]]
    parts = []
    if len(fit):
        parts.append(f"at L = {', '.join(map(str, fit['L']))} the three planes fit the "
                     f"{table['budget [MiB]'].iloc[0]:.1f} MiB budget and a sweep runs "
                     "unblocked")
    if len(blocked):
        r = blocked.iloc[-1]
        at = "" if len(blocked) == 1 else f" at L = {int(r['L'])}"
        parts.append(f"at L = {', '.join(map(str, blocked['L']))} they do not, and{at} blocks "
                     f"of {int(r['rows per block'])} rows load "
                     f"{r['u from memory, blocked [B/update]']:.2f} bytes of u per update from "
                     f"memory instead of {r['u from memory, unblocked [B/update]']:.0f}")
    return "On this machine " + "; ".join(parts) + "."


def _largest_cache(meta):
    """The largest data cache the run's machine description lists, in bytes (0: none)."""
    caches = [c for c in meta.get("machine", {}).get("caches", [])
              if c.get("type") != "Instruction" and c.get("size_bytes")]
    return max((c["size_bytes"] for c in caches), default=0)


def bound_regime_words(sizes, meta):
    """The regime the one-core memory bound holds in, from the run's sizes and caches: it
    bounds sweeps whose arrays do not fit in the largest cache; sizes that fit run from the
    cache and may pass it."""
    from hpclab.chapters.jacobi.kernels import field_bytes

    largest = _largest_cache(meta)
    sizes = sorted({int(L) for L in sizes})
    inside = [L for L in sizes if field_bytes(L) <= largest]
    beyond = [L for L in sizes if field_bytes(L) > largest]
    cache = f"the {largest / 2**20:.0f} MiB cache" if largest else "the cache"
    if not inside:
        return f"a bound for arrays beyond {cache}, as at every L measured here"
    listed = ", ".join(map(str, inside))
    if not beyond:
        return (f"a bound for arrays beyond {cache}; at every L measured here ({listed}) the "
                "arrays fit in it, so it bounds none of these runs and a rate may exceed it")
    return (f"a bound for arrays beyond {cache}, from L = {beyond[0]} on here; at L = {listed} "
            "the arrays fit in it, and their rates may exceed it")


def _target_words(meta):
    """Which CPU the run's Jacobi kernel was compiled for, from the build recorded with it."""
    flags = ((meta.get("machine", {}).get("mpi") or {}).get("kernel_flags") or {}).get("jacobi")
    if flags is None:
        return "The kernel"
    march = [f for f, ok in flags.items() if ok and f.startswith("-march=")]
    if march == ["-march=native"]:
        return "The kernel is compiled for this CPU's vector instructions (-march=native)"
    if march:
        return f"The kernel is compiled for {march[0].split('=', 1)[1]} ({march[0]})"
    return "The kernel is compiled for the compiler's default target (HPCLAB_MARCH=none)"


def numbers(sweep_run, lam, bandwidth, pp_source, stream_gbs, stream_source, t5, orfeo_pp):
    """Every number the chapter's text quotes, computed (name -> value)."""
    df = records.table(sweep_run)
    pred = predict(df, lam, bandwidth, stream_gbs)
    pmax = int(df["nprocs"].max())
    big = pred[(pred["L"] == pred["L"].max()) & (pred["nprocs"] == pmax)]
    cube = big[big["decomposition"] == "cube"].iloc[0]
    halo = halo_bandwidth(df, lam)
    halo_big = halo[(halo["L"] == halo["L"].max()) & (halo["nprocs"] == pmax)]
    one = pred[(pred["nprocs"] == 1)]
    L1 = one[one["L"] == one["L"].max()].iloc[0]
    stores = run_stores(df).get((int(L1["L"]), 1), "plain")
    per = bytes_per_update(int(L1["L"]), stores)
    o = orfeo_table(t5).set_index("nprocs")
    ib = orfeo_pp[(orfeo_pp["transport"] == "UCX (InfiniBand)")
                  & (orfeo_pp["placement"] == "internode")]
    o_lam = float(ib[ib["quantity"] == "latency"]["value"].iloc[0]) * 1e-6
    o_B = float(ib[ib["quantity"] == "asymptotic_bandwidth"]["value"].iloc[0]) * 1e6
    tcp = orfeo_pp[(orfeo_pp["transport"] == "Ob1 TCP") & (orfeo_pp["placement"] == "internode")
                   & (orfeo_pp["quantity"] == "latency")]
    o_tcp = float(tcp["value"].iloc[0]) * 1e-6
    t_upd = 1 / (float(t5["P1_MLUPs"].iloc[0]) * 1e6)
    ib48 = model_elsewhere(o_lam, o_B, t_upd).loc[48]
    tcp48 = model_elsewhere(o_tcp, o_B, t_upd).loc[48]
    grids = {d: grid_of(d, pmax) for d in DECOMPOSITIONS}
    if len(set(grids.values())) == 1:
        grid_words = (f"a slab, a pencil and a cube are the same grid here "
                      f"({'x'.join(map(str, grids['cube']))}), so the decompositions differ "
                      "only from four ranks on")
    else:
        grid_words = ("the decompositions differ here, but one node cannot show what a "
                      "network adds")
    roof = stream_gbs[1] * 1e9 / per / 1e6
    share = float(L1["mlups"]) / roof
    return {
        "roof_words": roof_words(share, int(L1["L"]), sweep_run.meta),
        "stores_words": stores_words(int(L1["L"]), stores, sweep_run.meta),
        "roof_regime": bound_regime_words(df.loc[df["L"] > 0, "L"], sweep_run.meta),
        "grid_words": grid_words,
        "lam_us": lam * 1e6, "B_GBs": bandwidth / 1e9, "pp_source": pp_source,
        "stream_source": stream_source, "stream1": stream_gbs[1],
        "bytes_per_update": per, "pmax": pmax, "L_big": int(L1["L"]),
        "roof_mlups": roof, "one_mlups": float(L1["mlups"]), "roof_share": share * 100,
        "cube_pred": float(cube["predicted"]), "cube_meas": float(cube["mlups"]),
        "cube_halo": float(cube["halo_share"]) * 100, "cube_k": int(cube["k"]),
        "cube_ratio_words": stats.estimate_words(
            float(cube["mlups"] / cube["predicted"]), float(cube["ratio_low"]),
            float(cube["ratio_high"]), "", "ratio of rates", name="the ratio"),
        **_halo_words(halo_big, bandwidth),
        "o_c_words": c_column_words(t5), "o_c48_pub": float(o.loc[48, "c_MB"]),
        "o_c48_eq8": float(o.loc[48, "c eq. (8) [MB]"]),
        "o_meas48": float(o.loc[48, "measured (implied) [MLUP/s]"]),
        "o_model48": float(o.loc[48, "P_model_MLUPs"]),
        "o_over48": (float(o.loc[48, "model / measured"]) - 1) * 100,
        "o_lam_us": o_lam * 1e6, "o_B_GBs": o_B / 1e9, "o_tcp_us": o_tcp * 1e6,
        "ib48_mlups": float(ib48["MLUP/s"]), "ib48_slow": float(ib48["slow-down"]),
        "tcp48_mlups": float(tcp48["MLUP/s"]), "tcp48_slow": float(tcp48["slow-down"]),
    }


# ----------------------------------------------------------------------- simulated cluster

def simulated(profile=None, platform="orfeo"):
    """Weak scaling of the C sweep (cube decomposition) on a simulated cluster
    (:mod:`hpclab.simulate`) at the profile's ``simulated`` L and rank counts: a records.Run,
    or None without SimGrid."""
    from hpclab import simulate
    from hpclab.chapters.jacobi import simulation

    if not simulate.available():
        return None
    s = profiles.get(NAME, profile)["simulated"]
    return simulation.on_platform(platform, ranks=s["ranks"], L=s["L"], sweeps=s["sweeps"],
                                  profile=profile)


def simulated_table(df, t5):
    """Per P: grid, simulated ms per sweep, in the arithmetic (the slowest rank's) and in the
    halo, the halo's share, the slow-down against one rank, and report 001's measured
    slow-down (Table 5, L = 1200) at that P."""
    t = records.table(df)
    w = t.pivot_table(index=["nprocs", "grid"], columns="metric", values="value",
                      aggfunc="median").reset_index()
    out = pd.DataFrame({"P": w["nprocs"].astype(int), "grid": w["grid"],
                        "ms per sweep": w["sweep"] * 1e3, "compute [ms]": w["compute"] * 1e3,
                        "halo [ms]": w["halo"] * 1e3})
    out["halo share"] = w["halo"] / w["sweep"]
    out["slow-down"] = w["sweep"] / float(w.loc[w["nprocs"] == 1, "sweep"].iloc[0])
    pub = t5.sort_values("placement").drop_duplicates("nprocs", keep="first")
    pub = pub.set_index("nprocs")
    out["slow-down, report 001"] = out["P"].map(pub["slowdown"])
    out["placement, report 001"] = out["P"].map(pub["placement"])
    return out.sort_values("P").reset_index(drop=True)


def simulated_words(table, L, spec):
    """What the simulated weak scaling shows, in sentences computed from it: the change from
    one rank to the most split into the halo exchange (the platform's links) and the rest of
    the sweep (arithmetic timed on this machine), and where the ranks sit."""
    from hpclab import simulate

    per_node = spec["cores_per_socket"] * spec["sockets_per_node"]
    top, one = table.iloc[-1], table.iloc[0]
    p_top = int(top["P"])
    lines = [f"Simulated, L = {L} points per rank and dimension: at P = {p_top} "
             f"({'two nodes' if p_top > per_node else 'one node'}) a sweep takes "
             f"{top['slow-down']:.2f} times as long as on one rank, and the halo exchange is "
             f"{top['halo share'] * 100:.0f}% of it."]
    if p_top > int(one["P"]):
        def both(col):
            return tuple(float(r[col]) for r in (one, top))
        halo = both("halo [ms]")
        rest = tuple(s - h for s, h in zip(both("ms per sweep"), halo))
        lines.append(simulate.change_words(int(one["P"]), p_top, halo, rest, "the halo exchange",
                                           "the rest of the sweep"))
        lines.append(f"At P = {p_top}: {simulate.placement_words(spec, p_top)}.")
        compute = both("compute [ms]")
        grew = compute[1] / compute[0]
        lines.append(f"The arithmetic alone (the compute column, the slowest rank's) takes "
                     f"{grew:.2f} times as long at P = {p_top} as on one rank, though every rank "
                     "updates the same L³ points." + (
                         " Two things in how it is simulated can make it grow, and this table "
                         "does not tell them apart: the ranks' updates are timed on this "
                         "machine one rank after another, with the other ranks' arrays passing "
                         "through the cache in between, and a sweep waits for the slowest of "
                         f"the {p_top}." if grew > 1 else ""))
    inside = table[(table["P"] > 1) & (table["P"] <= per_node)]
    if len(inside):
        lines.append(f"Within one node the slow-down is {inside['slow-down'].min():.2f} to "
                     f"{inside['slow-down'].max():.2f}.")
    pub = table.dropna(subset=["slow-down, report 001"])
    if len(pub):
        last = pub.iloc[-1]
        grow = 1200 / L
        lines.append(f"Report 001 measured a slow-down of "
                     f"{last['slow-down, report 001']:.3f} at P = {int(last['P'])} "
                     f"with L = 1200, where each rank computes (1200/{L})³ = {grow ** 3:,.0f} "
                     f"times as many points as here and exchanges (1200/{L})² = "
                     f"{grow ** 2:,.0f} times the halo.")
    lines.append("The simulated ranks compute one at a time on this machine, each with its "
                 "core, but not its caches, to itself: the arithmetic in each sweep is this "
                 "machine's, the halo column is the platform's links.")
    return "\n".join(lines)
