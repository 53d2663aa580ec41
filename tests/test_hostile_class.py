"""A class of hostile and broken submissions graded beside a good one, in the sandbox.

A small course of its own (one answer, one test with a hidden part, one written answer)
keeps this quick; the six labs' own round trip is in test_notebooks.py. Every submission
gets a status, the good one its full marks, the gradebook survives, no feedback shows
hidden-test code, no process is left behind, and grading again skips what did not change.
"""
import contextlib
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
AUTOGRADER = ROOT / "autograder"
sys.path.insert(0, str(AUTOGRADER))

import sandbox  # noqa: E402
from hpclab.processes import alive  # noqa: E402

# seconds per submission in this test: the good submissions, 3 s alone, must be graded on a
# loaded machine too (a fresh-clone run at load 14 on two cores stopped one at 15 s)
WALL = 25
# files and output a submission may write in this test: small, so that the submissions that
# write gigabytes meet the limit within a second or two, long before their wall budget
OUTPUT = 8 << 20
HIDDEN = 'assert abs(answer - 42.0) < 1e-9, "the answer is wrong: recompute it"'
SECRET_FILE = "instructor-secret.txt"

pytestmark = pytest.mark.skipif(sandbox.isolation()[0] != "bwrap",
                                reason="bubblewrap cannot run here: " + sandbox.isolation()[1])


def _meta(grade_id, **kw):
    m = {"grade": False, "solution": False, "locked": False, "schema_version": 3,
         "grade_id": grade_id}
    m.update(kw)
    return {"nbgrader": m}


def toy_source(folder):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.metadata["hpclab"] = {"report": {"answer": {"quantity": "triad"}}}  # class report
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Toy lab\nCompute the answer.",
                                      metadata=_meta("intro", locked=True)),
        nbformat.v4.new_code_cell("import numpy as np", metadata=_meta("setup", locked=True)),
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nanswer = 6.0 * 7.0\n### END SOLUTION",
                                  metadata=_meta("answer", solution=True)),
        nbformat.v4.new_code_cell(
            '"""The answer, a float."""\n'
            'assert isinstance(answer, float), "answer must be a float"\n'
            f"### BEGIN HIDDEN TESTS\n{HIDDEN}\n### END HIDDEN TESTS",
            metadata=_meta("test_answer", grade=True, points=2, locked=True)),
        nbformat.v4.new_markdown_cell("YOUR ANSWER HERE\n\n### BEGIN SOLUTION\nBecause.\n"
                                      "### END SOLUTION",
                                      metadata=_meta("why", solution=True, grade=True, points=1)),
    ]
    (folder / "toy").mkdir(parents=True)
    nbformat.write(nb, folder / "toy" / "toy.ipynb")


# what each hostile student writes in the answer cell
HOSTILE = {
    "loop": "while True:\n    pass",
    "sleeper": "import time\ntime.sleep(10**6)",
    "hog": "hog = bytearray(200 * 2**30)\nanswer = 42.0",
    "forker": ("import os, time\nfor _ in range(5000):\n    if os.fork() == 0:\n"
               "        time.sleep(3600)\n        os._exit(0)\nanswer = 42.0"),
    "reader": ("import glob\nfound = []\nfor pattern in {patterns!r}:\n"
               "    for p in glob.glob(pattern, recursive=True):\n"
               "        try:\n            found.append(open(p, 'rb').read()[:2000])\n"
               "        except OSError:\n            pass\nprint(found)\nanswer = 1.0"),
    "deleter": ("import os, shutil\nfor p in {deletes!r}:\n    try:\n"
                "        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)\n"
                "    except OSError as e:\n        print('could not', p, e)\nanswer = 1.0"),
    "parricide": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
    "networker": ("import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
                  "    answer = 42.0\nexcept OSError:\n    answer = 0.0"),
    "flooder": "import sys\nfor _ in range(200000):\n    sys.stdout.write('x' * 1000 + '\\n')",
    "orphans": ("import subprocess\nfor _ in range(3):\n"
                "    subprocess.Popen(['sleep', '3600'], start_new_session=True)\nanswer = 1.0"),
    "patcher": ("import builtins\nimport numpy as np\n"
                "class Yes(float):\n    def __eq__(self, other): return True\n"
                "    def __sub__(self, other): return Yes(0.0)\n"
                "    __rsub__ = __sub__\n    __lt__ = __le__ = __ge__ = __gt__ = __eq__\n"
                "    __hash__ = float.__hash__\n"
                "builtins.abs = lambda x: 0.0\nnp.isclose = lambda *a, **k: True\n"
                "answer = Yes(1.0)"),
    "spy": ("ip = get_ipython()\n"
            "ip.events.register('pre_run_cell', lambda info: print(info.raw_cell))\n"
            "answer = 1.0"),
    # a log line of nbgrader's command-line form, naming a correct student, then the runner
    # killed (statuses come from each submission's own run, never from what it printed)
    "forger": ("import os, signal, sys\n"
               "line = b\"[AutogradeApp | ERROR] Creating/updating student with ID 'good'\\n\"\n"
               "os.write(2, line); os.write(1, line)\n"
               "os.kill(os.getppid(), signal.SIGKILL)"),
    # 1 GiB to the kernel's raw stdout and 1 GiB to /dev/shm, then the right answer
    "gigabytes": ("import os\nblock = b'x' * 2**20\nfor where in ('shm', 'stdout'):\n"
                  "    try:\n"
                  "        fd = 1 if where == 'stdout' else os.open('/dev/shm/big', "
                  "os.O_WRONLY | os.O_CREAT)\n"
                  "        for _ in range(1024):\n            os.write(fd, block)\n"
                  "        print(where, 'took 1 GiB')\n"
                  "    except OSError as e:\n        print(where, 'stopped:', e)\n"
                  "answer = 42.0"),
}
GOOD = "answer = 6.0 * 7.0"


