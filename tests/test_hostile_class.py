"""A class of hostile and broken submissions graded beside a good one, in the sandbox.

A small course of its own (one answer, one test with a hidden part, one written answer)
keeps this quick; the six labs' own round trip is in test_notebooks.py. Every submission
gets a status, the good one its full marks, the gradebook survives, no feedback shows
hidden-test code, no process is left behind, and grading again skips what did not change.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
AUTOGRADER = ROOT / "autograder"
sys.path.insert(0, str(AUTOGRADER))

import grade  # noqa: E402
import sandbox  # noqa: E402

WALL = 15  # seconds per submission in this test
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
}


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
    subs = {"good": _submission(released, "answer = 6.0 * 7.0", edit=_explain),
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
    roster = base / "roster.csv"
    roster.write_text("id,first_name,last_name,email\ngood,Ada,Lovelace,ada@example.org\n")
    subprocess.run(cli + ["roster", str(roster)] + common, check=True, capture_output=True,
                   timeout=300)
    t0 = time.monotonic()
    first = subprocess.run(cli + ["grade", "toy", "--timeout", str(WALL)] + common,
                           capture_output=True, text=True, timeout=3000)
    seconds = time.monotonic() - t0
    again = subprocess.run(cli + ["grade", "toy"] + common, capture_output=True, text=True,
                           timeout=600)
    subprocess.run(cli + ["report"] + common, check=True, capture_output=True, timeout=300)
    return {"work": work, "first": first, "again": again, "seconds": seconds,
            "students": sorted(subs) + ["broken"], "source": source, "base": base}


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
        if student not in ("good", "late"):
            assert float(rows[student]["score"]) == 0, (student, rows[student], out[-3000:])
    status = {s: rows[s]["status"].split(",")[0] for s in rows}
    assert status["loop"] == status["sleeper"] == "timed out", status
    assert status["broken"] == "ungradable", status
    assert status["parricide"] == "failed", status
    assert "SIGKILL" in rows["parricide"]["reason"], rows["parricide"]
    assert "File too large" in rows["flooder"]["reason"] or status["flooder"] == "graded"
    for student in ("untouched", "tester", "hog", "forker", "reader", "deleter", "networker",
                    "orphans", "spy", "patcher"):
        assert status[student] in ("graded", "failed"), (student, rows[student])


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
    if os.geteuid() == 0:
        assert _uid_processes(sandbox.grader_uid()) == 0
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
    shutil.copytree(hostile["work"], work)
    (work / "grades.csv").unlink()
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(AUTOGRADER / "grade.py"), "export", "--workdir",
                    str(work), "--source", str(hostile["source"])], check=True,
                   capture_output=True, timeout=120)
    assert time.monotonic() - t0 < 30
    assert _rows(work)["good"]["score"] == _rows(hostile["work"])["good"]["score"]
