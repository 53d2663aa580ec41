"""What a lab's self-check says when the exercise it checks is missing or raised."""
import numpy as np
import pytest

IPython = pytest.importorskip("IPython")


@pytest.fixture()
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    # in a kernel, importing hpclab.exercises starts following the cells; here the module
    # may have been imported before this shell existed
    ip.run_cell("from hpclab import exercises\nexercises._watch()")
    yield ip
    ip.run_cell("exercises._RAISED.clear()")


def _error(ip, code):
    return ip.run_cell(code).error_in_exec


def test_a_check_before_the_answer_says_answer_it_first(shell):
    err = _error(shell, "exercises.require('not_written_yet')")
    assert type(err).__name__ == "NotAnswered"
    assert "answer the exercise above first: not_written_yet is not defined yet" in str(err)


def test_a_check_after_an_answer_that_raised_names_the_error_and_its_line(shell):
    shell.run_cell("import numpy as np\n\ndef fit(n):\n    return n\n\nlam_c, B_c = 1.0, 1 / 0\n")
    err = _error(shell, "exercises.require('fit', 'B_c')")
    assert type(err).__name__ == "NotAnswered"
    text = str(err)
    assert "the cell that defines B_c raised ZeroDivisionError: division by zero" in text
    assert "line 6: lam_c, B_c = 1.0, 1 / 0" in text
    assert "not defined yet" not in text
    # fixed and run again: the check passes
    shell.run_cell("lam_c, B_c = 1.0, 2.0")
    assert _error(shell, "exercises.require('fit', 'B_c')") is None


def test_the_line_quoted_is_the_answer_cells_own_not_a_helpers(shell):
    shell.run_cell("def helper(n):\n    return n / 0\n")
    shell.run_cell("x = 1\nB_h = helper(3)\nprint('after')\n")
    err = _error(shell, "exercises.require('B_h')")
    assert "at line 2: B_h = helper(3)" in str(err), str(err)


def test_a_cell_with_ipython_syntax_is_followed_too(shell):
    shell.run_cell("%env HPCLAB_NOTHING=1\nT_c = 1 / 0\n")
    err = _error(shell, "exercises.require('T_c')")
    assert "the cell that defines T_c raised ZeroDivisionError" in str(err), str(err)


def test_a_name_defined_before_the_error_is_not_reported(shell):
    shell.run_cell("def pingpong_loop():\n    return 1\nundefined_name + 1\n")
    # the def ran before the error: the name exists, and the check does not invent a problem
    assert _error(shell, "exercises.require('pingpong_loop')") is None
    shell.run_cell("raise_here = [][1]\n")
    err = _error(shell, "exercises.require('raise_here')")
    assert "IndexError: list index out of range, at line 1" in str(err)


def test_a_timing_on_more_ranks_than_cores_is_refused_by_name(monkeypatch):
    from types import SimpleNamespace

    from hpclab import exercises, launch

    monkeypatch.setattr(launch, "usable_cores", lambda: 2)
    engines = SimpleNamespace(n=4)
    assert exercises.timed_ranks(engines, 2) == 2
    for bad in (0, 3):
        with pytest.raises(ValueError, match="one per core of the 2"):
            exercises.timed_ranks(engines, bad)
    assert exercises.timed_ranks(SimpleNamespace(n=1), 1) == 1
    with pytest.raises(ValueError, match="time on 1 to 1 ranks"):
        exercises.timed_ranks(SimpleNamespace(n=1), 2)


def test_the_rule_checks_accept_the_rules_and_name_the_usual_others():
    """furthest_problem and verdict_problem pass the rules the labs ask for and say what is
    wrong with the ones students write instead: the largest ratio, |ratio - 1|, a NaN left in,
    a verdict from any overlap with 1, or one that cannot say "cannot tell"."""
    import numpy as np

    from hpclab import exercises, stats

    def right(ratios):
        finite = {k: v for k, v in ratios.items() if np.isfinite(v)}
        return max(finite, key=lambda k: abs(np.log(finite[k])))

    assert exercises.furthest_problem(right) is None
    assert exercises.verdict_problem(stats.verdict) is None
    for wrong in (lambda r: max(r, key=r.get), lambda r: max(r, key=lambda k: abs(r[k] - 1))):
        assert "compare |log(ratio)|" in exercises.furthest_problem(wrong)
    nan_kept = exercises.furthest_problem(lambda r: max(r, key=lambda k: abs(np.log(r[k]))))
    assert "skip a NaN ratio" in nan_kept
    assert "raised KeyError" in exercises.furthest_problem(lambda r: r["x"])
    overlap = exercises.verdict_problem(
        lambda lo, hi: "slower than the model" if hi > 1 else "faster than the model")
    assert "holds 1 shows no difference" in overlap
    blind = exercises.verdict_problem(lambda lo, hi: stats.verdict(lo, hi)
                                      if np.isfinite(lo) else "no difference shown")
    assert "nothing can be told" in blind


