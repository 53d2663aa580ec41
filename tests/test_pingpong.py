"""PingPong: the notebook path (engines) and the CLI path (mpiexec) write the same records;
the chapter page."""
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpclab import kernels, launch, models, records
from hpclab.chapters.pingpong import analysis as pingpong


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli")
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", "pingpong", "--profile", "quick",
                       "--out", str(out), "--quiet"], n=2, timeout=300, what="pingpong CLI")
    return out, r


def test_cli_writes_csv_and_json_records(cli_run):
    out, r = cli_run
    csvs, jsons = list(out.glob("pingpong-*.csv")), list(out.glob("pingpong-*.json"))
    assert len(csvs) == 1 and len(jsons) == 1, r.stdout + r.stderr
    df, meta = records.load(csvs[0])
    assert set(df["impl"]) == set(pingpong.IMPLS)
    assert (df["nprocs"] == 2).all() and (df["value"] > 0).all()
    assert meta["profile"] == "quick" and meta["launcher"] == "mpiexec"
    mpi = meta["machine"]["mpi"]
    # the library mpi4py runs, without Open MPI's trailing NUL, is the one the kernels were
    # built with
    assert "\x00" not in mpi["library_version"] and mpi["library"] == mpi["library"].strip()
    assert kernels._family(mpi["kernels_built_with"]) == kernels._family(mpi["library"])
    assert [p["rank"] for p in meta["placement"]] == [0, 1] and meta["placement"][0]["cpus"]
    assert {p["thread_level"] for p in meta["placement"]} == {"funneled"}
    assert json.loads(jsons[0].read_text())["records"] == csvs[0].name


def test_engines_path_gives_the_same_record_shape(cli_run, engines):
    out, _ = cli_run
    cli, _ = records.load(next(out.glob("pingpong-*.csv")))
    nb, meta = pingpong.run(profile="quick", impls=("c", "python"), engines=engines,
                            progress=False)
    assert list(nb.columns) == list(cli.columns)
    key = ["impl", "nbytes", "warmup", "iterations", "rep"]
    merged = nb[key].merge(cli[key], on=key, how="left", indicator=True)
    assert (merged["_merge"] == "both").all()
    assert meta["launcher"] == "ipyparallel"
    assert {p["thread_level"] for p in meta["placement"]} == {"funneled"}


def test_cli_refuses_one_rank_clearly(tmp_path):
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", "pingpong", "--out", str(tmp_path)],
                      n=1, timeout=120, check=False)
    assert r.returncode == 2
    assert "needs at least 2 MPI ranks" in r.stderr and "mpiexec -n 2" in r.stderr
    assert "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())


def test_cli_rejects_unknown_implementations(tmp_path):
    r = launch.mpirun([sys.executable, "-m", "hpclab", "run", "pingpong", "--impl", "fortran",
                       "--out", str(tmp_path)], n=2, timeout=120, check=False)
    assert r.returncode == 1 and "unknown pingpong implementation" in r.stderr
    assert "Traceback" not in r.stderr


def test_analysis_of_a_run(engines):
    df, _ = pingpong.run(profile="quick", impls=("c", "pickle"), engines=engines,
                         progress=False)
    s = pingpong.summary(df)
    assert {"median", "best", "worst", "bandwidth_MBps"} <= set(s.columns)
    fits = pingpong.fit(df, "c")
    assert fits["hockney"]["B"] > 0 and fits["two_segment"] is not None
    overhead = pingpong.python_overhead(df)
    assert overhead["c"] == 0
    with pytest.raises(ValueError, match="no records of implementation"):
        pingpong.fit(df, "cython")
    few = df[(df["impl"] == "c") & (df["nbytes"] <= 8)]
    with pytest.warns(models.FitWarning, match="no two-segment fit for c"):
        sparse = pingpong.fit(few, "c")
    assert sparse["two_segment"] is None and "distinct sizes" in sparse["two_segment_error"]


def test_pingpong_page_has_its_figures_numbers_and_references(book):
    html, _ = book
    page = (html / "book" / "pingpong" / "index.html").read_text()
    assert page.count("<img") >= 4
    assert "Measured on" in page and "MPICH" in page
    assert "report 004" in page and "report 001" in page and "report 002" in page


def _loop_one_way(comm, sendbuf, recvbuf, iterations):
    from mpi4py import MPI

    rank = comm.Get_rank()
    comm.Barrier()
    t0 = MPI.Wtime()
    for _ in range(iterations):
        if rank == 0:
            comm.Send(sendbuf, dest=1)
            comm.Recv(recvbuf, source=1)
        elif rank == 1:
            comm.Recv(recvbuf, source=0)
            comm.Send(sendbuf, dest=0)
    return (MPI.Wtime() - t0) / (2 * iterations)


