"""The Amdahl experiment: CLI records with the phase metrics, the synthetic program's known s
recovered inside the fitted interval, the measured s and its prediction, and bad input."""

import numpy as np
import pytest

import quick_run
from hpclab import launch, models, reference
from hpclab.chapters.amdahl import analysis as exp


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    return quick_run.records_of(tmp_path_factory, "amdahl")


def test_cli_writes_every_phase_for_every_distribution(cli_run):
    df, meta = cli_run
    strong = df[df["kind"] == "strong"]
    assert set(strong["metric"]) == {"create", "distribute", "add", "collect", "total"}
    assert set(strong["distribution"]) == set(exp.DISTRIBUTIONS)
    assert set(strong["nprocs"]) == {1, 2} and set(strong["impl"]) == set(exp.IMPLS)
    assert (strong["value"] > 0).all()
    wide = strong.pivot_table(index=["impl", "distribution", "shape", "nprocs", "rep"],
                              columns="metric", values="value")
    np.testing.assert_allclose(wide[["create", "distribute", "add", "collect"]].sum(axis=1),
                               wide["total"], rtol=1e-9)
    weak = df[df["kind"] == "weak"]
    assert set(weak["shape"]) == {"24x20x20", "48x20x20"}
    assert meta["launcher"] == "mpiexec" and meta["profile"] == "quick"


def test_serial_fraction_and_prediction_from_the_records(cli_run):
    df, _ = cli_run
    s = exp.serial_fraction(df)
    assert 0 < s["s"] < 1 and s["reps"] == 3 and s["low"] <= s["s"] <= s["high"]
    sp = exp.speedups(df)
    assert list(sp["nprocs"]) == [1, 2] and np.isclose(sp["median"].iloc[0], 1.0)
    _, p, lines = exp.speedup_points(df)
    assert list(p) == [1, 2] and all(np.isclose(v[0], 1.0) for v in lines.values())
    with pytest.raises(models.FitError, match="is not a fit"):
        exp.fit_s(sp)  # one rank count above one: nothing to fit
    g = exp.gustafson(df)
    assert list(g["nprocs"]) == [1, 2] and (g["scaled_speedup"] > 0).all()


def test_amdahl_law_and_its_fit_on_synthetic_curves():
    p = np.arange(1, 9, dtype=float)
    exact = exp.amdahl_speedup(0.25, p)
    assert np.isclose(exact[0], 1.0) and np.isclose(exact[-1], 1 / (0.25 + 0.75 / 8))
    import pandas as pd

    pts = pd.DataFrame({"nprocs": p, "median": exact * (1 + 0.01 * np.sin(p))})
    f = exp.fit_s(pts)
    lo, hi = f.ci95["s"]
    assert lo <= 0.25 <= hi and f.npoints == 7  # P = 1 carries nothing and is left out


@pytest.fixture(scope="module")
def synthetic_run():
    return exp.run(profile="quick", kinds=("synthetic",), progress=False)


def test_the_synthetic_programs_known_s_is_recovered_and_oversleep_bounds_the_rest(synthetic_run):
    df, meta = synthetic_run
    assert set(df["nprocs"]) == {1, 2, 3, 4} and meta["nprocs"] == 4
    assert df.loc[df["nprocs"] > launch.usable_cores(), "oversubscribed"].all()
    asked, known = exp.synthetic_fit(df, "asked")
    low, high = asked.ci95["s"]
    assert known == 0.3 and low <= known <= high, (asked["s"], low, high)
    assert high - low < 0.1, "an interval that wide says nothing"
    assert asked.dof >= 3
    over = exp.synthetic_oversleep(df)["oversleep"]
    assert len(over) == 4 * 3  # every run on 1 .. 4 ranks, 3 repetitions each
    assert (over >= 0).all(), "a sleep ended before it was asked to"
    # the times as slept differ from those asked only by the oversleep, whatever the machine
    slept, _ = exp.synthetic_fit(df)
    assert abs(slept["s"] - asked["s"]) <= exp.synthetic_slack(df), (slept["s"], asked["s"])


