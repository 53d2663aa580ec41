"""Ring experiment: time of one full ring against the number of ranks P.

For every P = 1 .. cores (never more: oversubscribed timings are garbage), every
payload, variant and implementation, one measurement on the first P ranks of the
engines (or of the mpiexec job). Records: one row per repetition, metric
``ring_time`` in seconds per full ring, columns ``variant, nbytes, warmup,
iterations, hugepages, oversubscribed``. For the plain ``send`` variant the run
first checks that MPI buffers the message (metric ``send_buffered``, 1 or 0) and
times it only then, so the sweep never deadlocks.

:func:`check` runs every variant on P = 1 .. ``check_upto`` ranks under mpiexec,
oversubscribed where P exceeds the cores (metric ``correct``, column
``oversubscribed``): correctness, not timing.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from hpclab import machine, models, profiles, records, tables

# the sweep (what every rank runs) is hpclab.chapters.ring.sweep; its names (run, tasks,
# measure...) are imported here for the pages, the labs and the tests
from hpclab.chapters.ring.model import MODEL
from hpclab.chapters.ring.sweep import (  # noqa: F401 (the sweep's, for pages and labs)
    IMPLS,
    KERNEL,
    METRIC,
    MIN_PROCS,
    NAME,
    NPROCS,
    UNIT,
    VARIANTS,
    check,
    measure,
    run,
    run_mpi,
    tasks,
)
from hpclab.plots import MIN_PT, PALETTE, _ax, _styled
from hpclab.sweeps import on_engines

# ----------------------------------------------------------------------------- analysis

def timings(df):
    """Only the timing records (metric ring_time)."""
    df = records.table(df)
    return df[df["metric"] == METRIC]


def summary(df):
    """Median, best and worst time per ring and per step, per implementation, variant,
    payload and P."""
    g = timings(df).groupby(["impl", "variant", "nbytes", "nprocs"])["value"]
    out = g.agg(median="median", best="min", worst="max", reps="count").reset_index()
    out["step_median"] = out["median"] / out["nprocs"]
    return out


def fit(df, impl="c", variant="irecv", nbytes=4):
    """``T = lambda * P`` fitted to the median ring times of one implementation,
    variant and payload (a :class:`hpclab.models.Fit`; lambda in seconds per step)."""
    s = summary(df)
    s = s[(s["impl"] == impl) & (s["variant"] == variant) & (s["nbytes"] == nbytes)]
    if s.empty:
        raise ValueError(f"no ring timings of {impl} {variant} with {nbytes} B messages")
    return models.fit(MODEL, s["nprocs"].to_numpy(float), s["median"].to_numpy(float))


def fits(df, nbytes=4):
    """A table of lambda with its 95% interval for every implementation and variant.

    Where a fit cannot be made (a single P, on a one-core machine) the row is kept with
    NaN estimates and ``note`` saying why, rather than left out."""
    out = []
    s = summary(df)
    for (impl, variant), g in s[s["nbytes"] == nbytes].groupby(["impl", "variant"]):
        try:
            f = fit(df, impl, variant, nbytes)
        except models.FitError as exc:
            out.append({"impl": impl, "variant": variant, "lambda": np.nan,
                        "lambda_low": np.nan, "lambda_high": np.nan, "points": len(g),
                        "dof": 0, "note": str(exc)})
            continue
        # an interval past λ ≥ 0 is cut to it, and the note says λ is not determined
        note, (lo, hi) = tables.domain_note(f.model.domain("lambda"), f["lambda"],
                                            *f.ci95["lambda"])
        out.append({"impl": impl, "variant": variant, "lambda": f["lambda"], "lambda_low": lo,
                    "lambda_high": hi, "points": f.npoints, "dof": f.dof, "note": note})
    return pd.DataFrame(out)


def step_fit(df, impl="c", variant="irecv", nprocs=None):
    """Hockney ``t = lambda + n / B`` fitted to the time per step against the payload,
    at one P (default: the largest measured)."""
    s = summary(df)
    s = s[(s["impl"] == impl) & (s["variant"] == variant)]
    nprocs = nprocs or int(s["nprocs"].max())
    s = s[s["nprocs"] == nprocs]
    return models.fit(models.HOCKNEY, s["nbytes"].to_numpy(float),
                      s["step_median"].to_numpy(float), sigma="relative")


def pingpong_latency(pingpong_df, impl="c", max_bytes=8):
    """Median one-way PingPong time of small messages (seconds) from pingpong records."""
    from hpclab.chapters.pingpong import analysis as pingpong

    lat = pingpong.small_message_latency(pingpong_df, max_bytes)
    if impl not in lat.index:
        raise ValueError(f"the pingpong records hold no {impl} implementation")
    return float(lat[impl])


def measure_pingpong(engines=None, impl="c", profile=None, timeout=None):
    """A short PingPong of 0..8-byte messages on engines, for when no records exist."""
    from hpclab.chapters.pingpong import analysis as pingpong

    settings = profiles.get("pingpong", profile)
    todo = [t for t in pingpong.tasks(profile, (impl,)) if t["nbytes"] <= 8]
    return on_engines(pingpong, todo, profile=profile, n=2, engines=engines,
                      timeout=timeout or settings["timeout"], progress=False,
                      describe=lambda t: f"{t['impl']} {t['nbytes']} B")


def correctness(df):
    """The correctness runs: one row per implementation, variant, payload and P."""
    df = records.table(df)
    c = df[df["metric"] == "correct"]
    return c[["impl", "variant", "nbytes", "nprocs", "oversubscribed", "value"]].rename(
        columns={"value": "correct"}).reset_index(drop=True)


# ----------------------------------------------------------------------------- the chapter

def _probe(sizes):
    from mpi4py import MPI

    from hpclab.chapters.ring import kernels as ring

    return ring.eager_limit(MPI.COMM_WORLD, sizes)


def eager_probe(engines, sizes=None, timeout=None):
    """The largest message size the plain send ring gets through on the engines, and the
    first it does not (None: all did); sizes 4 B .. 4 MiB by default."""
    sizes = sizes or [4 << k for k in range(0, 21)]
    return tuple(engines.run(_probe, sizes, timeout=timeout or profiles.timeout(NAME),
                             what="eager probe")[0])


# the time limit of a ring that deadlocks: a ring of 2 ranks ends in milliseconds when it does
# not, and mpiexec starts within a second or two
DEADLOCK_SECONDS = 5.0


def send_demo(last_ok, first_blocked, n, mpi_args=()):
    """The plain send ring run under a timeout just above and just below the eager limit:
    the words the chapter uses for what happened."""
    from hpclab.chapters.ring import kernels as ring

    if not first_blocked:
        return {"blocked_verdict": "was not tried: every size was buffered",
                "fine_verdict": "finished"}
    blocked = ring.demonstrate_deadlock(n=max(n, 2), variant="send", nbytes=first_blocked,
                                        timeout=DEADLOCK_SECONDS, mpi_args=mpi_args)
    fine = ring.demonstrate_deadlock(n=max(n, 2), variant="send", nbytes=last_ok,
                                     timeout=60, mpi_args=mpi_args)
    return {"blocked_verdict": "deadlocked and was stopped at its time limit"
            if blocked["deadlocked"] else "finished after all (the probe was cautious)",
            "fine_verdict": "finished" if not fine["deadlocked"] else "deadlocked nevertheless"}


def placement(meta, mpi_args=()):
    """One line: the binding asked for and the CPUs every rank ran on."""
    return ("binding: " + (" ".join(mpi_args) or "none") + " | "
            + "; ".join(f"rank {p['rank']}: CPUs {p['cpus']}" for p in meta["placement"]))


def ring_points(df, impl, nbytes=4):
    """Time per ring against P for each variant of one implementation (a summary for
    :func:`hpclab.plots.scaling`), and each variant's ``T = λ·P`` fit where the points
    determine λ (its 95% interval above zero): a line whose band reaches negative times is
    not drawn as if it were a fit."""
    s = summary(df)
    s = s[(s["impl"] == impl) & (s["nbytes"] == nbytes)]
    fitted = {}
    for variant in s["variant"].unique():
        try:
            f = fit(df, impl, variant, nbytes)
        except models.FitError:
            continue
        if f.ci95["lambda"][0] > 0:
            fitted[variant] = f
    return s, fitted


def lines_words(points, fitted):
    """What a figure of :func:`ring_points` draws, for its caption: the variants that got a
    line T = λ·P, and why the others have none."""
    variants = list(dict.fromkeys(points["variant"]))
    drawn = [v for v in variants if v in fitted]
    if not drawn:
        return ("No line is drawn: for no variant does the 95% interval of λ lie above zero "
                f"with these {points['nprocs'].nunique()} values of P.")
    rest = [v for v in variants if v not in fitted]
    words = (f"The line T = λ·P is drawn for {_listing(drawn)}, whose 95% interval of λ lies "
             "above zero")
    if rest:
        words += f"; for {_listing(rest)} it reaches zero, so no line is drawn"
    return words + "."


def _listing(names):
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def step_points(df, impl="c", nprocs=None):
    """Time per step against the payload at one P (default the largest) for every variant,
    summarised as :func:`hpclab.plots.scaling` draws it, and Hockney fitted to irecv's."""
    s = summary(df)
    nprocs = nprocs or int(s["nprocs"].max())
    at = s[(s["impl"] == impl) & (s["nprocs"] == nprocs)].copy()
    for c in ("median", "best", "worst"):
        at[c] = at[c] / at["nprocs"]
    return at, {"irecv": step_fit(df, impl, "irecv", nprocs)}


