"""Each common wrong answer of a lab loses exactly its own item's points, and its check says
why in the words the case names.

The solution runs once in a Jupyter kernel (quick profile); its graded cells, visible and
hidden checks together, run as the autograder runs them: in this process, on the kernel's
values and functions through the bridge (autograder/judge.py), so a check that cannot read
there what it reads in a kernel (a function's source, say) is found here.
Then, for each wrong answer of tests/wrong_answers/<lab>.py, its edited answer cells and the
cells after them run again (see the test): the graded cells that fail must be the one it
names, with an AssertionError that says its words (not a NameError, a timeout or a crash).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbformat
import pytest

import wrong_answers

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))

import judge  # noqa: E402


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _failed(cell):
    return any(o.get("output_type") == "error" for o in cell.outputs)


def _errors(cell):
    return [(o["ename"], o["evalue"]) for o in cell.outputs if o.get("output_type") == "error"]


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


WRONG = wrong_answers.labs()


# methods that change their object in place (a cell calling one on x defines x again)
MUTATORS = {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear",
            "add", "discard", "remove", "sort", "fill"}


def _true_in_kernel(in_kernel, expression):
    """Whether ``expression`` is true in the kernel (its printed bool)."""
    outputs = in_kernel(f"print(bool({expression}))")
    return any(o.get("name") == "stdout" and o.get("text", "").strip() == "True"
               for o in outputs)


def _names(source):
    """(names a cell defines, names it reads), from its code after IPython's transforms; a
    cell magic's functions (``%%cython``) count as defined by name. Names local to a
    function, lambda or comprehension are neither: ``[p for p in ...]`` defines no ``p``."""
    import ast
    import re

    from IPython.core.inputtransformer2 import TransformerManager

    tree = ast.parse(TransformerManager().transform_cell(source))
    # def f(, cpdef double f(, cdef inline int f(: the name before the parenthesis
    defined = set(re.findall(r"^\s*c?p?def(?:\s+\w+)*?\s+(\w+)\s*\(", source, re.M))
    read = set()
    scopes = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)

    nested = (*scopes, *comprehensions, ast.ClassDef)

    def stored(nodes):
        """The names ``nodes`` bind in their own scope (not in functions, lambdas,
        comprehensions or classes nested in them)."""
        out, todo = set(), list(nodes)
        while todo:
            n = todo.pop()
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                out.add(n.id)
            todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, nested))
        return out

    def base(node):
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    def visit(node, local):
        """``local``: the names local to the enclosing function or comprehension (None at
        the cell's top level)."""
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if local is None or node.id not in local:
                    read.add(node.id)
            elif local is None:
                defined.add(node.id)
            return
        if isinstance(node, scopes):
            if local is None and not isinstance(node, ast.Lambda):
                defined.add(node.name)
            args = node.args
            for outer in [*getattr(node, "decorator_list", ()), *args.defaults,
                          *(d for d in args.kw_defaults if d is not None)]:
                visit(outer, local)
            body = node.body if isinstance(node.body, list) else [node.body]
            declared = {n for b in body for g in ast.walk(b) if isinstance(g, ast.Global)
                        for n in g.names}
            defined.update(declared & stored(body))
            params = {a.arg for a in ast.walk(args) if isinstance(a, ast.arg)}
            inner = ((local or set()) | params | stored(body)
                     | {n.name for b in body for n in ast.walk(b)
                        if isinstance(n, (ast.FunctionDef, ast.ClassDef))}) - declared
            for b in body:
                visit(b, inner)
            return
        if isinstance(node, comprehensions):
            inner = (local or set()) | stored([g.target for g in node.generators])
            for child in ast.iter_child_nodes(node):
                visit(child, inner)
            return
        if isinstance(node, ast.ClassDef) and local is None:
            defined.add(node.name)
        # x[k] = v, x.a = v and x.append(v) change x in place: they define it again
        if local is None and isinstance(node, (ast.Subscript, ast.Attribute)) \
                and not isinstance(node.ctx, ast.Load) and base(node):
            defined.add(base(node))
        if local is None and isinstance(node, ast.Call) \
                and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                and base(node.func.value):
            defined.add(base(node.func.value))
        for child in ast.iter_child_nodes(node):
            visit(child, local)

    visit(tree, None)
    return defined, read


# the labs whose cases tests/test_wrong_answers_second.py runs: a file is one worker's, and
# all six labs' cases in one file were the longest task of the run; the halves are balanced by
# time (a fresh-clone run, each %%cython case compiled with the optimiser: PingPong 250 s,
# STREAM 250 s, Poisson 210, Amdahl 166, Ring 166 and Jacobi 120; STREAM's compiles since
# take a third of that, so Ring moves here)
SECOND = ("amdahl", "jacobi", "mpilibs", "poisson")


@pytest.mark.slow
@pytest.mark.parametrize("lab", sorted(set(WRONG) - set(SECOND)))
def test_each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch):
    """Each wrong answer of ``lab`` loses only its own points (see
    :func:`each_wrong_answer_loses_only_its_own_points`)."""
    each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch)


