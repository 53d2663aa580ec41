"""The STREAM experiment: threaded runs in fresh processes, MPI modes, CLI records, models."""
import shutil
import sys

import numpy as np
import pytest

from hpclab import launch, machine, models, records
from hpclab.chapters.stream import analysis as exp, kernels as stream
from hpclab.kernels import KernelError


@pytest.fixture(scope="module")
def quick(engines):
    return exp.run(profile="quick", engines=engines, progress=False)


def test_every_thread_count_binding_and_operation_is_recorded(quick):
    df = quick.records
    t = df[(df["metric"] == "time") & (df["mode"] == "threads")]
    cores = launch.usable_cores()
    assert set(t["nthreads"]) == set(range(1, cores + 1))
    assert set(t["bind"]) == {"close", "spread"} and set(t["op"]) == set(stream.OPS)
    assert set(t["openmp_bind"]) == {"close", "spread"}  # the runtime really used them
    ntimes = quick.meta["settings"]["ntimes"]
    assert (t.groupby(["impl", "op", "nthreads", "bind"]).size() == ntimes - 1).all()


def test_mpi_modes_are_recorded_per_rank(quick, engines):
    star = quick.records[quick.records["mode"] == "star"]
    assert set(star["rank"]) == set(range(engines.n)) and (star["nprocs"] == engines.n).all()
    ms = exp.mpi_summary(quick)
    assert set(ms["op"]) == set(stream.OPS)
    assert (ms["star_total"] >= ms["star_per_rank"]).all() and (ms["single"] > 0).all()


def test_metadata_says_how_it_was_measured(quick):
    meta = quick.meta
    assert meta["write_allocate_counted"] is False
    assert meta["kernel_flags"] == {"-fno-tree-loop-distribute-patterns": True}
    assert meta["numa_nodes"] == (len(machine.numa_nodes()) or 1)
    assert quick.meta_of(meta["mpi_run"])["launcher"] == "ipyparallel"


def test_summary_fit_and_roofline(quick):
    s = exp.summary(quick)
    assert (s["best"] >= s["median"]).all() and (s["median"] >= s["worst"]).all()
    fit = exp.fit_saturation(quick)
    assert fit["b1"] > 0 and fit["Bmax"] > 0
    roof = exp.roofline(quick)
    assert isinstance(roof, models.Roofline) and "triad" in roof.source
    assert np.isclose(roof.bound(2 / 24), roof.bandwidth * 2 / 24)


def _sweep(rows):
    import pandas as pd

    return pd.DataFrame([{"impl": "c", "op": "triad", "bind": "close", "membind": -1,
                          "nthreads": n, "worst": w, "best": b} for n, w, b in rows])


def test_more_threads_with_less_bandwidth_is_said_only_when_the_ranges_separate():
    """Two threads whose every trial is below one thread's are named, with both ranges; ranges
    that overlap, or the NUMA runs, say nothing."""
    words = exp.slower_with_threads(_sweep([(1, 20.1, 21.0), (2, 15.9, 16.8)]))
    assert words is not None
    assert "2 threads (close binding) got 15.9 to 16.8 GB/s, one thread 20.1 to 21" in words
    assert "cannot tell which" in words
    assert exp.slower_with_threads(_sweep([(1, 20.1, 21.0), (2, 16.0, 20.5)])) is None
    assert exp.slower_with_threads(_sweep([(1, 20.1, 21.0), (2, 25.0, 30.0)])) is None
    numa = _sweep([(1, 20.1, 21.0), (2, 15.9, 16.8)]).assign(membind=0)
    assert exp.slower_with_threads(numa) is None


def test_standard_profile_follows_streams_array_rule():
    n = exp.array_elements("standard")
    assert n * 8 >= 4 * machine.total_cache_bytes()
    assert exp.array_elements("standard", ranks=2) * 2 >= n


def test_too_large_arrays_are_refused_before_anything_runs(monkeypatch):
    monkeypatch.setattr(machine, "memory_bytes", lambda: 1 << 20)
    with pytest.raises(ValueError, match="more than half of this machine's"):
        exp.array_elements("standard")


def test_a_failing_threaded_run_raises_a_kernel_error():
    with pytest.raises(KernelError, match="ntimes must be between"):
        exp.run_threads("c", 1, "close", 100, 1, timeout=60)


