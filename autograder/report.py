"""The class report: one HTML page an instructor reads after grading.

    python autograder/grade.py report      (make report)

* Per lab: how many submissions and with which status, and the distribution of scores.
* Per exercise: the mean score, and the checks the class failed most.
* The class's machines side by side: each student's ping-pong latency and bandwidth and
  STREAM triad bandwidth, as their own notebooks computed them (the variables a lab names in
  its notebook metadata ``hpclab.report``), beside the published clusters of the reference
  datasets. These numbers come out of the students' runs and are shown, never graded.

Everything is read from the gradebook and status.json: nothing is run again.
"""
from __future__ import annotations

import base64
import html
import io
from collections import Counter
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

# what the lab's variables mean in the report: metadata hpclab.report maps a variable to a
# (quantity, factor to the unit shown)
QUANTITIES = {"latency": ("ping-pong latency λ [µs]", 1e6),
              "bandwidth": ("ping-pong bandwidth B [GB/s]", 1e-9),
              "triad": ("STREAM triad, all threads [GB/s]", 1.0)}


def _png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return (f'<img alt="{html.escape(fig.get_label() or "figure")}" '
            f'src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">')


def grade_rows(course):
    """One row per submitted notebook and graded cell: lab, student, cell, kind, score, max."""
    from nbgrader.api import Gradebook

    out = []
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        for assignment in gb.assignments:
            for sub in gb.assignment_submissions(assignment.name):
                for nb in sub.notebooks:
                    for g in nb.grades:
                        out.append({"lab": assignment.name, "student": sub.student.id,
                                    "cell": g.name, "kind": g.cell_type, "auto": g.auto_score
                                    is not None, "score": g.score, "max": g.max_score})
    return pd.DataFrame(out, columns=["lab", "student", "cell", "kind", "auto", "score", "max"])


def machine_values(course, sources):
    """Each student's reported numbers: {student: {quantity: value in the unit shown}}."""
    from grade import load_status, report_meaning

    status, out = load_status(course), {}
    for lab, entries in status.items():
        meaning = report_meaning(sources, lab)
        for student, entry in entries.items():
            for name, value in (entry.get("values") or {}).items():
                if name in meaning and meaning[name]["quantity"] in QUANTITIES:
                    q = meaning[name]["quantity"]
                    scale = meaning[name].get("to_unit", 1.0) * QUANTITIES[q][1]
                    out.setdefault(student, {})[q] = value * scale
    return out


def reference_machines():
    """Published clusters: (label, latency µs, bandwidth GB/s, triad GB/s or None)."""
    from hpclab import models, reference

    rows = []
    ul = reference.load("ulysses_imb_pingpong")
    two = models.fit_two_segment(ul["nbytes"].to_numpy(float), ul["time_us"].to_numpy(float) * 1e-6)
    st = reference.load("ulysses_stream").set_index(["op", "threads"])["best_rate_MBps"]
    rows.append(("Ulysses (report 004)", two.left["lambda"] * 1e6, two.right["B"] / 1e9,
                 st[("triad", 20)] / 1e3))
    orfeo = reference.load("orfeo_pingpong")
    lat = orfeo[(orfeo["quantity"] == "latency") & (orfeo["placement"] == "internode")
                & orfeo["transport"].str.startswith("UCX")]["value"].iloc[0]
    bw = orfeo[orfeo["quantity"] == "asymptotic_bandwidth"]["value"].iloc[0]
    rows.append(("ORFEO, two nodes (report 001)", lat, bw / 1e3, None))
    hh = reference.load("hamburg_hpcc_stream")
    triad = hh[hh["op"].str.lower() == "triad"]
    if len(triad):
        t = triad.iloc[0]
        rows.append((f"Hamburg SCC node: {int(t['cores_per_node'])} ranks x StarSTREAM "
                     "(report 002)", None, None,
                     float(t["star_GBps"]) * int(t["cores_per_node"])))
    return rows


