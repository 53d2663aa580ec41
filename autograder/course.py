"""A course folder and nbgrader's commands on it: where submissions, feedback and the
gradebook live (:class:`Course`), nbgrader run in a process group of its own or in a
grading worker, the release of labs, and the grader's status file and gradebook backups.

Part of the grader (grade.py).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
NBGRADER_TIMEOUT = 300  # seconds for an nbgrader step that runs no student code
BACKUPS_KEPT = 20
WORKER_DIED = 99  # the result of a run whose worker process died (see grade._Workers)


def assignments(source=None):
    source = Path(source) if source else ROOT / "solutions"
    return sorted(p.name for p in source.iterdir() if p.is_dir() and list(p.glob("*.ipynb")))


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

    def submit_autograde(self, pool, lab, student, options, env):
        """nbgrader autograde of one student in a worker of ``pool`` (worker.py), with this
        course's options and ``options`` over them: a Future of a CompletedProcess."""
        import worker

        given = {a.split("=", 1)[0] for a in options}
        mine = [a for a in self.args if a.split("=", 1)[0] not in given]
        done = concurrent.futures.Future()
        try:
            future = pool.submit(worker.autograde, lab, student, [*mine, *options], env)
        except concurrent.futures.BrokenExecutor as exc:
            done.set_result(subprocess.CompletedProcess(
                ["autograde", lab, student], WORKER_DIED, f"the grading worker died: {exc!r}"))
            return done

        def finish(f):
            try:
                res = f.result()
                done.set_result(subprocess.CompletedProcess(
                    ["autograde", lab, student], 0 if res["success"] else 1,
                    "\n".join(x for x in (res["log"], res["error"]) if x)))
            except BaseException as exc:  # a worker died: this run, or a neighbour's
                done.set_result(subprocess.CompletedProcess(
                    ["autograde", lab, student], WORKER_DIED,
                    f"the grading worker died: {exc!r}"))
        future.add_done_callback(finish)
        return done

    def step(self, workers, kind, lab, student=None, options=(), env=None,
             timeout=NBGRADER_TIMEOUT):
        """One nbgrader step that runs no student code (worker.step: generate_assignment,
        autograde or generate_feedback), with this course's options and ``options`` over
        them, in a worker of ``workers`` (_Workers), where nbgrader is loaded already: its
        command line would cost a new Python and 2.5 s of imports. A CompletedProcess:
        returncode 0 when it succeeded, its log as stdout. A step still running after
        ``timeout`` seconds is stopped with the workers."""
        import worker

        given = {a.split("=", 1)[0] for a in options}
        mine = [a for a in self.args if a.split("=", 1)[0] not in given]
        what = [kind, lab] + ([student] if student else [])
        try:
            future = workers.get().submit(worker.step, kind, lab, student,
                                          [*mine, *options], env or {})
            res = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            workers.stop()
            return subprocess.CompletedProcess(what, -9, f"[stopped after {timeout} s]")
        except Exception as exc:  # the worker died under it
            workers.stop()
            return subprocess.CompletedProcess(what, WORKER_DIED,
                                               f"the grading worker died: {exc!r}")
        return subprocess.CompletedProcess(
            what, 0 if res["success"] else 1,
            "\n".join(x for x in (res["log"], res["error"]) if x))

    def nbgrader(self, *args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
        """nbgrader with this course's options; an option in ``args`` replaces the course's."""
        given = {a.split("=", 1)[0] for a in args if a.startswith("--") and "=" in a}
        mine = [a for a in self.args if a.split("=", 1)[0] not in given]
        return nbgrader(*args, *mine, timeout=timeout, env=env, check=check)


def nbgrader(*args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
    """Run one nbgrader command from the autograder folder in its own process group."""
    from confinement import run_group
    from sandbox import SLOW_OPTIONAL

    cmd = [sys.executable, "-c", f"import sys; sys.modules.setdefault({SLOW_OPTIONAL!r}, None); "
           "from nbgrader.apps.nbgraderapp import main; sys.exit(main())", *args]
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader calls alembic
    result = run_group(cmd, timeout, env={**os.environ, "PATH": path, **(env or {})}, cwd=HERE)
    if check and result.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{result.stdout}")
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


def log_errors(log):
    """The gist of a failed nbgrader step: its last exception line, else its ERROR lines."""
    import re

    raised = re.findall(r"\b[\w.]*(?:Error|Exception): [^\n]*", log)
    if raised:  # without the module path: NotJSONError: ...
        return re.sub(r"^(?:\w+\.)+", "", raised[-1].strip())[:300]
    lines = [line.split("]", 1)[-1].strip() for line in log.splitlines()
             if re.match(r"\[(?:\w+ \| )?ERROR\]", line)]
    return "; ".join(dict.fromkeys(x for x in lines if x))[:300] or log.strip()[-300:]


