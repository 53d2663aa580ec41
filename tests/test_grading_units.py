"""The grader's small parts on their own, without nbgrader runs: what is refused before a
submission runs (screen.py), one grader per course folder (lock.py), and a worker that dies
(grade._Workers), the graded cell's bridge to a kernel (judge.py, kernel_side.py). The whole
grader against a hostile class is test_hostile_class.py."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "autograder"))

import grade  # noqa: E402
import judge  # noqa: E402
import lock  # noqa: E402
import others  # noqa: E402
import screen  # noqa: E402

NB = json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def _folder(tmp_path, files=None):
    folder = tmp_path / "submitted" / "ada" / "lab"
    folder.mkdir(parents=True)
    for name, text in (files if files is not None else {"lab.ipynb": NB}).items():
        (folder / name).write_text(text)
    return folder


def test_a_plain_submission_passes(tmp_path):
    assert screen.problem(_folder(tmp_path), "lab.ipynb") is None


@pytest.mark.parametrize("make, says", [
    (lambda f: (f / "lab.ipynb").unlink() or (f / "lab.ipynb").symlink_to("/etc/passwd"),
     "is a link (to '/etc/passwd')"),
    (lambda f: (f / "data").symlink_to("/nonexistent"), "data is a link"),
    (lambda f: os.mkfifo(f / "pipe"), "pipe is not a plain file"),
    (lambda f: (f / "lab.ipynb").rename(f / "mine.ipynb"), "there is no lab.ipynb"),
    (lambda f: (f / "copy.ipynb").write_text(NB), "more than one notebook"),
    (lambda f: (f / "lab.ipynb").write_text("{ not json"), "not a notebook (it is not JSON)"),
    (lambda f: (f / "lab.ipynb").write_text("[" * 200_000), "not a notebook (it is not JSON)"),
    (lambda f: (f / "lab.ipynb").write_text('{"cells": 3}'), "not a version-4"),
    (lambda f: (f / "timestamp.txt").write_text("soon"), "not a date and time"),
    (lambda f: (f / "big.bin").write_bytes(b"0" * (2 << 20)), "over the limit of 1 MiB"),
], ids=["link-notebook", "dangling", "fifo", "renamed", "two", "not-json", "nested",
        "not-v4", "timestamp", "too-big"])
def test_each_refusal_says_what_is_wrong(tmp_path, make, says):
    folder = _folder(tmp_path)
    make(folder)
    why = screen.problem(folder, "lab.ipynb", total=1 << 20)
    assert why and says in why, why


def test_a_linked_student_folder_is_refused(tmp_path):
    real = _folder(tmp_path)
    (tmp_path / "submitted" / "bob").symlink_to(real.parent)
    why = screen.problem(tmp_path / "submitted" / "bob" / "lab", "lab.ipynb")
    assert why and "is a link" in why, why


@pytest.mark.parametrize("student, safe", [("ada", True), ("a.b-c_d@x", True), ("bad id", False),
                                           ("../x", False), (".hidden", False), ("", False)])
def test_student_ids_are_safe_names(student, safe):
    assert (screen.unsafe_id(student) is None) is safe


def test_a_missing_timestamp_is_noted_only_when_the_lab_is_due(tmp_path):
    folder = _folder(tmp_path)
    assert screen.notes(folder, due=False) == []
    assert "lateness not judged" in screen.notes(folder, due=True)[0]


def test_a_second_grader_names_the_first_and_changes_nothing(tmp_path):
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); import lock\n"
            "with lock.hold(sys.argv[2], 'grade lab'):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(ROOT / "autograder"),
                               str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in tmp_path.iterdir())
        with pytest.raises(lock.Busy) as info:
            with lock.hold(tmp_path, "grade lab"):
                pass
        assert info.value.code == lock.BUSY
        assert f"process {holder.pid}" in info.value.message
        assert sorted(p.name for p in tmp_path.iterdir()) == before
    finally:
        holder.kill()
        holder.wait()
    with lock.hold(tmp_path, "grade lab"):  # the kernel let go of a killed holder's lock
        pass


def _die_or_answer(lab, student, options, env):
    if student == "killer":
        os._exit(1)
    return {"success": True, "log": f"graded {student}", "error": ""}


def _no_init(slots=None):
    pass


def test_a_dead_worker_fails_its_runs_and_is_replaced(monkeypatch):
    """A worker that dies fails the runs in its pool with the WORKER_DIED result (so the
    grader runs them again, alone), and the next pool is a new one that works."""
    import worker

    monkeypatch.setattr(worker, "init", _no_init)  # forked workers inherit the patches
    monkeypatch.setattr(worker, "autograde", _die_or_answer)
    course = grade.Course()
    workers = grade._Workers(1)
    try:
        dead = course.submit_autograde(workers.get(), "lab", "killer", [], {}).result(60)
        assert dead.returncode == grade.WORKER_DIED, dead
        assert "the grading worker died" in dead.stdout
        alone = course.submit_autograde(workers.get(), "lab", "ada", [], {}).result(60)
        assert alone.returncode == 0 and "graded ada" in alone.stdout, alone
    finally:
        workers.stop()


def _in_a_worker(code):
    """``code`` run in a new process after a grading worker's start (worker.init)."""
    head = "import sys; sys.path.insert(0, sys.argv[1]); import worker\nworker.init()\n"
    r = subprocess.run([sys.executable, "-c", head + code, str(ROOT / "autograder")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r


def test_a_worker_keeps_nbgraders_database_warnings_out_of_the_instructors_output():
    """nbgrader warns through SQLAlchemy on every submission it grades in-process; the
    instructor reads one line per submission, not those."""
    r = _in_a_worker("import warnings\n"
                     "from sqlalchemy.exc import SAWarning\n"
                     "warnings.warn('Object of type <SubmittedNotebook> not in session', "
                     "SAWarning)\n"
                     "warnings.warn('a warning of another kind', UserWarning)\n")
    assert "not in session" not in r.stderr
    assert "a warning of another kind" in r.stderr


def test_a_worker_checks_nbgraders_cell_schema_once_and_still_rejects_bad_metadata():
    """nbgrader checks the schema of its cell metadata on every cell it validates; a worker
    checks it once, and a cell whose metadata breaks the schema is still refused with the
    error nbgrader would have raised."""
    r = _in_a_worker("import jsonschema\n"
                     "from nbformat.v4 import new_code_cell\n"
                     "from nbgrader.nbgraderformat import common, v3\n"
                     "assert common.jsonschema is not jsonschema\n"
                     "meta = {'grade': True, 'solution': False, 'locked': True, 'points': 2,\n"
                     "        'grade_id': 'ok', 'schema_version': 3}\n"
                     "v = v3.MetadataValidatorV3()\n"
                     "for points in (2, 2, 2, 'x'):\n"
                     "    meta['points'] = points\n"
                     "    cell = new_code_cell('', metadata={'nbgrader': dict(meta)})\n"
                     "    try:\n"
                     "        v.validate_cell(cell)\n"
                     "    except jsonschema.ValidationError as exc:\n"
                     "        print('refused:', exc.message)\n"
                     "print('schemas checked:', len(common.jsonschema._validators))\n")
    assert r.stdout.splitlines() == ["refused: 'x' is not of type 'number'",
                                     "schemas checked: 1"]


def _kernel(tmp_path, code):
    """A stand-in for the submission's kernel: a namespace that ran ``code``, and a bridge
    whose requests run there, the kernel's side sent as source as the runner sends it."""
    import linecache

    kernel = {"__builtins__": __builtins__}
    cell = "<notebook cell 1>"  # named and cached, as IPython does, so tracebacks show lines
    linecache.cache[cell] = (len(code), None, code.splitlines(True), cell)
    exec(compile(code, cell, "exec"), kernel)

    def execute(cell):
        exec(cell, kernel)
        return []

    return judge.Bridge(execute, str(tmp_path / "bridge"))


def _errors(outputs):
    return [o["evalue"] for o in outputs if o.get("output_type") == "error"]


def test_a_graded_cell_reads_the_notebooks_values_and_calls_its_functions(tmp_path):
    bridge = _kernel(tmp_path, "import numpy as np\nx = 3.0\n"
                               "def fill(a):\n    a[0] = 5.0\n    return float(a.sum())\n")
    test = ("import numpy as np\nassert x == 3.0 and type(x) is float\n"
            "a = np.zeros(3)\nassert fill(a) == 5.0 and a[0] == 5.0\nprint('ok')")
    outputs = judge.run_test(test, bridge, 1)
    assert not _errors(outputs), outputs
    assert "ok" in "".join(o.get("text", "") for o in outputs)


def test_a_request_is_a_short_cell_that_leaves_nothing_in_the_notebook(tmp_path):
    """The kernel tokenizes and parses each cell it runs several times over: a request sends
    the kernel's side as one compressed line, not as its 150 lines, and removes what it
    defined."""
    kernel, sent = {"__builtins__": __builtins__, "x": 2.0}, []

    def execute(cell):
        sent.append(cell)
        exec(cell, kernel)
        return []

    bridge = judge.Bridge(execute, str(tmp_path / "bridge"))
    assert bridge.ask({"op": "lookup", "names": ["x"]}) == \
        {"names": {"x": {"kind": "data", "value": 2.0}}}
    assert len(sent) == 1 and sent[0].count("\n") == 3, sent
    assert len(sent[0]) < len(judge.KERNEL_SIDE), "the kernel's side was sent uncompressed"
    assert set(kernel) == {"__builtins__", "x"}


def test_a_notebook_functions_source_reaches_the_graded_cell(tmp_path):
    """Checks that read where a kernel's threads or MPI calls sit read the function's code:
    in the grader the function is a proxy, which carries what the kernel found: a
    ``%%cython`` module's .pyx beside its library, a compiled cell's own ``source``, a
    Python function's lines."""
    (tmp_path / "_cython_magic_x.pyx").write_text("def triad(a):\n    for j in prange(3):\n"
                                                   "        pass\n")
    bridge = _kernel(tmp_path, "import sys, types\n"
                               "m = types.ModuleType('_cython_magic_x')\n"
                               f"m.__file__ = {str(tmp_path / '_cython_magic_x.so')!r}\n"
                               "sys.modules['_cython_magic_x'] = m\n"
                               "def triad(a):\n    pass\n"
                               "triad.__module__ = '_cython_magic_x'\n"
                               "class Compiled:\n    source = 'with nogil:\\n    MPI_Send'\n"
                               "    def __call__(self):\n        pass\n"
                               "loop = Compiled()\n"
                               "def plain(x):\n    return x + 1\n"
                               "class Raising:\n    @property\n    def source(self):\n"
                               "        raise RuntimeError('looked at')\n"
                               "    def __call__(self):\n        return 7\n"
                               "odd = Raising()\n")
    test = ("from hpclab.mpicython import source_of\n"
            "assert source_of(odd) is None and odd() == 7\n"
            "assert 'prange(3)' in source_of(triad), source_of(triad)\n"
            "assert 'MPI_Send' in source_of(loop), source_of(loop)\n"
            "assert 'return x + 1' in source_of(plain), source_of(plain)\n")
    outputs = judge.run_test(test, bridge, 1)
    assert not _errors(outputs), outputs


def test_many_calls_of_a_notebook_function_go_in_one_request(tmp_path):
    """hpclab.exercises.map_calls: a check that needs a student's function on many inputs
    asks the kernel once (each request costs milliseconds); the results are the calls', in
    order, and the first call that raises raises in the check as a single call would. In the
    notebook (no proxy) it calls one after the other."""
    import numpy as np

    from hpclab import exercises

    kernel, sent = {"__builtins__": __builtins__}, []
    exec("import numpy as np\ndef line(s, t):\n    if len(s) < 2:\n"
         "        raise ValueError('two points at least')\n    return float(s.sum()), len(t)\n",
         kernel)

    def execute(cell):
        sent.append(cell)
        exec(cell, kernel)
        return []

    bridge = judge.Bridge(execute, str(tmp_path / "bridge"))
    line = judge.KernelFunction(bridge, "line")
    calls = [(np.arange(k, dtype=float), np.ones(k)) for k in (2, 3, 4)]
    assert exercises.map_calls(line, calls) == [(1.0, 2), (3.0, 3), (6.0, 4)]
    assert len(sent) == 1
    with pytest.raises(ValueError, match="two points at least"):
        exercises.map_calls(line, [*calls, (np.zeros(1), np.ones(1))])
    assert exercises.map_calls(kernel["line"], calls) == [(1.0, 2), (3.0, 3), (6.0, 4)]


def test_a_value_that_lies_about_equality_arrives_as_the_number_it_is(tmp_path):
    bridge = _kernel(tmp_path, "class Liar(float):\n    def __eq__(self, other):\n"
                               "        return True\nanswer = Liar(1.0)\n")
    outputs = judge.run_test("assert answer == 42.0, 'not 42'", bridge, 1)
    assert _errors(outputs) == ["not 42"], outputs


def test_a_students_exception_shows_the_line_of_their_code(tmp_path):
    bridge = _kernel(tmp_path, "def f():\n    return 1 / 0\n")
    outputs = judge.run_test("f()", bridge, 1)
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "ZeroDivisionError", outputs
    assert "return 1 / 0" in errors[0]["evalue"], errors[0]["evalue"]


def test_a_check_catches_numpys_linalgerror_by_its_type_as_in_the_notebook(tmp_path):
    """A check may catch numpy's LinAlgError (a singular system the student built) to say
    what is wrong; a class of the notebook's own that takes its name is not trusted."""
    bridge = _kernel(tmp_path, "import numpy as np\n"
                               "def solve():\n    return np.linalg.solve(np.zeros((2, 2)), "
                               "np.ones(2))\n"
                               "class LinAlgError(Exception):\n    pass\n"
                               "def mine():\n    raise LinAlgError('mine')\n")
    test = ("import numpy as np\n"
            "try:\n    solve()\nexcept np.linalg.LinAlgError as e:\n"
            "    assert 'return np.linalg.solve' in str(e), str(e)\n    print('caught')\n"
            "try:\n    mine()\nexcept np.linalg.LinAlgError:\n    print('trusted')\n"
            "except Exception as e:\n    print('not trusted:', type(e).__name__)\n")
    outputs = judge.run_test(test, bridge, 1)
    assert not _errors(outputs), outputs
    assert "".join(o.get("text", "") for o in outputs).split() == \
        ["caught", "not", "trusted:", "StudentError"], outputs


def test_the_sandbox_starts_with_the_graders_inputs_not_the_submissions(tmp_path):
    """The records the grader measured once are in the lab's results folder; a results/
    folder handed in with the submission (a forged measurement, say) is left out, and the
    reason says so."""
    import nbformat

    import confinement
    import sandbox

    if sandbox.isolation()[0] != "bwrap":
        pytest.skip("bubblewrap cannot run here: " + sandbox.isolation()[1])
    inputs = tmp_path / "inputs"
    inputs.mkdir(mode=0o700)  # as the grader's scratch folder is
    (inputs / "pingpong-measured.json").write_text("{}")
    (inputs / "pingpong-measured.json").chmod(0o600)
    handed_in = tmp_path / "submission"
    (handed_in / "results").mkdir(parents=True)
    (handed_in / "results" / "pingpong-forged.json").write_text("{}")
    (handed_in / "data.txt").write_text("mine")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    # what a reading submission must not see: a secret beside the grader's folders, the
    # solutions, the gradebook's folder, the grader's home (test_hostile_class.py's reader
    # tries the same under a wall budget a loaded machine can pass)
    secret = tmp_path / "instructor-secret.txt"
    secret.write_text("the instructor's secret")
    hidden = [str(secret), str(ROOT / "solutions"), str(Path.home()), str(tmp_path)]
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nprint(sorted(os.listdir(os.environ['HPCLAB_RESULTS_DIR'])), "
        "open('data.txt').read())\n"
        f"for p in {hidden!r}:\n"
        "    print('seen:', p, os.path.exists(p) and (not os.path.isdir(p) or "
        "sorted(os.listdir(p))))")]
    limits = sandbox.Limits.from_env()
    limits.wall = limits.cell = 60
    result = sandbox.run(nb, limits, files_from=handed_in, inputs_from=inputs)
    assert result.status == "finished", result.reason
    text = "".join(o.get("text", "") for o in result.notebook.cells[0].outputs)
    assert "['pingpong-measured.json'] mine" in text, result.notebook.cells[0].outputs
    # in the home, only the folders on the way to what is mounted back (the interpreter)
    home = Path.home()
    ways = sorted({m.relative_to(home).parts[0] for m in confinement._mount_points()
                   if home in m.parents})
    for p in hidden:
        assert f"seen: {p} False" in text or f"seen: {p} {ways}" in text, text
    assert "results/ (saved runs: the grader measured this machine's inputs)" in result.reason


def test_a_sandbox_takes_the_graders_simulations_and_cannot_change_them(tmp_path, monkeypatch):
    """A class's submissions of a lab simulate the same platform with the same arguments:
    each sandbox reads the grader's cache of programs and runs (read-only) before it builds
    or simulates anything of its own, and cannot write there."""
    import nbformat

    import sandbox

    if sandbox.isolation()[0] != "bwrap":
        pytest.skip("bubblewrap cannot run here: " + sandbox.isolation()[1])
    monkeypatch.setenv("HPCLAB_CACHE", str(tmp_path / "cache"))
    kept = tmp_path / "cache" / "smpi" / "outputs" / "0123abcd.out"
    kept.parent.mkdir(parents=True)
    kept.write_text("simulated by the grader")
    beside = tmp_path / "cache" / "grader-notes.txt"  # in the grader's cache, not its smpi/
    beside.write_text("not for the sandbox")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "from hpclab import simulate\n"
        "found = simulate._cached('outputs/0123abcd.out')\n"
        "print('read:', found.read_text())\n"
        "try:\n    found.write_text('forged')\n"
        "except OSError as exc:\n    print('not written:', type(exc).__name__)\n"
        "print('own cache elsewhere:', simulate._cache_dir() != found.parents[1])\n"
        f"import os\nprint('beside:', os.path.exists({str(beside)!r}))")]
    limits = sandbox.Limits.from_env()
    limits.wall = limits.cell = 60
    result = sandbox.run(nb, limits)
    assert result.status == "finished", result.reason
    text = "".join(o.get("text", "") for o in result.notebook.cells[0].outputs)
    assert "read: simulated by the grader" in text, result.notebook.cells[0].outputs
    assert "not written:" in text and "own cache elsewhere: True" in text, text
    assert "beside: False" in text, "the sandbox sees more of the grader's cache than smpi/"
    assert kept.read_text() == "simulated by the grader"