def lambda_table(fits_table):
    """λ per step in µs with its 95% interval, the points and degrees of freedom behind it."""
    t = fits_table.copy()
    for c in ("lambda", "lambda_low", "lambda_high"):
        t[c] = t[c] * 1e6
    t = t.rename(columns={"lambda": "λ [µs]", "lambda_low": "95% low [µs]",
                          "lambda_high": "95% high [µs]", "points": "P values",
                          "impl": "implementation"})
    t["implementation"] = t["implementation"].map(lambda i: {"c": "C", "cython": "Cython",
                                                             "python": "mpi4py"}.get(i, i))
    keep = [c for c in t.columns if c != "note" or t["note"].astype(bool).any()]
    return t[keep].set_index(["variant", "implementation"]).sort_index().round(3)


def pingpong_reference(profile=None, engines=None, impl="c"):
    """The PingPong latency the chapter compares λ with, from the PingPong run the other
    chapters take (:func:`hpclab.chapters.pingpong.analysis.measurement`, of ``profile``
    when one is given, as a lab gives its own; measured and saved now when there is none):
    (latency in s, where it came from). ``engines`` are the ring's own, which PingPong does
    not use (it starts its two)."""
    from hpclab.chapters.pingpong import analysis as pingpong

    pp, source = pingpong.measurement(profile)
    return pingpong_latency(pp, impl), source