def each_wrong_answer_loses_only_its_own_points(lab, tmp_path, monkeypatch):
    """A wrong answer reruns its edited cells and every cell after them that reads a name
    those cells (re)defined, when a graded cell reads what it defines, the graded cells among
    them; the cells the case before it edited run again with the solution's sources in the
    same pass, which gives the state back. Cells that read nothing an answer changed (the
    measurements, the simulation, the checks of other answers) run once; figures, tables and
    demonstrations no check reads, never."""
    from nbclient import NotebookClient

    from readiness import skip_if_unready

    skip_if_unready(lab, f"the {lab} lab's wrong answers")
    monkeypatch.setenv("HPCLAB_PROFILE", "quick")
    monkeypatch.setenv("HPCLAB_RESULTS_DIR", str(tmp_path / "results"))
    # the cases that deadlock by design (both ranks sending first) are stopped once an engine
    # has spent this much processor time on them, not the 10-30 s a student's check gives:
    # the solution's exchanges are milliseconds of it (a fresh engine's first call about
    # 0.1 s; a rank waiting for a peer the load keeps off a core polls, so a margin), and on
    # a loaded machine they still have 2 x 10-30 s on the clock
    monkeypatch.setenv("HPCLAB_STUCK_SECONDS", "2")
    # every case that edits a %%cython cell compiles it: without the optimiser the triad's
    # 30,000 lines of C take 2 s instead of 11 (no check depends on a time); in a cache of
    # this test's own, so that no lab run later finds these modules
    monkeypatch.setenv("CFLAGS", "-O0")
    # and %%mpi_cython cells that ask for -O3 (the stencil's Laplacians: 70 s of compiling)
    monkeypatch.setenv("HPCLAB_OPT", "-O0")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    nb = nbformat.read(ROOT / "solutions" / lab / f"{lab}.ipynb", as_version=4)
    solution = [c.source for c in nb.cells]
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    graded = {i for i in code if nb.cells[i].metadata.get("nbgrader", {}).get("grade")}
    meta = nb.cells[code[-1]].metadata.get("nbgrader", {})
    # a last cell that is neither an answer nor a check stops the engines: it runs at the end
    last = code[-1] if not (meta.get("grade") or meta.get("solution")) else len(nb.cells)
    names = {i: _names(solution[i]) for i in code}
    # the cells a verdict can depend on: the graded ones and, backwards, every cell that
    # defines a name one of them reads; the others (figures, printed tables) run once
    needed = set(graded)
    for i in reversed(code):
        if i not in needed and any(names[i][0] & names[j][1] for j in needed if j > i):
            needed.add(i)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    cases = [(_edited(nb.cells, solution, w["edits"]), w) for w in WRONG[lab]]
    problems, seconds = [], []
    scratch = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(""))  # where the bridge's requests run

    def in_kernel(code):
        cell = nbformat.v4.new_code_cell(code)
        client.execute_cell(cell, scratch, store_history=False)
        return cell.get("outputs", [])

    # the graded cells run as the grader runs them: in this process, on the kernel's values
    # and functions through the bridge (what a check reads of a function, e.g. its source,
    # is what the grader can read)
    bridge = judge.Bridge(in_kernel, str(tmp_path / "bridge"))
    with client.setup_kernel(env=dict(os.environ)):
        def execute(i, source):
            nb.cells[i].source = source
            if i in graded:
                nb.cells[i].outputs = judge.run_test(source, bridge, i)
            else:
                client.execute_cell(nb.cells[i], i)

        def rerun(edited):
            """Run the edited cells (sources from ``edited``, else the solution's) and the
            cells after the first edit that a verdict can depend on and that read what
            changed, the checks among them. A cell's names change only when it is edited or
            reads a changed name, and a check reads the notebook only by name (the bridge
            fetches what it names): a check whose names did not change keeps its verdict.
            A check defines nothing in the kernel."""
            dirty = set()
            for i in (i for i in code if min(edited) <= i < last):
                changed = i in edited or bool(names[i][1] & dirty)
                if changed and (i in edited or i in needed):
                    execute(i, edited.get(i) or solution[i])
                    if i not in graded:
                        dirty |= names[i][0] | (_names(edited[i])[0] if edited.get(i)
                                                else set())

        # the first pass: the cells a verdict can depend on, and the ones that load a magic
        # (which defines no name); the figures, tables and demonstrations the checks never
        # read are left out (the grading round trip runs every cell of the solution)
        for i in code[:-1]:
            if i in needed or any(line.startswith("%") and not line.startswith("%%")
                                  for line in solution[i].splitlines()):
                execute(i, solution[i])
        broken = {_grade_id(nb.cells[i]): _error(nb.cells[i]) for i in graded
                  if i < last and _failed(nb.cells[i])}
        # every cell that raised, graded or not (an answer's input, e.g. a measurement, may be
        # what failed)
        raised = {i: _error(nb.cells[i]) for i in code[:-1] if _error(nb.cells[i])}
        assert not broken, f"the solution of {lab} fails {broken}; cells that raised: {raised}"
        restore = {}  # the last case's edited cells, run again with the solution's sources
        for edited, wrong in cases:
            first = min(edited)
            t0 = time.monotonic()
            rerun({**restore, **edited})
            seconds.append((time.monotonic() - t0, wrong["why"]))
            lost = {_grade_id(nb.cells[i]) for i in graded if first <= i < last
                    and _failed(nb.cells[i])}
            # (check, words it must say, what it said) for each check the case loses
            said = [(g, words, e) for i in graded
                    for g, words in zip(wrong["loses"], wrong["says_each"])
                    if _grade_id(nb.cells[i]) == g for e in _errors(nb.cells[i])]
            if lost == set(wrong["loses"]) and not all(
                    name == "AssertionError" and words in text
                    for _, words, (name, text) in said):
                problems.append(f"{wrong['why']}: the check did not say {wrong['says']!r}: "
                                f"{said}")
            if not lost and wrong.get("unless") and _true_in_kernel(in_kernel, wrong["unless"]):
                # this run's data make the wrong answer the right one: nothing to lose
                print(f"{lab}: {wrong['why']}: right in this run ({wrong['unless']})")
            elif lost != set(wrong["loses"]):
                problems.append(f"{wrong['why']}: lost {sorted(lost) or 'nothing'}, expected "
                                f"{wrong['loses']}; " + " | ".join(
                                    f"{_grade_id(nb.cells[i])}: {_error(nb.cells[i])}"
                                    for i in graded if i >= first and _failed(nb.cells[i])))
            # and the cells that define a name the case's edits defined and the solution's
            # cells do not (a given measurement redefined in an answer): they give it back
            extra = set().union(*(_names(src)[0] - names[i][0] for i, src in edited.items()))
            restore = dict.fromkeys([*edited, *(j for j in code[:-1] if names[j][0] & extra)])
        if restore:
            rerun(restore)
        if last < scratch:
            execute(last, solution[last])
    # the slowest cases, for whoever makes this test faster (pytest -s shows them)
    for t, why in sorted(seconds, reverse=True)[:8]:
        print(f"{lab}: {t:6.1f} s  {why}")
    assert not problems, "\n".join(problems)
