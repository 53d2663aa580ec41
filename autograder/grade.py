"""Release labs and grade submissions with nbgrader, without JupyterHub.

    python autograder/grade.py release [LAB...]         # solutions/ -> labs/
    python autograder/grade.py grade [LAB...] [--student S]... [--force]
                                                        # new or changed submissions only
    python autograder/grade.py export                   # grades.csv, grades-lms.csv
    python autograder/grade.py roster students.csv      # names and emails (id,first_name,
                                                        # last_name,email)
    python autograder/grade.py duedate LAB "2026-12-01 17:00:00 Europe/Rome"
    python autograder/grade.py report                   # class-report.html
    python autograder/grade.py import-zip LAB FILE.zip [--lms canvas|moodle|folders]
                                                        # an LMS's zip of submissions

Submissions are read from ``<workdir>/submitted/<student>/<lab>/`` (workdir: autograder/
unless --workdir). Each one is executed in a sandbox (sandbox.py: no view of the course,
the gradebook or other submissions, no network, limits on memory, processes, CPU, output
and wall time); the gradebook is written by one step at a time, in a worker process of this
grader (worker.py), after the runs, and copied to ``<workdir>/backups/`` before every
grading run. What happened to each submission
(graded, failed, timed out, ungradable; manual grading pending and late come from the
gradebook) is kept in ``<workdir>/status.json`` and exported beside its score.

This module grades; its neighbours do one job each: course.py (the course folder, nbgrader's
commands, the status file and backups), exports.py (the grade files, roster and due dates),
screen.py (what is refused before it runs), machine_inputs.py (this machine's inputs, once
per run), sandbox.py and run_notebook.py (the sandboxed run), returned.py (what comes back
from it, read as untrusted), execute.py (nbgrader's step that runs it), judge.py (graded cells),
worker.py (nbgrader's steps in worker processes), lock.py (one grader per course folder) and
report.py (the class report).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import html
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confinement import remove_tree
from course import (  # noqa: F401 (the names the grader's callers use)
    BIN,
    HERE,
    NBGRADER_TIMEOUT,
    ROOT,
    WORKER_DIED,
    Course,
    assignments,
    backup_gradebook,
    load_status,
    log_errors,
    nbgrader,
    release,
    save_status,
)
from exports import duedate, export, roster, rows  # noqa: F401

GRADING_PROFILE = "quick"
# a lab makes a handful of measured MPI calls, each bounded by the profile's timeout
BUDGET_PER_PROFILE_TIMEOUT = 5
STATUSES = ("graded", "failed", "timed out", "ungradable", "missing")


def submission_budget(name):
    """Seconds one submission of lab ``name`` may take under the grading profile."""
    from hpclab import profiles

    try:
        return BUDGET_PER_PROFILE_TIMEOUT * profiles.timeout(name, GRADING_PROFILE)
    except (KeyError, ValueError):
        return BUDGET_PER_PROFILE_TIMEOUT * 60


def fingerprint(folder):
    """sha256 of a submission folder: names, contents and link targets (links are not
    followed, special files not opened)."""
    import stat

    h = hashlib.sha256()
    folder = Path(folder)
    if folder.is_symlink():
        return hashlib.sha256(b"link:" + os.readlink(folder).encode()).hexdigest()
    entries = []
    for root, dirs, files in os.walk(folder, followlinks=False):
        entries += [Path(root) / n for n in dirs + files]
    for p in sorted(entries):
        h.update(str(p.relative_to(folder)).encode() + b"\0")
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            h.update(b"link:" + os.readlink(p).encode())
        elif stat.S_ISREG(st.st_mode):
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
        else:
            h.update(f"mode:{st.st_mode}".encode())
    return h.hexdigest()


# ---------------------------------------------------------------- grading

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


def default_jobs():
    """Submissions graded side by side by default: one per core this process may use."""
    return max(1, len(os.sched_getaffinity(0)))


def wall_budget(name, timeout=None):
    """Seconds one submission of ``name`` may take: --timeout, else HPCLAB_GRADE_WALL, else
    the lab's own budget (:func:`submission_budget`)."""
    if timeout:
        return float(timeout)
    raw = os.environ.get("HPCLAB_GRADE_WALL")
    if raw:
        try:
            return float(raw)
        except ValueError:
            raise SystemExit(f"HPCLAB_GRADE_WALL={raw!r} is not a number of seconds") from None
    return submission_budget(name)


