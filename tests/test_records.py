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
    pd.testing.assert_frame_equal(back, df)
    for key in ("machine", "profile", "hpclab_version", "git_commit", "utc_time", "command_line"):
        assert key in meta_back
    assert meta_back["records"] == first.name
    assert not list(tmp_path.glob(".*tmp")), "temporary files left behind"


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
