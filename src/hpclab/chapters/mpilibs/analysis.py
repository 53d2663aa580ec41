"""What the MPI libraries sweep shows: each library's times with intervals, which library is
faster at which size (only where the intervals separate), the sizes where that changes,
Hockney's model per library on each side of its protocol switch, and what binding to cores
changed."""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from hpclab import models, stats
from hpclab.chapters.mpilibs import libraries
from hpclab.chapters.mpilibs.declaration import KERNEL  # noqa: F401 (pages and labs)
from hpclab.chapters.mpilibs.sweep import (  # noqa: F401 (the sweep's names, for pages and labs)
    NAME,
    PROFILES,
    RANKS,
    TESTS,
    SweepError,
    iterations,
    main,
    parse,
    program_args,
    reasons,
    records_of,
    run,
    run_one,
    version_of,
)

KEYS = ["impl", "test", "placement", "nbytes"]
# stats.VERDICTS of bound over unbound, in its order
PLACEMENT_VERDICTS = ("bound slower", "bound faster", "no difference shown", "cannot tell")


def name(slug: str) -> str:
    return libraries.get(slug).name


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per library, test, placement and size: the median time (µs) with its 95% interval,
    and for PingPong the bandwidth (GB/s, bytes over the one-way time)."""
    rows = []
    for key, g in df[df["metric"] == "time"].groupby(KEYS):
        try:
            med, low, high = stats.median_interval(g["value"])
        except ValueError:
            med, low, high = float(np.median(g["value"])), float("nan"), float("nan")
        rows.append({**dict(zip(KEYS, key)), "library": name(key[0]), "n": len(g),
                     "time_us": med * 1e6, "low_us": low * 1e6, "high_us": high * 1e6,
                     "gbs": key[3] / med / 1e9 if key[1] == "pingpong" and med > 0 else np.nan})
    return pd.DataFrame(rows)


def ranking(df: pd.DataFrame, test: str = "pingpong", placement: str = "core") -> pd.DataFrame:
    """Per size, the libraries from fastest to slowest where each pair's interval of the
    ratio of medians excludes 1; ``order`` reads "A < B = C" (= where no difference is shown)
    and ``fastest`` names the one library faster than every other, or is empty."""
    d = df[(df["metric"] == "time") & (df["test"] == test) & (df["placement"] == placement)]
    rows: list[dict] = []
    for nbytes, g in d.groupby("nbytes"):
        values = {s: v["value"].to_numpy() for s, v in g.groupby("impl")}
        med = {s: float(np.median(v)) for s, v in values.items()}
        slugs = sorted(values, key=lambda s: med[s])
        beats: dict[str, set[str]] = {s: set() for s in slugs}
        for a, b in itertools.permutations(slugs, 2):
            _, _, high = stats.ratio_or_nan(values[a], values[b])
            if np.isfinite(high) and high < 1:
                beats[a].add(b)
        words = name(slugs[0])
        for prev, s in zip(slugs, slugs[1:]):
            words += (" < " if s in beats[prev] else " = ") + name(s)
        clear = [s for s in slugs if len(slugs) > 1 and beats[s] == set(slugs) - {s}]
        rows.append({"nbytes": int(nbytes), "order": words,
                     "fastest": name(clear[0]) if clear else "",
                     **{f"{s}_us": med[s] * 1e6 for s in slugs}})
    return pd.DataFrame(rows, columns=None if rows else ["nbytes", "order", "fastest"])


def flips(rank: pd.DataFrame) -> list[tuple[int, int, str, str]]:
    """Where the clear winner changes: (size before, size after, winner before, after),
    counting only sizes with a clear winner."""
    clear = rank[rank["fastest"] != ""].sort_values("nbytes")
    out = []
    for (_, a), (_, b) in zip(clear.iterrows(), clear.iloc[1:].iterrows()):
        if a["fastest"] != b["fastest"]:
            out.append((int(a["nbytes"]), int(b["nbytes"]), a["fastest"], b["fastest"]))
    return out


def flips_words(rank: pd.DataFrame, test: str = "PingPong") -> str:
    if rank.empty:
        return f"{test[0].upper()}{test[1:]} was not measured."
    measured = [c[:-len("_us")] for c in rank.columns if c.endswith("_us")]
    if len(measured) < 2:  # nothing was compared: "no library was faster" would mislead
        return (f"In {test} only {name(measured[0]) if measured else 'one library'} was "
                "measured: there is no other library to compare it with (make mpilibs sets "
                "up the others).")
    found = flips(rank)
    clear = rank[rank["fastest"] != ""]
    if clear.empty:
        return (f"In {test} no library was faster than every other at any size, by the "
                "intervals.")
    if not found:
        return (f"In {test}, {clear['fastest'].iloc[0]} was the fastest wherever one library "
                f"was faster than every other ({len(clear)} of {len(rank)} sizes).")
    parts = [f"from {b:,} bytes on {after} (after {before} at {a:,})"
             for a, b, before, after in found]
    return f"In {test} the fastest library changes: {'; '.join(parts)}."


def hockney(df: pd.DataFrame, slug: str, placement: str = "core"):
    """Hockney's model t = λ + n / B fitted to a library's PingPong times on each side of the
    size where the fit is best split (its protocol switch, as the data show it):
    :class:`hpclab.models.TwoSegmentFit`."""
    d = df[(df["metric"] == "time") & (df["test"] == "pingpong") & (df["impl"] == slug)
           & (df["placement"] == placement) & (df["nbytes"] > 0)]
    med = d.groupby("nbytes")["value"].median()  # one point a size, as PingPong's fit
    return models.fit_two_segment(med.index.to_numpy(float), med.to_numpy(float))


def hockney_table(df: pd.DataFrame, placement: str = "core") -> pd.DataFrame:
    """Per library and segment: λ (µs) and B (GB/s) with their 95% intervals, and the
    switch between the segments. ``note`` says which estimate the points do not determine
    (outside or barely within its domain: below a switch at a few hundred bytes the times are
    the latency alone and say nothing of B), or why a library has no fit (fewer than two
    segments of three sizes each)."""
    rows = []
    for slug in sorted(set(df["impl"])):
        try:
            fit = hockney(df, slug, placement)
        except models.FitError as exc:
            rows.append({"library": name(slug), "note": str(exc)})
            continue
        for part, f in (("below", fit.left), ("above", fit.right)):
            lam, bw = f.ci95["lambda"], f.ci95["B"]
            doubts = f.table().set_index("parameter")["note"]
            notes = [f"{'λ' if k == 'lambda' else k}: {v}" for k, v in doubts.items() if v]
            # B is the slope's inverse: without a rise of the time across the segment
            # (intervals of its first and last sizes apart) no B is measured there
            a, b = float(np.min(f.x)), float(np.max(f.x))
            low = _rise_low(df, slug, placement, a, b)
            if not any(n.startswith("B:") for n in notes) and not low > 1:
                notes.append(f"B: not determined: the time does not rise measurably from "
                             f"{a:,.0f} to {b:,.0f} bytes (the latency alone)")
            note = "; ".join(notes)
            rows.append({"library": name(slug), "segment": part,
                         "switch_bytes": f"{fit.breakpoint_low:,.0f} to "
                                         f"{fit.breakpoint_high:,.0f}",
                         "lambda_us": f["lambda"] * 1e6, "lambda_low": lam[0] * 1e6,
                         "lambda_high": lam[1] * 1e6, "B_GBs": f["B"] / 1e9,
                         "B_low": bw[0] / 1e9, "B_high": bw[1] / 1e9, "note": note})
    return pd.DataFrame(rows, columns=["library", "segment", "switch_bytes", "lambda_us",
                                       "lambda_low", "lambda_high", "B_GBs", "B_low", "B_high",
                                       "note"])


def _rise_low(df, slug, placement, a, b):
    """The low end of the 95% interval of the PingPong time at b bytes over a bytes."""
    d = df[(df["metric"] == "time") & (df["test"] == "pingpong") & (df["impl"] == slug)
           & (df["placement"] == placement)]
    return stats.ratio_or_nan(d.loc[d["nbytes"] == b, "value"],
                              d.loc[d["nbytes"] == a, "value"])[1]


def placement_effect(df: pd.DataFrame, test: str = "pingpong") -> pd.DataFrame:
    """Per library and size: the time bound to cores over unbound, with its interval, and
    the verdict of the interval."""
    d = df[(df["metric"] == "time") & (df["test"] == test)]
    rows = []
    for (slug, nbytes), g in d.groupby(["impl", "nbytes"]):
        core = g.loc[g["placement"] == "core", "value"]
        none = g.loc[g["placement"] == "none", "value"]
        ratio, low, high = stats.ratio_or_nan(core, none)
        verdict = PLACEMENT_VERDICTS[stats.VERDICTS.index(stats.verdict(low, high))]
        rows.append({"library": name(slug), "nbytes": int(nbytes), "ratio": ratio,
                     "low": low, "high": high, "verdict": verdict,
                     "cpus_core": g.loc[g["placement"] == "core", "cpus"].iloc[0]
                     if len(core) else "", "cpus_none": g.loc[g["placement"] == "none",
                                                                "cpus"].iloc[0]
                     if len(none) else ""})
    return pd.DataFrame(rows)


def measurement(profile=None, progress=False):
    """A sweep of the libraries set up on this machine (``make mpilibs``), at the book's
    profile (``HPCLAB_PROFILE``, quick when unset), saved to the results folder; None with
    the words that say why when none is set up or none ran."""
    import os

    profile = profile or os.environ.get("HPCLAB_PROFILE") or "quick"
    try:
        done = run(profile, setup=False, progress=print if progress else (lambda m: None))
    except SweepError as exc:
        why = (f"Nothing was measured on this machine: {exc}. `make mpilibs` sets the "
               "libraries up and measures them.")
        _nothing_measured("data", why)
        return None, why
    done.save(publish="data")
    return done, ""


def _nothing_measured(folder, why):
    """The page's data files when nothing was measured: no rows, and the metadata says why
    (the page offers them for download either way)."""
    import json
    from pathlib import Path

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}-records.csv").write_text(",".join(KEYS + ["metric", "value"]) + "\n")
    (out / f"{NAME}-records.json").write_text(json.dumps(
        {"experiment": NAME, "measured": False, "why": why}, indent=1) + "\n")


def pingpong_figure(run, placement="core"):
    """PingPong's one-way time against the size for each library, bound to cores: the
    median with its 95% interval."""
    from hpclab import plots

    s = summary(run.records)
    s = s[(s["test"] == "pingpong") & (s["placement"] == placement)]
    s = s.assign(impl=s["library"], median=s["time_us"] * 1e-6, best=s["low_us"] * 1e-6,
                 worst=s["high_us"] * 1e-6)
    where = "bound to cores" if placement == "core" else "unbound"
    ax = plots.latency(s, title=f"PingPong, {RANKS} ranks, {where}")
    plots.machine_note(ax, run.meta)
    return ax.figure


def placement_words(df, test="pingpong"):
    """Per library: at how many sizes binding to cores was faster, slower or not shown
    different, and the cores each rank reported under each placement."""
    p = placement_effect(df, test)
    parts = []
    for lib, g in p.groupby("library"):
        c = g["verdict"].value_counts()
        parts.append(f"{lib}: bound faster at {c.get('bound faster', 0)} of {len(g)} sizes, "
                     f"slower at {c.get('bound slower', 0)}, no difference shown at "
                     f"{c.get('no difference shown', 0)} (ranks on cores "
                     f"{g['cpus_core'].iloc[0].replace('|', ' and ')} bound, "
                     f"{g['cpus_none'].iloc[0].replace('|', ' and ')} unbound)")
    return "; ".join(parts) + "."


def numbers(run, why=""):
    """The words of the page from a run; with none (``run`` None), every one of them says
    ``why``."""
    from hpclab import plots, reference

    h = reference.load("hamburg_hpcc")
    fixed = {"ranks": f"{RANKS}", "report_nodes": f"{int(h['nodes'].iloc[0])}",
             "report_ranks": f"{int(h['ranks'].iloc[0])}"}
    keys = ["machine", "settings_words", "libraries_words", "skipped_words", "pingpong_flips",
            "exchange_flips", "allreduce_flips", "ring_flips", "placement_words", "hockney_notes",
            "socket_words"]
    if run is None:
        return {**{k: why if k == "libraries_words" else "" for k in keys}, **fixed}
    df, meta = run
    out = {"machine": plots.caption(meta), **fixed}
    libs = meta["libraries"]
    out["libraries_words"] = "Measured: " + ", ".join(
        f"{i['name']} ({i['version']})" for i in libs.values()) + "."
    skipped, failed = meta.get("skipped") or {}, meta.get("failed") or {}
    said = [f"Not measured: {reasons(skipped)}." if skipped else "",
            f"Stopped during the sweep, its records until then kept: {reasons(failed)}."
            if failed else ""]
    out["skipped_words"] = (" ".join(w for w in said if w)
                            or "Every library set up here ran to the end.")
    out["settings_words"] = settings_words(meta)
    out["socket_words"] = socket_words(meta)
    for test, label in (("pingpong", "PingPong"), ("exchange", "Exchange"),
                        ("allreduce", "Allreduce"), ("ring", "the ring")):
        out[f"{test}_flips"] = flips_words(ranking(df, test), label)
    out["placement_words"] = "Binding to cores against none, PingPong: " + placement_words(df)
    out["hockney_notes"] = hockney_notes(df)
    return out


def socket_words(meta) -> str:
    """Why binding to sockets (report 002's Table 5.2 has it) is or is not among the
    placements, from the machine the run was on."""
    sockets = (meta.get("machine") or {}).get("sockets")
    if sockets == 1:
        return ("Binding to sockets is not measured: this machine has one socket, so each rank "
                "bound to it could run on any core, as unbound; a machine of two sockets could "
                "show what placing the two ranks on one socket or on two changes.")
    return (f"Binding to sockets is not among the placements measured (this machine has "
            f"{sockets if sockets else 'an unreported number of'} sockets); the two ranks ran "
            "unbound and bound to cores.")


def placement_spellings() -> pd.DataFrame:
    """How this chapter asks each library for each placement: its mpiexec options or the
    environment it sets (libraries.LIBRARIES), one row per library."""
    rows = []
    for lib in libraries.LIBRARIES.values():
        row = {"library": lib.name}
        for placement, label in (("none", "unbound"), ("core", "bound to cores")):
            args = " ".join(lib.placement_args.get(placement, ()))
            env = " ".join(f"{k}={v}" for k, v in lib.placement_env.get(placement, {}).items())
            row[label] = " ".join(x for x in (args, env) if x) or "(nothing)"
        rows.append(row)
    return pd.DataFrame(rows).set_index("library")


def report_binding_table() -> pd.DataFrame:
    """Report 002's Table 5.2: Open MPI's mapping and binding options and the defaults of
    Open MPI and MVAPICH2, as the reference dataset holds them (its lists of objects are
    longer than a pandas cell shows: a page shows it with :func:`whole_html`)."""
    from hpclab import reference

    t = reference.load("hamburg_binding_options").fillna("")
    t = t.assign(objects=t["objects"].str.replace(";", ", "))
    return t.drop(columns="source").rename(columns={
        "objects": "objects it takes", "openmpi_default": "Open MPI default",
        "mvapich2_default": "MVAPICH2 default"})


def whole_html(df: pd.DataFrame):
    """A table for a page with every cell whole (pandas' display cuts long text to '...')."""
    from IPython.display import HTML

    return HTML(df.to_html(index=False))


def report_libraries_table() -> pd.DataFrame:
    """Report 002's Table 5.1, the libraries its team compared on paper, as the reference
    dataset holds it."""
    from hpclab import reference

    t = reference.load("hamburg_mpi_libraries").drop(columns="source")
    return t.rename(columns={"open_source": "open source",
                             "infiniband_support": "InfiniBand",
                             "last_stable_release": "last release",
                             "release_date": "released", "mpi3_support": "MPI-3"})


def report_stream_words() -> str:
    """Report 002's HPCC STREAM (Section 6.6) in words: Triad per process alone and all at
    once, what a node's processes drew together, and its largest ping-pong bandwidth against
    one process's copy."""
    from hpclab import reference

    st = reference.load("hamburg_hpcc_stream").set_index("op")
    h = reference.load("hamburg_hpcc").set_index("quantity")["value"]
    triad = st.loc["triad"]
    per_node = int(triad["cores_per_node"])
    ping = h["MaxPingPongBandwidth"]
    copy = st.loc["copy", "single_GBps"]
    return (f"Its HPCC STREAM on the same {int(triad['ranks'])} processes: Triad "
            f"{triad['single_GBps']:.2f} GB/s for one process alone (SingleSTREAM) and "
            f"{triad['star_GBps']:.2f} GB/s each when all run at once (StarSTREAM), so the "
            f"{per_node} processes of a node drew {triad['star_GBps'] * per_node:.0f} GB/s "
            f"together. Its largest ping-pong bandwidth, {ping:.2f} GB/s, is "
            f"{ping / copy:.2f} of what one process copies alone ({copy:.2f} GB/s)")


def settings_words(meta) -> str:
    """The MPI settings the run had in its environment, in words (they change how a waiting
    rank polls or which transport it takes, and so the times), or none."""
    found = meta.get("mpi_settings") or {}
    if not found:
        return "No MPI setting was given in the environment: each library ran as installed."
    listed = ", ".join(f"`{k}={v}`" for k, v in sorted(found.items()))
    return (f"The run had these MPI settings in its environment: {listed}. They change how a "
            "waiting rank polls or which transport it takes, so the times are those of the "
            "libraries so set, not as installed.")


def _interval_text(value, low, high, digits=3):
    return f"{value:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}]"


def hockney_display(df, placement="core"):
    """:func:`hockney_table` for a page: λ (µs) and B (GB/s) with their intervals, or the
    words that say the points do not determine it."""
    t = hockney_table(df, placement)
    rows = []
    for _, r in t.iterrows():
        if pd.isna(r["segment"]):
            rows.append({"library": r["library"], "segment": "", "switch (bytes)": "",
                         "λ (µs)": "see the note", "B (GB/s)": "see the note"})
            continue
        note = r["note"] or ""
        lam = ("see the note" if note.startswith("λ") or "; λ" in note else
               _interval_text(r["lambda_us"], r["lambda_low"], r["lambda_high"]))
        bw = ("see the note" if "B:" in note else
              _interval_text(r["B_GBs"], r["B_low"], r["B_high"]))
        rows.append({"library": r["library"], "segment": r["segment"],
                     "switch (bytes)": r["switch_bytes"], "λ (µs)": lam, "B (GB/s)": bw})
    return pd.DataFrame(rows).set_index(["library", "segment"])


def hockney_notes(df, placement="core"):
    """The notes of :func:`hockney_table` as a sentence (the estimates the points do not
    determine, and the libraries without a fit)."""
    t = hockney_table(df, placement)
    notes = [f"{r['library']}{'' if pd.isna(r['segment']) else ', ' + r['segment']}: "
             f"{r['note']}" for _, r in t.iterrows() if r["note"]]
    return ("Every estimate is bounded by its points." if not notes else
            "Where the table says to: " + "; ".join(notes) + ".")


def ranking_display(df, test="pingpong", placement="core"):
    """:func:`ranking` for a page: the size, the order and each library's median (µs)."""
    r = ranking(df, test, placement)
    cols = {c: f"{name(c[:-3])} (µs)" for c in r.columns if c.endswith("_us")}
    return r.rename(columns={"nbytes": "bytes", **cols}).set_index("bytes").round(3)


def report_exchange_words():
    """Report 002's IMB Exchange (Table 5.3), per configuration of nodes and processes:
    which library took less time at how many sizes, from its single averages (it gives no
    spread)."""
    from hpclab import reference

    ex = reference.load("hamburg_imb_exchange")
    parts = []
    for (nodes, nprocs), g in ex.groupby(["nodes", "nprocs"]):
        t = g.pivot(index="nbytes", columns="mpi", values="t_avg_us")
        a, b = t.columns[:2]
        less = t[a] < t[b]
        changes = t.index[less != less.iloc[0]]
        wins, other = (a, b) if less.sum() * 2 >= len(t) else (b, a)
        parts.append(
            f"on {nodes} nodes and {nprocs} processes {wins}'s average was below {other}'s at "
            f"{int((t[wins] < t[other]).sum())} of {len(t)} sizes (at 0 bytes "
            f"{t.loc[0, wins]:g} µs against {t.loc[0, other]:g} µs)"
            + (f", the order changing first at {int(changes[0]):,} bytes"
               if len(changes) else ""))
    return ("In report 002's IMB Exchange, " + "; ".join(parts) + ". The report gives one "
            "average per size and no spread, so how sure each order is cannot be told from it")


def beside_report(df, placement="core"):
    """This machine's libraries beside report 002's HPCC b_eff (its nodes and processes in
    the dataset): PingPong's latency (smallest size here) and bandwidth (largest size here),
    with 95% intervals here."""
    from hpclab import reference

    h = reference.load("hamburg_hpcc").set_index("quantity")["value"]
    s = summary(df)
    s = s[s["placement"] == placement]

    def here(test, nbytes, column="time_us", digits=2):
        out = {}
        for lib, g in s[(s["test"] == test) & (s["nbytes"] == nbytes)].groupby("library"):
            r = g.iloc[0]
            if column == "gbs":
                out[lib] = (f"{r['gbs']:.{digits}f} GB/s [{nbytes / r['high_us'] / 1e3:.{digits}f}"
                            f"-{nbytes / r['low_us'] / 1e3:.{digits}f}]")
            else:
                out[lib] = f"{r['time_us']:.{digits}f} µs [{r['low_us']:.{digits}f}-" \
                           f"{r['high_us']:.{digits}f}]"
        return out

    ping = s[(s["test"] == "pingpong") & (s["nbytes"] > 0)]["nbytes"]
    if ping.empty:
        return pd.DataFrame(columns=["report 002"])
    small, large = int(ping.min()), int(ping.max())
    rows = [
        {"quantity": f"PingPong latency ({small} B here)",
         "report 002": f"{h['MinPingPongLatency']:.2f} / {h['AvgPingPongLatency']:.2f} / "
                       f"{h['MaxPingPongLatency']:.2f} µs (min / avg / max)",
         **here("pingpong", small)},
        {"quantity": f"PingPong bandwidth ({large:,} B here)",
         "report 002": f"{h['MinPingPongBandwidth']:.2f} / {h['AvgPingPongBandwidth']:.2f} / "
                       f"{h['MaxPingPongBandwidth']:.2f} GB/s (min / avg / max)",
         **here("pingpong", large, "gbs")},
    ]
    # (HPCC's ring latency is per message and the slowest rank's; this program's ring
    # times a step of two messages on rank 0: not the same quantity, so not set beside it)
    return pd.DataFrame(rows).set_index("quantity")