def test_the_hand_grader_reads_the_students_own_outputs_beside_the_graded_run():
    """Grading runs the lab in its own profile; a written answer speaks of the numbers the
    student measured: each code cell keeps the student's own text outputs under a heading,
    escaped; a graded check's, an edited cell's and a silent cell's are not added."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from returned import add_own_run

    def notebook(*outputs):
        cells = [new_code_cell("x = measure()"), new_code_cell("assert x > 0"),
                 new_code_cell("plot(x)"), new_code_cell("y = 1"), new_markdown_cell("why")]
        cells[1].metadata["nbgrader"] = {"grade": True, "solution": False}
        for cell, out in zip(cells, outputs):
            cell.outputs = out
        return new_notebook(cells=cells)

    graded = notebook([new_output("stream", name="stdout", text="triad: 9.1 GB/s\n")])
    own = notebook([new_output("stream", name="stdout", text="triad: 41.7 GB/s <b>fast</b>\n"),
                    new_output("error", ename="ValueError", evalue="bad", traceback=[])],
                   [new_output("stream", name="stdout", text="check says 41.7\n")],
                   [new_output("display_data", data={"image/png": "AAAA", "text/plain": "fig"})],
                   [new_output("stream", name="stdout", text="edited\n")])
    own.cells[3].source = "y = 2"  # a cell the student edited: its outputs are not the run's
    assert add_own_run(graded, own, {1}, text=1000) == 2
    first = graded.cells[0].outputs
    assert first[0]["text"] == "triad: 9.1 GB/s\n", "the graded run's own output is kept"
    html = first[1]["data"]["text/html"]
    assert "the student's own run" in html and "41.7 GB/s &lt;b&gt;fast&lt;/b&gt;" in html
    assert "<b>fast" not in html and "ValueError: bad" in html
    assert graded.cells[1].outputs == [], "a graded check's outputs are the runner's alone"
    assert "[a figure]" in graded.cells[2].outputs[0]["data"]["text/plain"]
    assert graded.cells[3].outputs == []
    long = notebook([new_output("stream", name="stdout", text="z" * 5000)])
    add_own_run(long, nbformat.from_dict(json.loads(json.dumps(long))), set(), text=100)
    assert "[cut: 5,001 characters" in long.cells[0].outputs[1]["data"]["text/plain"]
    # a cell the student added moves no other: cells are matched by their ids
    added = notebook([new_output("stream", name="stdout", text="mine\n")])
    theirs = nbformat.from_dict(json.loads(json.dumps(added)))
    theirs.cells.insert(0, new_code_cell("print('scratch')"))
    fresh = nbformat.from_dict(json.loads(json.dumps(added)))
    fresh.cells[0].outputs = []
    assert add_own_run(fresh, theirs, set(), text=100) == 1
    assert "mine" in fresh.cells[0].outputs[0]["data"]["text/plain"]
    # a notebook of other cells, or none: nothing added
    assert add_own_run(graded, new_notebook(cells=[]), set(), text=100) == 0
    assert add_own_run(graded, None, set(), text=100) == 0


def test_the_sandbox_keeps_the_graders_mpi_settings_but_no_jobs_identity(monkeypatch):
    """A cluster's MPI may need the grader's settings to start at all; a job's identity, or
    anything else of the grader's, never reaches a submission."""
    import sandbox

    kept = {"MPIR_CVAR_ENABLE_HEAVY_YIELD": "1", "OMPI_MCA_btl": "self,vader",
            "I_MPI_FABRICS": "shm", "FI_PROVIDER": "tcp", "UCX_TLS": "sm",
            "OMP_WAIT_POLICY": "passive"}
    dropped = {"PMI_RANK": "3", "OMPI_COMM_WORLD_RANK": "3", "OMPI_MCA_ess_base_vpid": "3",
               "PMIX_RANK": "3", "OMPI_MCA_orte_hnp_uri": "x", "GRADER_TOKEN": "secret"}
    for k, v in {**kept, **dropped}.items():
        monkeypatch.setenv(k, v)
    env = sandbox._environment("/box", "/venv/bin")
    assert {k: env.get(k) for k in kept} == kept
    assert not set(dropped) & set(env), set(dropped) & set(env)
    assert env["HOME"] == "/box/work" and env["PATH"].startswith("/venv/bin:")


