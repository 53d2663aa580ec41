"""PingPong experiment: one-way time against message size, per implementation.

Sizes and iteration counts come from :mod:`hpclab.profiles`; for each size
every implementation is measured in turn (interleaved, so a drift of the
machine does not favour one implementation). Records: one row per repetition,
metric ``one_way_time`` in seconds, with the columns ``nbytes, warmup,
iterations, hugepages``.
"""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from hpclab import models, profiles, records, stats as hstats

# the sweep (what every rank runs) is hpclab.chapters.pingpong.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.pingpong.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    IMPLS,
    KERNEL,
    METRIC,
    MIN_PROCS,
    NAME,
    NPROCS,
    UNIT,
    measure,
    run,
    run_mpi,
    tasks,
)

# ----------------------------------------------------------------------------- analysis
QUICK_BIG_BYTES = 1 << 20   # the quick profile's "large" message: in the cache, for speed
BIG_COUNTS = {"warmup": 2, "iterations": 10}  # round trips of a message beyond the cache


def big_message(profile=None, sizes=()):
    """A message size whose buffers do not fit in the last-level cache, and words on why
    (and on which of ``sizes``, the sweep's, do fit with their buffers).

    Two ranks each hold a send and a receive buffer, so a message of n bytes makes a
    working set of 4n: the size is twice the last-level cache (at least 8 MiB). The quick
    profile uses QUICK_BIG_BYTES instead (in the cache: its timing says nothing about
    memory)."""
    from hpclab import machine

    if profiles.name(profile) == "quick":
        return QUICK_BIG_BYTES, (f"{QUICK_BIG_BYTES >> 20} MiB: the quick profile's size, "
                                 "inside the cache; this timing means nothing about memory")
    llc = machine.last_level_cache_bytes()
    if not llc:
        return 64 << 20, ("64 MiB: this machine does not report its cache sizes, so the size "
                          "is a guess that exceeds the last-level caches of current CPUs")
    nbytes = max(8 << 20, 2 * llc)
    words = (f"{nbytes / 2**20:g} MiB; this machine's last-level cache holds "
             f"{llc / 2**20:g} MiB, so the four buffers of the two ranks are "
             f"{4 * nbytes / llc:g} times it")
    fit = [n for n in sizes if 0 < 4 * n <= llc]
    if sizes:
        words += (f". Of the sweep's sizes, those up to {max(fit)} B fit in it with their "
                  "buffers; the larger ones do not" if fit else
                  ". None of the sweep's sizes fits in it with its buffers")
    return nbytes, words


def summary(df):
    """Median, best and worst one-way time and the bandwidth per implementation and size."""
    df = records.table(df)
    g = df[df["metric"] == METRIC].groupby(["impl", "nbytes"])["value"]
    out = g.agg(median="median", best="min", worst="max", reps="count").reset_index()
    out["bandwidth_MBps"] = np.where(out["nbytes"] > 0, out["nbytes"] / out["median"] / 1e6, np.nan)
    order = {impl: i for i, impl in enumerate(IMPLS)}
    return out.sort_values(["impl", "nbytes"], key=lambda s: s.map(order) if s.name == "impl"
                           else s).reset_index(drop=True)


def fit(df, impl="c"):
    """Hockney and two-segment Hockney fitted to one implementation's median times.

    Returns a dict with ``hockney`` (a :class:`hpclab.models.Fit`) and
    ``two_segment`` (a :class:`hpclab.models.TwoSegmentFit`); both weigh relative
    errors. When the two-segment fit cannot be made (too few sizes), ``two_segment``
    is None, ``two_segment_error`` says why and a :class:`hpclab.models.FitWarning`
    is issued.
    """
    s = summary(df)
    s = s[s["impl"] == impl]
    if s.empty:
        raise ValueError(f"no records of implementation {impl!r}")
    x, y = s["nbytes"].to_numpy(float), s["median"].to_numpy(float)
    out = {"hockney": models.fit(models.HOCKNEY, x, y, sigma="relative"), "two_segment": None,
           "two_segment_error": None}
    try:
        out["two_segment"] = models.fit_two_segment(x, y)
    except models.FitError as exc:
        out["two_segment_error"] = str(exc)
        warnings.warn(f"no two-segment fit for {impl}: {exc}", models.FitWarning, stacklevel=2)
    return out


