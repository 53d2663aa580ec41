"""Release labs and grade submissions with nbgrader, without JupyterHub.

    python autograder/grade.py release [LAB...]         # solutions/ -> labs/
    python autograder/grade.py grade [LAB...] [--student S]... [--force]
                                                        # new or changed submissions only
    python autograder/grade.py export                   # grades.csv, grades-lms.csv
    python autograder/grade.py roster students.csv      # names and emails (id,first_name,
                                                        # last_name,email)
    python autograder/grade.py duedate LAB "2026-12-01 17:00:00 Europe/Rome"
    python autograder/grade.py report                   # class-report.html

Submissions are read from ``<workdir>/submitted/<student>/<lab>/`` (workdir: autograder/
unless --workdir). Each one is executed in a sandbox (sandbox.py: no view of the course,
the gradebook or other submissions, no network, limits on memory, processes, CPU, output
and wall time); the gradebook is written only by this process, after the run, and copied
to ``<workdir>/backups/`` before every grading run. What happened to each submission
(graded, failed, timed out, ungradable; manual grading pending and late come from the
gradebook) is kept in ``<workdir>/status.json`` and exported beside its score.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import html
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
GRADING_PROFILE = "quick"
# a lab makes a handful of measured MPI calls, each bounded by the profile's timeout
BUDGET_PER_PROFILE_TIMEOUT = 5
NBGRADER_TIMEOUT = 300  # seconds for an nbgrader step that runs no student code
BACKUPS_KEPT = 20
STATUSES = ("graded", "failed", "timed out", "ungradable", "missing")


def assignments(source=None):
    source = Path(source) if source else ROOT / "solutions"
    return sorted(p.name for p in source.iterdir() if p.is_dir() and list(p.glob("*.ipynb")))


def submission_budget(name):
    """Seconds one submission of lab ``name`` may take under the grading profile."""
    from hpclab import profiles

    try:
        return BUDGET_PER_PROFILE_TIMEOUT * profiles.timeout(name, GRADING_PROFILE)
    except (KeyError, ValueError):
        return BUDGET_PER_PROFILE_TIMEOUT * 60


@dataclass
class Course:
    """Where nbgrader keeps submissions, results and the gradebook for one grading run
    (default: autograder/; a workdir moves all of them; a source replaces solutions/)."""

    workdir: Path = HERE
    args: list = field(default_factory=list)
    source: Path | None = None

    @classmethod
    def at(cls, workdir, source=None):
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        args = [f"--CourseDirectory.submitted_directory={workdir / 'submitted'}",
                f"--CourseDirectory.autograded_directory={workdir / 'autograded'}",
                f"--CourseDirectory.feedback_directory={workdir / 'feedback'}",
                f"--CourseDirectory.db_url=sqlite:///{workdir / 'gradebook.db'}"]
        if source:
            source = Path(source).resolve()
            args += [f"--CourseDirectory.root={source.parent}",
                     f"--CourseDirectory.source_directory={source.name}"]
        return cls(workdir, args, source)

    @property
    def gradebook(self):
        return Path(self.workdir) / "gradebook.db"

    @property
    def source_dir(self):
        return self.source or ROOT / "solutions"

    def nbgrader(self, *args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
        """nbgrader with this course's options; an option in ``args`` replaces the course's."""
        given = {a.split("=", 1)[0] for a in args if a.startswith("--") and "=" in a}
        mine = [a for a in self.args if a.split("=", 1)[0] not in given]
        return nbgrader(*args, *mine, timeout=timeout, env=env, check=check)


def nbgrader(*args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
    """Run one nbgrader command from the autograder folder in its own process group."""
    cmd = [str(BIN / "nbgrader"), *args]
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader calls alembic
    proc = subprocess.Popen(cmd, cwd=HERE, env={**os.environ, "PATH": path, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return subprocess.CompletedProcess(cmd, -9, (out or "") + f"\n[stopped after {timeout} s]")
    finally:
        try:  # anything the run left in its group
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    result = subprocess.CompletedProcess(cmd, proc.returncode, out)
    if check and proc.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{out}")
    return result


def release(names, course=None):
    course = course or Course()
    for name in names:
        course.nbgrader("generate_assignment", name, "--force")
        print(f"released {name}")


# ---------------------------------------------------------------- status and backups

def _status_path(course):
    return Path(course.workdir) / "status.json"


def load_status(course):
    try:
        return json.loads(_status_path(course).read_text())
    except (OSError, ValueError):
        return {}


def save_status(course, status):
    path = _status_path(course)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status, indent=1, sort_keys=True))
    os.replace(tmp, path)


def backup_gradebook(course):
    """Copy the gradebook (sqlite's online backup: consistent) to backups/; keep the last
    BACKUPS_KEPT. Returns the copy's path or None when there is no gradebook yet."""
    db = course.gradebook
    if not db.exists():
        return None
    folder = Path(course.workdir) / "backups"
    folder.mkdir(exist_ok=True)
    dest = folder / f"gradebook-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.db"
    with sqlite3.connect(db) as src, sqlite3.connect(dest) as out:
        src.backup(out)
    for old in sorted(folder.glob("gradebook-*.db"))[:-BACKUPS_KEPT]:
        old.unlink()
    return dest


def fingerprint(folder):
    """sha256 of a submission folder: names, contents and link targets."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).rglob("*")):
        h.update(str(p.relative_to(folder)).encode() + b"\0")
        if p.is_symlink():
            h.update(b"link:" + os.readlink(p).encode())
        elif p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------- grading

def _errors(log):
    """The gist of a failed nbgrader step: its last exception line, else its ERROR lines."""
    import re

    raised = re.findall(r"\b[\w.]*(?:Error|Exception): [^\n]*", log)
    if raised:  # without the module path: NotJSONError: ...
        return re.sub(r"^(?:\w+\.)+", "", raised[-1].strip())[:300]
    lines = [line.split("]", 1)[-1].strip() for line in log.splitlines() if "| ERROR]" in line]
    return "; ".join(dict.fromkeys(x for x in lines if x))[:300] or log.strip()[-300:]


def hidden_lines(source_nb):
    """Lines of the hidden tests of a source notebook that the visible text does not hold."""
    import nbformat

    sys.path.insert(0, str(HERE))
    from feedback import strip_hidden

    visible, hidden = set(), set()
    for cell in nbformat.read(source_nb, as_version=4).cells:
        shown, _ = strip_hidden(cell.source)
        visible |= {x.strip() for x in shown.splitlines()}
        if "BEGIN HIDDEN TESTS" in cell.source:
            block = cell.source.split("BEGIN HIDDEN TESTS", 1)[1].split("END HIDDEN TESTS")[0]
            hidden |= {x.strip() for x in block.splitlines()[1:]}
    return sorted(x for x in hidden - visible if len(x) >= 12)


def redact_feedback(feedback_dir, lines):
    """Remove any hidden-test line a submission managed to print into its feedback."""
    found = 0
    for page in Path(feedback_dir).rglob("*.html"):
        text = page.read_text(errors="replace")
        new = text
        for line in lines:
            for form in {line, html.escape(line), html.escape(line, quote=False)}:
                if form in new:
                    new = new.replace(form, "[hidden test]")
                    found += 1
        if new != text:
            page.write_text(new)
    return found


def grade(names, timeout=None, course=None, students=None, force=False):
    """Autograde the new or changed submissions of the labs ``names`` (all of them with
    ``force``; only ``students`` when given), write feedback, then export.

    The submissions of one lab that need grading run in one nbgrader process (each in its
    own sandbox): nbgrader's start-up is paid once per lab, not per student. Returns 1 when
    any submission could not be graded or its feedback not written (each is listed), else 0.
    """
    course = course or Course()
    workdir = Path(course.workdir)
    submitted = workdir / "submitted"
    if not submitted.is_dir():
        raise SystemExit(f"no submissions: copy each student's notebooks to "
                         f"{submitted}/<student>/<assignment>/ first")
    import sandbox

    sandbox.install_bwrap()
    mode, why = sandbox.isolation()
    print(f"sandbox: {mode}" + (f" ({why})" if why else ""))
    saved = backup_gradebook(course)
    if saved:
        print(f"gradebook backed up to {saved}")
    status = load_status(course)
    failures = []
    plans = {}
    for name in names:
        found = sorted(p.parent.name for p in submitted.glob(f"*/{name}") if p.is_dir())
        if students:
            missing = sorted(set(students) - set(found))
            if missing:
                print(f"{name}: no submission from {', '.join(missing)}")
            found = [s for s in found if s in students]
        todo = {}
        for student in found:
            digest = fingerprint(submitted / student / name)
            entry = status.setdefault(name, {}).get(student, {})
            if not force and entry.get("fingerprint") == digest and entry.get("status") in STATUSES:
                print(f"{student}/{name}: unchanged since it was {entry['status']} "
                      "(--force grades again)")
            else:
                todo[student] = digest
        if todo:
            plans[name] = todo
    if plans:
        # record the assignments in the gradebook without touching labs/: one nbgrader run
        # ("*") when every lab of the source folder is graded, else one per lab, so that a
        # lab nobody was graded on yet stays out of the gradebook and the exports
        every = {p.name for p in course.source_dir.iterdir() if list(p.glob("*.ipynb"))}
        with tempfile.TemporaryDirectory() as tmp:
            for which in (["*"] if len(plans) > 1 and set(plans) == every else plans):
                course.nbgrader("generate_assignment", which, "--force",
                                f"--CourseDirectory.release_directory={tmp}")
    for name, todo in plans.items():
        budget = timeout or submission_budget(name)
        secret = hidden_lines(next((course.source_dir / name).glob("*.ipynb")))
        _grade_lab(course, name, todo, budget, secret, status, failures)
        save_status(course, status)
    export(course)
    for student, name, what, log in failures:
        print(f"\n--- {student}/{name} {what}:\n{log}")
    return 1 if failures else 0


def report_meaning(source_dir, name):
    """What the lab's variables mean in the class report: its notebook metadata
    hpclab.report, {variable: {"quantity": ...}} ({} without one)."""
    import nbformat

    nb = next(iter(sorted((Path(source_dir) / name).glob("*.ipynb"))), None)
    if nb is None:
        return {}
    return nbformat.read(nb, as_version=4).metadata.get("hpclab", {}).get("report", {})


def _by_student(log):
    """nbgrader's log cut into one piece per student (it announces each one)."""
    import re

    pieces, current = {}, None
    for line in log.splitlines():
        m = re.search(r"(?:Creating/updating student with ID|for student) '([^']+)'", line)
        if m and "Creating/updating" in line:
            current = m.group(1)
        if current:
            pieces.setdefault(current, []).append(line)
    return {k: "\n".join(v) for k, v in pieces.items()}


def _grade_lab(course, name, todo, budget, secret, status, failures):
    """Autograde the submissions ``todo`` ({student: fingerprint}) of lab ``name`` in one
    nbgrader run over a staged copy of them, then their feedback; updates ``status``."""
    workdir = Path(course.workdir)
    with tempfile.TemporaryDirectory() as tmp:
        stage, reports = Path(tmp) / "submitted", Path(tmp) / "reports"
        reports.mkdir()
        for student in todo:
            shutil.copytree(workdir / "submitted" / student / name, stage / student / name,
                            symlinks=True)
        env = {"HPCLAB_PROFILE": GRADING_PROFILE, "HPCLAB_GRADE_WALL": str(budget),
               "HPCLAB_GRADE_STATUS": str(reports),
               "HPCLAB_GRADE_VALUES": ",".join(n for n in report_meaning(course.source_dir, name)
                                              if n.isidentifier())}
        r = course.nbgrader("autograde", name, "--force",
                            f"--CourseDirectory.submitted_directory={stage}", env=env,
                            timeout=len(todo) * (budget + 60) + NBGRADER_TIMEOUT, check=False)
        logs = _by_student(r.stdout)
        ran = {p.stem: json.loads(p.read_text()) for p in reports.glob("*.json")}
    graded = []
    for student, digest in todo.items():
        log = logs.get(student) or r.stdout
        entry = {"fingerprint": digest, "graded_at": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                 "isolation": ran.get(student, {}).get("isolation", ""),
                 "seconds": ran.get(student, {}).get("seconds", 0)}
        error = "| ERROR]" in logs.get(student, "") or \
            f"error processing assignment '{name}' for student '{student}'" in r.stdout
        if student not in ran:
            entry.update(status="ungradable" if error else "failed",
                         reason=_errors(log) if error else
                         "the notebook was not executed in the sandbox (check SandboxedExecute "
                         "in nbgrader_config.py, or grading was stopped): no valid score")
            failures.append((student, name, f"could not be graded ({entry['status']})",
                             log[-2000:]))
        elif error:
            entry.update(status="failed", reason=_errors(log))
            failures.append((student, name, "could not be graded (failed)", log[-2000:]))
        else:
            kind = {"finished": "graded"}.get(ran[student]["status"], ran[student]["status"])
            entry.update(status=kind, reason=ran[student]["reason"],
                         values=ran[student].get("values") or {})
            graded.append(student)
        status[name][student] = entry
    if graded:
        pattern = graded[0] if len(graded) == 1 else "*"
        fb = course.nbgrader("generate_feedback", name, "--force",
                             f"--CourseDirectory.student_id={pattern}", check=False)
        fb_logs = _by_student(fb.stdout) if fb.returncode else {}
        for student in graded:
            entry = status[name][student]
            notes = [entry["reason"]] if entry["reason"] else []
            if fb.returncode and ("error" in fb_logs.get(student, "").lower() or not fb_logs):
                notes.append("feedback could not be written")
                failures.append((student, name, "was graded, but its feedback could not be "
                                 "written", fb_logs.get(student, fb.stdout)[-2000:]))
            else:
                n = redact_feedback(workdir / "feedback" / student / name, secret)
                if n:
                    notes.append(f"{n} hidden-test line(s) printed by the submission removed "
                                 "from its feedback")
            entry["reason"] = "; ".join(notes)
    for student in todo:
        entry = status[name][student]
        print(f"{student}/{name}: {entry['status']}" +
              (f" ({entry['reason']})" if entry["reason"] else "") +
              (f" [{entry['isolation']}, {entry['seconds']:.0f} s]" if entry["isolation"] else ""),
              flush=True)


# ---------------------------------------------------------------- export

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
            for student in gb.students:
                row = {"assignment": assignment.name, "student_id": student.id,
                       "last_name": student.last_name or "", "first_name": student.first_name or "",
                       "email": student.email or "", "duedate": assignment.duedate or "",
                       "max_score": assignment.max_score}
                entry = status.get(assignment.name, {}).get(student.id, {})
                try:
                    sub = gb.find_submission(assignment.name, student.id)
                except MissingEntry:
                    row.update(timestamp="", seconds_late=0, raw_score=0, late_penalty=0,
                               score=0, status=entry.get("status", "missing"),
                               reason=entry.get("reason", "no submission"))
                    out.append(row)
                    continue
                flags = [entry.get("status", "graded")]
                if sub.needs_manual_grade and flags[0] != "ungradable":
                    flags.append("manual grading pending")
                if (sub.total_seconds_late or 0) > 0:
                    flags.append("late")
                penalty = sub.late_submission_penalty or 0
                # as nbgrader's own export: the gradebook's score is before the penalty
                row.update(timestamp=sub.timestamp or "", seconds_late=round(sub.total_seconds_late or 0),
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
            "Student": ", ".join(x for x in (r["last_name"], r["first_name"]) if x) or r["student_id"],
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
    print(f"grades: {workdir / 'grades.csv'} ({', '.join(f'{v} {k}' for k, v in sorted(counts.items()))})"
          f"\nfor a learning-management system: {workdir / 'grades-lms.csv'}"
          f"\nfeedback: {workdir / 'feedback'}/")


def roster(course, path):
    """Import students (CSV with id, first_name, last_name, email) into the gradebook."""
    backup_gradebook(course)
    r = course.nbgrader("db", "student", "import", str(Path(path).resolve()), check=False)
    if r.returncode != 0:
        raise SystemExit(f"could not import {path}: {_errors(r.stdout)}\n"
                         "The file is a CSV with a header: id,first_name,last_name,email")
    print(r.stdout.strip().splitlines()[-1] if r.stdout.strip() else f"imported {path}")


def duedate(course, name, when):
    backup_gradebook(course)
    r = course.nbgrader("db", "assignment", "add", name, f"--duedate={when}", check=False)
    if r.returncode != 0:
        raise SystemExit(f"could not set the due date: {_errors(r.stdout)}")
    print(f"{name} is due {when}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["release", "grade", "export", "roster", "duedate",
                                       "report"])
    p.add_argument("args", nargs="*", help="labs (default: every folder of solutions/); the "
                   "roster's CSV; the lab and its due date")
    p.add_argument("--student", action="append", default=None,
                   help="grade only this student (repeat for several)")
    p.add_argument("--force", action="store_true",
                   help="grade again even the submissions that did not change")
    p.add_argument("--workdir", default=None,
                   help="folder of submitted/, autograded/, feedback/, gradebook.db and the "
                        "exports (default: autograder/)")
    p.add_argument("--source", default=None, help=argparse.SUPPRESS)  # tests: a course of
    # their own instead of solutions/
    p.add_argument("--timeout", type=float, default=None,
                   help=f"wall seconds allowed for one submission (default: "
                        f"{BUDGET_PER_PROFILE_TIMEOUT} x the lab's {GRADING_PROFILE}-profile "
                        "timeout)")
    args = p.parse_args(argv)
    course = Course.at(args.workdir or HERE, args.source) if (args.workdir or args.source) \
        else Course()
    known = assignments(course.source)
    if args.command == "roster":
        if len(args.args) != 1:
            raise SystemExit("roster takes one CSV file: id,first_name,last_name,email")
        return roster(course, args.args[0]) or 0
    if args.command == "duedate":
        if len(args.args) != 2 or args.args[0] not in known:
            raise SystemExit(f"duedate takes a lab ({', '.join(known)}) and a date, e.g. "
                             '"2026-12-01 17:00:00 Europe/Rome"')
        return duedate(course, *args.args) or 0
    if args.command == "export":
        export(course)
        return 0
    if args.command == "report":
        import report

        print(f"class report: {report.build(course)}")
        return 0
    names = args.args or known
    unknown = set(names) - set(known)
    if unknown:
        raise SystemExit(f"unknown lab(s) {sorted(unknown)}: choose from {known}")
    if args.command == "release":
        release(names, course)
        return 0
    return grade(names, args.timeout, course, students=args.student, force=args.force)


if __name__ == "__main__":
    sys.exit(main())