def grade(names, timeout=None, course=None, students=None, force=False, jobs=None):
    """Autograde the new or changed submissions of the labs ``names`` (all of them with
    ``force``; only ``students`` when given), write feedback, then export.

    One grader at a time per course folder (lock.py). Each submission is checked first
    (screen.py), then run on its own: its own nbgrader autograde (in a worker), its own
    sandbox, ``jobs`` of them side by side; its status comes from that run only. The class
    is then recorded in the gradebook by one nbgrader step, which runs nothing. Returns 1 when any
    submission could not be graded or its feedback not written (each is listed), else 0.
    """
    import lock

    course = course or Course()
    workdir = Path(course.workdir)
    submitted = workdir / "submitted"
    if not submitted.is_dir():
        raise SystemExit(f"no submissions: copy each student's notebooks to "
                         f"{submitted}/<student>/<assignment>/ first")
    with lock.hold(workdir, f"grade {' '.join(names)}"):
        scratch = workdir / ".grading"
        remove_tree(scratch)  # a killed grader's; we hold the lock
        scratch.mkdir(mode=0o700)
        try:
            return _grade(names, timeout, course, students, force, jobs or default_jobs(),
                          scratch)
        finally:
            remove_tree(scratch)


def _grade(names, timeout, course, students, force, jobs, scratch):
    import cgroup
    import machine_inputs
    import sandbox
    import screen

    try:
        sandbox.Limits.from_env()
    except ValueError as exc:
        raise SystemExit(f"a HPCLAB_GRADE_* setting is not a number: {exc}") from None
    workdir = Path(course.workdir)
    submitted = workdir / "submitted"
    sandbox.install_bwrap()
    mode, why = sandbox.isolation()
    print(f"sandbox: {mode}" + (f" ({why})" if why else "") + f"; {jobs} at a time")
    capped, why_not = cgroup.available()
    cgroup.remove_stale()  # a killed grader's groups, and what escaped into them
    if capped:
        total = sandbox.Limits.from_env().memory_total / (1 << 30)
        print(f"memory of each submission, all its processes together: at most {total:g} GiB")
    else:
        print(f"memory is capped per process only, not per submission ({why_not})")
    saved = backup_gradebook(course)
    if saved:
        print(f"gradebook backed up to {saved}")
    status = load_status(course)
    failures = []
    plans = {}
    for name in names:
        found = sorted(p.name for p in submitted.iterdir()
                       if (p / name).is_dir() or (p / name).is_symlink())
        if students:
            for student in sorted(set(students) - set(found)):
                print(f"{student}/{name}: no submission")
                if screen.unsafe_id(student) is None:
                    status.setdefault(name, {})[student] = {
                        "status": "missing", "reason": "no submission", "fingerprint": ""}
            found = [s for s in found if s in students]
        todo = {}
        for student in found:
            try:
                digest = fingerprint(submitted / student / name)
            except OSError as exc:
                digest = f"unreadable: {exc}"
            entry = status.setdefault(name, {}).get(student, {})
            if not force and entry.get("fingerprint") == digest and entry.get("status") in STATUSES:
                print(f"{student}/{name}: unchanged since it was {entry['status']} "
                      "(--force grades again)")
            else:
                todo[student] = digest
        if todo:
            plans[name] = todo
    # record the assignments in the gradebook without touching labs/: one nbgrader run ("*")
    # when every lab of the source folder is graded, else one per lab, so that a lab nobody
    # was graded on yet stays out of the gradebook and the exports
    every = {p.name for p in course.source_dir.iterdir() if list(p.glob("*.ipynb"))}
    # no more workers (each loads nbgrader) than a lab has submissions to run side by side
    pool = _Workers(min(jobs, max(map(len, plans.values()), default=1)))
    try:
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            for which in (["*"] if len(plans) > 1 and set(plans) == every else plans):
                r = course.step(pool, "generate_assignment", which,
                                options=[f"--CourseDirectory.release_directory={tmp}"],
                                env={"TMPDIR": str(scratch)})
                if r.returncode:
                    raise SystemExit(f"nbgrader generate_assignment {which} failed:\n{r.stdout}")
        inputs = machine_inputs.measure(plans, scratch / "inputs", GRADING_PROFILE)
        machine_inputs.simulate_once(plans, GRADING_PROFILE)
        for name, todo in plans.items():
            lab = _Lab(course, name, wall_budget(name, timeout), scratch / name, pool,
                       inputs.get(name))
            lab.grade(todo, status, failures)
            save_status(course, status)
            counts = {}
            for student in todo:
                kind = status[name][student]["status"]
                counts[kind] = counts.get(kind, 0) + 1
            print(f"{name}: {len(todo)} submission(s) graded: " +
                  ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), flush=True)
    finally:
        pool.stop()
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


