"""The grading round trip of a group of labs, for a test module: the solution (alice) full
marks, the untouched lab (bob) zero with its checks intact, a broken file (carol) ungradable
without spoiling the others, feedback without hidden tests, no widget state.

``globals().update(define(labs))`` in a test module defines its ``graded`` fixture and tests.
Two modules grade half of the labs each, so that two pytest-xdist workers (``--dist
loadfile``) grade side by side.
"""
import ast
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
AUTOGRADER = ROOT / "autograder"


def cells(path):
    return nbformat.read(path, as_version=4).cells


def _scores(work, lab, student):
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{work / 'gradebook.db'}") as gb:
        sub = gb.find_submission_notebook(lab, lab, student)
        return {g.name: (g.score, g.max_score) for g in sub.grades if g.auto_score is not None
                or g.cell_type == "code"}


# what alice's own run printed in her first code cell (a submitted notebook keeps its outputs)
OWN_RUN = "measured on alice's laptop: 41.7 GB/s <b>"


def _add_own_output(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    first.outputs = [nbformat.v4.new_output("stream", name="stdout", text=OWN_RUN + "\n")]
    nbformat.write(nb, path)


def define(labs):
    """{name: fixture or test} of the grading round trip of ``labs``."""
    @pytest.fixture(scope="module")
    def graded(tmp_path_factory):
        """Grade the solution (alice), the untouched lab (bob) and a broken file (carol) of every
        lab in one grading run (its submissions side by side, one per core):
        {lab: (course folder, the grading process)}."""
        work = tmp_path_factory.mktemp("grading")
        for lab in labs:
            for student, source in (("alice", ROOT / "solutions"), ("bob", ROOT / "labs")):
                dest = work / "submitted" / student / lab
                dest.mkdir(parents=True)
                shutil.copy(source / lab / f"{lab}.ipynb", dest)
            _add_own_output(work / "submitted" / "alice" / lab / f"{lab}.ipynb")
            carol = work / "submitted" / "carol" / lab
            carol.mkdir(parents=True)
            (carol / f"{lab}.ipynb").write_text("{ this is not a notebook")
        done = subprocess.run([sys.executable, str(AUTOGRADER / "grade.py"), "grade", *labs,
                               "--workdir", str(work)], capture_output=True, text=True,
                              timeout=1500)
        return {lab: (work, done) for lab in labs}


    @pytest.mark.parametrize("lab", labs)
    def test_solution_autogrades_to_full_marks(graded, lab):
        from readiness import skip_if_unready

        skip_if_unready(lab, f"the {lab} solution's full marks")
        work, proc = graded[lab]
        scores = _scores(work, lab, "alice")
        assert scores, proc.stdout + proc.stderr
        for name, (score, max_score) in scores.items():
            assert score == max_score, f"{name}: {score}/{max_score}\n{proc.stdout[-3000:]}"


    @pytest.mark.parametrize("lab", labs)
    def test_untouched_lab_autogrades_to_zero(graded, lab):
        work, _ = graded[lab]
        scores = _scores(work, lab, "bob")
        assert scores and all(score == 0 for score, _ in scores.values()), scores
        # an unanswered exercise's checks say so, not NameError
        nb = nbformat.read(work / "autograded" / "bob" / lab / f"{lab}.ipynb", as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                names = [o.get("ename") for o in cell.outputs if o.get("output_type") == "error"]
                assert names and "NameError" not in names, (meta["grade_id"], names)


    def test_a_broken_submission_does_not_spoil_the_others(graded):
        for work, proc in {str(w): (w, p) for w, p in graded.values()}.values():
            assert proc.returncode == 1
            assert "carol" in proc.stdout and "could not be graded" in proc.stdout
            grades = (work / "grades.csv").read_text()
            assert "alice" in grades and "bob" in grades


    @pytest.mark.parametrize("lab", labs)
    def test_feedback_shows_no_hidden_tests(graded, lab):
        """Words that occur only inside hidden tests must not reach the students' feedback."""
        import re

        sys.path.insert(0, str(AUTOGRADER))
        from feedback import strip_hidden

        visible, hidden, messages = "", "", ""
        for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
            shown, _ = strip_hidden(cell.source)
            visible += shown + "\n"
            if "BEGIN HIDDEN TESTS" in cell.source:
                hidden += cell.source.split("BEGIN HIDDEN TESTS")[1].split("END HIDDEN TESTS")[0]
                # a failed check's message is meant to be read: its words are not secret
                for node in ast.walk(ast.parse(cell.source)):
                    if isinstance(node, ast.Assert) and node.msg is not None:
                        messages += ast.unparse(node.msg) + "\n"
        words = lambda text: set(re.findall(r"\w{8,}", text))  # noqa: E731
        secret = words(hidden) - words(visible) - words(messages)
        assert secret, "no hidden-only words to look for"
        work, _ = graded[lab]
        for student in ("alice", "bob"):
            html = (work / "feedback" / student / lab / f"{lab}.html").read_text()
            assert "HIDDEN TESTS" not in html
            leaked = {w for w in secret if re.search(rf"\b{w}\b", html)}
            assert not leaked, f"{student}'s feedback shows hidden-test code: {leaked}"


    def test_the_hand_grader_reads_the_students_own_run_beside_the_graded_one(graded):
        """The graded run is the grading profile's; the written answers speak of the
        student's numbers, shown (escaped) under their heading."""
        for lab, (work, proc) in graded.items():
            page = (work / "feedback" / "alice" / lab / f"{lab}.html").read_text()
            assert "the student's own run of this cell" in page, f"{lab}: {proc.stdout[-2000:]}"
            assert "alice's laptop: 41.7 GB/s &lt;b&gt;" in page, lab
            assert "41.7 GB/s <b>" not in page, \
                f"{lab}: the student's output reached the page as HTML"

    @pytest.mark.parametrize("lab", labs)
    def test_each_input_is_measured_once_for_the_class(graded, lab):
        """A lab that takes another chapter's measurement takes the one the grader made
        before the submissions ran (machine_inputs.py), not one of its own."""
        from hpclab.kernels import registry

        work, proc = graded[lab]
        for source in registry.get(lab).inputs:
            assert f"{lab} input, the same for every submission: {source}:" in proc.stdout, \
                proc.stdout[-3000:]
        for student in ("alice", "bob"):
            text = (work / "autograded" / student / lab / f"{lab}.ipynb").read_text()
            assert "measured now" not in text, f"{student}'s {lab} measured its own input"
        # and what it simulates alike for every student is simulated once, into the
        # grader's cache that every sandbox reads
        import importlib

        from hpclab import simulate

        if simulate.available() and hasattr(importlib.import_module(f"hpclab.chapters.{lab}"),
                                            "shared_simulations"):
            assert f"{lab}: its simulations, the same for every submission, were run once " \
                "for the class" in proc.stdout, proc.stdout[-3000:]

    @pytest.mark.parametrize("lab", labs)
    def test_a_graded_notebook_keeps_no_widget_state(graded, lab):
        """Progress bars are text: reopening a saved or graded notebook shows no
        'Error displaying widget: model not found'."""
        work, _ = graded[lab]
        text = (work / "autograded" / "alice" / lab / f"{lab}.ipynb").read_text()
        assert "application/vnd.jupyter.widget-view+json" not in text
        assert "application/vnd.jupyter.widget-state+json" not in text

    return {name: value for name, value in locals().items()
            if name == "graded" or name.startswith("test_")}
