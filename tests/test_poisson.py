"""The Poisson experiment: CLI records, the convergence study (Table 3.1's N = 1024 row
exactly), the prediction from its pieces, speed-ups with intervals, and report 000's tables
read right."""
import sys

import numpy as np
import pytest

import quick_run
from hpclab import launch, models, records, reference
from hpclab.chapters.poisson import analysis as exp


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    return quick_run.records_of(tmp_path_factory, "poisson")


def test_cli_writes_every_kind_and_metric(cli_run):
    df, meta = cli_run
    assert set(df["metric"]) == set(exp.KERNEL.metric_names)
    assert set(df["kind"]) == {"convergence", "strong", "compare"}
    assert set(df["nprocs"]) == {1, 2}
    assert set(df[df["kind"] == "compare"]["impl"]) == set(exp.IMPLS)
    assert meta["launcher"] == "mpiexec" and meta["profile"] == "quick"


def test_the_convergence_study_is_second_order(cli_run):
    df, _ = cli_run
    t = exp.convergence_table(df, reference.load("poisson_convergence"))
    assert list(t["N"]) == [16, 32, 64]
    assert (t["iterations"] == t["iterations on 2 ranks"]).all()
    assert t["Table 3.1 iterations"].isna().all(), "Table 3.1 starts at N = 1024"
    o = exp.orders(t)
    assert o["p_low"] < 2 < o["p_high"] or abs(o["p"] - 2) < 0.02
    with pytest.raises(models.FitError, match="not a fit"):
        exp.power_law([1, 2], [3, 4])
    assert exp.memory_table(df).empty, "vectors below 1 MiB are not visible in VmRSS"


def test_table_3_1_n_1024_is_reproduced_exactly():
    code = ("from mpi4py import MPI; from hpclab.chapters.poisson import kernels as poisson; "
            "t = poisson.run_c(MPI.COMM_WORLD, n=1024); "
            "print(int(t[5, 0]), '%.4e' % t[7, 0], t[8, 0] - t[9, 0])")
    r = launch.mpirun([sys.executable, "-c", code], n=1, timeout=120, what="poisson N=1024")
    iters, err, growth = r.stdout.split()[-3:]
    row = reference.load("poisson_convergence").set_index("N").loc[1024]
    assert int(iters) == row["cg_iterations"] == 1581
    assert err == f"{row['err_linf']:.4e}" == "3.1266e-06"
    assert float(growth) == pytest.approx(4 * 1024**2 * 8, rel=0.05), "VmRSS: four vectors"


def test_the_iteration_is_predicted_from_its_pieces(cli_run):
    df, _ = cli_run
    lam, bandwidth, stream = 2e-6, 5e9, {1: 20.0, 2: 30.0}
    total, memory, reduce, halo = exp.predicted_iteration(64, 2, lam, bandwidth, stream)
    assert memory == pytest.approx(88 * 64**2 / 30e9)
    assert reduce == pytest.approx(2 * lam) and halo == pytest.approx(2 * (lam + 8 * 66 / 5e9))
    assert exp.predicted_iteration(64, 1, lam, bandwidth, stream)[2:] == (0.0, 0.0)
    p = exp.predict(df, lam, bandwidth, stream)
    assert set(p["P"]) == {1, 2}
    one = p[p["P"] == 1]
    assert (one["predicted speed-up"] == 1).all() and (one["measured speed-up"] == 1).all()
    ratio = p["measured / predicted"]
    assert ((p["low"] <= ratio) & (ratio <= p["high"])).all()
    s = exp.speedup(df, 64)
    assert s.set_index("P").loc[1, "speed-up"] == 1.0
    assert (s["low"] <= s["high"]).all()
    parts = exp.parts(df)
    assert (parts >= 0).all().all() and list(parts.index) == [1, 2]


