"""make student-release: what students get holds no solution, hidden test or grading, and
works as a repository of its own (autograder/student_release.py)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))
import student_release as sr  # noqa: E402

SOURCES = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def _release(dest, *extra):
    return subprocess.run([sys.executable, str(ROOT / "autograder" / "student_release.py"),
                           str(dest), *extra], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    dest = tmp_path_factory.mktemp("students") / "hpclab"
    res = _release(dest)
    assert res.returncode == 0, res.stderr
    return dest


def test_release_leaves_out_solutions_tests_and_grading(released):
    for left_out in ("solutions", "autograder", "hub", "tests", ".ci"):
        assert not (released / left_out).exists(), left_out
    names = {p.name for p in released.rglob("*")}
    assert not names & {"gradebook.db", "nbgrader_config.py", "grades.csv", "status.json"}
    for lab in (ROOT / "labs").iterdir():
        assert (released / "labs" / lab.name / f"{lab.name}.ipynb").is_file(), lab.name
    for kept in ("book", "src/hpclab", "pyproject.toml", "setup.py", "environment.yml",
                 "_toc.yml", "_config.yml", "LICENSE"):
        assert (released / kept).exists(), kept


def test_release_holds_no_solution_or_hidden_test_text(released):
    """Every solution and hidden-test line of every source notebook is searched for in every
    file of the release (three consecutive lines at a time: single lines such as ``else:`` are
    in any program)."""
    assert len(SOURCES) >= 8
    regions = [r for nb in SOURCES for r in sr.regions(nb)[0]]
    hidden = sum("HIDDEN" in "".join(c["source"]) for nb in SOURCES
                 for c in json.loads(nb.read_text())["cells"])
    assert len(regions) > 100 and hidden > 10, (len(regions), hidden)
    assert sr.leaks(released, SOURCES) == []
    # and the released labs hold none of the source notebooks' hidden tests' markers
    for nb in released.rglob("*.ipynb"):
        assert "BEGIN HIDDEN TESTS" not in nb.read_text() and "BEGIN SOLUTION" not in \
            nb.read_text(), nb


def test_search_finds_a_solution_that_was_copied(released, tmp_path):
    """The search is not vacuous: a solution region written into a shipped file is found, and
    a hidden test's lines too."""
    nb = ROOT / "solutions" / "pingpong" / "pingpong.ipynb"
    found, _ = sr.regions(nb)
    region = max(found, key=len)
    copy = tmp_path / "copy"
    (copy / "src").mkdir(parents=True)
    (copy / "src" / "helpers.py").write_text("def f():\n    " + "\n    ".join(region) + "\n")
    hits = sr.leaks(copy, [nb])
    assert hits and {h[0] for h in hits} == {"src/helpers.py"} and hits[0][1] == "pingpong"
    hidden = next(c for c in json.loads(nb.read_text())["cells"]
                  if "BEGIN HIDDEN TESTS" in "".join(c["source"]))
    (copy / "src" / "helpers.py").write_text("".join(hidden["source"]))
    assert sr.leaks(copy, [nb])


def test_readme_and_makefile_lose_their_instructors_parts(released):
    readme = (released / "README.md").read_text()
    for gone in ("<!-- instructors", "## Instructors", "make grade", "make release",
                 "make test", "solutions/", "autograder/", "## Adding a chapter"):
        assert gone not in readme, gone
    assert "## Students" in readme and "make lab" in readme
    makefile = (released / "Makefile").read_text()
    assert "instructors" not in makefile and "autograder/grade.py" not in makefile
    helped = subprocess.run(["make", "-s", "-C", str(released), "help"], capture_output=True,
                            text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert "make lab" in helped.stdout and "make grade" not in helped.stdout
    # every make target the students' README shows (not in a comment) is one their Makefile has
    shown = re.sub(r"<!--.*?-->", "", readme, flags=re.S)
    targets = sorted(set(re.findall(r"(?:^|`)make ([a-z][a-z-]*)", shown, flags=re.M)))
    assert {"book", "lab", "setup"} <= set(targets)
    for target in targets:
        res = subprocess.run(["make", "-n", "-C", str(released), target], capture_output=True,
                             text=True, timeout=60)
        assert "No rule to make target" not in res.stderr, (target, res.stderr)
    # the root README's parts are balanced, so no instructors' text reaches a student
    assert sr.strip_parts((ROOT / "README.md").read_text(), "<!-- instructors -->",
                          "<!-- /instructors -->", "README.md") == readme


def test_bad_destinations_are_refused_and_nothing_is_lost(tmp_path, released):
    res = _release(ROOT / "build" / "students")
    assert res.returncode == 2 and "inside the repository" in res.stderr
    assert not (ROOT / "build" / "students").exists()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    res = _release(foreign)
    assert res.returncode == 2 and "not a student release" in res.stderr
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    # an earlier release is replaced, its .git kept
    again = tmp_path / "again"
    assert _release(again).returncode == 0
    (again / ".git").mkdir()
    (again / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (again / "stale.txt").write_text("from an older release")
    assert _release(again).returncode == 0
    assert (again / ".git" / "HEAD").is_file() and not (again / "stale.txt").exists()
    # (make, even make help, makes an empty .venv in the folder it runs in)
    assert sorted(p.name for p in again.iterdir()) == sorted(
        [".git", *(p.name for p in released.iterdir() if p.name != ".venv")])


@pytest.mark.parametrize("text, says", [
    ("a\n<!-- instructors -->\nb\n", "never closed"),
    ("a\n<!-- /instructors -->\n", "with no"),
    ("<!-- instructors -->\n<!-- instructors -->\n<!-- /instructors -->\n", "again before"),
])
def test_unbalanced_parts_stop_the_release(text, says):
    with pytest.raises(sr.ReleaseError, match=says):
        sr.strip_parts(text, "<!-- instructors -->", "<!-- /instructors -->", "README.md")


def test_a_leak_in_the_repository_stops_the_release(tmp_path):
    """A repository whose shipped code holds a solution's lines: nothing is written and the
    message names the file."""
    repo = tmp_path / "repo"
    (repo / "solutions" / "lab").mkdir(parents=True)
    (repo / "src").mkdir()
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}, "outputs": [],
            "execution_count": None,
            "source": "def area(r):\n    ### BEGIN SOLUTION\n    import math\n"
                      "    squared = r * r\n    return math.pi * squared\n    ### END SOLUTION\n"}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (repo / "solutions" / "lab" / "lab.ipynb").write_text(json.dumps(nb))
    (repo / "src" / "geometry.py").write_text("import math\nsquared = r * r\n"
                                              "return math.pi * squared\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    dest = tmp_path / "out"
    with pytest.raises(sr.ReleaseError, match="src/geometry.py"):
        sr.release(dest, root=repo)
    assert not dest.exists()
