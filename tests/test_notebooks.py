"""Labs and grading: solutions -> labs, autograding round trip, hidden tests, timeouts."""
import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager

import grading_round_trip
from grading_round_trip import cells

ROOT = Path(__file__).resolve().parents[1]
AUTOGRADER = ROOT / "autograder"
LABS = sorted(p.name for p in (ROOT / "solutions").iterdir() if list(p.glob("*.ipynb")))


def _mpi_calls():
    """Calls that start or talk to MPI: the engines' and every harness in hpclab.exercises
    that takes a timeout."""
    import inspect

    from hpclab import exercises

    harnesses = {name for name, f in exercises.harnesses().items()
                 if "timeout" in inspect.signature(f).parameters}
    return {"run", "start", "cluster"} | harnesses


MPI_CALLS = _mpi_calls()


def nbgrader_config():
    """Execute nbgrader_config.py with a stand-in get_config and return the config."""
    from traitlets.config import Config

    cfg = Config()
    code = (AUTOGRADER / "nbgrader_config.py").read_text()
    exec(compile(code, str(AUTOGRADER / "nbgrader_config.py"), "exec"),
         {"get_config": lambda: cfg, "__file__": str(AUTOGRADER / "nbgrader_config.py")})
    return cfg


def test_every_chapter_has_a_lab():
    from hpclab.kernels import registry

    assert set(registry.slugs()) <= set(LABS)
    for lab in LABS:
        assert (ROOT / "labs" / lab / f"{lab}.ipynb").exists(), f"labs/{lab} missing: make release"


@pytest.fixture(scope="module")
def fresh_release(tmp_path_factory):
    """Every lab generated afresh from solutions/, in one nbgrader run ("*")."""
    out = tmp_path_factory.mktemp("release")
    subprocess.run([str(Path(sys.executable).with_name("nbgrader")), "generate_assignment", "*",
                    "--force", f"--CourseDirectory.release_directory={out}",
                    f"--CourseDirectory.db_url=sqlite:///{out / 'gb.db'}"],
                   cwd=AUTOGRADER, check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.parametrize("lab", LABS)
def test_labs_equal_a_fresh_generate_assignment(lab, fresh_release):
    tmp_path = fresh_release
    fresh = sorted(p.relative_to(tmp_path / lab)
                   for p in (tmp_path / lab).rglob("*") if p.is_file())
    committed = sorted(p.relative_to(ROOT / "labs" / lab)
                       for p in (ROOT / "labs" / lab).rglob("*") if p.is_file())
    assert fresh == committed, "labs/ has other files than a fresh release: run `make release`"
    for rel in fresh:
        if rel.suffix == ".ipynb":
            a = json.loads((tmp_path / lab / rel).read_text())
            b = json.loads((ROOT / "labs" / lab / rel).read_text())
            assert a == b, f"labs/{lab}/{rel} drifted from solutions/: run `make release`"


def test_no_solution_or_hidden_test_text_in_labs():
    for path in (ROOT / "labs").rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
                assert marker not in text, f"{marker} in {path}"


@pytest.mark.parametrize("lab", LABS)
def test_grade_cells_are_named_weighted_and_have_hidden_tests(lab):
    ids, tests, answers = set(), 0, 0
    for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        assert meta["schema_version"] == 3
        assert meta["grade_id"] not in ids, f"duplicate grade_id {meta['grade_id']}"
        ids.add(meta["grade_id"])
        if meta.get("grade"):
            assert 0.5 <= meta["points"] <= 3, f"{meta['grade_id']}: keep points small"
        if meta.get("grade") and not meta.get("solution"):
            tests += 1
            assert "BEGIN HIDDEN TESTS" in cell.source, f"{meta['grade_id']} has no hidden test"
            assert cell.source.lstrip().startswith('"""'), f"{meta['grade_id']}: say what it checks"
        if meta.get("solution") and cell.cell_type == "code":
            answers += 1
            assert "BEGIN SOLUTION" in cell.source
    assert tests >= 3 and answers >= 3


# The labs made into whole assignments (a kernel to write, predictions, the simulated cluster,
# written answers with rubrics) say so in their metadata; the others follow lab by lab.
ASSIGNMENTS = [lab for lab in LABS if nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb",
                                                    as_version=4).metadata.get("hpclab", {})
               .get("assignment")]


def _points(lab):
    """(total, modelling) points of a lab: hand-graded answers and the checks marked
    ``hpclab.modelling`` are on modelling and interpretation."""
    total = modelling = 0.0
    for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            total += meta["points"]
            if cell.cell_type == "markdown" or cell.metadata.get("hpclab", {}).get("modelling"):
                modelling += meta["points"]
    return total, modelling