def test_a_students_timings_are_saved_for_the_instructor_and_never_taken_as_inputs(
        tmp_path, monkeypatch):
    """save_yours writes <chapter>-yours with provenance, keeps only finite numbers, a row per
    entry of a Series indexed by a parameter, nothing when nothing is a number; the inputs
    resolver, which takes a chapter's experiment by name, never picks it."""
    import numpy as np
    import pandas as pd

    from hpclab import exercises, inputs, records

    monkeypatch.setenv("HPCLAB_RESULTS_DIR", str(tmp_path))
    path = exercises.save_yours("pingpong", "one-way time",
                                pd.Series([1e-6, np.nan, 2e-5],
                                          index=pd.Index([0, 8, 1024], name="nbytes")),
                                "s", nprocs=2)
    run = records.load(path)
    assert run.meta["experiment"] == "pingpong-yours" and run.meta["student_code"]
    assert run.meta["machine"] and "git_commit" in run.meta
    assert list(run.records["nbytes"]) == [0, 1024]
    assert list(run.records["value"]) == [1e-6, 2e-5]
    assert set(run.records["impl"]) == {"yours"} and set(run.records["nprocs"]) == {2}
    again = records.load(exercises.save_yours("stream", "triad", [3.0, float("inf"), 1.0], "s",
                                              nthreads=2, n=100))
    assert list(again.records["value"]) == [3.0, 1.0] and set(again.records["n"]) == {100}
    assert exercises.save_yours("stream", "triad", [float("nan")], "s") is None
    assert exercises.save_yours("stream", "triad", ["not a number"], "s") is None
    assert inputs.resolve("pingpong", out_dir=tmp_path).run is None


def test_names_used_reads_a_proxy_as_its_compiled_code_would():
    """The grader's proxy of a notebook function carries its source only: what it reads from
    it matches the compiled code's names, so a local variable that shares a library function's
    name is not taken for a call of it."""
    from hpclab import exercises

    source = ("def solve_it(order, k=2):\n"
              "    weights = helper(order)\n"
              "    total = 0\n"
              "    for w in weights:\n"
              "        total += w * k\n"
              "    return fd.second_derivative(total)\n")
    namespace = {}
    exec(source, namespace)

    class Proxy:
        __name__ = "solve_it"

    proxy = Proxy()
    proxy.source = source
    compiled = exercises.names_used(namespace["solve_it"])
    assert exercises.names_used(proxy) == compiled == {"helper", "fd", "second_derivative"}
    # an import inside it names the module and what it takes, as the compiled code does
    source = ("def borrow(order):\n"
              "    import math\n"
              "    from hpclab.chapters.stencil.fd import second_derivative as s\n"
              "    return s(order), math.pi\n")
    namespace = {}
    exec(source, namespace)
    proxy.__name__, proxy.source = "borrow", source
    compiled = exercises.names_used(namespace["borrow"])
    assert exercises.names_used(proxy) == compiled == {
        "math", "pi", "hpclab.chapters.stencil.fd", "second_derivative"}, compiled


def test_a_check_waits_for_stuck_code_as_long_as_it_says_or_as_the_environment_caps_it(
        monkeypatch):
    from hpclab.exercises import stuck_after

    monkeypatch.delenv("HPCLAB_STUCK_SECONDS", raising=False)
    assert stuck_after(30) == 30
    monkeypatch.setenv("HPCLAB_STUCK_SECONDS", "8")
    assert stuck_after(30) == 8 and stuck_after(5) == 5
    for unusable in ("0", "-1", "soon"):  # never a wait of nothing: the check's own time
        monkeypatch.setenv("HPCLAB_STUCK_SECONDS", unusable)
        assert stuck_after(30) == 30


def test_stuck_code_is_judged_by_the_work_it_spends_the_clock_only_bounds_it(monkeypatch):
    """The cap is processor time (a deadlock polls); the clock gets STUCK_WALL times the
    check's seconds, whatever the cap: right code on a loaded machine waits for its turn."""
    from hpclab.exercises import STUCK_WALL, stuck_limits

    monkeypatch.delenv("HPCLAB_STUCK_SECONDS", raising=False)
    assert stuck_limits(10) == {"timeout": STUCK_WALL * 10, "busy": 10} and STUCK_WALL > 1
    monkeypatch.setenv("HPCLAB_STUCK_SECONDS", "1")
    assert stuck_limits(10) == {"timeout": STUCK_WALL * 10, "busy": 1}


def test_origins_names_the_library_a_function_reaches_under_any_name():
    """A library function under another name, a module under another name, a nested
    function's reads: each named with the module its value comes from; the grader's proxy
    carries what the kernel found."""
    from hpclab import exercises
    from hpclab.chapters.stencil import fd

    namespace = {"np": np, "coeffs": fd.second_derivative, "lib": fd, "LIMIT": 3}
    exec("def weights(order):\n"
         "    def inner():\n"
         "        return lib.ORDERS\n"
         "    return np.asarray(coeffs(order))[:LIMIT], inner()\n", namespace)
    found = exercises.origins(namespace["weights"])
    assert found == {"np": "numpy", "coeffs": fd.__name__, "lib": fd.__name__}, found

    class Proxy:
        origins = {"coeffs": fd.__name__}

    assert exercises.origins(Proxy()) == {"coeffs": fd.__name__}
    assert exercises.origins(len) == {}