def test_report_000_tables_read_right():
    t31 = reference.load("poisson_convergence")
    assert list(t31["N"]) == [2**k for k in range(10, 17)]
    ratios = (t31["err_linf"].shift(1) / t31["err_linf"]).round(2)
    assert ratios.iloc[1] == 4.01 and t31["err_ratio"].iloc[1] == 4.07  # the printed anomaly
    np.testing.assert_array_equal(ratios.iloc[2:], t31["err_ratio"].iloc[2:])
    h = exp.cluster_history(reference.load("poisson_cluster_history"))
    odd = h[h["differs"]]
    assert list(odd["cluster"]) == ["maya 2013"]
    assert odd["speed-up recomputed"].iloc[0] == pytest.approx(746 / 15)
    st = h[(h["cluster"] == "Stampede2") & (h["P"] == 32) & (h["nodes"] == 32)].iloc[0]
    assert st["MiB per process"] == 16
    sc = reference.load("poisson_scaling")
    assert len(sc) == 996
    sub = sc.groupby(sc["table"].str[:3])["table"].nunique().to_dict()
    assert sub == {"4.1": 5, "4.2": 4, "4.3": 5, "6.1": 5, "6.2": 4, "6.3": 5, "7.1": 2, "7.2": 2}
    pvs = exp.packed_vs_spread(sc)
    assert pvs.loc[16, "ratio"] == pytest.approx(4827 / 3258, abs=0.005)
    ref = exp.scaling_reference(sc, "4.1")
    assert (ref["wall_s"] >= 10).all()
    one = ref[(ref["N"] == 4096) & (ref["nodes"] == 1) & (ref["mpi_per_node"] == 1)]
    assert one["speed-up"].iloc[0] == 1.0


