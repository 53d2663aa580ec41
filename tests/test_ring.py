"""The ring experiment: engines and CLI records, correctness runs, the deadlock kept safe."""
import sys
import time

import numpy as np
import pytest

import leftovers
from hpclab import launch, models, records
from hpclab.chapters.ring import analysis as exp, kernels as ring, model as ring_model


def _ring_processes():
    import os

    return [p for p in leftovers.tagged(os.environ["HPCLAB_RUN_TAG"])
            if "hpclab.chapters.ring.kernels" in p[1]]


@pytest.mark.parametrize("variant,nbytes", [("naive", 4), ("send", 16 << 20)])
def test_deadlocks_are_stopped_at_the_timeout_and_leave_nothing(variant, nbytes):
    start = time.monotonic()
    result = ring.demonstrate_deadlock(n=2, variant=variant, nbytes=nbytes, timeout=6)
    assert result["deadlocked"], result
    assert "did not finish within 6 s" in result["message"]
    assert time.monotonic() - start < 30
    assert not leftovers.wait_gone_matching(_ring_processes, 10)


def test_a_safe_variant_is_not_reported_as_deadlocked():
    result = ring.demonstrate_deadlock(n=2, variant="irecv", nbytes=4, timeout=60)
    assert not result["deadlocked"] and result["message"].startswith("ok: irecv ring")


def test_a_deadlock_on_engines_raises_and_fresh_engines_follow(engines):
    from mpi4py import MPI  # noqa: F401  (the engines import it themselves)

    with pytest.raises(TimeoutError, match="did not finish within 4 s"):
        engines.run(_naive_on_engine, timeout=4, what="the naive ring")
    assert engines.run(_irecv_on_engine, timeout=60) == [True, True]


def _naive_on_engine():
    from mpi4py import MPI

    from hpclab.chapters.ring import kernels as r

    r.run_c(MPI.COMM_WORLD, "naive", 4, warmup=0, iterations=1, repetitions=1,
            allow_deadlock=True)


def _irecv_on_engine():
    from mpi4py import MPI

    from hpclab.chapters.ring import kernels as r

    return bool(r.run_c(MPI.COMM_WORLD, "irecv", 4, warmup=0, iterations=2, repetitions=1)[0] > 0)


@pytest.fixture(scope="module")
def engine_run(engines):
    return exp.run(profile="quick", engines=engines, progress=False, check_upto=4)


def test_engine_run_times_every_variant_up_to_the_cores(engine_run):
    df, meta = engine_run
    t = exp.timings(df)
    assert set(t["variant"]) == set(exp.VARIANTS) and set(t["impl"]) == set(exp.IMPLS)
    assert set(t["nprocs"]) == {1, 2} and not t["oversubscribed"].any()
    assert (t["value"] > 0).all()
    buffered = df[df["metric"] == "send_buffered"]
    assert set(buffered["nbytes"]) == {4, 256, 4096} and (buffered["nprocs"] == 2).all()
    assert meta["launcher"] == "ipyparallel" and meta["variants"] == list(exp.VARIANTS)
    assert [p["rank"] for p in meta["placement"]] == [0, 1]


def test_correctness_runs_go_to_8_ranks_labelled_oversubscribed(engine_run):
    c = exp.correctness(engine_run)
    assert set(c["nprocs"]) == {1, 2, 3, 4}
    assert (c["correct"] == 1).all()
    per_p = c.groupby("nprocs").size()
    assert (per_p == per_p.max()).all(), "every variant is checked at every P, a ring of one too"
    assert c.loc[c["nprocs"] > launch.usable_cores(), "oversubscribed"].all()
    assert not c.loc[c["nprocs"] <= launch.usable_cores(), "oversubscribed"].any()
    checked = engine_run.meta_of(engine_run.meta["correctness_run"])
    assert checked["ranks"] == [1, 2, 3, 4] and checked["launcher"] == "mpiexec"
    assert set(engine_run.records.loc[c.index, "run"]) <= set(engine_run.runs)