def _submission(released, code=None, edit=None):
    nb = nbformat.read(released, as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid == "answer" and code is not None:
            cell.source = code
    if edit:
        edit(nb)
    return nb


def _edit_tests(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_answer":
            cell.source = "pass"
    _answer(nb, "answer = 1.0")


def _answer(nb, code):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "answer":
            cell.source = code


def _explain(nb):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == "why":
            cell.source = "Because six times seven is forty-two."


def _strip(nb):
    _answer(nb, "answer = 42.0")
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)


def _uid_processes(uid):
    n = 0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                n += d.stat().st_uid == uid
            except OSError:
                pass
    return n


def _descendants(root, sandboxes=False):
    """{pid: command} of the live processes below ``root``, outside the sandboxes unless
    asked (a process under bubblewrap belongs to a submission, not to the grader)."""
    parent, cmd = {}, {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmd[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except (OSError, ValueError, IndexError):
                pass
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        for child, p in parent.items():
            if p == pid and child not in out:
                out[child] = cmd.get(child, "")
                if sandboxes or not cmd.get(child, "").startswith("bwrap"):
                    todo.append(child)
    return out


@contextlib.contextmanager
def memory_watch(interval=0.2):
    """Yields a dict that ends up holding the peak resident memory (bytes) of this test's
    grader processes (grade.py, nbgrader; not the sandboxed submissions), read from
    /proc/<pid>/status while they run."""
    peak = {"bytes": 0, "process": ""}
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            for pid, cmd in _descendants(os.getpid()).items():
                if "grade.py" not in cmd and "nbgrader" not in cmd:
                    continue
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        kib = int(line.split()[1])
                        if kib * 1024 > peak["bytes"]:
                            peak.update(bytes=kib * 1024, process=cmd[:120])
            stop.wait(interval)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield peak
    finally:
        stop.set()
        thread.join()


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    source, work = base / "course" / "source", base / "work"
    toy_source(source)
    (base / "course" / SECRET_FILE).write_text("the instructor's secret")
    cli = [sys.executable, str(AUTOGRADER / "grade.py")]
    common = ["--workdir", str(work), "--source", str(source)]
    subprocess.run(cli + ["release", "toy"] + common, check=True, capture_output=True,
                   timeout=300)
    released = base / "course" / "labs" / "toy" / "toy.ipynb"
    gradebook = work / "gradebook.db"
    patterns = [str(source / "**" / "*.ipynb"), str(gradebook), str(base / "course" / SECRET_FILE),
                str(work / "submitted" / "**" / "*.ipynb"), "/root/**/*", "/home/**/*",
                f"{sandbox.INNER}/**/*"]
    subs = {"good": _submission(released, GOOD, edit=_explain),
            "zz_good": _submission(released, GOOD, edit=_explain),
            "untouched": _submission(released),
            "tester": _submission(released, edit=_edit_tests),
            "stripped": _submission(released, edit=_strip)}
    for name, code in HOSTILE.items():
        subs[name] = _submission(released, code.format(
            patterns=patterns, deletes=[str(gradebook), str(work), str(source)]))
    subs["late"] = _submission(released, "answer = 6.0 * 7.0", edit=_explain)
    for student, nb in subs.items():
        (work / "submitted" / student / "toy").mkdir(parents=True)
        nbformat.write(nb, work / "submitted" / student / "toy" / "toy.ipynb")
    # handed in 2 days and an hour after the due date: 3 started days, 30% off
    (work / "submitted" / "late" / "toy" / "timestamp.txt").write_text("2026-03-03 13:00:00 UTC")
    subprocess.run(cli + ["duedate", "toy", "2026-03-01 12:00:00 UTC"] + common, check=True,
                   capture_output=True, timeout=300)
    (work / "submitted" / "broken" / "toy").mkdir(parents=True)
    (work / "submitted" / "broken" / "toy" / "toy.ipynb").write_text('{"cells": [')
    # refused before they run: links (dangling; to the solution), a malformed hand-in time,
    # no notebook at all, an unsafe student id
    for student in ("dangling", "solutionlink", "badstamp", "notebookless", "bad id"):
        (work / "submitted" / student / "toy").mkdir(parents=True)
    (work / "submitted" / "dangling" / "toy" / "toy.ipynb").symlink_to("/nonexistent/toy.ipynb")
    (work / "submitted" / "solutionlink" / "toy" / "toy.ipynb").symlink_to(source / "toy" /
                                                                        "toy.ipynb")
    nbformat.write(subs["good"], work / "submitted" / "badstamp" / "toy" / "toy.ipynb")
    (work / "submitted" / "badstamp" / "toy" / "timestamp.txt").write_text("next tuesday-ish")
    (work / "submitted" / "notebookless" / "toy" / "answers.txt").write_text("42")
    nbformat.write(subs["good"], work / "submitted" / "bad id" / "toy" / "toy.ipynb")
    roster = base / "roster.csv"
    roster.write_text("id,first_name,last_name,email\ngood,Ada,Lovelace,ada@example.org\n")
    subprocess.run(cli + ["roster", str(roster)] + common, check=True, capture_output=True,
                   timeout=300)
    t0 = time.monotonic()
    with memory_watch() as peak:
        first = subprocess.run(cli + ["grade", "toy", "--timeout", str(WALL)] + common,
                               capture_output=True, text=True, timeout=3000,
                               env={**os.environ, "HPCLAB_GRADE_OUTPUT": str(OUTPUT)})
    seconds = time.monotonic() - t0
    again = subprocess.run(cli + ["grade", "toy"] + common, capture_output=True, text=True,
                           timeout=600)
    subprocess.run(cli + ["report"] + common, check=True, capture_output=True, timeout=300)
    return {"work": work, "first": first, "again": again, "seconds": seconds, "peak": peak,
            "students": sorted(subs) + ["broken"], "source": source, "base": base,
            "refused": ["dangling", "solutionlink", "badstamp", "notebookless", "bad id"]}


def _rows(work):
    with open(work / "grades.csv") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh)}


def test_every_submission_gets_a_status_and_the_good_one_full_marks(hostile):
    rows = _rows(hostile["work"])
    out = hostile["first"].stdout + hostile["first"].stderr
    assert set(hostile["students"]) <= set(rows), out[-3000:]
    good = rows["good"]
    assert float(good["score"]) == 2 and good["status"] == "graded, manual grading pending", good
    assert (good["first_name"], good["last_name"], good["email"]) == \
        ("Ada", "Lovelace", "ada@example.org")
    late = rows["late"]
    assert (float(late["raw_score"]), float(late["score"])) == (2, 1.4), late
    assert late["status"] == "graded, manual grading pending, late", late
    for student in hostile["students"]:
        if student not in ("good", "late", "zz_good", "gigabytes"):
            assert float(rows[student]["score"]) == 0, (student, rows[student], out[-3000:])
    status = {s: rows[s]["status"].split(",")[0] for s in rows}
    assert float(rows["zz_good"]["score"]) == 2, rows["zz_good"]
    assert status["good"] == status["zz_good"] == "graded", status
    assert status["loop"] == status["sleeper"] == "timed out", status
    assert status["broken"] == "ungradable", status
    assert status["parricide"] == "failed", status
    assert "SIGKILL" in rows["parricide"]["reason"], rows["parricide"]
    assert "File too large" in rows["flooder"]["reason"] or status["flooder"] == "graded"
    # each of these runs in a few seconds alone; on a loaded machine (CI runs three test
    # files at once on two cores, beside the forker's fork storm) a kernel's start alone can
    # pass the WALL of this test, and stopped at the wall it is contained all the same. What
    # they must not read or break is checked below and, without a wall, in
    # test_grading_units.py (the sandbox's view of the course and the homes)
    for student in ("untouched", "tester", "hog", "reader", "deleter", "networker",
                    "orphans", "spy", "patcher"):
        assert status[student] in ("graded", "failed", "timed out"), (student, rows[student])
        if status[student] == "timed out":
            assert f"wall budget of {WALL} s" in rows[student]["reason"], rows[student]
    # forking up to the process cap takes a loaded machine longer than the WALL of this test:
    # stopped at the wall it is contained all the same (the leftover checks look for its
    # children)
    assert status["forker"] in ("graded", "failed", "timed out"), rows["forker"]


def test_each_refused_submission_has_its_own_row_and_reason(hostile):
    rows = _rows(hostile["work"])
    for student in hostile["refused"]:
        assert student in rows, f"{student} has no row in grades.csv"
        assert rows[student]["status"] == "ungradable", rows[student]
        assert float(rows[student]["score"]) == 0, rows[student]
    reasons = {s: rows[s]["reason"] for s in hostile["refused"]}
    assert "is a link" in reasons["dangling"] and "/nonexistent" in reasons["dangling"]
    assert "is a link" in reasons["solutionlink"]
    assert "not a date" in reasons["badstamp"], reasons["badstamp"]
    assert "there is no toy.ipynb" in reasons["notebookless"], reasons["notebookless"]
    assert "not a safe name" in reasons["bad id"], reasons["bad id"]
    assert "not a notebook" in rows["broken"]["reason"], rows["broken"]
    out = hostile["first"].stdout + hostile["first"].stderr
    assert "Traceback" not in out, out[-3000:]
    # the linked solution was never graded: no feedback, no autograded copy of it
    assert not (hostile["work"] / "feedback" / "solutionlink").exists()
    assert not (hostile["work"] / "autograded" / "solutionlink").exists()
    with open(hostile["work"] / "grades-lms.csv") as fh:
        assert set(hostile["refused"]) <= {r["ID"] for r in csv.DictReader(fh)}


def test_a_forged_log_line_changes_only_the_forgers_status(hostile):
    rows = _rows(hostile["work"])
    assert rows["forger"]["status"].startswith("failed"), rows["forger"]
    assert float(rows["forger"]["score"]) == 0
    assert "SIGKILL" in rows["forger"]["reason"], rows["forger"]
    for student in ("good", "zz_good"):
        assert "SIGKILL" not in rows[student]["reason"], rows[student]
        assert "Creating/updating" not in rows[student]["reason"], rows[student]
        assert rows[student]["status"].startswith("graded"), rows[student]


def test_raw_output_and_shared_memory_are_capped(hostile):
    row = _rows(hostile["work"])["gigabytes"]
    assert row["status"].startswith("graded"), row  # stopped by the limits, not the wall
    nb = nbformat.read(hostile["work"] / "autograded" / "gigabytes" / "toy" / "toy.ipynb",
                       as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    # the file-size limit or the size of the sandbox's /dev/shm, whichever comes first
    assert re.search(r"shm stopped: \[Errno (27|28)\]", text), text[-2000:]
    assert "[stopped: this cell wrote more than" in text, text[-2000:]
    assert "took 1 GiB" not in text
    assert hostile["peak"]["bytes"] < 1 << 30, hostile["peak"]
    assert hostile["peak"]["bytes"] > 0, "the grader's memory was never read"


def test_the_class_is_graded_within_its_budget(hostile):
    n = len(hostile["students"])
    # each submission: its wall budget plus nbgrader's own steps, a few seconds
    assert hostile["seconds"] < n * (WALL + 20), hostile["seconds"]


def test_the_gradebook_and_the_course_survive(hostile):
    from nbgrader.api import Gradebook

    work = hostile["work"]
    assert (hostile["source"] / "toy" / "toy.ipynb").exists()
    assert (hostile["base"] / "course" / SECRET_FILE).exists()
    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        graded = {s.student.id for s in gb.assignment_submissions("toy")}
    assert "good" in graded and "deleter" in graded
    assert list((work / "backups").glob("gradebook-*.db")), "no backup before grading"


def test_no_feedback_shows_a_secret(hostile):
    work = hostile["work"]
    pages = list((work / "feedback").rglob("*.html"))
    assert len(pages) >= 10
    for page in pages:
        text = page.read_text(errors="replace")
        # the hidden check's message may show (it says what is wrong), not its code
        for secret in ("abs(answer - 42.0)", "1e-9",
                       "the instructor&#39;s secret", "the instructor's secret",
                       "BEGIN SOLUTION", "SQLite format"):
            assert secret not in text, f"{page}: {secret}"
    # the test cells run in the grader's own process: the submission's kernel never holds
    # their code, neither as a cell it runs (spy) nor in the notebook file it reads (reader)
    status = json.loads((work / "status.json").read_text())["toy"]
    for student in ("spy", "reader"):
        assert "hidden-test line" not in status[student]["reason"], status[student]


def test_no_process_is_left_behind(hostile):
    if os.geteuid() == 0:  # a dedicated user id per sandbox running side by side
        for uid in range(sandbox.grader_uid(), sandbox.grader_uid() + os.cpu_count()):
            assert _uid_processes(uid) == 0, uid
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    assert "sleep 3600" not in out, out


def test_grading_again_skips_what_did_not_change(hostile):
    again = hostile["again"].stdout
    for student in hostile["students"]:
        assert f"{student}/toy: unchanged" in again, again[-2000:]
    assert "LMS" not in again and (hostile["work"] / "grades-lms.csv").exists()
    with open(hostile["work"] / "grades-lms.csv") as fh:
        lms = list(csv.DictReader(fh))
    assert {r["ID"] for r in lms} >= set(hostile["students"])
    assert any(r["Email"] == "ada@example.org" for r in lms)


def test_the_class_report_shows_the_students_numbers(hostile):
    work = hostile["work"]
    status = json.loads((work / "status.json").read_text())["toy"]
    assert status["good"]["values"] == {"answer": 42.0}
    assert status["networker"]["values"] == {"answer": 0.0}  # no network: shown, not graded
    page = (work / "class-report.html").read_text()
    for words in ("Submissions by status", "Checks failed most", "test_answer", "timed out",
                  "ungradable", "STREAM triad", "Ulysses", "data:image/png;base64"):
        assert words in page, words
    assert "abs(answer - 42.0)" not in page


def test_export_runs_nothing(hostile, tmp_path):
    work = tmp_path / "copy"
    shutil.copytree(hostile["work"], work, symlinks=True)
    (work / "grades.csv").unlink()

    def graded_files():
        """What grading writes (the submissions as graded, the feedback), with mtimes."""
        return {str(f.relative_to(work)): f.lstat().st_mtime_ns
                for part in ("submitted", "autograded", "feedback")
                for f in (work / part).rglob("*") if f.is_symlink() or f.is_file()}

    before = graded_files()
    assert before, "the hostile class left nothing graded to compare"
    subprocess.run([sys.executable, str(AUTOGRADER / "grade.py"), "export", "--workdir",
                    str(work), "--source", str(hostile["source"])], check=True,
                   capture_output=True, timeout=120)
    assert graded_files() == before, "export wrote into the graded submissions or feedback"
    assert _rows(work)["good"]["score"] == _rows(hostile["work"])["good"]["score"]


def _kill_grader(grader, started):
    """SIGKILL the grader alone, as an instructor's kill -9 would; what of ``started`` (its
    processes before the kill) is still alive 15 s later."""
    import signal

    os.kill(grader.pid, signal.SIGKILL)
    grader.communicate()
    deadline = time.monotonic() + 15
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [started[p] for p in started if alive(p)]


def test_one_grader_at_a_time_a_killed_one_leaves_nothing_and_the_wall_holds(hostile, tmp_path):
    """HPCLAB_GRADE_WALL=20 without --timeout; a second grader while one runs; the first
    killed mid-run; then a full run."""
    import signal

    work = tmp_path / "work"
    released = hostile["base"] / "course" / "labs" / "toy" / "toy.ipynb"
    (work / "submitted" / "sleeper" / "toy").mkdir(parents=True)
    nbformat.write(_submission(released, HOSTILE["sleeper"]),
                   work / "submitted" / "sleeper" / "toy" / "toy.ipynb")
    cli = [sys.executable, str(AUTOGRADER / "grade.py"), "grade", "toy", "--workdir", str(work),
           "--source", str(hostile["source"])]
    # the graders' temporary folder is this test's own, so that another grader on the
    # machine cannot make or hide a leftover
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "HPCLAB_GRADE_WALL": "20", "TMPDIR": str(temp)}
    first = subprocess.Popen(cli, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not any("run_notebook.py" in c for c in _descendants(first.pid, True).values()):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.2)
        second = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 3, second
        assert f"process {first.pid}" in second.stderr and "Nothing was changed" in \
            second.stderr, second.stderr
        started = _descendants(first.pid, True)
        assert len(started) >= 3, started
        assert not _kill_grader(first, started), "the killed grader left these"
        assert (work / ".grading").exists(), "the killed grader's files were not in its folder"
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
    assert not list(temp.iterdir()), f"left in the temporary folder: {sorted(os.listdir(temp))}"
    third = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    row = _rows(work)["sleeper"]
    assert row["status"] == "timed out", row
    assert "wall budget of 20 s" in row["reason"], row
    entry = json.loads((work / "status.json").read_text())["toy"]["sleeper"]
    assert entry["seconds"] < 60, entry
    assert not (work / ".grading").exists()
    # the killed grader's memory cgroups were removed by the next one
    import cgroup
    from hpclab.processes import alive

    version, parent = cgroup._parent()
    if version is not None:
        left = [p.name for p in parent.glob(cgroup.PREFIX + "*")
                if not alive(int(p.name[len(cgroup.PREFIX):].split("-")[0]))]
        assert not left, left


def _steps(root):
    """The nbgrader steps the grading workers below ``root`` run now (worker.py names a
    worker for its step: hpclab-record, hpclab-feedback, ...)."""
    names = set()
    for pid in _descendants(root):
        with contextlib.suppress(OSError):
            names.add(Path(f"/proc/{pid}/comm").read_text().strip())
    return names


def test_a_grader_killed_while_recording_or_writing_feedback_leaves_a_course_that_grades(
        hostile, tmp_path):
    """Killed in the steps after the sandboxes, one after the other in one course: while the
    gradebook is written, then (the next grader) while the feedback is written. After each
    kill nothing is left running or in the temporary folder and the statuses still read; the
    run after them grades the student with full marks and a page that shows no secret."""
    import signal

    work = tmp_path / "work"
    released = hostile["base"] / "course" / "labs" / "toy" / "toy.ipynb"
    (work / "submitted" / "good" / "toy").mkdir(parents=True)
    nbformat.write(_submission(released, GOOD, edit=_explain),
                   work / "submitted" / "good" / "toy" / "toy.ipynb")
    cli = [sys.executable, str(AUTOGRADER / "grade.py"), "grade", "toy", "--workdir", str(work),
           "--source", str(hostile["source"])]
    temp = tmp_path / "tmp"  # the graders' own temporary folder (see the test above)
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    for step, marker in (("recording", "hpclab-record"), ("feedback", "hpclab-feedback")):
        first = subprocess.Popen(cli, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True, env=env)
        try:
            deadline = time.monotonic() + 240
            while marker not in _steps(first.pid):
                assert first.poll() is None and time.monotonic() < deadline, \
                    (step, first.communicate())
                time.sleep(0.05)
            assert not _kill_grader(first, _descendants(first.pid, True)), \
                (step, "the killed grader left these")
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
                first.wait()
        assert not list(temp.iterdir()), (step, sorted(os.listdir(temp)))
        if (work / "status.json").exists():
            json.loads((work / "status.json").read_text())
    again = subprocess.run(cli, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    row = _rows(work)["good"]
    assert float(row["score"]) == 2 and row["status"] == "graded, manual grading pending", row
    page = (work / "feedback" / "good" / "toy" / "toy.html").read_text(errors="replace")
    assert "abs(answer - 42.0)" not in page and "BEGIN SOLUTION" not in page
    assert not (work / ".grading").exists()