def test_the_assignments_are_found():
    assert len(ASSIGNMENTS) >= 2, ASSIGNMENTS


@pytest.mark.parametrize("lab", ASSIGNMENTS)
def test_an_assignment_is_worth_20_points_40_percent_on_modelling_and_says_so(lab):
    import re

    total, modelling = _points(lab)
    assert total >= 20 and modelling >= 0.4 * total, (total, modelling)
    head = cells(ROOT / "labs" / lab / f"{lab}.ipynb")[0].source
    assert re.search(r"Expected time: \d+–\d+ minutes", head), "say the expected time at the top"
    said = re.search(r"(\d+) points: (\d+) for code, (\d+) for", head)
    assert said and [float(x) for x in said.groups()] == [total, total - modelling, modelling], \
        f"the head of the lab should say {total:g} points, {modelling:g} on modelling"
    for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and meta.get("solution"):
            points = f"{meta['points']:g} point" + ("" if meta["points"] == 1 else "s")
            assert cell.source.startswith(f"**Rubric ({points}).**"), \
                f"{meta['grade_id']}: a written answer needs a rubric for the grader"


@pytest.mark.parametrize("lab", LABS)
def test_every_check_says_what_is_wrong(lab):
    """Every assert of a test cell, visible or hidden, carries a message."""
    for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.Assert):
                    assert node.msg is not None, f"{lab}/{meta['grade_id']}: " \
                        f"{ast.unparse(node)[:80]} has no message"


@pytest.mark.parametrize("lab", LABS)
def test_every_mpi_call_has_a_timeout_below_the_cell_timeout(lab):
    cell_timeout = nbgrader_config().SandboxedExecute.timeout
    names = {}
    for cell in cells(ROOT / "solutions" / lab / f"{lab}.ipynb"):
        if cell.cell_type != "code":
            continue
        tree = ast.parse(TransformerManager().transform_cell(cell.source))  # magics too
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        names[target.id] = node.value.value
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name not in MPI_CALLS or name == "start":
                    continue
                kw = {k.arg: k.value for k in node.keywords}
                assert "timeout" in kw, f"{ast.unparse(node)} has no timeout"
                value = kw["timeout"]
                seconds = value.value if isinstance(value, ast.Constant) else names[value.id]
                assert 0 < seconds < cell_timeout, f"{ast.unparse(node)}: {seconds} s"