class _Workers:
    """The grading workers: a process pool, made again when a worker died (a pool with a
    dead worker fails every run in it)."""

    def __init__(self, jobs):
        import threading

        self.jobs, self.pool, self.lock = jobs, None, threading.Lock()

    def get(self):
        with self.lock:
            return self._get()

    def _get(self):
        if self.pool is not None and getattr(self.pool, "_broken", False):
            _stop_pool(self.pool)
            self.pool = None
        if self.pool is None:
            self.pool = _pool(self.jobs)
        return self.pool

    def stop(self):
        with self.lock:
            if self.pool is not None:
                _stop_pool(self.pool)
                self.pool = None


def _pool(jobs):
    """``jobs`` worker processes (worker.py) that load nbgrader once each."""
    import multiprocessing

    import worker

    context = multiprocessing.get_context("fork")
    slots = context.Queue()
    for slot in range(jobs):
        slots.put(slot)
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=jobs, initializer=worker.init, initargs=(slots,), mp_context=context)


def _stop_pool(pool):
    """Stop the workers now, and whatever sandbox they run (it dies with them)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join(timeout=10)


class _Lab:
    """The grading of one lab's submissions (see :func:`grade`)."""

    def __init__(self, course, name, budget, scratch, pool, inputs=None):
        self.course, self.name, self.budget, self.pool = course, name, budget, pool
        self.scratch = Path(scratch)
        self.scratch.mkdir(mode=0o700)
        self.workdir = Path(course.workdir)
        import sandbox

        self.limits = sandbox.Limits.from_env()
        self.notebook = next(iter(sorted((course.source_dir / name).glob("*.ipynb")))).name
        self.secret = hidden_lines(course.source_dir / name / self.notebook)
        self.env = {"HPCLAB_PROFILE": GRADING_PROFILE, "HPCLAB_GRADE_WALL": str(budget),
                    "TMPDIR": str(self.scratch),
                    "HPCLAB_GRADE_VALUES": ",".join(n for n in report_meaning(course.source_dir,
                                                                              name)
                                                   if n.isidentifier())}
        if inputs is not None:  # this machine's inputs, measured once (machine_inputs.py)
            self.env["HPCLAB_GRADE_INPUTS"] = str(inputs)

    def _due(self):
        from nbgrader.api import Gradebook, MissingEntry

        try:
            with Gradebook(f"sqlite:///{self.course.gradebook}") as gb:
                return gb.find_assignment(self.name).duedate is not None
        except MissingEntry:
            return False

    def _copy(self, student, dest):
        """The submission's plain files (screened: no links) into dest/<student>/<lab>/."""
        shutil.copytree(self.workdir / "submitted" / student / self.name,
                        dest / student / self.name, symlinks=True)

    def _submit(self, student):
        """Start one submission's run in its own course copy and sandbox, in a worker:
        a Future of nbgrader's result, and the submission's folder."""
        own = self.scratch / "run" / student
        (own / "status").mkdir(parents=True)
        try:
            self._copy(student, own / "submitted")
            shutil.copyfile(self.scratch / "gradebook.db", own / "gradebook.db")
        except OSError as exc:
            failed = concurrent.futures.Future()
            failed.set_result(subprocess.CompletedProcess([], 1, f"OSError: {exc}"))
            return failed, own
        options = [f"--CourseDirectory.submitted_directory={own / 'submitted'}",
                   f"--CourseDirectory.autograded_directory={own / 'autograded'}",
                   f"--CourseDirectory.feedback_directory={own / 'feedback'}",
                   f"--CourseDirectory.db_url=sqlite:///{own / 'gradebook.db'}"]
        env = {**self.env, "HPCLAB_GRADE_STATUS": str(own / "status"),
               "HPCLAB_GRADE_SUBMITTED": str(own / "submitted" / student / self.name
                                             / self.notebook)}
        return self.course.submit_autograde(self.pool.get(), self.name, student, options,
                                            env), own

    def _record(self, students, executed):
        """Record ``students`` (run already) in the course's gradebook, in one nbgrader
        step that runs nothing; the students whose autograded notebook is missing after
        it, each with its own nbgrader log."""
        stage = self.scratch / "record"
        for student in students:
            self._copy(student, stage)
            shutil.rmtree(self.workdir / "autograded" / student / self.name, ignore_errors=True)
        env = {**self.env, "HPCLAB_GRADE_EXECUTED": str(executed)}
        options = [f"--CourseDirectory.submitted_directory={stage}"]
        r = self.course.step(self.pool, "autograde", self.name, "*", options, env,
                             timeout=NBGRADER_TIMEOUT + 10 * len(students))
        missing = {}
        for student in students:
            done = self.workdir / "autograded" / student / self.name / self.notebook
            if not done.exists():
                one = r if len(students) == 1 else self.course.step(
                    self.pool, "autograde", self.name, student, options, env)
                if not done.exists():
                    missing[student] = one.stdout
        return missing

    def grade(self, todo, status, failures):
        import screen

        name, due = self.name, self._due()
        if self.course.gradebook.exists():
            with sqlite3.connect(self.course.gradebook) as src, \
                    sqlite3.connect(self.scratch / "gradebook.db") as out:
                src.backup(out)
        now = time.strftime("%Y-%m-%d %H:%M:%S %z")
        entries, runnable = {}, []
        for student, digest in todo.items():
            entries[student] = {"fingerprint": digest, "graded_at": now, "isolation": "",
                                "seconds": 0}
            folder = self.workdir / "submitted" / student / name
            try:
                why = screen.unsafe_id(student) or screen.problem(folder, self.notebook,
                                                                  total=self.limits.files)
            except Exception as exc:  # whatever a submission holds, it stops only itself
                why = f"the submission could not be read ({type(exc).__name__}: {exc})"
            if why:
                entries[student].update(status="ungradable", reason=why)
                failures.append((student, name, "could not be graded (ungradable)", why))
            else:
                runnable.append(student)
        executed = self.scratch / "executed"
        executed.mkdir()
        ran_ok = []
        started = {}
        for student in runnable:
            future, own = self._submit(student)
            started[future] = (student, own)
        results = {}
        for future in concurrent.futures.as_completed(started):
            student, own = started[future]
            results[student] = (future.result(), own)
        # a worker that died took its neighbours' runs with it: each of those runs again,
        # alone, in a new worker, so that only the submission that kills one fails
        for student in sorted(s for s, (r, _) in results.items() if r.returncode == WORKER_DIED):
            shutil.rmtree(results[student][1], ignore_errors=True)
            future, own = self._submit(student)
            results[student] = (future.result(), own)
        for student in sorted(results):
            r, own = results[student]
            report = own / "status" / f"{student}.json"
            ran = json.loads(report.read_text()) if report.exists() else None
            entry = entries[student]
            log = r.stdout
            if ran is None:
                entry.update(status="failed", reason=log_errors(log) if r.returncode else
                             "the notebook was not executed in the sandbox (check "
                             "SandboxedExecute in nbgrader_config.py): no valid score")
                failures.append((student, name, "could not be graded (failed)", log[-2000:]))
                continue
            entry.update(isolation=ran.get("isolation", ""), seconds=ran.get("seconds", 0))
            if r.returncode != 0:
                entry.update(status="failed", reason=log_errors(log))
                failures.append((student, name, "could not be graded (failed)", log[-2000:]))
                continue
            kind = {"finished": "graded"}.get(ran["status"], ran["status"])
            notes = [ran["reason"]] if ran["reason"] else []
            notes += screen.notes(self.workdir / "submitted" / student / name, due)
            entry.update(status=kind, reason="; ".join(notes), values=ran.get("values") or {})
            shutil.copyfile(own / "status" / f"{student}.ipynb", executed / f"{student}.ipynb")
            ran_ok.append(student)
            shutil.rmtree(own, ignore_errors=True)
        ran_ok.sort()
        # autograded/ and feedback/ of these students are rewritten next: a grader killed
        # from here on must leave them to be graded again, not "unchanged"
        for student in ran_ok:
            if student in status.get(name, {}):
                status[name][student]["fingerprint"] = ""
        save_status(self.course, status)
        graded = []
        if ran_ok:
            missing = self._record(ran_ok, executed)
            for student in ran_ok:
                if student in missing:
                    entries[student].update(status="failed", reason="not recorded in the "
                                            "gradebook: " + log_errors(missing[student]))
                    failures.append((student, name, "could not be recorded",
                                     missing[student][-2000:]))
                else:
                    graded.append(student)
        if graded:
            self._feedback(graded, entries, failures)
        for student in todo:
            entry = status[name][student] = entries[student]
            print(f"{student}/{name}: {entry['status']}" +
                  (f" ({entry['reason']})" if entry["reason"] else "") +
                  (f" [{entry['isolation']}, {entry['seconds']:.0f} s]"
                   if entry["isolation"] else ""), flush=True)

    def _feedback(self, graded, entries, failures):
        """nbgrader's feedback pages of ``graded``: the students split into one group per
        worker, the groups written side by side (each reads the gradebook, none writes it);
        a group that failed is written again one student at a time, to say whose failed."""
        name = self.name
        for student in graded:
            shutil.rmtree(self.workdir / "feedback" / student / name, ignore_errors=True)
        env = {"TMPDIR": str(self.scratch)}
        folder = self.workdir / "autograded"
        everyone = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        groups = [g for g in (graded[i::self.pool.jobs] for i in range(self.pool.jobs)) if g]

        def write(group):
            if len(group) == 1:
                return self.course.step(self.pool, "generate_feedback", name, group[0],
                                        env=env)
            others = ",".join(s for s in everyone if s not in group)
            options = [f"--CourseDirectory.student_id_exclude={others}"] if others else []
            return self.course.step(self.pool, "generate_feedback", name, "*", options,
                                    env=env)

        with concurrent.futures.ThreadPoolExecutor(len(groups)) as threads:
            written = dict(zip(map(tuple, groups), threads.map(write, groups)))
        for group, fb in written.items():
            for student in group:
                entry = entries[student]
                notes = [entry["reason"]] if entry["reason"] else []
                page = self.workdir / "feedback" / student / name / self.notebook.replace(
                    ".ipynb", ".html")
                if fb.returncode or not page.exists():
                    log = fb.stdout if len(group) == 1 else write([student]).stdout
                    if not page.exists() or len(group) == 1:
                        notes.append("feedback could not be written")
                        failures.append((student, name, "was graded, but its feedback could "
                                         "not be written", log[-2000:]))
                if page.exists():
                    n = redact_feedback(self.workdir / "feedback" / student / name,
                                        self.secret)
                    if n:
                        notes.append(f"{n} hidden-test line(s) printed by the submission "
                                     "removed from its feedback")
                entry["reason"] = "; ".join(notes)