def test_fits_and_summary(engine_run):
    fits = exp.fits(engine_run)
    assert len(fits) == len(exp.VARIANTS) * len(exp.IMPLS)
    assert (fits["lambda"] > 0).all()
    assert (fits["lambda_low"] <= fits["lambda"]).all()
    assert (fits["lambda"] <= fits["lambda_high"]).all()
    one_p = exp.timings(engine_run)
    one_p = one_p[one_p["nprocs"] == 1]
    lone = exp.fits(one_p)
    assert len(lone) == len(fits) and lone["lambda"].isna().all()
    assert lone["note"].str.contains("need at least 2 points").all()
    s = exp.summary(engine_run)
    np.testing.assert_allclose(s["step_median"] * s["nprocs"], s["median"])
    hockney = exp.step_fit(engine_run, "c", "irecv")
    assert len(hockney.x) == 3 and hockney["B"] > 0


def test_timings_refuse_oversubscription():
    with pytest.raises(ValueError, match="oversubscribed timings are meaningless"):
        exp.run(profile="quick", n=launch.usable_cores() + 1, progress=False)


def test_pingpong_latency_from_records(engines):
    pp = exp.measure_pingpong(engines)
    assert set(pp.records["nbytes"]) <= {0, 1, 8}
    assert exp.pingpong_latency(pp) > 0


def test_the_labs_pingpong_latency_is_of_its_own_profile(engines, tmp_path, monkeypatch):
    """A lab in the standard profile does not take a saved quick PingPong run: it measures
    its own (here a stand-in that says it was asked), and the quick lab takes the saved one."""
    from hpclab.chapters.pingpong import analysis as pingpong

    monkeypatch.setenv("HPCLAB_RESULTS_DIR", str(tmp_path))
    exp.measure_pingpong(engines, profile="quick").save()

    class Measured(Exception):
        pass

    def measure_anew(profile=None, **options):
        raise Measured(profile)

    monkeypatch.setattr(pingpong, "run", measure_anew)
    latency, source = exp.pingpong_reference("quick")
    assert latency > 0 and "quick" in source, source
    with pytest.raises(Measured, match="standard"):
        exp.pingpong_reference("standard")


def test_cli_writes_ring_records(tmp_path):
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", "ring", "--profile", "quick",
                       "--out", str(tmp_path), "--quiet"], n=2, timeout=300, what="ring CLI")
    csvs = list(tmp_path.glob("ring-*.csv"))
    assert len(csvs) == 1, r.stdout + r.stderr
    df, meta = records.load(csvs[0])
    t = exp.timings(df)
    assert set(t["nprocs"]) == {1, 2} and set(t["variant"]) == set(exp.VARIANTS)
    assert meta["launcher"] == "mpiexec" and meta["profile"] == "quick"


def test_cli_rejects_unknown_implementations(tmp_path):
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", "ring", "--impl", "fortran",
                       "--out", str(tmp_path)], n=2, timeout=120, check=False)
    assert r.returncode == 1 and "unknown ring implementation" in r.stderr
    assert "Traceback" not in r.stderr and not list(tmp_path.iterdir())


def test_a_figures_caption_names_the_lines_it_draws_and_those_it_does_not(engine_run):
    points, fitted = exp.ring_points(engine_run, "c", nbytes=4)
    words = exp.lines_words(points, fitted)
    variants = list(dict.fromkeys(points["variant"]))
    for v in variants:  # every variant is named, drawn or not
        assert v in words or not fitted
    if fitted:
        assert words.startswith("The line T = λ·P is drawn for")
        assert ("reaches zero" in words) == (len(fitted) < len(variants))
    assert exp.lines_words(points, {}).startswith("No line is drawn")
    assert "reaches zero" not in exp.lines_words(points, {v: None for v in variants})


def test_a_lambda_interval_below_zero_is_cut_and_said(engine_run, monkeypatch):
    """Ring steps so scattered that λ's interval crosses zero: the table shows no negative
    latency and says λ is not determined (seeded, synthetic: not this machine's numbers)."""
    rng = np.random.default_rng(3)
    p = np.array([1.0, 2.0, 3.0, 4.0])
    scattered = models.fit(ring_model.MODEL, p, np.abs(1e-7 * p + rng.normal(0, 2e-6, 4)))
    lo, _ = scattered.ci95["lambda"]
    assert lo < 0, "the synthetic data should give an interval below zero"
    monkeypatch.setattr(exp, "fit", lambda *a, **k: scattered)
    table = exp.lambda_table(exp.fits(engine_run))
    assert (table["95% low [µs]"] >= 0).all(), table
    assert table["note"].str.contains("not determined").all(), table