# the grading round trip (solution, untouched lab, broken file) of the first half of the labs;
# tests/test_notebooks_grading.py grades the other half, so that two test workers grade side
# by side
globals().update(grading_round_trip.define(LABS[:len(LABS) // 2]))


def test_a_feedback_failure_is_reported_not_ignored(tmp_path, capsys, monkeypatch):
    """grade.py keeps no module-level state and reports every failed step."""
    import subprocess as sp

    sys.path.insert(0, str(AUTOGRADER))
    import grade
    import machine_inputs

    monkeypatch.delenv("HPCLAB_GRADE_WALL", raising=False)
    # the labs' inputs (other chapters' runs, a minute on a loaded machine) are not what this
    # test is about: none measured, each lab would measure its own, and none runs here
    monkeypatch.setattr(machine_inputs, "measure", lambda *args, **kwargs: {})
    lab, other = LABS[0], LABS[1]
    for name in (lab, other):
        (tmp_path / "submitted" / "dora" / name).mkdir(parents=True)
        shutil.copy(ROOT / "labs" / name / f"{name}.ipynb", tmp_path / "submitted" / "dora" / name)
    calls, generated = [], []

    class FakeCourse(grade.Course):
        def step(self, workers, kind, name, student=None, options=(), env=None, timeout=None):
            env = env or {}
            if name == lab:
                calls.append((kind, timeout, "HPCLAB_GRADE_EXECUTED" in env))
            if kind == "generate_assignment":
                generated.append(name)
            if kind == "autograde" and "HPCLAB_GRADE_EXECUTED" in env:  # as nbgrader does
                out = Path(self.workdir) / "autograded" / "dora" / name
                out.mkdir(parents=True, exist_ok=True)
                (out / f"{name}.ipynb").write_text("{}")
            return sp.CompletedProcess([kind, name], 1 if kind == "generate_feedback" else 0,
                                       "feedback broke here")

        def nbgrader(self, *args, **kwargs):
            raise AssertionError(f"grading ran the nbgrader command: {args}")

        def submit_autograde(self, pool, name, student, options, env):  # as the sandbox does
            import concurrent.futures

            if name == lab:
                calls.append(("autograde", float(env["HPCLAB_GRADE_WALL"]), False))
            status = Path(env["HPCLAB_GRADE_STATUS"])
            (status / "dora.json").write_text(json.dumps(
                {"status": "finished", "reason": "", "isolation": "bwrap", "seconds": 1}))
            shutil.copy(ROOT / "labs" / name / f"{name}.ipynb", status / "dora.ipynb")
            done = concurrent.futures.Future()
            done.set_result(sp.CompletedProcess(["autograde"], 0, ""))
            return done

    assert grade.grade([lab, other], course=FakeCourse(tmp_path), jobs=1) == 1
    # two of the labs graded: only those two enter the gradebook, not "*" (every lab)
    assert sorted(generated) == sorted([lab, other])
    out = capsys.readouterr().out
    assert f"dora/{lab} was graded, but its feedback could not be written" in out
    assert "feedback broke here" in out
    # each submission ran on its own with the lab's budget, then was recorded without running
    assert [(what, recorded) for what, _, recorded in calls if what == "autograde"] == \
        [("autograde", False), ("autograde", True)]
    budget = next(t for what, t, recorded in calls if what == "autograde" and not recorded)
    assert budget == grade.submission_budget(lab)
    assert grade.submission_budget(lab) <= 600
    assert not (tmp_path / ".grading").exists()


@pytest.mark.parametrize("lab", LABS)
def test_a_lab_says_how_to_work_through_it(lab):
    """Before the first exercise: cell by cell, what NotImplementedError means, what Run All
    does, and that the engines stop with the kernel."""
    top = [c.source for c in cells(ROOT / "labs" / lab / f"{lab}.ipynb")[:3]
           if c.cell_type == "markdown"]
    text = "\n".join(top)
    for words in ("cell by cell", "NotImplementedError", "Run All", "restarts"):
        assert words in text, f"labs/{lab}: the introduction does not say {words!r}"


# calls that measure: a chapter's sweep or simulation, a timing of the student's kernel, or an
# earlier lab's input measured when none is saved
MEASURING_CALLS = ("run(profile=", "timing(", "time_batches(", "time_triad(", ".simulated(",
                   "on_platform(", "stream_add(", "stream_bandwidth(", "pingpong_model(",
                   "pingpong_reference(")


def test_lab_times_knows_which_cells_measure_and_refuses_an_unknown_lab():
    """autograder/labtimes.py (make labtimes) weighs the cells a lab tags ``measures``
    against the budget of a timed section: every lab has some, its sweep among them, every
    cell that makes a measuring call is tagged, and no check or engine cell is."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("labtimes", ROOT / "autograder" / "labtimes.py")
    labtimes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(labtimes)
    for lab in LABS:
        nb = nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb", as_version=4)
        ids = {c.metadata.get("nbgrader", {}).get("grade_id"): labtimes._measures(c)
               for c in nb.cells if c.cell_type == "code"}
        assert ids.get("measure"), f"{lab}: its sweep cell is not tagged as measuring"
        assert not ids.get("start_engines"), f"{lab}: the engine cell tagged as measuring"
        assert not any(v for k, v in ids.items() if k and k.startswith("test_")), lab
        for c in nb.cells:
            code = "\n".join(line.split("#", 1)[0] for line in c.source.splitlines())
            if c.cell_type == "code" and not c.metadata.get("nbgrader", {}).get("grade") \
                    and any(w in code for w in MEASURING_CALLS):
                assert labtimes._measures(c), \
                    f"{lab}: {c.metadata.get('nbgrader', {}).get('grade_id')} measures, untagged"
    r = subprocess.run([sys.executable, str(ROOT / "autograder" / "labtimes.py"), "nosuch"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no lab nosuch: choose from" in r.stderr, r.stderr


@pytest.mark.parametrize("lab", LABS)
def test_what_a_lab_needs_names_the_engines_it_starts(lab):
    """The book's table of labs (each chapter's ``lab_needs``) names as many engines as the
    lab's engine cell starts, and a lab that starts none names none."""
    import re

    from hpclab.kernels import registry

    needs = registry.get(lab).lab_needs
    text = (ROOT / "labs" / lab / f"{lab}.ipynb").read_text()
    started = sorted({int(n) for n in re.findall(r"launch\.cluster\(n=(\d+)", text)})
    assert len(started) <= 1, f"{lab} starts engines of {started}"
    if started:
        assert re.search(rf"\b{started[0]} (?:MPI ranks|engines)\b", needs), (lab, needs)
    else:
        assert "engines" not in needs and "ranks" not in needs, (lab, needs)