def small_message_latency(df, max_bytes=8):
    """Median one-way time of messages of at most max_bytes, per implementation (seconds)."""
    df = records.table(df)
    s = df[(df["metric"] == METRIC) & (df["nbytes"] <= max_bytes)]
    return s.groupby("impl")["value"].median().reindex([i for i in IMPLS if i in set(s["impl"])])


def small_message_interval(df, impl="c", max_bytes=8):
    """(median, low, high) in µs: the one-way time of messages of at most max_bytes, with
    the 95% interval of the median of every repetition."""
    t = records.table(df)
    t = t[(t["metric"] == METRIC) & (t["nbytes"] <= max_bytes) & (t["impl"] == impl)]
    return tuple(v * 1e6 for v in hstats.median_interval(t["value"]))


def _ratio_range(a, b):
    """The range of a / b when a and b each lie in their 95% intervals ``(estimate, low,
    high)``: conservative (both at their extremes at once); NaN where b's low end is not
    above zero."""
    _, alo, ahi = a
    _, blo, bhi = b
    if blo <= 0 or alo <= 0:
        return float("nan"), float("nan")
    return alo / bhi, ahi / blo


def _compare_words(t, impl, words):
    """``impl`` against C on the repetitions in ``t`` (one-way times): the words of
    :meth:`hpclab.stats.Comparison.words`."""
    return hstats.said(t[t["impl"] == impl]["value"], t[t["impl"] == "c"]["value"],
                       (words[impl], words["c"]), "one-way time")


OVERHEAD_WHY = ("an implementation cannot do less work per message than the C kernel it "
                "calls, so a cost below zero says the two ran under different load on a shared "
                "machine and its noise is larger than the cost")


def overhead_words(t, impl):
    """What ``impl`` costs per message over C on the repetitions in ``t`` (one-way times),
    in µs with the 95% interval of the ratio of medians times C's median, quoted within its
    domain (zero or more: the interpreter's work cannot be negative)."""
    a, c = t[t["impl"] == impl]["value"], t[t["impl"] == "c"]["value"]
    base = float(np.median(c)) * 1e6
    try:
        cmp = hstats.compare(a, c)
        value, low, high = ((r - 1) * base for r in (cmp.ratio, cmp.low, cmp.high))
    except ValueError:
        value, low, high = (float(np.median(a)) * 1e6 - base), np.nan, np.nan
    return hstats.estimate_words(value, low, high, "µs", "cost per message", 2,
                                 name="the cost", domain=hstats.NONNEGATIVE,
                                 basis="these repetitions", why=OVERHEAD_WHY)


def python_overhead(df):
    """Per-message cost of each implementation over C, in seconds, at small sizes."""
    lat = small_message_latency(df)
    return (lat - lat.get("c", np.nan)).rename("overhead_s")


# ----------------------------------------------------------------------------- zero page

def _zero_page_on_rank(nbytes, iterations, order):
    """On every engine: ping-pong between ranks 0 and 1 with the mpi4py buffer API on fresh
    anonymous pages, the send buffer either never written (as mpi4py.bench's numpy.empty
    buffers) or written once; one-way time of each run, the slowest rank's."""
    import mmap

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()

    def round_trips(sbuf, rbuf, n):
        for _ in range(n):
            if rank == 0:
                comm.Send(sbuf, 1, 7)
                comm.Recv(rbuf, 1, 7)
            elif rank == 1:
                comm.Recv(rbuf, 0, 7)
                comm.Send(sbuf, 0, 7)

    out = []
    for written in order:
        smap, rmap = mmap.mmap(-1, nbytes), mmap.mmap(-1, nbytes)  # untouched pages
        sbuf, rbuf = np.frombuffer(smap, np.uint8), np.frombuffer(rmap, np.uint8)
        if written:
            sbuf[:] = rank + 1
        round_trips(sbuf, rbuf, 2)  # warm-up: the receive buffer's pages get written here
        comm.Barrier()
        t0 = MPI.Wtime()
        round_trips(sbuf, rbuf, iterations)
        t = (MPI.Wtime() - t0) / (2 * iterations) if rank < 2 else 0.0
        out.append({"written": bool(written), "one_way_time": comm.allreduce(t, op=MPI.MAX)})
        del sbuf, rbuf
        smap.close()
        rmap.close()
    return out