def _nonblocking(*steps, unwaited=0, messages=("Irecv", "Isend")):
    """A ring_calls_check result of two ranks making ``steps``: each a list of (name, sends
    not yet waited for) as CountingComm records them."""
    order = [call for step in steps for call in step]
    return {"nprocs": len(steps), "messages": dict.fromkeys(messages, 2 * len(steps)),
            "orders": {0: order, 1: order}, "unwaited": unwaited}


GOOD = [("Irecv", 0), ("Irecv", 0), ("Isend", 0), ("Isend", 1)]


@pytest.mark.parametrize("calls, says", [
    (_nonblocking(GOOD, GOOD), None),
    (_nonblocking([("Isend", 0), ("Isend", 1), ("Irecv", 2), ("Irecv", 2)]), None),
    (_nonblocking([("Isend", 0), ("Isend", 1), ("Irecv", 0), ("Irecv", 0)]),
     "waited for its sends before posting any receive"),
    (_nonblocking([("Irecv", 0), ("Irecv", 0), ("Isend", 0), ("Isend", 0)]),
     "waited for its first send before it started the second"),
    (_nonblocking(GOOD, [(n, k + 2) for n, k in GOOD]), "2 send(s) of the step before"),
    (_nonblocking(GOOD, GOOD, unwaited=2), "never waited for"),
    (_nonblocking(GOOD, messages=("irecv", "Isend")), "comm.irecv: that is the pickle API"),
])
def test_the_nonblocking_ring_waits_for_its_four_requests_together(calls, says):
    from hpclab.chapters.ring import exercises

    problem = exercises.nonblocking_problem(calls)
    assert problem is None if says is None else says in problem, problem


def test_a_wait_after_one_receive_is_not_called_a_deadlock():
    from hpclab.chapters.ring import exercises

    pairs = _nonblocking([("Irecv", 0), ("Isend", 0), ("Irecv", 0), ("Isend", 0)])
    problem = exercises.nonblocking_problem(pairs)
    assert "before posting its second receive" in problem and "forever" not in problem


def _ordered(*per_rank):
    """A ring_calls_check result whose rank r made the calls ``per_rank[r]`` (names)."""
    return {"nprocs": len(per_rank),
            "orders": {r: [(n, 0) for n in names] for r, names in enumerate(per_rank)}}


SEND_FIRST, RECEIVE_FIRST = ["Ssend", "Recv"] * 2, ["Recv", "Ssend"] * 2


@pytest.mark.parametrize("calls, says", [
    (_ordered(SEND_FIRST, RECEIVE_FIRST, SEND_FIRST), None),
    (_ordered(RECEIVE_FIRST, SEND_FIRST, RECEIVE_FIRST, SEND_FIRST), None),
    # rank < P/2 sends first: rank 2 receives first where rank 0 sends first
    (_ordered(SEND_FIRST, SEND_FIRST, RECEIVE_FIRST), "rank 2 calls Recv, Ssend, Recv, Ssend "
                                                      "but rank 0, also even, calls Ssend"),
    (_ordered(SEND_FIRST, SEND_FIRST, RECEIVE_FIRST, RECEIVE_FIRST), "rank 2 calls Recv"),
    # one rank receives first, all others send first
    (_ordered(RECEIVE_FIRST, SEND_FIRST, SEND_FIRST), "rank 2 calls Ssend, Recv"),
    (_ordered(SEND_FIRST, SEND_FIRST), "in the same order"),
])
def test_the_ordered_ring_is_ordered_by_parity(calls, says):
    from hpclab.chapters.ring import exercises

    problem = exercises.ordered_problem(calls)
    assert problem is None if says is None else says in problem, problem