def test_the_kernel_suite_at_three_ranks():
    """tests/mpi runs at 1, 2 and 4 ranks (test_kernels); the iteration count is also checked
    at 3, a count that divides none of its meshes."""
    import warnings
    from pathlib import Path

    suite = Path(__file__).parent / "mpi" / "test_poisson_mpi.py"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", launch.OversubscriptionWarning)
        r = launch.mpirun([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           str(suite)], n=3, timeout=300, what="poisson tests on 3 ranks",
                          check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


def test_unknown_implementations_are_refused():
    with pytest.raises(ValueError, match="unknown poisson implementation"):
        exp.tasks("quick", impls=("fortran",))


def test_the_strong_sweep_adds_another_implementation_interleaved_only_when_asked():
    """strong_impls adds another implementation to the strong sweep, at the most ranks,
    interleaved; by default the strong sweep is the C solver's alone."""
    opts = {"max_procs": 2, "strong": [64], "compare": False, "convergence": False}
    plain = exp.tasks("quick", impls=("c", "python"), **opts)
    assert {t["impl"] for t in plain} == {"c"}
    both = exp.tasks("quick", impls=("c", "python"), strong_impls=("c", "python"), **opts)
    extra = [t for t in both if t["impl"] == "python"]
    assert [(t["nprocs"], t["n"], t["interleave"]) for t in extra] == [(2, 64, True)]
    assert [t for t in both if t["impl"] == "c"] == plain
    with pytest.raises(ValueError, match="not among the implementations measured"):
        exp.tasks("quick", impls=("c",), strong_impls=("python",))


def test_a_parts_interval_sums_each_repetitions_metrics_over_the_model():
    """part_interval: memory is A p + updates (matvec - halo + update) repetition by
    repetition, over the model's seconds, with the interval of stats.over_model."""
    from hpclab import records, stats
    from hpclab.chapters.poisson import analysis as px

    names = [m.name for m in px.KERNEL.metrics]
    reps = np.array([1.0, 1.2, 0.9, 1.1])
    times = np.array([{"matvec": 3.0, "halo": 1.0, "update": 0.5}.get(n, 0.25) * reps
                      for n in names])
    params = {"kind": "strong", "n": 64, "interleave": True, "iterations_cap": 10,
              "oversubscribed": False}
    df = records.frame(records.timings(px.KERNEL, "c", 2, 1, params, times)
                       + records.timings(px.KERNEL, "c", 1, 1, params, 9 * times))
    assert np.allclose(records.samples(df, "matvec", nprocs=2), 3.0 * reps)
    got = px.part_interval(df, "memory", 2, 64, 0.5)
    assert np.allclose(got, stats.over_model(2.5 * reps, 0.5))
    assert np.allclose(px.part_interval(df, "halo", 2, 64, 2.0), stats.over_model(reps, 2.0))
    with pytest.raises(ValueError, match="memory"):
        px.part_interval(df, "compute", 2, 64, 1.0)


def test_the_c_solvers_model_reads_no_other_implementations_rows():
    """A lab's strong sweep also times the Python solver at the most ranks: the prediction,
    the fit and the words on interleaving stay the C solver's."""
    import pandas as pd

    from hpclab.chapters.poisson import analysis as px

    names = [m.name for m in px.KERNEL.metrics]
    reps = np.array([1.0, 1.2, 0.9, 1.1])
    rows, rows_py = [], []
    for n in (64, 128):
        for p, interleave in ((1, True), (2, True), (2, False)):
            params = {"kind": "strong", "n": n, "interleave": interleave, "iterations_cap": 10,
                      "oversubscribed": False}
            t = np.array([reps * 1e-3 * (n / 64) ** 2 / p for _ in names])
            rows += records.timings(px.KERNEL, "c", p, 1, params, t)
            if p == 2 and interleave:
                rows_py += records.timings(px.KERNEL, "python", p, 1, params, 50 * t)
    c_only = records.frame(rows)
    both = records.frame(rows + rows_py)
    lam, bw, stream = 2e-6, 5e9, {1: 20.0, 2: 30.0}
    pd.testing.assert_frame_equal(px.predict(both, lam, bw, stream),
                                  px.predict(c_only, lam, bw, stream))
    assert px.interleave_words(both) == px.interleave_words(c_only)
    assert px.fit_model(both).params == px.fit_model(c_only).params


@pytest.mark.parametrize("interleave", [True, False])
def test_the_products_a_lab_times_alone_are_the_solvers_own(interleave):
    """A lab times the C and Python solvers' product q = A p alone: both are the code every
    iteration calls (hpclab_poisson_product, _python.product), and give p·q of the 5-point
    operator on the rank's rows."""
    from mpi4py import MPI

    from hpclab.chapters.poisson.kernels._poisson import Product
    from hpclab.chapters.poisson.kernels._python import product
    from hpclab.kernels.topology import Topology

    n = 9
    p = np.zeros((n + 2, n + 2))
    p[1:-1, 1:-1] = np.random.default_rng(0).random((n, n))
    inner = p[1:-1, 1:-1]
    want_q = 4 * inner - p[:-2, 1:-1] - p[2:, 1:-1] - p[1:-1, :-2] - p[1:-1, 2:]
    want = float(np.sum(inner * want_q))
    c_product = Product(MPI.COMM_SELF, n, interleave, seed=0)
    try:
        assert np.isclose(c_product(), want, rtol=1e-12)
    finally:
        c_product.free()
    with pytest.raises(ValueError, match="freed"):
        c_product()
    t = Topology(MPI.COMM_SELF, (n, n), dims=(1, 1), impl="python")
    try:
        q = np.zeros_like(p)
        pq, stamps = product(t, p, q, interleave)
    finally:
        t.free()
    assert np.isclose(pq, want, rtol=1e-12) and np.allclose(q[1:-1, 1:-1], want_q)
    assert stamps[0] <= stamps[1] <= stamps[2]


def test_report_002s_hpcg_is_said_from_its_dataset():
    """The Poisson page's HPCG sentence comes from report 002's Table 6.1 (hamburg_hpcg), not
    from typed numbers: its range, its best size and their spread."""
    from hpclab import reference
    from hpclab.chapters.poisson import analysis as px

    h = reference.load("hamburg_hpcg")
    words = px.hpcg_words(h)
    assert f"{h['gflops'].min():.1f} to {h['gflops'].max():.1f} GFLOP/s" in words
    assert f"the highest at {h.loc[h['gflops'].idxmax(), 'problem_size']}" in words
    assert "from 104x104x104 to 192x192x192" in words
    changed = h.assign(gflops=h["gflops"] * 2)
    assert f"{changed['gflops'].max():.1f} GFLOP/s" in px.hpcg_words(changed)