def zero_page_effect(engines, nbytes=4 << 20, profile=None, timeout=None):
    """One-way time of ``nbytes`` messages whose send buffer was never written against one
    that was, on fresh pages, interleaved (mpi4py buffer API, ranks 0 and 1 of the engines).

    Linux maps every page of a buffer that was never written to one shared page of zeros,
    so sending such a buffer reads the same page again and again, from cache. Returns a
    DataFrame (``buffers``, ``rep``, ``one_way_time``) and the :class:`hpclab.stats.Comparison`
    of the two (never written / written).
    """
    from hpclab import stats

    settings = profiles.get(NAME, profile)
    iterations = max(5, 100 // settings["scale"])
    repetitions = settings["repetitions"] + 2
    order = [bool(r % 2) for r in range(2 * repetitions)]  # interleaved
    rows = engines.run(_zero_page_on_rank, int(nbytes), iterations, order,
                       timeout=timeout or settings["timeout"], what="zero-page ping-pong")[0]
    df = pd.DataFrame(rows)
    df["buffers"] = np.where(df["written"], "written", "never written")
    df["rep"] = df.groupby("buffers").cumcount()
    never = df.loc[~df["written"], "one_way_time"]
    written = df.loc[df["written"], "one_way_time"]
    comparison = stats.compare(never, written, ("the never-written buffer",
                                                "the written one"))
    return df[["buffers", "rep", "one_way_time"]], comparison


# ----------------------------------------------------------------------------- the chapter

def reference_summary(table, label, mine=None, nbytes="nbytes", time_us="time_us"):
    """A published table of one-way times in µs as a summary :func:`plots.latency` draws,
    after the rows of ``mine`` (this machine's summary) when given."""
    t = table[time_us].to_numpy(float) * 1e-6
    ref = pd.DataFrame({"impl": label, "nbytes": table[nbytes].to_numpy(), "median": t,
                        "best": t, "worst": t})
    return ref if mine is None else pd.concat([mine, ref], ignore_index=True)


def reference_fits(table, nbytes="nbytes", time_us="time_us"):
    """One Hockney line and the two-segment fit of a published table of one-way times."""
    x, y = table[nbytes].to_numpy(float), table[time_us].to_numpy(float) * 1e-6
    return {"hockney": models.fit(models.HOCKNEY, x, y, sigma="relative"),
            "two_segment": models.fit_two_segment(x, y)}


def orfeo_latency(orfeo):
    """ORFEO's latencies (report 001, Table 4) by placement and transport, in µs; a dash
    where a transport cannot reach (shared memory across nodes)."""
    t = (orfeo[(orfeo["quantity"] == "latency") & orfeo["source"].str.contains("Table 4")]
         .pivot(index="placement", columns="transport", values="value")
         .reindex(["intrasocket", "intersocket", "internode"]))
    t.columns = [f"{c} [µs]" for c in t.columns]
    return t


def exchange_messages(ex):
    """How many messages of n bytes IMB's Exchange bandwidth counts per iteration: the
    median of bandwidth · t / n over the table's rows (IMB documents 4: each rank sends to
    and receives from both neighbours), computed from the published times and bandwidths."""
    g = ex[(ex["nbytes"] > 0) & (ex["t_avg_us"] > 0)]
    return float(np.median(g["bandwidth_MiBps"] * 2**20 * g["t_avg_us"] * 1e-6 / g["nbytes"]))


def exchange_table(ex):
    """IMB Exchange per library and job size as measured, no model: the zero-byte time, the
    peak of IMB's bandwidth (all messages of an iteration counted, see
    :func:`exchange_messages`) and the size it is reached at, the same peak per message
    stream, and IMB's bandwidth of the largest message (GB/s, 1e9 bytes per second, from the
    table's MiB/s)."""
    count = round(exchange_messages(ex))
    rows = []
    for (mpi, nprocs), g in ex.groupby(["mpi", "nprocs"]):
        bw = g.set_index("nbytes")["bandwidth_MiBps"] * 2**20 / 1e9
        bw = bw[bw.index > 0]
        rows.append({"MPI": mpi, "ranks": int(nprocs), "nodes": int(g["nodes"].iloc[0]),
                     "0-byte time [µs]": float(g.loc[g["nbytes"] == 0, "t_avg_us"].iloc[0]),
                     f"IMB peak ({count} messages) [GB/s]": float(bw.max()),
                     "peak per stream [GB/s]": float(bw.max()) / count,
                     "at [KiB]": int(bw.idxmax() // 1024),
                     f"at {int(bw.index.max()) // 2**20} MiB [GB/s]": float(bw.iloc[-1])})
    return pd.DataFrame(rows).set_index(["MPI", "ranks"]).round(3)


def exchange_line(ex, mpi, nprocs, min_bytes=65536):
    """The Hockney line through one library's Exchange times of at least min_bytes, fitted
    with no domain (least squares of T on n, relative weights): what the page shows a line
    would need, a λ below zero if the times fall too fast to follow one. A dict of
    ``lambda``, ``B`` and ``r2``; a model fit (:func:`hpclab.models.fit`) would stop at λ = 0."""
    g = ex[(ex["mpi"] == mpi) & (ex["nprocs"] == nprocs) & (ex["nbytes"] >= min_bytes)]
    n, t = g["nbytes"].to_numpy(float), g["t_avg_us"].to_numpy(float) * 1e-6
    slope, lam = np.polyfit(n, t, 1, w=1 / t)
    pred = lam + slope * n
    r2 = 1 - np.sum((t - pred) ** 2) / np.sum((t - t.mean()) ** 2)
    return {"lambda": float(lam), "B": float(1 / slope), "r2": float(r2)}


def numbers(run, fits, zero=None):
    """Every number the chapter's text quotes about this machine, computed (name -> value)."""
    df, meta = run
    s = summary(df)
    c = s[s["impl"] == "c"]
    one, two = fits["hockney"], fits["two_segment"]
    lat = small_message_latency(df) * 1e6
    bw = c.set_index("nbytes")["bandwidth_MBps"].dropna() / 1e3
    l2 = [x["size_bytes"] for x in meta["machine"]["caches"] if x["level"] == 2
          and x["size_bytes"]]
    if bw.idxmax() < bw.index[-1]:
        bw_words = (f"Neither line follows the largest messages. The achieved bandwidth peaks at "
                    f"{bw.idxmax() / 1024:.0f} KiB ({bw.max():.1f} GB/s) and is down to "
                    f"{bw.iloc[-1]:.1f} GB/s at {bw.index[-1] / 1024:.0f} KiB: while sender's and "
                    "receiver's buffers fit in the caches, the copy through shared memory runs "
                    "at cache speed; beyond, it runs at memory speed. A third regime the "
                    "Hockney model does not have")
    else:
        bw_words = (f"The achieved bandwidth is highest at the largest size this run measured, "
                    f"{bw.index[-1] / 1024:.0f} KiB ({bw.iloc[-1]:.1f} GB/s). Whether it falls "
                    "once the buffers outgrow the caches, a regime the Hockney model does not "
                    "have, needs larger messages than this profile sends")
    out = {"nsizes": len(c), "reps": int(s["reps"].max()), "lat_c": lat["c"], "bw_words": bw_words,
           "lam_left_words": two.left.words("lambda", "latency", "µs", 1e6, 3, name="λ"),
           "B_right_words": two.right.words("B", "bandwidth", "GB/s", 1e-9, name="B"),
           "lam_left": two.left["lambda"] * 1e6, "B_right": two.right["B"] / 1e9,
           "break_lo": f"{two.breakpoint_low:,.0f}", "break_hi": f"{two.breakpoint_high:,.0f}",
           "one_rel": models.rms_relative(one), "two_rel": models.rms_relative(two),
           "l2_kib": (l2[0] / 1024) if l2 else float("nan"),
           "n_half": two.right["lambda"] * two.right["B"] / 1024,
           "placement": "; ".join(f"rank {p['rank']}: {p['cpus']}" for p in meta["placement"])}
    overhead = python_overhead(df) * 1e6
    words = {"c": "the C kernel", "cython": "Cython", "python": "the mpi4py buffer API",
             "pickle": "the pickle API"}
    t = records.table(df)
    t = t[t["metric"] == METRIC]
    small = t[t["nbytes"] <= 8]
    big = t[t["nbytes"] == t["nbytes"].max()]
    for impl in ("cython", "python", "pickle"):
        out[f"ovh_{impl}_us"] = overhead.get(impl, np.nan)
        out[f"ovh_{impl}_words"] = overhead_words(small, impl)
        out[f"cmp_small_{impl}"] = _compare_words(small, impl, words)
        out[f"cmp_large_{impl}"] = _compare_words(big, impl, words)
    largest = s[s["nbytes"] == s["nbytes"].max()].set_index("impl")["median"]
    out.update(large_python_ratio=largest["python"] / largest["c"],
               large_pickle_ratio=largest["pickle"] / largest["c"],
               largest_kib=s["nbytes"].max() / 1024)
    if zero is not None:
        frame, comparison = zero
        med = frame.groupby("buffers")["one_way_time"].median() * 1e6
        out.update(zero_never=med["never written"], zero_written=med["written"],
                   zero_words=comparison.words(), zero_ratio=comparison.ratio,
                   zero_mib=(4 << 20) / (1 << 20))
    return out


def reference_numbers(fits, ul, ul_fits, orfeo_table, exchange, lat_c_us, ex_line):
    """The numbers the text quotes from the published tables, and this machine beside them
    (``lat_c_us``: :func:`small_message_interval`; ``ex_line``: :func:`exchange_line` of
    Open MPI on 40 ranks)."""
    two, ul_two = fits["two_segment"], ul_fits["two_segment"]
    ul_bw = ul.set_index("nbytes")["bandwidth_MiBps"]
    ucx = orfeo_table["UCX (InfiniBand) [µs]"]
    peak = exchange["peak per stream [GB/s]"]
    imb_peak = exchange[[c for c in exchange.columns if c.startswith("IMB peak")][0]]
    last = exchange[[c for c in exchange.columns if c.endswith("MiB [GB/s]")][0]]
    lam = (two.left["lambda"], *two.left.ci95["lambda"])
    ul_lam = (ul_two.left["lambda"], *ul_two.left.ci95["lambda"])
    bw = (two.right["B"], *two.right.ci95["B"])
    ul_bw_fit = (ul_two.right["B"], *ul_two.right.ci95["B"])
    def span(a, b):
        lo, hi = _ratio_range(a, b)
        if not np.isfinite(lo):
            return ("without a useful range: an interval of the two fits reaches zero or below, "
                    "so the points do not bound it")
        return (f"between {lo:.2f} and {hi:.2f} when both fits range over their 95% "
                "intervals")

    return {"ratio_lat_span": span(lam, ul_lam), "ratio_bw_span": span(bw, ul_bw_fit),
            "ours_vs_intra_words": hstats.estimate_words(
                *(v / ucx["intrasocket"] for v in lat_c_us), "", "ratio of latencies",
                1, name="the ratio", basis="our repetitions"),
            "orfeo_spread": ucx["internode"] / ucx["intrasocket"],
            "ul_lam": ul_two.left["lambda"] * 1e6,
            "ul_one_rel": models.rms_relative(ul_fits["hockney"]),
            "ul_two_rel": models.rms_relative(ul_two), "ul_B": ul_two.right["B"] / 1e9,
            "ul_break": f"{ul_two.breakpoint_high:,.0f}",
            "ratio_lat": two.left["lambda"] / ul_two.left["lambda"],
            "ratio_bw": two.right["B"] / ul_two.right["B"],
            "ul_peak_kib": ul_bw.idxmax() / 1024,
            "ul_drop": (1 - ul_bw.iloc[-1] / ul_bw.max()) * 100,
            "orfeo_intra": ucx["intrasocket"], "orfeo_inter": ucx["intersocket"],
            "orfeo_node": ucx["internode"], "ours_vs_intra": lat_c_us[0] / ucx["intrasocket"],
            "tcp_vs_ucx": orfeo_table.loc["internode", "Ob1 TCP [µs]"] / ucx["internode"],
            "ex_ompi": peak[("Open MPI 1.8.1", 40)], "ex_mvapich": peak[("MVAPICH2 1.9", 40)],
            "ex_ratio": peak[("Open MPI 1.8.1", 40)] / peak[("MVAPICH2 1.9", 40)],
            "ex_ompi_kib": exchange.loc[("Open MPI 1.8.1", 40), "at [KiB]"],
            "ex_messages": float((imb_peak / peak).median()),
            "ex_ompi_drop": (1 - last[("Open MPI 1.8.1", 40)] / imb_peak[("Open MPI 1.8.1", 40)])
            * 100,
            "ex_ompi_zero": exchange.loc[("Open MPI 1.8.1", 40), "0-byte time [µs]"],
            "ex_mvapich_zero": exchange.loc[("MVAPICH2 1.9", 40), "0-byte time [µs]"],
            "ex_line_words": "λ = " + hstats.estimate_words(
                ex_line["lambda"] * 1e6, np.nan, np.nan, "µs", "latency", digits=1,
                domain=models.HOCKNEY.domain("lambda"), name="a latency",
                basis="the published times"),
            "ex_line_r2": ex_line["r2"]}


def reports_own(ul_fits, estimates, orfeo):
    """The reports' own latency and bandwidth estimates beside what this chapter's fit of the
    same published table gives (Ulysses), or beside nothing where the report's times are
    not published as numbers (ORFEO). One unit per quantity: µs and GB/s (1e9 B/s)."""
    two = ul_fits["two_segment"]
    est = estimates.set_index("quantity")
    o = orfeo[(orfeo["placement"] == "internode") & orfeo["transport"].str.startswith("UCX")]
    o = o.drop_duplicates("quantity").set_index("quantity")
    mib = 2**20 / 1e9
    ours = {"latency [µs]": (two.left["lambda"] * 1e6,
                             *(v * 1e6 for v in two.left.ci95["lambda"])),
            "bandwidth [GB/s]": (two.right["B"] / 1e9, *(v / 1e9 for v in two.right.ci95["B"]))}
    none = "— (its times are not published as numbers)"
    rows = []
    for system, quantity, value in (
            ("Ulysses, one node (report 004)", "latency [µs]", est.loc["latency", "value"]),
            ("Ulysses, one node (report 004)", "bandwidth [GB/s]",
             est.loc["asymptotic_bandwidth", "value"] * mib),
            ("ORFEO, two nodes, UCX (report 001)", "latency [µs]", o.loc["latency", "value"]),
            ("ORFEO, two nodes, UCX (report 001)", "bandwidth [GB/s]",
             o.loc["asymptotic_bandwidth", "value"] / 1e3)):
        if system.startswith("Ulysses"):
            fit, lo, hi = ours[quantity]
            rows.append((system, quantity, value, f"{fit:.3f} ({lo:.3f} to {hi:.3f})",
                         "yes" if lo <= value <= hi else "no"))
        else:
            rows.append((system, quantity, value, none, "—"))
    return pd.DataFrame(rows, columns=["system", "quantity", "the report's estimate",
                                       "this chapter's fit of the table (95% interval)",
                                       "estimate inside the interval"]
                        ).set_index(["system", "quantity"]).round(3)


def _has_c(run_):
    t = records.table(run_)
    return None if (t["impl"] == "c").any() else "no records of the C kernel"


def measurement(profile=None, engines=None, out_dir=None):
    """(run, where it came from): the PingPong run this machine's other chapters take
    (:func:`hpclab.inputs.measured`: saved here, of this host and MPI library, not
    simulated, of this book build when one is under way), else one measured now and saved,
    so that the next page or lab takes the same: in a book build the whole experiment (the
    PingPong page shows it), elsewhere the C kernel alone (quick profile unless one is
    given), which is all another chapter takes. ``out_dir``: the results folder (default:
    :func:`hpclab.records.results_dir`)."""
    from hpclab import inputs

    if inputs.build_id():
        def measure():
            return run(profile=profile, engines=engines, progress=False)
    else:
        def measure():
            return run(profile=profile or "quick", impls=("c",), engines=engines,
                       progress=False)
    return inputs.measured(NAME, measure, profile=profile, out_dir=out_dir, accept=_has_c)


def hockney_model(profile=None, engines=None):
    """(λ in s, B in B/s, where they came from): Hockney's single line through every size
    of the C kernel, fitted to :func:`measurement` (λ stays in its domain, zero or more)."""
    r, source = measurement(profile, engines)
    f = fit(r, "c")["hockney"]
    return f["lambda"], f["B"], source


def report_references():
    """The published clusters' ping-pong numbers for the class report (the declaration's
    ``report`` quantities, in the units shown there): [(label, {quantity: value})].
    Ulysses: the two-segment fit's small-message λ and large-message B of IMB's PingPong
    (report 004); ORFEO: the internode UCX latency and the asymptotic bandwidth (report 001)."""
    from hpclab import reference

    ul = reference.load("ulysses_imb_pingpong")
    two = models.fit_two_segment(ul["nbytes"].to_numpy(float),
                                 ul["time_us"].to_numpy(float) * 1e-6)
    orfeo = reference.load("orfeo_pingpong")
    lat = orfeo[(orfeo["quantity"] == "latency") & (orfeo["placement"] == "internode")
                & orfeo["transport"].str.startswith("UCX")]["value"].iloc[0]
    bw = orfeo[orfeo["quantity"] == "asymptotic_bandwidth"]["value"].iloc[0]
    return [("Ulysses (report 004)", {"latency": two.left["lambda"] * 1e6,
                                      "bandwidth": two.right["B"] / 1e9}),
            ("ORFEO, two nodes (report 001)", {"latency": float(lat),
                                               "bandwidth": float(bw) / 1e3})]
