import json

import pandas as pd
import pytest

from hpclab import records


def sample():
    rows = records.rows("pingpong", "pingpong", "c", 2, 1, {"nbytes": 8}, [1e-6, 2e-6],
                        "one_way_time", "s")
    return records.frame(rows)


def test_rows_are_tidy_with_parameters_in_the_middle():
    df = sample()
    assert list(df.columns) == records.LEADING + ["nbytes"] + records.TRAILING
    assert df["rep"].tolist() == [0, 1]


def test_save_writes_csv_and_json_and_never_overwrites(tmp_path):
    df = sample()
    meta = records.metadata("pingpong", "quick")
    first = records.save(df, meta, tmp_path)
    second = records.save(df, meta, tmp_path)
    assert first != second
    assert len(list(tmp_path.glob("*.csv"))) == 2 and len(list(tmp_path.glob("*.json"))) == 2
    back, meta_back = records.load(first)
    pd.testing.assert_frame_equal(back.drop(columns="run"), df)
    assert (back["run"] == meta_back["run_id"]).all()
    for key in ("machine", "profile", "hpclab_version", "git_commit", "utc_time", "command_line"):
        assert key in meta_back
    assert meta_back["records"] == first.name
    assert not list(tmp_path.glob(".*tmp")), "temporary files left behind"


def test_save_can_publish_under_names_that_stay(tmp_path):
    run = records.Run(sample(), records.metadata("pingpong", "quick"))
    for _ in range(2):
        run.save(tmp_path / "results", publish=tmp_path / "data")
    assert len(list((tmp_path / "results").glob("*.csv"))) == 2
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "pingpong-records.csv", "pingpong-records.json"]
    back, meta = records.load(tmp_path / "data" / "pingpong-records.csv")
    pd.testing.assert_frame_equal(back, run.records)
    assert meta["records"] == "pingpong-records.csv" and meta["run_id"] == run.meta["run_id"]


@pytest.mark.parametrize("run_id", ["123456789012", "12345e678901", "000000000000"])
def test_a_run_id_that_looks_like_a_number_loads_as_text(tmp_path, run_id):
    meta = {**records.metadata("pingpong", "quick"), "run_id": run_id}
    run = records.Run(sample(), meta)
    back, _ = records.load(run.save(tmp_path))
    assert list(back["run"].unique()) == [run_id]
    pd.testing.assert_frame_equal(back, run.records)


def test_atomic_write_refuses_to_replace(tmp_path):
    target = tmp_path / "x.csv"
    target.write_text("earlier run")
    with pytest.raises(FileExistsError):
        records._atomic_new(target, "new")
    assert target.read_text() == "earlier run"


def test_metadata_is_json_and_describes_the_machine():
    meta = json.loads(json.dumps(records.metadata("pingpong", "quick"), default=str))
    m = meta["machine"]
    for key in ("cpu_model", "logical_cpus", "physical_cores", "sockets", "numa_nodes", "caches",
                "transparent_hugepages", "mpi"):
        assert key in m
    assert m["mpi"]["mpi4py"] and m["mpi"]["kernels_built_with"]


@pytest.mark.parametrize("bad,match", [
    (pd.DataFrame({"value": [1.0]}), "lack the columns"),
    (sample().iloc[0:0], "no records"),
    (sample().assign(value=float("nan")), "NaN"),
])
def test_invalid_tables_are_refused(bad, match, tmp_path):
    with pytest.raises(records.RecordError, match=match):
        records.save(bad, {}, tmp_path)
    assert not list(tmp_path.glob("*.csv"))


def test_kernel_timings_become_one_row_per_metric_and_repetition():
    import numpy as np

    rows = records.timings("stream", "c", 1, 2, {"n": 10}, np.arange(1, 9).reshape(4, 2))
    df = records.frame(rows)
    assert df["op"].tolist() == ["copy", "copy", "scale", "scale", "add", "add", "triad", "triad"]
    assert set(df["metric"]) == {"time"} and df["value"].tolist() == list(range(1, 9))
    pp = records.frame(records.timings("pingpong", "c", 2, 1, {"nbytes": 8}, [[1e-6, 2e-6]]))
    assert pp["metric"].tolist() == ["one_way_time"] * 2 and set(pp["unit"]) == {"s"}
    with pytest.raises(records.RecordError, match="4 metric row.*copy, scale, add, triad"):
        records.timings("stream", "c", 1, 1, {}, np.ones((3, 2)))


def test_a_run_keeps_its_metadata_through_filters_merges_and_combination(tmp_path):
    a = records.Run(sample(), records.metadata("pingpong", "quick", {"launcher": "mpiexec"}))
    b = records.Run(sample().assign(impl="python"),
                    records.metadata("pingpong", "quick", {"launcher": "ipyparallel"}))
    both = records.Run.combine(a, b, note="two runs")
    assert len(both) == 4 and both.meta["note"] == "two runs"
    merged = both.records.merge(pd.DataFrame({"impl": ["python"], "label": ["mpi4py"]}))
    assert {both.meta_of(r)["launcher"] for r in merged["run"]} == {"ipyparallel"}
    picked = both.records[both.records["impl"] == "c"]
    assert {both.meta_of(r)["launcher"] for r in picked["run"]} == {"mpiexec"}
    back = records.load(both.save(tmp_path))
    assert set(back.runs) == {a.meta["run_id"], b.meta["run_id"]}
    assert back.meta_of(b.meta["run_id"])["launcher"] == "ipyparallel"
    with pytest.raises(KeyError, match="no run"):
        both.meta_of("nope")
