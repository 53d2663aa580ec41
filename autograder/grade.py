"""Release labs and grade submissions with nbgrader, without JupyterHub.

    python autograder/grade.py release            # solutions/ -> labs/
    python autograder/grade.py grade [ASSIGNMENT] # autograde autograder/submitted/*/ASSIGNMENT
    python autograder/grade.py grade --workdir DIR  # submissions in DIR/submitted instead

Grading runs each submission in its own process group with its own engine
profile folder and a wall-clock limit, so a submission that hangs, crashes or
leaves MPI engines behind costs only its own grade. Afterwards it writes
feedback (hidden tests removed) and ``autograder/grades.csv``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BIN = Path(sys.executable).parent
SUBMISSION_TIMEOUT = 1800  # seconds for one student's whole assignment


def assignments():
    return sorted(p.name for p in (ROOT / "solutions").iterdir()
                  if p.is_dir() and list(p.glob("*.ipynb")))


WORKDIR_ARGS = []  # nbgrader options that move submissions, results and gradebook (--workdir)


def nbgrader(*args, timeout=600, env=None, check=True):
    """Run one nbgrader command from the autograder folder in its own process group."""
    cmd = [str(BIN / "nbgrader"), *args, *WORKDIR_ARGS]
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


def use_workdir(workdir):
    """Keep submitted/, autograded/, feedback/, the gradebook and grades.csv in workdir."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    WORKDIR_ARGS[:] = [f"--CourseDirectory.submitted_directory={workdir / 'submitted'}",
                       f"--CourseDirectory.autograded_directory={workdir / 'autograded'}",
                       f"--CourseDirectory.feedback_directory={workdir / 'feedback'}",
                       f"--CourseDirectory.db_url=sqlite:///{workdir / 'gradebook.db'}"]
    return workdir


def grade(names, timeout=SUBMISSION_TIMEOUT, workdir=HERE):
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
            nbgrader("generate_assignment", name, "--force",
                     f"--CourseDirectory.release_directory={tmp}")
        for student in students:
            ipp_dir = tempfile.mkdtemp(prefix="hpclab-grade-ipp-")
            env = {"HPCLAB_PROFILE": "quick", "HPCLAB_IPP_DIR": ipp_dir}
            try:
                r = nbgrader("autograde", name, "--student", student, "--force", env=env,
                             timeout=timeout, check=False)
            finally:
                _stop_clusters(ipp_dir)
                shutil.rmtree(ipp_dir, ignore_errors=True)
            if r.returncode != 0:
                failures.append((student, name, r.stdout[-2000:]))
                print(f"{student}/{name}: autograde failed (see below); other submissions go on")
                continue
            nbgrader("generate_feedback", name, "--student", student, "--force", check=False)
            print(f"{student}/{name}: graded")
    nbgrader("export", f"--to={Path(workdir) / 'grades.csv'}")
    print(f"grades: {Path(workdir) / 'grades.csv'}\nfeedback: {Path(workdir) / 'feedback'}/")
    for student, name, log in failures:
        print(f"\n--- {student}/{name} could not be graded:\n{log}")
    return 1 if failures else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=["release", "grade"])
    p.add_argument("assignment", nargs="*", help="default: every folder of solutions/")
    p.add_argument("--workdir", default=None,
                   help="folder of submitted/, autograded/, feedback/, gradebook.db and grades.csv "
                        "(default: autograder/)")
    p.add_argument("--timeout", type=float, default=SUBMISSION_TIMEOUT,
                   help="seconds allowed for one submission (default %(default)s)")
    args = p.parse_args(argv)
    names = args.assignment or assignments()
    unknown = set(names) - set(assignments())
    if unknown:
        raise SystemExit(f"unknown assignment(s) {sorted(unknown)}: choose from {assignments()}")
    if args.command == "release":
        release(names)
        return 0
    workdir = use_workdir(args.workdir) if args.workdir else HERE
    return grade(names, args.timeout, workdir)


if __name__ == "__main__":
    sys.exit(main())