def _cgroup_missing():
    import cgroup
    import sandbox

    if sandbox.isolation()[0] != "bwrap":
        return "bubblewrap cannot run here: " + sandbox.isolation()[1]
    ok, why = cgroup.available()
    return None if ok else why


def test_a_submission_whose_processes_together_pass_the_memory_limit_is_stopped():
    """Four processes of 200 MiB each stay under the per-process limit, but not under the
    limit of the whole submission: the cgroup stops one, the reason says so in the
    instructor's terms, and the group is gone after the run."""
    why = _cgroup_missing()
    if why:
        pytest.skip(why)
    import nbformat

    import cgroup
    import sandbox

    code = ("import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n"
            "        blob = b'x' * (200 << 20)\n        time.sleep(60)\n        os._exit(0)\n"
            "blob = b'y' * (200 << 20)\ntime.sleep(5)\nprint('after the children')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    limits = sandbox.Limits(wall=90, cell=60, memory_total=384 << 20)
    result = sandbox.run(nb, limits, log=lambda *a: None)
    assert "memory limit of the whole submission (0.375 GiB" in result.reason, result
    version, parent = cgroup._parent()
    assert not list(parent.glob(f"{cgroup.PREFIX}{os.getpid()}-*"))


def test_the_memory_groups_of_a_grader_that_died_are_removed():
    why = _cgroup_missing()
    if why:
        pytest.skip(why)
    import cgroup

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    version, parent = cgroup._parent()
    stale = parent / f"{cgroup.PREFIX}{gone.pid}-0"
    stale.mkdir()
    mine = cgroup.create(64 << 20)
    assert mine is not None and not stale.exists()  # a new group sweeps the dead ones
    mine.remove()
    assert not mine.path.exists()


def test_memory_mounted_in_a_namespace_of_the_submissions_own_counts_against_its_limit():
    """Graded as root, a submission can make a user namespace and mount memory there; what it
    writes to it is charged to its cgroup like the rest: 720 MiB in 60 MiB files (each under
    the file-size limit) do not fit under a cap of 384 MiB."""
    why = _cgroup_missing()
    if why:
        pytest.skip(why)
    import nbformat

    import sandbox

    sh = ("mkdir -p m && mount -t tmpfs -o size=2g none m && for i in $(seq 12); do "
          "head -c 60M /dev/zero > m/x$i || exit 1; done; du -sh m")
    code = (f"import subprocess\nr = subprocess.run(['unshare', '-Urm', 'sh', '-c', {sh!r}], "
            "capture_output=True, text=True)\nprint(r.returncode, r.stdout, r.stderr)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    result = sandbox.run(nb, sandbox.Limits(wall=90, cell=60, memory_total=384 << 20),
                         log=lambda *a: None)
    text = "".join(o.get("text", "") for o in result.notebook.cells[0].get("outputs", []))
    if "unshare:" in text or "mount:" in text:
        pytest.skip(f"no user namespace with mounts here: {text.strip()[:200]}")
    assert "memory limit of the whole submission (0.375 GiB" in result.reason, (result, text)


def test_the_class_report_takes_its_quantities_and_clusters_from_the_chapters():
    """report.py names no chapter: the quantities come from the declarations (``report``),
    the published clusters from each reporting chapter's ``report_references()``, and a
    cluster that several chapters give numbers of is one row."""
    import report
    from hpclab.kernels import registry

    known = report.quantities()
    declared = [q for s in registry.chapter_order() for q in registry.get(s).report]
    assert len(declared) == len(set(declared)), "two chapters report the same quantity name"
    assert list(known) == declared and len(known) >= 2
    refs = report.reference_machines()
    for label, numbers in refs.items():
        assert set(numbers) <= set(known), (label, numbers)
        assert all(v > 0 for v in numbers.values()), (label, numbers)
    merged = [label for label, numbers in refs.items()
              if len({known[q][0] for q in numbers}) > 1]
    assert merged, "no cluster has the numbers of two chapters in one row"
    values = {"ada": {q: 1.0 for q in known}, "bo": {q: 2.0 for q in known}}
    figures = report._machines_figures(values, refs)
    chapters = {slug for slug, _ in known.values()}
    assert len(figures) == len(chapters) and all(f.startswith("<img") for f in figures)


def test_feedback_is_written_in_disjoint_groups_and_a_failed_group_one_by_one(tmp_path):
    """The class's feedback pages: one nbgrader step per worker, each naming every other
    student of the course in student_id_exclude (so no page is written twice, and a student
    not graded this run is left alone); a group that fails is written again student by
    student, and the student whose page could not be written is named."""
    import threading
    from types import SimpleNamespace

    students = ["ann", "bob", "cid", "dee", "eve"]
    for s in students + ["old"]:  # "old": graded in an earlier run, not this one
        (tmp_path / "autograded" / s / "lab").mkdir(parents=True)
    calls, lock_ = [], threading.Lock()

    def step(pool, kind, lab, student=None, options=(), env=None):
        excluded = next((o.split("=", 1)[1].split(",") for o in options
                         if o.startswith("--CourseDirectory.student_id_exclude=")), [])
        chosen = [s for s in students + ["old"]
                  if (student in ("*", s)) and s not in excluded]
        with lock_:
            calls.append(chosen)
        ok = "cid" not in chosen  # cid's page cannot be written
        for s in chosen if ok or len(chosen) > 1 else []:
            if s != "cid":
                page = tmp_path / "feedback" / s / "lab" / "lab.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text("<p>feedback</p>")
        return subprocess.CompletedProcess([kind], 0 if ok else 1, f"log of {chosen}")

    lab = object.__new__(grade._Lab)
    lab.name, lab.notebook, lab.secret = "lab", "lab.ipynb", []
    lab.workdir, lab.scratch = tmp_path, tmp_path / "scratch"
    lab.pool = SimpleNamespace(jobs=2)
    lab.course = SimpleNamespace(step=step)
    entries = {s: {"reason": ""} for s in students}
    failures = []
    lab._feedback(students, entries, failures)
    groups = calls[:2]
    assert sorted(sum(groups, [])) == students and not set(groups[0]) & set(groups[1])
    assert ["cid"] in calls[2:], "the failed group is written again student by student"
    assert all(c != ["old"] and "old" not in c for c in calls), "old's page was rewritten"
    assert [f[0] for f in failures] == ["cid"] and "feedback could not be written" in \
        entries["cid"]["reason"]
    assert all(not entries[s]["reason"] for s in students if s != "cid")


@pytest.mark.skipif(bool(others.why_not_as_another_user()),
                    reason=others.why_not_as_another_user() or "")
def test_a_grader_without_root_removes_its_read_only_and_closed_folders():
    """confinement.remove_tree as an ordinary user (a grader on a course hub runs as the
    instructor): the sandbox's runner folder is 0o555, a submission may leave a folder 0o000;
    both go, and the folder above is left as it was."""
    import pwd
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="hpclab-remove-", dir="/tmp"))
    try:
        module = base / "module"
        module.mkdir()
        shutil.copy(ROOT / "autograder" / "confinement.py", module)
        box = base / "box"
        (box / "runner").mkdir(parents=True)
        (box / "runner" / "judge.py").write_text("x")
        (box / "closed" / "inner").mkdir(parents=True)
        (box / "closed" / "inner" / "f").write_text("y")
        subprocess.run(["chown", "-R", "nobody", str(box)], check=True)
        os.chown(base, pwd.getpwnam("nobody").pw_uid, -1)  # the grader's own folder
        os.chmod(box / "runner", 0o555)
        os.chmod(box / "closed", 0o000)
        for p in (base, module, module / "confinement.py"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        res = subprocess.run(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                              f"import sys; sys.path.insert(0, {str(module)!r}); "
                              f"import confinement; confinement.remove_tree({str(box)!r})"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert not box.exists() and oct(base.stat().st_mode & 0o777) == "0o755"
    finally:
        shutil.rmtree(base, ignore_errors=True)
