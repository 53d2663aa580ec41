"""make import-zip: a zip of submissions exported from an LMS comes into the course
(autograder/lms_import.py), and what cannot be graded is reported, not lost or scored 0."""
import json
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))
import lms_import  # noqa: E402
import screen  # noqa: E402

NOTEBOOK = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _zip(path, entries):
    """entries: (name, text, (y, m, d, H, M, S)) or (name, target, 'link')."""
    with zipfile.ZipFile(path, "w") as z:
        for name, text, when in entries:
            info = zipfile.ZipInfo(name, date_time=(2026, 11, 20, 10, 0, 0)
                                   if when == "link" else when)
            if when == "link":
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            z.writestr(info, text)
    return path


def test_a_canvas_export(tmp_path):
    day = (2026, 11, 20, 10, 0, 0)
    archive = _zip(tmp_path / "export.zip", [
        ("doealice_1001_5001_ring.ipynb", NOTEBOOK.replace("[]", '[{"cell_type": "markdown", '
                                                         '"metadata": {}, "source": "alice"}]', 1),
         day),
        ("smithbob_1002_5002_ring.ipynb", "first", day),
        ("smithbob_1002_5003_ring-1.ipynb", NOTEBOOK, (2026, 11, 21, 9, 0, 0)),
        ("roecarol_LATE_1003_5004_Untitled.ipynb", NOTEBOOK, day),
        ("evedave_1004_5005_ring.ipynb", "/etc/passwd", "link"),
        ("readme.txt", "not a submission", day),
        ("__MACOSX/._doealice_1001_5001_ring.ipynb", "junk", day),
    ])
    submitted, replaced = tmp_path / "submitted", tmp_path / "replaced"
    (submitted / "1001" / "ring").mkdir(parents=True)
    (submitted / "1001" / "ring" / "ring.ipynb").write_text("an older hand-in")
    done = lms_import.collect(archive, "ring", submitted, replaced)
    said = "\n".join(done.reports)
    assert done.students == ["1001", "1002", "1003"]
    # the newest of bob's two hand-ins is kept and both are named
    assert (submitted / "1002" / "ring" / "ring.ipynb").read_text() == NOTEBOOK
    assert "1002: ring.ipynb handed in more than once; kept smithbob_1002_5003_ring-1.ipynb" \
        in said and "smithbob_1002_5002_ring.ipynb" in said
    # carol's notebook of another name is kept, reported here and by the grader's screen
    assert (submitted / "1003" / "ring" / "Untitled.ipynb").is_file()
    assert "1003: no ring.ipynb in the export (handed in Untitled.ipynb)" in said
    assert "ring.ipynb" in screen.problem(submitted / "1003" / "ring", "ring.ipynb")
    assert screen.problem(submitted / "1002" / "ring", "ring.ipynb") is None
    # a link is not written; a path of no Canvas shape is reported; macOS's junk is skipped
    assert not (submitted / "1004").exists() and "evedave_1004_5005_ring.ipynb: a link" in said
    assert "readme.txt: matches no canvas file name" in said and "MACOSX" not in said
    # alice's earlier submission is kept in replaced/, and said so
    (old,) = replaced.iterdir()
    assert (old / "ring.ipynb").read_text() == "an older hand-in"
    assert "1001: the submission already in the course moved to" in said


def test_moodle_and_a_pattern_with_the_hand_in_time(tmp_path):
    day = (2026, 11, 20, 10, 0, 0)
    moodle = _zip(tmp_path / "m.zip", [
        ("Jane Doe_4711_assignsubmission_file_/ring.ipynb", NOTEBOOK, day)])
    done = lms_import.collect(moodle, "ring", tmp_path / "s", tmp_path / "r", lms="moodle")
    assert done.students == ["jane.doe"] and (tmp_path / "s/jane.doe/ring/ring.ipynb").is_file()
    custom = _zip(tmp_path / "c.zip", [
        ("alice--2026-12-01 16:59:00 UTC--ring.ipynb", NOTEBOOK, day),
        ("../../etc--2026-12-01 10:00:00 UTC--ring.ipynb", NOTEBOOK, day)])
    done = lms_import.collect(custom, "ring", tmp_path / "t", tmp_path / "r",
                              pattern=r"(?:.*/)?(?P<student>[^/]+?)--(?P<timestamp>[^/]+)--"
                                      r"(?P<file>[^/]+)")
    assert done.students == ["alice", "etc"]
    assert (tmp_path / "t/alice/ring/timestamp.txt").read_text() == "2026-12-01 16:59:00 UTC\n"
    assert screen.problem(tmp_path / "t/alice/ring", "ring.ipynb") is None
    # nothing is written outside the course's folder, whatever the path in the zip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.zip", "m.zip", "s", "t"]