def test_report_tables_are_the_reports():
    t = exp.orfeo_table(reference.load("orfeo_matrix_topology"))
    assert t.loc["2400x100x100", "none [ms]"] == pytest.approx(495.66, abs=0.01)
    assert t.loc["1200x200x100", "spread [ms]"] == pytest.approx(497.4063 - 496.2343, abs=0.01)
    o = exp.orfeo_s(reference.load("orfeo_amdahl"))
    assert o["s"] == 0.78 and (o["low"], o["high"]) == (1, 12)
    assert o["S24"] == pytest.approx(1 / (0.78 + 0.22 / 24))
    grids = exp.process_grids()
    assert grids.loc[48, "3d"] == "4x4x3" and grids.loc[2, "2d"] == "2x1x1"


def test_unknown_kinds_and_implementations_are_refused():
    with pytest.raises(ValueError, match="unknown amdahl implementation"):
        exp.tasks("quick", impls=("fortran",))
    with pytest.raises(ValueError, match="unknown amdahl implementation.*kind"):
        exp.tasks("quick", kinds=("sideways",))


def test_a_labs_comparison_runs_only_what_it_names_and_is_marked_a_probe():
    todo = exp.tasks("quick", impls=("c", "python"), max_procs=2, kinds=("strong",),
                     shapes=[exp.tiny_shape(2)], distributions=("3d",), procs=[2],
                     repetitions=10)
    assert [(t["impl"], t["nprocs"], t["distribution"], (t["nx"], t["ny"], t["nz"]),
             t["repetitions"]) for t in todo] == [
        ("c", 2, "3d", exp.tiny_shape(2), 10), ("python", 2, "3d", exp.tiny_shape(2), 10)]
    assert exp.tiny_shape(2) == (4, 2, 2) and exp.tiny_shape(4) == (4, 4, 2)
    with pytest.raises(ValueError, match="distribution"):
        exp.tasks("quick", distributions=("4d",))
    with pytest.raises(ValueError, match="no amdahl measurement asks for"):
        exp.tasks("quick", max_procs=2, kinds=("strong",), procs=[3])
    with pytest.raises(ValueError, match="at least 1"):
        exp.tasks("quick", repetitions=0)
    from hpclab.chapters.amdahl.sweep import _extra

    assert "subset" not in _extra(("c",), False)
    assert _extra(("c",), False, ("3d",), [2], 10)["subset"] == \
        "distributions 3d and P = 2 and 10 repetitions only"


def test_work_seconds_are_the_three_phases_a_labs_addition_does_per_repetition():
    df = _phase_records((0.2, 0.4), kind="strong")
    w = exp.work_seconds(df, "c", 2, (8, 8, 8), distribution="none")
    runs = exp.phase_runs(df, nprocs=2, shape="8x8x8")
    assert np.allclose(w, runs["distribute"] + runs["add"] + runs["collect"])
    assert np.allclose(w, runs["total"] - runs["create"])


def _phase_records(shares, kind="simulated"):
    """Records of the C program at P = 1 and 2 whose serial share per repetition is
    ``shares`` (create + distribute + collect over the total)."""
    import pandas as pd

    rows = []
    for p in (1, 2):
        for rep, share in enumerate(shares):
            serial, add = share, (1 - share) / p
            phase = {"create": serial / 2, "distribute": serial / 4, "collect": serial / 4,
                     "add": add}
            phase["total"] = sum(phase.values())
            rows += [{"run": "r", "kind": kind, "impl": "c", "distribution": "none",
                      "shape": "8x8x8", "nprocs": p, "rep": rep, "metric": m, "value": v}
                     for m, v in phase.items()]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("shares, says", [
    ((0.05, 0.95), "covers every value a serial fraction can take"),  # both ends left
    ((0.90, 0.95, 0.99), "the most a serial fraction can be"),         # above 1
    ((0.01, 0.03, 0.05), "the least a serial fraction can be"),        # below 0
    ((0.30, 0.31), "(95% interval "),                                  # inside
])
def test_simulated_serial_fraction_is_never_quoted_outside_zero_to_one(shares, says):
    """A few repetitions give a t interval wide enough to leave [0, 1]: the page's sentence
    says so in words and prints no bound outside the domain, whatever the runs give."""
    import re

    df = _phase_records(shares)
    table = exp.simulated_table(df)
    orfeo = reference.load("orfeo_amdahl")
    from hpclab import simulate

    words = exp.simulated_words(df, table, orfeo, simulate.platform("orfeo"))
    first = words.split(". At P")[0]
    assert says in first, first
    for number in re.findall(r"-?\d+\.\d+", first):
        assert 0 <= float(number) <= 1, f"{number} outside [0, 1]: {first}"
