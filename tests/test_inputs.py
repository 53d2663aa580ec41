"""Declared inputs resolve by provenance (hpclab.inputs), never by 'the newest file'."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from hpclab import inputs, records
from hpclab.kernels import registry


def _save(out, experiment="pingpong", impl="c", when="2026-01-01T00:00:00+00:00", **meta):
    """A saved run of this machine (unless ``meta`` says otherwise) with one record."""
    df = pd.DataFrame([{"experiment": experiment, "kernel": experiment, "impl": impl,
                        "nprocs": 2, "nthreads": 1, "nbytes": 8, "rep": 0,
                        "metric": "one_way_time", "value": 1e-6, "unit": "s"}])
    here = inputs.here()
    m = {"experiment": experiment, "profile": "quick", "utc_time": when,
         "machine": {"hostname": here["hostname"], "mpi": {"library": here["mpi"]}}}
    for key, value in meta.items():
        if key in ("hostname", "library"):
            (m["machine"] if key == "hostname" else m["machine"]["mpi"])[key] = value
        else:
            m[key] = value
    return records.save(df, m, out)


@pytest.fixture(autouse=True)
def _no_build(monkeypatch):
    monkeypatch.delenv(inputs.BUILD_ENV, raising=False)


def test_the_newest_run_of_this_machine_wins_over_newer_foreign_or_simulated_ones(tmp_path):
    real = _save(tmp_path, when="2026-01-01T00:00:00+00:00")
    _save(tmp_path, when="2026-02-01T00:00:00+00:00", simulated=True, platform="two-host")
    _save(tmp_path, when="2026-03-01T00:00:00+00:00", hostname="elsewhere")
    _save(tmp_path, when="2026-04-01T00:00:00+00:00", library="Open MPI v5.0.3")
    _save(tmp_path, when="2026-05-01T00:00:00+00:00", oversubscribed=True)
    _save(tmp_path, when="2026-06-01T00:00:00+00:00", subset="sizes 67108864 B only")
    r = inputs.resolve("pingpong", out_dir=tmp_path)
    assert r.path == real, r.report()
    reasons = " ".join(why for _, why in r.rejected)
    assert "simulated on platform two-host" in reasons and "another host (elsewhere)" in reasons
    assert "another MPI library" in reasons
    assert "more ranks than cores (oversubscribed)" in reasons
    assert "a probe of sizes 67108864 B only" in reasons  # the PingPong lab's large message


def test_the_profile_asked_for_and_what_the_records_lack_pass_a_run_over(tmp_path):
    quick = _save(tmp_path, when="2026-01-01T00:00:00+00:00")
    _save(tmp_path, when="2026-02-01T00:00:00+00:00", profile="standard")
    assert inputs.resolve("pingpong", "quick", tmp_path).path == quick
    _save(tmp_path, when="2026-03-01T00:00:00+00:00", impl="python")
    r = inputs.resolve("pingpong", "quick", tmp_path,
                       accept=lambda run: None if (run.records["impl"] == "c").any()
                       else "no C records")
    assert r.path == quick and any("no C records" in why for _, why in r.rejected)


def test_inside_a_book_build_only_that_builds_runs_count(tmp_path, monkeypatch):
    _save(tmp_path, when="2026-05-01T00:00:00+00:00", build="old")
    mine = _save(tmp_path, when="2026-01-01T00:00:00+00:00", build="b1")
    monkeypatch.setenv(inputs.BUILD_ENV, "b1")
    assert inputs.resolve("pingpong", out_dir=tmp_path).path == mine


def test_measured_measures_once_saves_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(inputs.BUILD_ENV, "b2")
    calls = []

    def measure():
        calls.append(1)
        return records.load(_save(tmp_path / "elsewhere", build="b2"))

    run, source = inputs.measured("pingpong", measure, out_dir=tmp_path)
    assert calls == [1] and "measured now (no saved run" in source
    again, source2 = inputs.measured("pingpong", measure, out_dir=tmp_path)
    assert calls == [1], "a second page of the build must take the same run"
    assert again.meta["run_id"] == run.meta["run_id"] and "PingPong records of" in source2


def test_no_run_qualifies_says_what_would_be_measured(tmp_path):
    _save(tmp_path, simulated=True, platform="orfeo")
    text = inputs.report("jacobi", tmp_path)
    assert "pingpong" in text and "none qualifies" in text and "would measure" in text
    assert "simulated on platform orfeo" in text


def test_every_declared_input_names_a_chapter():
    for slug in registry.chapter_order():
        for source in registry.get(slug).inputs:
            assert source in registry.chapter_order() and source != slug
    assert "jacobi" in registry.consumers("pingpong")


def test_the_cli_names_the_record_it_resolves_to(tmp_path):
    real = _save(tmp_path)
    _save(tmp_path, when="2026-06-01T00:00:00+00:00", simulated=True, platform="two-host")
    r = subprocess.run([sys.executable, "-m", "hpclab", "inputs", "jacobi", "--results",
                        str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert str(real) in r.stdout and "passed over" in r.stdout, r.stdout
    json.loads(real.with_suffix(".json").read_text())


def test_measure_asks_each_declared_producer_and_saves_where_it_is_told(tmp_path, monkeypatch):
    """``python -m hpclab inputs <slug> --measure`` (what the grader runs once for a class):
    each declared input's producer is asked, with the profile and the folder given (as an
    argument: the environment is not changed)."""
    import os

    monkeypatch.setenv("HPCLAB_RESULTS_DIR", "/elsewhere")
    asked = []

    def producer(source):
        def measurement(profile=None, out_dir=None):
            asked.append((source, profile, str(out_dir), os.environ["HPCLAB_RESULTS_DIR"]))
            return None, f"{source} measured"
        return measurement

    monkeypatch.setattr(inputs, "producer", producer)
    lines = inputs.measure("jacobi", "quick", tmp_path)
    assert lines == [f"{s}: {s} measured" for s in registry.get("jacobi").inputs]
    assert asked == [(s, "quick", str(tmp_path), "/elsewhere")
                     for s in registry.get("jacobi").inputs]
    assert os.environ["HPCLAB_RESULTS_DIR"] == "/elsewhere"


def test_every_declared_producer_gives_its_measurement():
    import inspect

    for slug in registry.chapter_order():
        for source in registry.get(slug).inputs:
            assert callable(inputs.producer(source)), source
            takes = inspect.signature(inputs.producer(source)).parameters
            assert {"profile", "engines", "out_dir"} <= set(takes), (source, list(takes))


def test_the_cli_measures_nothing_for_a_chapter_without_inputs(tmp_path):
    r = subprocess.run([sys.executable, "-m", "hpclab", "inputs", "pingpong", "--measure",
                        "--results", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "declares no inputs" in r.stdout, r.stdout + r.stderr
    assert not list(tmp_path.iterdir())