def _orfeo_step_us(orfeo):
    """ORFEO's λ per step in µs (Table 1 gives seconds for ring_runs rings), indexed by
    placement and variant."""
    return (orfeo.assign(step=orfeo["lambda_s"] / orfeo["ring_runs"] * 1e6)
            .set_index(["placement", "variant"])["step"])


def orfeo_steps(orfeo):
    """ORFEO's λ (report 001, Table 1) per step in µs, by placement and variant."""
    t = _orfeo_step_us(orfeo).reset_index()
    t = t.pivot(index="placement", columns="variant", values="step").round(3)
    t.columns = [f"{c} [µs/step]" for c in t.columns]
    return t


def orfeo_model(orfeo, node, variants=("ssend_ordered", "irecv")):
    """T = λ·P with ORFEO's published λ, switching to the internode λ past one node:
    (P values, {label: time per ring in µs}, ranks per node)."""
    per_node = int(node["sockets_per_node"] * node["cores_per_socket"])
    lam = _orfeo_step_us(orfeo)
    p = np.arange(1, int(node["nodes_in_ring_study"]) * per_node + 1)
    lines = {f"{v} (T = λ·P, Table 1's λ)": np.where(p <= per_node, lam[("intranode", v)],
                                                    lam[("internode", v)]) * p for v in variants}
    return p, lines, per_node


