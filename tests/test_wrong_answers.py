"""Each common wrong answer of a lab loses exactly its own item's points.

The solution runs once in a Jupyter kernel, as the autograder runs it (visible and hidden
checks, quick profile). Then, for each wrong answer of tests/wrong_answers.py, its edited
answer cells and every cell after the first of them run again, and the graded cells that
fail must be the ones it names. Wrong answers are taken from the last edited cell to the
first, so that each rerun starts from the solution's state: the cells before it were never
changed, and it runs every cell from its first edit on.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from wrong_answers import WRONG

ROOT = Path(__file__).resolve().parents[1]


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _failed(cell):
    return any(o.get("output_type") == "error" for o in cell.outputs)


def _error(cell):
    return "; ".join(f"{o['ename']}: {o['evalue']}"[:400] for o in cell.outputs
                     if o.get("output_type") == "error")


def _edited(cells, solution, edits):
    """{index: edited source} of a wrong answer's edits of the solution's sources."""
    out = {}
    index = {_grade_id(c): i for i, c in enumerate(cells)}
    for gid, old, new in edits:
        i = index[gid]
        text = out.get(i, solution[i])
        assert old in text, f"{gid}: the wrong answer's edit no longer matches: {old!r}"
        out[i] = text.replace(old, new)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(WRONG))
def test_each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("HPCLAB_PROFILE", "quick")
    monkeypatch.setenv("HPCLAB_RESULTS_DIR", str(tmp_path / "results"))
    nb = nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb", as_version=4)
    solution = [c.source for c in nb.cells]
    graded = {i for i, c in enumerate(nb.cells)
              if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}
    last = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")  # stops the engines
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    cases = sorted(((min(_edited(nb.cells, solution, w["edits"])), w) for w in WRONG[lab]),
                   key=lambda t: -t[0])
    problems = []
    with client.setup_kernel(env=dict(os.environ)):
        def execute(i, source):
            nb.cells[i].source = source
            client.execute_cell(nb.cells[i], i)

        for i, cell in enumerate(nb.cells[:last]):
            if cell.cell_type == "code":
                execute(i, solution[i])
        broken = {_grade_id(nb.cells[i]): _error(nb.cells[i]) for i in graded
                  if i < last and _failed(nb.cells[i])}
        assert not broken, f"the solution of {lab} fails {broken}"
        for first, wrong in cases:
            edited = _edited(nb.cells, solution, wrong["edits"])
            for i in range(first, last):
                if nb.cells[i].cell_type == "code":
                    execute(i, edited.get(i, solution[i]))
            lost = {_grade_id(nb.cells[i]) for i in graded if i >= first and i < last
                    and _failed(nb.cells[i])}
            if lost != set(wrong["loses"]):
                problems.append(f"{wrong['why']}: lost {sorted(lost) or 'nothing'}, expected "
                                f"{wrong['loses']}; " + " | ".join(
                                    f"{_grade_id(nb.cells[i])}: {_error(nb.cells[i])}"
                                    for i in graded if i >= first and _failed(nb.cells[i])))
        execute(last, solution[last])
    assert not problems, "\n".join(problems)