# ---------------------------------------------------------------- export

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["release", "grade", "export", "roster", "duedate",
                                       "report", "import-zip"])
    p.add_argument("args", nargs="*", help="labs (default: every folder of solutions/); the "
                   "roster's CSV; the lab and its due date")
    p.add_argument("--student", action="append", default=None,
                   help="grade only this student (repeat for several)")
    p.add_argument("--jobs", type=int, default=None,
                   help="submissions graded side by side (default: one per core)")
    p.add_argument("--force", action="store_true",
                   help="grade again even the submissions that did not change")
    p.add_argument("--workdir", default=None,
                   help="folder of submitted/, autograded/, feedback/, gradebook.db and the "
                        "exports (default: autograder/)")
    p.add_argument("--lms", default="canvas",
                   help="import-zip: the export's file names (canvas, moodle, folders)")
    p.add_argument("--pattern", default=None,
                   help="import-zip: a regular expression of each file's path in the zip, "
                        "with the groups (?P<student>...) and (?P<file>...)")
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
    if args.command in ("roster", "duedate", "export", "import-zip"):
        import lock

        with lock.hold(course.workdir, args.command):
            return _edit(args, course, known)
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
    if args.jobs is not None and args.jobs < 1:
        raise SystemExit(f"--jobs {args.jobs}: grade at least one submission at a time")
    return grade(names, args.timeout, course, students=args.student, force=args.force,
                 jobs=args.jobs)