VARIANT_WORDS = {"ssend_ordered": "the ordered synchronous ring", "irecv": "the irecv ring",
                 "isend": "the isend ring", "send": "the buffered send ring",
                 "sendrecv": "the sendrecv ring", "naive": "the naive ring"}
IMPL_WORDS = {"c": "C", "cython": "Cython", "python": "mpi4py"}


def ring_times(df, impl, variant, nprocs, nbytes=4):
    """Every repetition's time per ring (seconds) of one implementation and variant at one
    P and payload."""
    t = timings(df)
    return t[(t["impl"] == impl) & (t["variant"] == variant) & (t["nprocs"] == nprocs)
             & (t["nbytes"] == nbytes)]["value"].to_numpy(float)


def comparison(df, a, b, nprocs, nbytes=4):
    """Time per ring of ``a`` against ``b`` (each ``(impl, variant)``) at one P and payload,
    from the repeated measurements: the sentence :func:`hpclab.stats.said` allows, naming
    the rings in words."""
    from hpclab import stats as hstats

    def name(impl, variant):
        words = VARIANT_WORDS.get(variant, f"the {variant} ring")
        return words if a[0] == b[0] else f"{words} in {IMPL_WORDS.get(impl, impl)}"

    return hstats.said(ring_times(df, *a, nprocs, nbytes), ring_times(df, *b, nprocs, nbytes),
                       (name(*a), name(*b)), "time per ring")


def lambda_words(fits_table, impl, variant):
    """λ in µs per step with its interval, and what the interval allows."""
    row = fits_table.set_index(["impl", "variant"]).loc[(impl, variant)]
    if not np.isfinite(row["lambda"]):
        return f"no fitted λ ({row['note']})"
    from hpclab import stats as hstats

    return "λ = " + hstats.estimate_words(
        row["lambda"] * 1e6, row["lambda_low"] * 1e6, row["lambda_high"] * 1e6, "µs", "latency",
        points=f"{int(row['points'])} values of P", name="λ", value_unit="µs per step",
        domain=MODEL.domain("lambda"))


# the jumps report 001's ring shows, and what a machine needs to show them
CANNOT_SHOW = (("the jump at a socket boundary", {"sockets": 2}),
               ("the jump at a node boundary", {"nodes": 2}))


