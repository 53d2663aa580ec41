"""The class report: one HTML page an instructor reads after grading.

    python autograder/grade.py report      (make report)

* Per lab: how many submissions and with which status, and the distribution of scores.
* Per exercise: the mean score, and the checks the class failed most.
* The class's machines side by side: the quantities the chapters declare for the report
  (their declaration's ``report``: PingPong's latency and bandwidth, STREAM's triad), each
  student's as their own notebook computed it (the variables a lab names in its notebook
  metadata ``hpclab.report``), beside the published clusters the chapters give
  (``report_references()`` of their analysis). These numbers come out of the students' runs
  and are shown, never graded.

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


def quantities():
    """{quantity: (chapter, ReportQuantity)} of every chapter that reports to the class
    report (its declaration's ``report``), in the book's order."""
    from hpclab.kernels import registry

    return {q: (slug, rq) for slug in registry.chapter_order()
            for q, rq in registry.get(slug).report.items()}


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

    known = quantities()
    status, out = load_status(course), {}
    for lab, entries in status.items():
        meaning = report_meaning(sources, lab)
        for student, entry in entries.items():
            for name, value in (entry.get("values") or {}).items():
                if name in meaning and meaning[name]["quantity"] in known:
                    q = meaning[name]["quantity"]
                    scale = meaning[name].get("to_unit", 1.0) * known[q][1].to_unit
                    out.setdefault(student, {})[q] = value * scale
    return out


def reference_machines():
    """Published clusters, from the chapters that report (their analysis's
    ``report_references()``): {label: {quantity: value in the unit shown}}, one entry per
    cluster whichever chapters give its numbers."""
    from importlib import import_module

    out = {}
    for slug in dict.fromkeys(slug for slug, _ in quantities().values()):
        analysis = import_module(f"hpclab.chapters.{slug}.analysis")
        for label, numbers in getattr(analysis, "report_references", list)():
            out.setdefault(label, {}).update(numbers)
    return out


def _figure(slug, names, values, refs):
    """One chapter's quantities: the students (grey) beside the clusters, a scatter of the
    first two quantities when it reports two or more, else a bar per machine."""
    known = quantities()
    shown = {q: known[q][1] for q in names}
    if len(names) >= 2:
        x, y = names[:2]
        fig, a = plt.subplots(figsize=(6.5, 4.2), label=f"{shown[x].label} and "
                              f"{shown[y].label} of the class's machines and of the "
                              "reference clusters")
        pts = [(s, v[x], v[y]) for s, v in values.items() if x in v and y in v]
        if pts:
            a.scatter([p[1] for p in pts], [p[2] for p in pts], marker="o", color="0.3",
                      label="students")
            for s, px, py in pts:
                a.annotate(s, (px, py), fontsize=8, xytext=(3, 3), textcoords="offset points")
        drawn = [(label, v) for label, v in refs.items() if x in v and y in v]
        for (label, v), m in zip(drawn, "s^Dv<>ph"):
            a.scatter([v[x]], [v[y]], marker=m, s=70, label=label)
        a.set(xscale="log" if shown[x].log else "linear",
              yscale="log" if shown[y].log else "linear",
              xlabel=shown[x].label, ylabel=shown[y].label, title=registry_title(slug))
        if not shown[y].log:
            a.set_ylim(0, None)
        a.legend(fontsize=8)
        return _png(fig)
    q = names[0]
    students = sorted(s for s, v in values.items() if q in v)
    clusters = [label for label, v in refs.items() if v.get(q) is not None]
    if not students:
        return ""
    labels = students + clusters
    heights = [values[s][q] for s in students] + [refs[c][q] for c in clusters]
    fig, b = plt.subplots(figsize=(6.5, 0.45 * len(labels) + 1.2),
                          label=f"{shown[q].label} of the class's machines and of the "
                          "reference nodes")
    b.barh(range(len(labels)), heights,
           color=["0.5"] * len(students) + ["tab:blue"] * len(clusters))
    b.set_yticks(range(len(labels)), labels, fontsize=8)
    b.set(xscale="log" if shown[q].log else "linear", xlabel=shown[q].label,
          title=f"{registry_title(slug)} (grey: students)")
    return _png(fig)


def registry_title(slug):
    from hpclab.kernels import registry

    return registry.get(slug).title


def _machines_figures(values, refs):
    """A figure per reporting chapter (:func:`_figure`)."""
    chapters = {}
    for q, (slug, _) in quantities().items():
        chapters.setdefault(slug, []).append(q)
    return [f for slug, names in chapters.items() if (f := _figure(slug, names, values, refs))]


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
    known = quantities()
    labels = {q: rq.label for q, (_, rq) in known.items()}
    if values:
        table = pd.DataFrame(values).T.reindex(columns=[q for q in known
                                                        if any(q in v for v in values.values())])
        refs = reference_machines()
        parts += _machines_figures(values, refs)
        parts.append(table.rename(columns=labels).round(3).to_html(na_rep="—"))
        parts.append("<h3>Reference clusters</h3>")
        parts.append(pd.DataFrame.from_dict(refs, orient="index").reindex(columns=list(known))
                     .rename(columns=labels).rename_axis("machine").reset_index()
                     .round(3).to_html(index=False, na_rep="—"))
    else:
        titles = sorted({registry_title(slug) for slug, _ in known.values()})
        parts.append("<p>No student numbers yet (they come from graded submissions of "
                     f"{' and '.join(titles)}).</p>")
    path = Path(course.workdir) / "class-report.html"
    path.write_text("<!DOCTYPE html><html><head><meta charset='utf-8'><meta name='viewport' "
                    "content='width=device-width'><title>Class report</title><style>"
                    "body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
                    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
                    "img{max-width:100%}</style></head><body>" + "\n".join(parts) +
                    "</body></html>")
    return path
