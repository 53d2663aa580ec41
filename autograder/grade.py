"""Release labs and grade submissions with nbgrader, without JupyterHub.

    python autograder/grade.py release            # solutions/ -> labs/
    python autograder/grade.py grade [ASSIGNMENT] # autograde autograder/submitted/*/ASSIGNMENT
    python autograder/grade.py grade --workdir DIR  # submissions in DIR/submitted instead

Grading runs each submission in its own process group with its own engine
profile folder and a wall-clock limit, so a submission that hangs, crashes or
leaves MPI engines behind costs only its own grade. Afterwards it writes
feedback (hidden tests removed) and ``autograder/grades.csv``.

Submissions run with the quick profile; one submission may take
``BUDGET_PER_PROFILE_TIMEOUT`` times its lab's quick-profile timeout (``--timeout``
overrides it).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
GRADING_PROFILE = "quick"
# a lab makes a handful of measured MPI calls, each bounded by the profile's timeout
BUDGET_PER_PROFILE_TIMEOUT = 10
NBGRADER_TIMEOUT = 300  # seconds for an nbgrader step that runs no student code


def assignments():
    return sorted(p.name for p in (ROOT / "solutions").iterdir()
                  if p.is_dir() and list(p.glob("*.ipynb")))


def submission_budget(name):
    """Seconds one submission of lab ``name`` may take under the grading profile."""
    from hpclab import profiles

    return BUDGET_PER_PROFILE_TIMEOUT * profiles.timeout(name, GRADING_PROFILE)


@dataclass
class Course:
    """Where nbgrader keeps submissions, results and the gradebook for one grading run
    (default: autograder/; a --workdir moves all of them)."""

    workdir: Path = HERE
    args: list = field(default_factory=list)

    @classmethod
    def at(cls, workdir):
        workdir = Path(workdir).resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        return cls(workdir, [
            f"--CourseDirectory.submitted_directory={workdir / 'submitted'}",
            f"--CourseDirectory.autograded_directory={workdir / 'autograded'}",
            f"--CourseDirectory.feedback_directory={workdir / 'feedback'}",
            f"--CourseDirectory.db_url=sqlite:///{workdir / 'gradebook.db'}"])

    def nbgrader(self, *args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
        return nbgrader(*args, *self.args, timeout=timeout, env=env, check=check)


def nbgrader(*args, timeout=NBGRADER_TIMEOUT, env=None, check=True):
    """Run one nbgrader command from the autograder folder in its own process group."""
    cmd = [str(BIN / "nbgrader"), *args]
    proc = subprocess.Popen(cmd, cwd=HERE, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return subprocess.CompletedProcess(cmd, -9, (out or "") + f"\n[stopped after {timeout} s]")
    finally:
        try:  # anything the run left in its group (notebook kernel, engines)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    result = subprocess.CompletedProcess(cmd, proc.returncode, out)
    if check and proc.returncode != 0:
        raise SystemExit(f"nbgrader {' '.join(args)} failed:\n{out}")
    return result


def release(names):
    for name in names:
        nbgrader("generate_assignment", name, "--force")
        print(f"released labs/{name}/")


def _stop_clusters(ipp_dir):
    for profile in Path(ipp_dir).glob("*"):
        subprocess.run([str(BIN / "ipcluster"), "stop", "--all", f"--profile-dir={profile}"],
                       capture_output=True, timeout=60)


def grade(names, timeout=None, course=None):
    """Autograde every submission of the labs ``names``; feedback and grades.csv.

    Returns 1 when any submission could not be graded or its feedback not written
    (each is listed with nbgrader's output), 0 otherwise.
    """
    course = course or Course()
    workdir = course.workdir
    submitted = Path(workdir) / "submitted"
    if not submitted.is_dir():
        raise SystemExit(f"no submissions: copy each student's notebooks to "
                         f"{submitted}/<student>/<assignment>/ first")
    failures = []
    for name in names:
        students = sorted(p.parent.name for p in submitted.glob(f"*/{name}") if p.is_dir())
        if not students:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            # record the assignment in the gradebook without touching labs/
            course.nbgrader("generate_assignment", name, "--force",
                            f"--CourseDirectory.release_directory={tmp}")
        budget = timeout or submission_budget(name)
        for student in students:
            ipp_dir = tempfile.mkdtemp(prefix="hpclab-grade-ipp-")
            env = {"HPCLAB_PROFILE": GRADING_PROFILE, "HPCLAB_IPP_DIR": ipp_dir}
            try:
                r = course.nbgrader("autograde", name, "--student", student, "--force", env=env,
                                    timeout=budget, check=False)
            finally:
                _stop_clusters(ipp_dir)
                shutil.rmtree(ipp_dir, ignore_errors=True)
            if r.returncode != 0:
                failures.append((student, name, "could not be graded", r.stdout[-2000:]))
                print(f"{student}/{name}: autograde failed (see below); other submissions go on")
                continue
            fb = course.nbgrader("generate_feedback", name, "--student", student, "--force",
                                 check=False)
            if fb.returncode != 0:
                failures.append((student, name, "was graded, but its feedback could not be "
                                 "written", fb.stdout[-2000:]))
                print(f"{student}/{name}: graded; feedback failed (see below)")
                continue
            print(f"{student}/{name}: graded")
    course.nbgrader("export", f"--to={Path(workdir) / 'grades.csv'}")
    print(f"grades: {Path(workdir) / 'grades.csv'}\nfeedback: {Path(workdir) / 'feedback'}/")
    for student, name, what, log in failures:
        print(f"\n--- {student}/{name} {what}:\n{log}")
    return 1 if failures else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["release", "grade"])
    p.add_argument("assignment", nargs="*", help="default: every folder of solutions/")
    p.add_argument("--workdir", default=None,
                   help="folder of submitted/, autograded/, feedback/, gradebook.db and grades.csv "
                        "(default: autograder/)")
    p.add_argument("--timeout", type=float, default=None,
                   help=f"seconds allowed for one submission (default: "
                        f"{BUDGET_PER_PROFILE_TIMEOUT} x the lab's {GRADING_PROFILE}-profile "
                        "timeout)")
    args = p.parse_args(argv)
    names = args.assignment or assignments()
    unknown = set(names) - set(assignments())
    if unknown:
        raise SystemExit(f"unknown assignment(s) {sorted(unknown)}: choose from {assignments()}")
    if args.command == "release":
        release(names)
        return 0
    course = Course.at(args.workdir) if args.workdir else Course()
    return grade(names, args.timeout, course)


if __name__ == "__main__":
    sys.exit(main())