def _machines_figures(values, refs):
    fig, a = plt.subplots(figsize=(6.5, 4.2), label="ping-pong latency and bandwidth of the "
                          "class's machines and of the reference clusters")
    pts = [(s, v["latency"], v["bandwidth"]) for s, v in values.items()
           if "latency" in v and "bandwidth" in v]
    if pts:
        a.scatter([p[1] for p in pts], [p[2] for p in pts], marker="o", color="0.3",
                  label="students")
        for s, x, y in pts:
            a.annotate(s, (x, y), fontsize=8, xytext=(3, 3), textcoords="offset points")
    for (label, lat, bw, _), m in zip(refs, "s^Dv"):
        if lat is not None and bw is not None:
            a.scatter([lat], [bw], marker=m, s=70, label=label)
    a.set(xscale="log", xlabel=QUANTITIES["latency"][0], ylabel=QUANTITIES["bandwidth"][0],
          title="Ping-pong: latency and bandwidth", ylim=(0, None))
    a.legend(fontsize=8)
    out = [_png(fig)]
    names = sorted(s for s, v in values.items() if "triad" in v)
    labels = names + [r[0] for r in refs if r[3] is not None]
    if names:
        heights = [values[s]["triad"] for s in names] + [r[3] for r in refs if r[3] is not None]
        fig, b = plt.subplots(figsize=(6.5, 0.45 * len(labels) + 1.2),
                              label="STREAM triad of the class's machines and of the "
                              "reference nodes")
        b.barh(range(len(labels)), heights, color=["0.5"] * len(names) +
               ["tab:blue"] * (len(labels) - len(names)))
        b.set_yticks(range(len(labels)), labels, fontsize=8)
        b.set(xlabel=QUANTITIES["triad"][0], title="STREAM triad (grey: students)")
        out.append(_png(fig))
    return out


def build(course, sources=None):
    """Write class-report.html in the course's workdir; returns its path."""
    from grade import rows as export_rows

    sources = Path(sources or course.source_dir)
    grades = grade_rows(course)
    exported = pd.DataFrame(export_rows(course))
    parts = ["<h1>Class report</h1>",
             "<p>From the gradebook and the grader's status file; nothing was run again. "
             "Students' machine numbers come from their own notebooks and are not graded.</p>"]
    if exported.empty:
        parts.append("<p>No submissions have been graded yet.</p>")
    else:
        parts.append("<h2>Submissions by status</h2>")
        counts = exported.groupby(["assignment", "status"]).size().unstack(fill_value=0)
        parts.append(counts.rename_axis(index="lab", columns=None).reset_index()
                     .to_html(index=False))
        fig, axes = plt.subplots(1, len(counts.index), figsize=(3 * len(counts.index), 2.6),
                                 squeeze=False, label="score distribution per lab")
        for ax, (lab, g) in zip(axes[0], exported.groupby("assignment")):
            top = float(g["max_score"].iloc[0]) or 1.0
            ax.hist(g["score"].astype(float), bins=np.linspace(0, top, 11), color="0.4")
            ax.set(title=lab, xlabel=f"score of {top:g}", ylabel="students")
        parts += ["<h2>Scores per lab</h2>", _png(fig)]
    if not grades.empty:
        per = (grades.groupby(["lab", "cell"])
               .agg(max=("max", "first"), mean=("score", "mean"),
                    full_marks=("score", lambda s: int((s >= grades.loc[s.index, "max"]).sum())),
                    submissions=("score", "size"), autograded=("auto", "first"))
               .reset_index())
        per["mean"] = per["mean"].round(2)
        per["autograded"] = per["autograded"].map({True: "autograder", False: "by hand"})
        per = per.rename(columns={"cell": "exercise", "max": "points", "mean": "mean score",
                                  "full_marks": "full marks", "autograded": "graded by"})
        parts += ["<h2>Per exercise</h2>", per.to_html(index=False)]
        tests = grades[grades["auto"] & (grades["kind"] == "code")]
        failed = Counter((r.lab, r.cell) for r in tests.itertuples() if r.score < r.max)
        if failed:
            parts.append("<h2>Checks failed most</h2><ol>")
            parts += [f"<li>{html.escape(lab)} / {html.escape(cell)}: {n} of "
                      f"{int(((tests['lab'] == lab) & (tests['cell'] == cell)).sum())}</li>"
                      for (lab, cell), n in failed.most_common(10)]
            parts.append("</ol>")
    values = machine_values(course, sources)
    parts.append("<h2>The class's machines beside the reference clusters</h2>")
    if values:
        table = pd.DataFrame(values).T.rename(columns={k: v[0] for k, v in QUANTITIES.items()})
        refs = reference_machines()
        parts += _machines_figures(values, refs)
        parts.append(table.round(3).to_html(na_rep="—"))
        parts.append("<h3>Reference clusters</h3>")
        parts.append(pd.DataFrame(refs, columns=["machine"] + [q[0] for q in QUANTITIES.values()])
                     .round(3).to_html(index=False, na_rep="—"))
    else:
        parts.append("<p>No student numbers yet (they come from graded ping-pong and STREAM "
                     "submissions).</p>")
    path = Path(course.workdir) / "class-report.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='viewport' "
                    "content='width=device-width'><title>Class report</title><style>"
                    "body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
                    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
                    "img{max-width:100%}</style></head><body>" + "\n".join(parts) +
                    "</body></html>")
    return path