def _loop_round_trip(comm, sendbuf, recvbuf, iterations):
    return 2 * _loop_one_way(comm, sendbuf, recvbuf, iterations)


def _loop_world(comm, sendbuf, recvbuf, iterations):
    from mpi4py import MPI

    return _loop_one_way(MPI.COMM_WORLD, sendbuf, recvbuf, iterations)


def _loop_sends_first(comm, sendbuf, recvbuf, iterations):
    from mpi4py import MPI

    rank = comm.Get_rank()
    comm.Barrier()
    t0 = MPI.Wtime()
    if rank == 0:
        for _ in range(iterations):
            comm.Send(sendbuf, dest=1)
        for _ in range(iterations):
            comm.Recv(recvbuf, source=1)
    elif rank == 1:
        for _ in range(iterations):
            comm.Recv(recvbuf, source=0)
            comm.Send(sendbuf, dest=0)
    return (MPI.Wtime() - t0) / (2 * iterations)


def test_a_loop_that_would_wait_forever_at_large_sizes_is_not_timed(engines):
    """All the sends first finishes with small messages, which MPI buffers, and waits forever
    once they are too large: the timing of (b) reads the order of the calls with small
    messages first and times the lab's own loop instead, at once, rather than after a
    timeout per size. A loop of one round trip after another is timed as it is."""
    from hpclab.chapters.pingpong import exercises

    said = exercises._order_problem(engines, _loop_sends_first, 60)
    assert said and "sends all its messages on rank 0" in said, said
    assert exercises._order_problem(engines, _loop_one_way, 60) is None
    assert exercises._order_problem(engines, _loop_world, 60)  # no calls on the communicator


def test_the_ticking_clock_grades_the_timing_arithmetic_without_timing(engines):
    """A correct loop reads exactly one tick, a round trip two, whatever the machine's load;
    a loop that bypasses the communicator it is given sends no counted message."""
    from hpclab import exercises

    good = exercises.pingpong_clock_check(engines, _loop_one_way, nbytes=64, iterations=10)
    assert good["received_ok"] and good["messages"][:2] == [20, 20]
    assert abs(good["ticks"] - 1) < 1e-9, good
    twice = exercises.pingpong_clock_check(engines, _loop_round_trip, nbytes=64, iterations=10)
    assert abs(twice["ticks"] - 2) < 1e-9, twice
    world = exercises.pingpong_clock_check(engines, _loop_world, nbytes=64, iterations=10)
    assert world["messages"][:2] == [0, 0] and world["ticks"] == 0, world
    # the real clock is back on the engines
    assert engines.run(lambda: __import__("mpi4py.MPI").MPI.Wtime() > 1e-3)[0]


# a submission that games every check it can reach in its own kernel, and solves nothing
PATCHER = {
    "pingpong_loop": """
import builtins
import numpy as np
from hpclab import exercises, models

class Yes(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __lt__ = __le__ = __gt__ = __ge__ = __eq__
    def __float__(self): return 1e-6
    __hash__ = int.__hash__

np.isclose = np.allclose = lambda *a, **k: True
exercises.pingpong_check = lambda *a, **k: {"time": 1e-6, "times": [1e-6, 1e-6],
                                             "received_ok": True}
exercises.pingpong_clock_check = lambda *a, **k: {"time": 1e-3, "ticks": 1.0,
                                                   "messages": [20, 20], "received_ok": True}
exercises.reference_pingpong_time = lambda *a, **k: 1e-6
exercises.require = lambda *names: None
models.fit_two_segment = lambda *a, **k: None

def pingpong_loop(comm, sendbuf, recvbuf, iterations):
    return Yes(1)
""",
    "fit_hockney": """
c = summary[summary["impl"] == "c"]
c_sizes, c_times = c["nbytes"].to_numpy(float), c["median"].to_numpy(float)
def fit_hockney(n, t):
    return Yes(1), Yes(1)
lam_c, B_c = Yes(1), Yes(1)
""",
    "ulysses_fit": """
ulysses = reference.load("ulysses_imb_pingpong")
ulysses_latency_us = ulysses_bandwidth_GBs = ulysses_break_bytes = Yes(1)
""",
}


def _submission(text, replace=None):
    import nbformat

    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if replace and gid in replace:
            cell.source = replace[gid]
    return nbformat.writes(nb)