def test_cli_writes_records_for_all_four_kernels(tmp_path):
    proc = launch.run_process([sys.executable, "-m", "hpclab", "run", "stream", "--profile",
                               "quick", "--out", str(tmp_path), "--quiet"], timeout=300)
    assert proc.returncode == 0, proc.stderr
    df, meta = records.load(next(tmp_path.glob("stream-*.csv")))
    assert set(df["op"]) == set(stream.OPS) and set(df["impl"]) == set(exp.IMPLS)
    assert set(df["mode"]) == {"threads", "single"}
    assert meta["launcher"] == "mpiexec" and meta["doubles_per_array"] == 1 << 18


def test_missing_openmp_is_explained(tmp_path, root):
    """A compiler without OpenMP stops the build with what to install, not a traceback."""
    fake = tmp_path / "mpicc"
    fake.write_text("#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -fopenmp ] && "
                    "{ echo 'unsupported option -fopenmp' >&2; exit 1; }; done\n"
                    f"exec {shutil.which('mpicc')} \"$@\"\n")
    fake.chmod(0o755)
    code = (root / "setup.py").read_text().split("\ndef extensions")[0]
    ns = {"__name__": "setup_probe", "__file__": str(root / "setup.py")}
    exec(compile(code, "setup.py", "exec"), ns)
    ns["check_toolchain"](str(fake), need_openmp=False)  # MPI alone still compiles
    with pytest.raises(SystemExit, match="(?s)does not support OpenMP.*install libomp"):
        ns["check_toolchain"](str(fake), need_openmp=True)


def test_two_numa_nodes_give_close_and_distant_runs_within_a_node(monkeypatch):
    monkeypatch.setattr(machine, "numa_nodes", lambda: {0: [0], 1: [1]})
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    todo = exp.tasks("quick", ("c",), threads=[1, 2])
    placed = [t for t in todo if "membind" in t]
    assert {(t["cpunodebind"], t["membind"]) for t in placed} == {(0, 0), (0, 1), (1, 1), (1, 0)}
    assert {t["threads"] for t in placed} == {1}  # one core per node here


def test_a_stream_run_that_more_threads_made_much_slower_is_named():
    """{1: 49, 2: 0.4} GB/s came from a run under load: the words a lab prints with its
    input say so and say what to do; a sound run gets none."""
    from hpclab.chapters.stream import analysis

    words = analysis.loaded_words({1: 49.0, 2: 0.4})
    assert "with 2 threads" in words and "0.4 GB/s" in words and "idle machine" in words
    assert analysis.loaded_words({1: 12.0, 2: 20.0, 4: 19.0}) == ""
    assert analysis.loaded_words({1: 12.0}) == ""


TRIAD_HEAD = ("from cython.parallel cimport prange, parallel, threadid\n"
              "def triad(double[::1] a, const double[::1] b, const double[::1] c, double scalar,"
              " int threads=1):\n    \"\"\"prange(n) in a docstring\"\"\"\n"
              "    cdef Py_ssize_t j, n = a.shape[0]\n")
LINE = "a[j] = b[j] + scalar * c[j]"


@pytest.mark.parametrize("body, threaded, schedule, split", [
    (f'    for j in prange(n, nogil=True, schedule="static", num_threads=threads):\n        {LINE}',
     True, "static", True),
    (f'    for j in prange(n, nogil=True, schedule="dynamic", num_threads=threads):\n'
     f'        {LINE}', True, "dynamic", True),
    (f"    for j in prange(n, nogil=True, num_threads=threads, schedule='guided',\n"
     f"                    chunksize=4):\n        {LINE}", True, "guided", True),
    (f"    for j in prange(n, nogil=True, num_threads=threads):\n        {LINE}", True, "", True),
    (f"    with nogil, parallel(num_threads=threads):\n        for j in range(n):\n"
     f"            {LINE}", True, "", False),
    (f"    with nogil, parallel(num_threads=threads):\n        t = threadid()\n"
     f"        for j in range(t, n, threads):\n            {LINE}", True, "", True),
    (f"    for j in range(n):\n        {LINE}", False, "", True),
    (f"    for j in prange(n, nogil=True, num_threads=1):\n        {LINE}", False, "", True),
])
def test_the_triads_source_says_how_its_threads_share_the_loop(body, threaded, schedule, split):
    """What the STREAM lab's check reads from a triad's Cython: its threads, its schedule and
    whether they share the loop out or each run all of it. The source is read wherever the
    function is: its own ``source`` (the grader's proxy carries it) or its module's .pyx."""
    from types import SimpleNamespace

    from hpclab.chapters.stream.exercises import stream_triad_source

    triad = SimpleNamespace(__name__="triad", source=TRIAD_HEAD + body + "\n")
    assert stream_triad_source(triad) == {"threaded": threaded, "schedule": schedule,
                                          "split": split}
    assert stream_triad_source(SimpleNamespace(__name__="triad")) == {
        "threaded": None, "schedule": None, "split": None}