def _edit(args, course, known):
    """roster, duedate and export (under the course's lock)."""
    if args.command == "roster":
        if len(args.args) != 1:
            raise SystemExit("roster takes one CSV file: id,first_name,last_name,email")
        return roster(course, args.args[0]) or 0
    if args.command == "duedate":
        if len(args.args) != 2 or args.args[0] not in known:
            raise SystemExit(f"duedate takes a lab ({', '.join(known)}) and a date, e.g. "
                             '"2026-12-01 17:00:00 Europe/Rome"')
        return duedate(course, *args.args) or 0
    if args.command == "import-zip":
        return _import_zip(args, course, known)
    export(course)
    return 0


def _import_zip(args, course, known):
    import lms_import

    if len(args.args) != 2 or args.args[0] not in known:
        raise SystemExit(f"import-zip takes a lab ({', '.join(known)}) and the zip file")
    lab, archive = args.args
    try:
        done = lms_import.collect(archive, lab, Path(course.workdir) / "submitted",
                                  Path(course.workdir) / "replaced", lms=args.lms,
                                  pattern=args.pattern)
    except lms_import.ExportError as exc:
        raise SystemExit(f"import-zip: {exc}") from None
    for line in done.reports:
        print(line)
    print(f"{len(done.students)} submission(s) of {lab} imported into "
          f"{Path(course.workdir) / 'submitted'}: grade them with make grade LAB={lab}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
