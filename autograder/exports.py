"""The grade files and the gradebook's roster and due dates: ``grades.csv`` (a row per
student and lab, with the grader's status), ``grades-lms.csv`` (a row per student, for a
learning-management system), ``roster`` and ``duedate`` (nbgrader's database commands).
Nothing here runs a submission.

Part of the grader (grade.py).
"""
from __future__ import annotations

import csv
from pathlib import Path

from course import backup_gradebook, load_status, log_errors

EXPORT_COLUMNS = ["assignment", "student_id", "last_name", "first_name", "email", "timestamp",
                  "duedate", "seconds_late", "raw_score", "late_penalty", "score", "max_score",
                  "status", "reason"]


def rows(course):
    """One row per roster student and lab: the gradebook's scores with this grader's status."""
    from nbgrader.api import Gradebook, MissingEntry

    status = load_status(course)
    out = []
    if not course.gradebook.exists():
        return out
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        for assignment in gb.assignments:
            known = {student.id: student for student in gb.students}
            # a submission refused before nbgrader saw it has no student in the gradebook
            ids = sorted(set(known) | set(status.get(assignment.name, {})))
            for sid in ids:
                student = known.get(sid)
                row = {"assignment": assignment.name, "student_id": sid,
                       "last_name": getattr(student, "last_name", "") or "",
                       "first_name": getattr(student, "first_name", "") or "",
                       "email": getattr(student, "email", "") or "",
                       "duedate": assignment.duedate or "", "max_score": assignment.max_score}
                entry = status.get(assignment.name, {}).get(sid, {})
                try:
                    if student is None:
                        raise MissingEntry()
                    sub = gb.find_submission(assignment.name, sid)
                except MissingEntry:
                    row.update(timestamp="", seconds_late=0, raw_score=0, late_penalty=0,
                               score=0, status=entry.get("status", "missing"),
                               reason=entry.get("reason", "no submission"))
                    out.append(row)
                    continue
                if entry.get("status") == "ungradable":  # the gradebook's score is of an
                    row.update(timestamp="", seconds_late=0, raw_score=0, late_penalty=0,  # older
                               score=0, status="ungradable", reason=entry.get("reason", ""))
                    out.append(row)  # submission than the one handed in last
                    continue
                flags = [entry.get("status", "graded")]
                if sub.needs_manual_grade and flags[0] != "ungradable":
                    flags.append("manual grading pending")
                if (sub.total_seconds_late or 0) > 0:
                    flags.append("late")
                penalty = sub.late_submission_penalty or 0
                # as nbgrader's own export: the gradebook's score is before the penalty
                row.update(timestamp=sub.timestamp or "",
                           seconds_late=round(sub.total_seconds_late or 0),
                           raw_score=round(sub.score, 3), late_penalty=round(penalty, 3),
                           score=round(max(0.0, sub.score - penalty), 3), status=", ".join(flags),
                           reason=entry.get("reason", ""))
                out.append(row)
    return out


def export(course):
    """grades.csv (a row per student and lab, with status) and grades-lms.csv (a row per
    student, a column per lab: the layout gradebook imports of learning-management systems
    take, matched by email or ID)."""
    data = rows(course)
    workdir = Path(course.workdir)
    with open(workdir / "grades.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, EXPORT_COLUMNS)
        w.writeheader()
        w.writerows(data)
    labs = sorted({r["assignment"] for r in data})
    maxima = {r["assignment"]: r["max_score"] for r in data}
    students = {}
    for r in data:
        s = students.setdefault(r["student_id"], {
            "Student": (", ".join(x for x in (r["last_name"], r["first_name"]) if x)
                        or r["student_id"]),
            "ID": r["student_id"], "Email": r["email"]})
        s[f"{r['assignment']} ({maxima[r['assignment']]:g} points)"] = r["score"]
    with open(workdir / "grades-lms.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, ["Student", "ID", "Email"] +
                           [f"{lab} ({maxima[lab]:g} points)" for lab in labs])
        w.writeheader()
        w.writerows(students.values())
    counts = {}
    for r in data:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    print(f"grades: {workdir / 'grades.csv'} ({summary})"
          f"\nfor a learning-management system: {workdir / 'grades-lms.csv'}"
          f"\nfeedback: {workdir / 'feedback'}/")


def roster(course, path):
    """Import students (CSV with id, first_name, last_name, email) into the gradebook."""
    backup_gradebook(course)
    r = course.nbgrader("db", "student", "import", str(Path(path).resolve()), check=False)
    if r.returncode != 0:
        raise SystemExit(f"could not import {path}: {log_errors(r.stdout)}\n"
                         "The file is a CSV with a header: id,first_name,last_name,email")
    print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"imported {path}")


def duedate(course, name, when):
    backup_gradebook(course)
    r = course.nbgrader("db", "assignment", "add", name, f"--duedate={when}", check=False)
    if r.returncode != 0:
        raise SystemExit(f"could not set the due date: {log_errors(r.stdout)}")
    print(f"{name} is due {when}")