@pytest.mark.parametrize("kwargs, says", [
    ({"lms": "blackboard"}, "choose one of canvas, moodle, folders"),
    ({"pattern": "(?P<student>.*)"}, "needs the named groups"),
    ({"pattern": "(?P<student"}, "not a regular expression"),
])
def test_bad_options_say_what_to_do(tmp_path, kwargs, says):
    archive = _zip(tmp_path / "e.zip", [("x", "y", (2026, 1, 1, 0, 0, 0))])
    with pytest.raises(lms_import.ExportError, match=says):
        lms_import.collect(archive, "ring", tmp_path / "s", tmp_path / "r", **kwargs)


def test_the_command(tmp_path):
    """grade.py import-zip (make import-zip) on a course folder, and a file that is no zip."""
    archive = _zip(tmp_path / "export.zip", [
        ("doealice_1001_5001_ring.ipynb", NOTEBOOK, (2026, 11, 20, 10, 0, 0))])
    work = tmp_path / "course"

    def run(*args):
        return subprocess.run([sys.executable, str(ROOT / "autograder" / "grade.py"),
                               "import-zip", *args, "--workdir", str(work)],
                              capture_output=True, text=True, timeout=120)
    res = run("ring", str(archive))
    assert res.returncode == 0, res.stderr
    assert "1 submission(s) of ring imported" in res.stdout and "make grade LAB=ring" in res.stdout
    assert (work / "submitted" / "1001" / "ring" / "ring.ipynb").is_file()
    (tmp_path / "notes.zip").write_text("not a zip")
    res = run("ring", str(tmp_path / "notes.zip"))
    assert res.returncode != 0 and "cannot be read as a zip file" in res.stderr
    res = run("nosuchlab", str(archive))
    assert res.returncode != 0 and "import-zip takes a lab" in res.stderr


def test_a_damaged_entry_moves_nothing_and_names_collide_not_merge(tmp_path):
    day = (2026, 11, 20, 10, 0, 0)
    archive = _zip(tmp_path / "bad.zip", [("doealice_1001_5001_ring.ipynb", NOTEBOOK, day),
                                          ("doealice_1001_5001_results-1.csv", "a,b\n", day)])
    raw = bytearray(archive.read_bytes())
    at = raw.index(NOTEBOOK.encode())
    raw[at + 5] ^= 0xFF  # the stored notebook's bytes no longer match their CRC
    archive.write_bytes(bytes(raw))
    submitted, replaced = tmp_path / "s", tmp_path / "r"
    (submitted / "1001" / "ring").mkdir(parents=True)
    (submitted / "1001" / "ring" / "ring.ipynb").write_text("recorded before")
    done = lms_import.collect(archive, "ring", submitted, replaced)
    assert done.students == [] and "cannot be read from the zip" in "\n".join(done.reports)
    assert (submitted / "1001" / "ring" / "ring.ipynb").read_text() == "recorded before"
    assert not replaced.exists()
    # Moodle: two participants of one name are not merged into one student
    moodle = _zip(tmp_path / "m.zip", [
        ("Jane Doe_4711_assignsubmission_file_/ring.ipynb", NOTEBOOK, day),
        ("Jane Doe_4712_assignsubmission_file_/ring.ipynb", NOTEBOOK, day)])
    done = lms_import.collect(moodle, "ring", tmp_path / "m", replaced, lms="moodle")
    assert done.students == [] and "2 participants of this name (4711, 4712)" in \
        "\n".join(done.reports)
    # folders; Canvas's hand-in number is taken off the lab's notebook only
    folders = _zip(tmp_path / "f.zip", [("bob/ring.ipynb", NOTEBOOK, day),
                                        ("bob/results-1.csv", "x\n", day)])
    done = lms_import.collect(folders, "ring", tmp_path / "f", replaced, lms="folders")
    assert done.students == ["bob"]
    assert sorted(p.name for p in (tmp_path / "f/bob/ring").iterdir()) == ["results-1.csv",
                                                                           "ring.ipynb"]
    canvas = _zip(tmp_path / "c.zip", [("doealice_1001_5001_results-1.csv", "1\n", day),
                                       ("doealice_1001_5002_results-2.csv", "2\n", day),
                                       ("doealice_1001_5003_ring.ipynb", NOTEBOOK, day)])
    lms_import.collect(canvas, "ring", tmp_path / "c", replaced)
    assert sorted(p.name for p in (tmp_path / "c/1001/ring").iterdir()) == [
        "results-1.csv", "results-2.csv", "ring.ipynb"]