def _other(name, step, p=2, unwaited=0, changed=None):
    """A ring_calls_check result of ``p`` ranks each making ``step`` in every step."""
    return {"nprocs": p, "orders": {r: step * p for r in range(p)}, "unwaited": unwaited,
            "changed": changed}


@pytest.mark.parametrize("calls, name, says", [
    (_other("send_ring", [("Send", 0), ("Send", 0), ("Recv", 0), ("Recv", 0)]), "send_ring",
     None),
    (_other("isend_ring", [("Isend", 0), ("Isend", 1), ("Recv", 2), ("Recv", 2)]),
     "isend_ring", None),
    (_other("send_ring", [("Recv", 0), ("Recv", 0), ("Send", 0), ("Send", 0)]), "send_ring",
     "no ordering by rank"),
    (_other("isend_ring", [("Isend", 0), ("Isend", 1), ("Recv", 0), ("Recv", 0)]),
     "isend_ring", "waited for a send before its receives"),
    (_other("isend_ring", [("Isend", 0), ("Isend", 1), ("Recv", 2), ("Recv", 2)], unwaited=2),
     "isend_ring", "never waited for"),
    (_other("isend_ring", [("Isend", 0), ("Isend", 1), ("Recv", 2), ("Recv", 2)],
            changed={"rank": 1, "function": "isend_ring", "line": 9, "code": "a[:] = b"}),
     "isend_ring", "rank 1 changed what it was sending before it waited for the send: after "
                   "line 9 of isend_ring (`a[:] = b`)"),
])
def test_the_other_rings_calls_are_read_in_order(calls, name, says):
    from hpclab.chapters.ring import exercises

    problem = exercises.other_ring_problem(calls, name)
    assert problem is None if says is None else says in problem, problem


def _isend_ring(comm, in_place=False):
    """isend_ring; with ``in_place``, it writes the next step's values into the arrays it is
    still sending before it waits for the sends."""
    import numpy as np
    from mpi4py import MPI

    cart = comm.Create_cart([comm.Get_size()], periods=[True])
    rank, size = cart.Get_rank(), cart.Get_size()
    left, right = cart.Shift(0, 1)
    to_right, to_left = np.array([-rank], np.int32), np.array([rank], np.int32)
    from_left, from_right = np.zeros(1, np.int32), np.zeros(1, np.int32)
    for step in range(size):
        sends = [cart.Isend(to_right, dest=right, tag=1), cart.Isend(to_left, dest=left, tag=2)]
        cart.Recv(from_left, source=left, tag=1)
        cart.Recv(from_right, source=right, tag=2)
        if in_place and step < size - 1:
            to_right[:] = from_left + rank
        MPI.Request.Waitall(sends)
        if step < size - 1:
            to_right, to_left = from_left + rank, from_right - rank
    cart.Free()
    return int(from_left[0]), int(from_right[0])


def _isend_ring_in_place(comm):
    return _isend_ring(comm, in_place=True)


def test_a_send_buffer_changed_before_its_wait_is_found_with_its_line(engines):
    from hpclab.chapters.ring import exercises

    good = exercises.ring_calls_check(engines, _isend_ring, nprocs=2, timeout=30)
    assert good["ok"] and good["changed"] is None, good
    bad = exercises.ring_calls_check(engines, _isend_ring_in_place, nprocs=2, timeout=30)
    # the line that changed it is _isend_ring's, called from the function that was checked
    assert bad["changed"]["function"] == "_isend_ring", bad["changed"]
    assert bad["changed"]["line"] == 17 and bad["changed"]["code"] == "", bad["changed"]
    problem = exercises.other_ring_problem(bad, "isend_ring")
    assert "after line 17 of _isend_ring" in problem, problem


def test_the_nonblocking_rings_two_directions_need_two_tags():
    from hpclab.chapters.ring import exercises

    calls = _nonblocking(GOOD, GOOD)
    calls["tags"] = {r: [1, 2, 1, 2] * 2 for r in (0, 1)}
    assert exercises.nonblocking_problem(calls) is None
    calls["tags"] = {0: [1, 2, 1, 2] * 2, 1: [1, 2, 1, 1] + [1, 2, 1, 2]}
    assert "rank 1 sent both directions with tag 1" in exercises.nonblocking_problem(calls)