def numbers(df, fits_table, pp, orfeo, node):
    """Every number the chapter's text quotes, computed (name -> value)."""
    from hpclab import stats as hstats

    lam = fits_table.set_index(["impl", "variant"])["lambda"]
    s = summary(df)
    small = s[s["nbytes"] == 4]
    one = small[(small["impl"] == "c") & (small["nprocs"] == 1)].set_index("variant")["median"]
    pmax = int(s["nprocs"].max())
    at = s[(s["impl"] == "c") & (s["nprocs"] == pmax)]
    hockney = step_fit(df, "c", "irecv", pmax)
    table = records.table(df)
    sent = table[(table["metric"] == "send_buffered") & (table["nprocs"] == pmax)]
    missing = sorted(sent.loc[sent["value"] == 0, "nbytes"].unique())
    checks = correctness(df)
    pp_lat, pp_source = pp
    per_node = int(node["sockets_per_node"] * node["cores_per_socket"])
    ol = _orfeo_step_us(orfeo)
    nmax = int(at["nbytes"].max())
    cmp = {f"cmp_{v}": comparison(df, ("c", v), ("c", "irecv"), pmax)
           for v in ("ssend_ordered", "sendrecv", "send", "isend")}
    cmp["cmp_cython"] = comparison(df, ("cython", "irecv"), ("c", "irecv"), pmax)
    cmp["cmp_python"] = comparison(df, ("python", "irecv"), ("c", "irecv"), pmax)
    cmp["cmp_big"] = comparison(df, ("c", "ssend_ordered"), ("c", "irecv"), pmax, nmax)
    ratio = step_ratio_interval(df, pmax)
    o_ratio = ol[("intranode", "ssend_ordered")] / ol[("intranode", "irecv")]
    return {
        **cmp,
        "lam_irecv_words": lambda_words(fits_table, "c", "irecv"),
        "lam_ssend_words": lambda_words(fits_table, "c", "ssend_ordered"),
        "npoints": int(fits_table["points"].max()),
        "lam_irecv": lam[("c", "irecv")] * 1e6, "lam_ssend": lam[("c", "ssend_ordered")] * 1e6,
        "ssend_ratio_words": hstats.estimate_words(ratio[0], ratio[1], ratio[2], "",
                                                   "ratio of times", name="the ratio"),
        "ours_ratio_vs_orfeo_words": hstats.estimate_words(
            ratio[0] / o_ratio, ratio[1] / o_ratio, ratio[2] / o_ratio, "", "ratio",
            value_unit="times ORFEO's intranode ratio", name="the ratio"),
        "t_quantile": hstats.t_quantile(0.975, max(int(fits_table["points"].max()) - 1, 1)),
        "t_dof_words": machine.count_words(max(int(fits_table["points"].max()) - 1, 1),
                                      "degree of freedom", "degrees of freedom"),
        "ring2_us": float(small[(small["impl"] == "c") & (small["nprocs"] == min(2, pmax))
                                & (small["variant"] == "irecv")]["median"].iloc[0]) * 1e6,
        "p1_irecv": one["irecv"] * 1e6, "p1_share": one["irecv"] / lam[("c", "irecv")],
        "pmax": pmax, "h_lam": hockney["lambda"] * 1e6, "h_B": hockney["B"] / 1e9,
        "cannot_words": machine.cannot_show(
            df.meta.get("machine") if isinstance(df, records.Run) else None, CANNOT_SHOW),
        "h_lam_words": hockney.words("lambda", "latency", "µs", 1e6, name="λ"),
        "h_B_words": hockney.words("B", "bandwidth", "GB/s", 1e-9, name="B"),
        "big_kib": nmax / 1024,
        "send_skipped": (", ".join(f"{m:,}" for m in missing) + " bytes") if missing
        else "no size",
        "check_upto": int(checks["nprocs"].max()),
        "pp_lat": pp_lat * 1e6, "pp_source": pp_source,
        **_per_step_over(df, pmax, pp_lat, "pp"),
        "o_ratio_intra": o_ratio,
        "o_ratio_inter": ol[("internode", "ssend_ordered")] / ol[("internode", "irecv")],
        "o_node_jump": ol[("internode", "irecv")] / ol[("intranode", "irecv")],
        "per_node": per_node, "per_node_next": per_node + 1,
        "per_socket": int(node["cores_per_socket"]),
        "per_socket_next": int(node["cores_per_socket"]) + 1,
        "ours_vs_orfeo_words": _per_step_over(df, pmax, ol[("intranode", "irecv")] * 1e-6,
                                              "orfeo")["irecv_over_orfeo_words"],
    }


def step_ratio_interval(df, pmax):
    """(ratio, low, high): ordered synchronous over irecv, C, 4 B, at P = pmax, medians of the
    repetitions with the 95% interval of :func:`hpclab.stats.compare` (NaN when a
    variant has fewer than two)."""
    from hpclab import stats as hstats

    return hstats.ratio_or_nan(ring_times(df, "c", "ssend_ordered", pmax),
                               ring_times(df, "c", "irecv", pmax))