def _errors(work, student):
    """What the cells of a student's autograded notebook raised, by grade id or cell number:
    why a cell lost its points, read back when a test finds it did."""
    import nbformat

    nb = nbformat.read(work / "autograded" / student / "pingpong" / "pingpong.ipynb",
                       as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id") or i:
            [f"{o.get('ename')}: {o.get('evalue')}" for o in c.get("outputs", [])
             if o.get("output_type") == "error"]
            for i, c in enumerate(nb.cells)
            if any(o.get("output_type") == "error" for o in c.get("outputs", []))}


def test_gamed_checks_and_a_pickled_loop_lose_their_points(tmp_path):
    """Graded in the sandbox: the lab's solution with one pickle-API send (which would block
    its partner's buffer receive until the timeout) loses the loop's points and nothing else,
    found in the loop's code where the engines run it (the grader sees no source); a submission
    that patches numpy's comparisons, the harnesses and ``require`` in its kernel and answers
    with an int whose ``==`` always holds scores nothing, because the graded cells run in
    the grader's own process on plain copies of its values."""
    import subprocess

    from nbgrader.api import Gradebook

    root = Path(__file__).resolve().parents[1]
    text = (root / "solutions" / "pingpong" / "pingpong.ipynb").read_text()
    pickled = "comm.send(sendbuf, dest=1, tag=0)"
    assert text.count(pickled.replace("send", "Send", 1)) == 1
    lab = (root / "labs" / "pingpong" / "pingpong.ipynb").read_text()
    for student, nb in (("dave", text.replace(pickled.replace("send", "Send", 1), pickled)),
                        ("mallory", _submission(lab, PATCHER))):
        dest = tmp_path / "submitted" / student / "pingpong"
        dest.mkdir(parents=True)
        (dest / "pingpong.ipynb").write_text(nb)
    subprocess.run([sys.executable, str(root / "autograder" / "grade.py"), "grade", "pingpong",
                    "--workdir", str(tmp_path)], capture_output=True, timeout=900)
    scores = {}
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        for student in ("dave", "mallory"):
            sub = gb.find_submission_notebook("pingpong", "pingpong", student)
            scores[student] = {g.name: (g.score, g.max_score) for g in sub.grades
                               if g.cell_type == "code"}
    dave, mallory = scores["dave"], scores["mallory"]
    assert dave["test_pingpong_loop"][0] == 0, dave
    lost = {name: (s, m) for name, (s, m) in dave.items()
            if name != "test_pingpong_loop" and s != m}
    assert not lost, f"the pickled loop also lost points in {lost}: {_errors(tmp_path, 'dave')}"
    assert len(mallory) == sum(1 for name in dave if name.startswith("test_")), mallory
    assert len(mallory) >= 3 and all(s == 0 for s, _ in mallory.values()), mallory


def test_imb_exchange_bandwidth_is_split_into_its_four_message_streams():
    """IMB's Exchange bandwidth counts the four messages of an iteration (4n/t): the times
    and bandwidths of the table say so, and the per-stream peak is a quarter of IMB's."""
    from hpclab import reference
    from hpclab.chapters.pingpong import analysis as exp

    ex = reference.load("hamburg_imb_exchange")
    assert exp.exchange_messages(ex) == pytest.approx(4, abs=0.1)
    t = exp.exchange_table(ex)
    imb = t["IMB peak (4 messages) [GB/s]"]
    np.testing.assert_allclose(t["peak per stream [GB/s]"], imb / 4, atol=1e-3)
    line = exp.exchange_line(ex, "Open MPI 1.8.1", 40)
    assert line["lambda"] < 0, "the page shows what a line through these times would need"


@pytest.mark.parametrize("scale, says", [
    (1.5, "(95% interval"),                       # a cost the runs bound
    (0.8, "which no cost per message can be"),    # a ratio below 1: impossible, said why
])
def test_the_interpreters_cost_per_message_is_never_quoted_below_zero(scale, says):
    """Seeded one-way times: the words quote the cost inside its domain, and a measured
    ratio below 1 is called impossible with the reason instead of a negative cost."""
    rng = np.random.default_rng(0)
    c = 1e-6 * (1 + 0.01 * rng.standard_normal(8))
    other = scale * 1e-6 * (1 + 0.01 * rng.standard_normal(8))
    t = pd.DataFrame({"impl": ["c"] * 8 + ["python"] * 8, "value": np.r_[c, other]})
    words = pingpong.overhead_words(t, "python")
    assert says in words, words
    if scale < 1:
        assert words.endswith(pingpong.OVERHEAD_WHY)