def _triad(a, b, c, scalar, threads=1):
    a[:] = b + scalar * c


def test_a_recording_triad_notes_the_threads_of_each_call_and_stays_the_triad():
    from hpclab.chapters.stream import exercises

    calls: list = []
    triad = exercises.stream_recording(exercises.stream_recording(_triad, []), calls)
    a, b, c = np.zeros(5), np.ones(5), np.full(5, 2.0)
    triad(a, b, c, 3.0)
    triad(a, b, c, 3.0, 4)
    triad(a, b, c, scalar=3.0, threads=2)
    # one recorder (the one given was unwrapped), and each call's clock just around it
    assert [c[:2] for c in calls] == [(1, 5), (4, 5), (2, 5)]
    assert all(c[2] <= c[3] for c in calls) and calls[0][3] <= calls[1][2] <= calls[2][2]
    assert np.array_equal(a, np.full(5, 7.0))
    assert triad.__name__ == "_triad" and triad.__module__ == _triad.__module__


@pytest.mark.parametrize("calls, says", [
    ([(2, 10)] * 3 + [(2, 99)], None),
    ([(1, 10)] + [(2, 10)] * 3, None),  # an untimed first call before the three
    ([(2, 10), (1, 10), (2, 10)], "ran on 1 thread(s), not all 2 cores"),
    ([(8, 10)] * 3, "ran on 8 threads, on 2 cores"),
    ([(2, 10)] * 2 + [(2, 99)], "called 2 times on arrays of n_big = 10"),
])
def test_the_timed_triads_threads_are_named_when_not_the_cores(calls, says):
    from hpclab.chapters.stream import exercises

    problem = exercises.stream_threads_problem(calls, 10, 2, 3)
    assert problem is None if says is None else says in problem, problem


def _clocked(durations, gap=1e-6, threads=2, n=10):
    """calls as stream_recording keeps them, of the given durations, ``gap`` apart; and the
    times a student's loop reads around each (t0 just before, t1 just after)."""
    calls, times, now = [], [], 0.0
    for d in durations:
        t0 = now
        start = now + gap / 4
        end = start + d
        calls.append((threads, n, start, end))
        now = end + gap / 4
        times.append(now - t0)
        now += gap / 2
    return calls, times


@pytest.mark.parametrize("change, says", [
    (lambda t: t, None),
    (lambda t: [x * 1e3 for x in t], "looks like milliseconds"),
    (lambda t: [x * 1e6 for x in t], "looks like microseconds"),
    (lambda t: list(np.cumsum(t)), "grow from run to run"),
    (lambda t: [x / 10 for x in t], "is less than that call of triad took"),
    (lambda t: [2.5 * x for x in t], "time each call on its own"),  # CPU time of two threads
])
def test_the_timed_triads_times_are_held_against_the_calls_clock(change, says):
    from hpclab.chapters.stream import exercises

    calls, times = _clocked([2e-3, 3e-3, 2.5e-3, 2e-3, 2.2e-3])
    problem = exercises.stream_times_problem(calls, 10, change(times))
    assert problem is None if says is None else says in problem, problem


def test_a_call_after_the_timing_is_not_taken_for_a_timed_one():
    """A student who times ten calls and then calls the triad once more, on one thread, to
    look at the result: the timed calls are the ones whose clocks hold the times."""
    from hpclab.chapters.stream import exercises

    calls, times = _clocked([2e-3, 6e-3, 1e-3, 2e-3, 2.2e-3])  # one slow call among them
    after = calls[-1][3] + 1e-3
    calls = calls + [(1, 10, after, after + 5e-3)]
    assert exercises.stream_times_problem(calls, 10, times) is None
    assert exercises.stream_threads_problem(calls, 10, 2, len(times), times) is None
    # without the times, the last five calls are taken, one of them on one thread
    assert "ran on 1 thread(s)" in exercises.stream_threads_problem(calls, 10, 2, len(times))