REFERENCE_WORDS = {"pp": "PingPong's latency", "orfeo": "ORFEO's intranode step"}
# a ring step sends and receives a message each way: it cannot take less than one PingPong
# message when both run alike, so a ratio below 1 says how they ran, not what a step costs
FLOORS = {"pp": (1.0, "ratio of a ring step to one message",
                  "a ring step moves at least one message, so a ratio below 1 says the "
                      "ring and PingPong ran differently (other cores, other binding, another "
                      "load), not that a step costs less than a message")}


def _per_step_over(df, pmax, reference, tag):
    """The time per step at P = pmax (C, 4 B) of the irecv and the ordered synchronous ring
    over a reference time taken as exact, in words with the 95% interval of the median of
    the repetitions: ``{variant}_over_{tag}_words``."""
    from hpclab import stats as hstats

    out = {}
    for variant, key in (("irecv", "irecv"), ("ssend_ordered", "ssend")):
        try:
            med, lo, hi = hstats.median_interval(ring_times(df, "c", variant, pmax) / pmax)
        except ValueError:
            med = lo = hi = np.nan
        floor, quantity, why = FLOORS.get(tag, (0.0, "ratio of times", None))
        out.update({f"{key}_over_{tag}_words": hstats.estimate_words(
                        med / reference, lo / reference, hi / reference, "", quantity,
                        value_unit=f"times {REFERENCE_WORDS.get(tag, tag)}",
                        name="the ratio", domain=hstats.Domain(floor, np.inf, floor == 0),
                        why=why)})
    return out


# ----------------------------------------------------------------------- simulated cluster

def simulated(platform="orfeo", variants=("ssend_ordered", "irecv"), ranks=None, profile=None):
    """The C ring on a simulated cluster (:mod:`hpclab.simulate`, SimGrid SMPI) for the
    given variants at the platform's socket and node boundaries: a records.Run, or None
    when SimGrid is not installed (:data:`hpclab.simulate.INSTALL_HINT` says how to get it)."""
    from hpclab import simulate
    from hpclab.chapters.ring import simulation

    if not simulate.available():
        return None
    return simulation.on_platform(platform, ranks=ranks, variants=variants, profile=profile,
                                  payloads=[4])


def simulated_steps(df):
    """Simulated time per ring step in µs (median ring time / P), by P and variant."""
    t = records.table(df)
    t = t[t["metric"] == METRIC]
    g = t.groupby(["nprocs", "variant"])["value"].median().reset_index()
    g["step"] = g["value"] / g["nprocs"] * 1e6
    out = g.pivot(index="nprocs", columns="variant", values="step")
    out.columns.name = None
    return out


def simulated_regions(steps, spec):
    """Median step time per region of P (one socket, two sockets, two nodes) and variant."""
    per_socket, per_node = spec["cores_per_socket"], spec["cores_per_socket"] * \
        spec["sockets_per_node"]
    region = np.where(steps.index <= per_socket, "one socket",
                      np.where(steps.index <= per_node, "one node", "two nodes"))
    keep = steps.index >= 2  # a ring of one talks to itself
    return steps[keep].groupby(region[keep], sort=False).median()


def simulated_words(steps, spec, orfeo):
    """What the simulation shows, in sentences computed from it and report 001's Table 1."""
    r = simulated_regions(steps, spec)
    ol = _orfeo_step_us(orfeo)
    lat = {k: spec[k]["latency_us"] for k in ("intrasocket", "intersocket", "internode")}
    nb = r["irecv"]
    sim_jump = nb["two nodes"] / nb["one node"]
    pub_jump = ol[("internode", "irecv")] / ol[("intranode", "irecv")]

    def ordered(where):
        return ol[(where, "ssend_ordered")] / ol[(where, "irecv")]

    lines = [
        f"Simulated non-blocking (irecv) step: {nb['one socket']:.2f} µs within one socket, "
        f"{nb['one node']:.2f} µs across two sockets, {nb['two nodes']:.2f} µs across two "
        f"nodes; the platform's link latencies are {lat['intrasocket']:.2f}, "
        f"{lat['intersocket']:.2f} and {lat['internode']:.2f} µs.",
        _step_sentence(nb, lat, spec),
        f"Simulated jump at the node boundary: {sim_jump:.2f}x; report 001 measured "
        f"{pub_jump:.2f}x (Table 1, intranode to internode).",
        f"Simulated intranode step {nb['one node']:.2f} µs against report 001's "
        f"{ol[('intranode', 'irecv')]:.2f} µs: {ol[('intranode', 'irecv')] - nb['one node']:.2f} "
        "µs per step that a model of link latencies alone does not contain (the software "
        "cost of posting and completing four messages, for one).",
    ]
    ss = r["ssend_ordered"] / r["irecv"]
    lines.append("Ordered synchronous over non-blocking, simulated: "
                 + ", ".join(f"{v:.2f}x ({k})" for k, v in ss.items())
                 + f"; report 001: {ordered('intranode'):.2f}x "
                 f"intranode, {ordered('internode'):.2f}x internode.")
    return "\n".join(lines)


def _step_sentence(nb, lat, spec):
    """Whether each simulated step costs one latency of its slowest link, computed."""
    pairs = [("one socket", "intrasocket"), ("one node", "intersocket"),
             ("two nodes", "internode")]
    ratios = {region: nb[region] / lat[link] for region, link in pairs}
    where = (f"P = {spec['cores_per_socket'] + 1} and "
             f"P = {spec['cores_per_socket'] * spec['sockets_per_node'] + 1}")
    if all(abs(r - 1) < 0.2 for r in ratios.values()):
        return ("Each simulated step costs one latency of the slowest link the ring uses "
                f"(within 20%: {min(ratios.values()):.2f} to {max(ratios.values()):.2f} "
                f"latencies), so the step time jumps where the ring first crosses a socket and "
                f"a node ({where}).")
    return ("The simulated step is not one latency of its slowest link: "
            + ", ".join(f"{v:.2f} latencies ({k})" for k, v in ratios.items()) + ".")


@_styled
def diagram(P=6, ax=None):
    """A ring of P ranks with the two messages of one step (a picture, no data)."""
    import matplotlib.pyplot as plt

    ax = _ax(ax, 4.2)
    angle = np.pi / 2 - 2 * np.pi * np.arange(P) / P
    x, y = np.cos(angle), np.sin(angle)
    right, left = PALETTE[0], PALETTE[3]
    for r in range(P):
        s = (r + 1) % P
        ax.annotate("", xy=(x[s] * 0.8, y[s] * 0.8), xytext=(x[r] * 0.8, y[r] * 0.8),
                    arrowprops=dict(arrowstyle="->", color=right,
                                    connectionstyle="arc3,rad=-0.25"))
        ax.annotate("", xy=(x[r] * 1.12, y[r] * 1.12), xytext=(x[s] * 1.12, y[s] * 1.12),
                    arrowprops=dict(arrowstyle="->", color=left, ls="--",
                                    connectionstyle="arc3,rad=0.25"))
        ax.add_patch(plt.Circle((x[r], y[r]), 0.16, color="0.92", ec="0.3"))
        ax.text(x[r], y[r], str(r), ha="center", va="center", fontsize=12)
    ax.text(0, 0.08, "to the right (solid): −r, +rank", ha="center", color=right, fontsize=MIN_PT)
    ax.text(0, -0.1, "to the left (dashed): +r, −rank", ha="center", color=left, fontsize=MIN_PT)
    ax.set_xlim(-1.45, 1.45)
    ax.set_ylim(-1.45, 1.45)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(f"a ring of {P} ranks: every step, every rank sends two messages")
    return ax
