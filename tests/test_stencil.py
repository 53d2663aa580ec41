"""The stencil experiment: the CLI's records (every order, both implementations, baseline
and blocked), the kernels' own checks, their refusals, and the weights of C against numpy."""

import numpy as np
import pytest
from mpi4py import MPI

import quick_run
from hpclab.chapters.stencil import analysis as exp, fd, kernels as stencil

SELF = MPI.COMM_SELF


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    return quick_run.records_of(tmp_path_factory, "stencil")


def test_cli_writes_every_order_both_implementations_baseline_and_blocked(cli_run):
    df, meta = cli_run
    d = df[df["kind"] == "derivative"]
    assert sorted(set(d["order"])) == [2, 4, 8, 12, 16]
    assert set(d["impl"]) == {"c", "cython"} and set(d["blocked"]) == {True, False}
    assert set(d["operator"]) == set(exp.OPERATORS)
    assert set(d["metric"]) == {"apply", "compute", "halo", "error"}
    assert meta["profile"] == "quick" and set(df.loc[df["kind"] == "scaling", "nprocs"]) == {1, 2}


def test_the_errors_fall_at_the_rate_of_the_order_until_round_off(cli_run):
    df, _ = cli_run
    orders = exp.convergence_orders(df).set_index("order")
    for order in (2, 4):
        row = orders.loc[order]
        assert row["points"] == 3 and abs(row["observed"] - order) < 0.3, row["words"]
    # orders 12 and 16 reach round-off on these small cubes: no order is claimed
    assert np.isnan(orders.loc[16, "observed"]) and "round-off" in orders.loc[16, "words"]
    err = df[(df["kind"] == "convergence") & (df["metric"] == "error")]
    by_order = err[err["n"] == err["n"].min()].groupby("order")["value"].median()
    assert by_order[2] > by_order[4] > by_order[8]


def test_the_c_weights_are_fornbergs():
    for order in range(2, 17, 2):
        assert np.allclose(stencil.weights(order), fd.second_derivative(order)[order // 2:],
                           rtol=1e-13, atol=1e-15), order


@pytest.mark.parametrize("impl", ["c", "cython"])
def test_a_corrupted_halo_is_caught_and_named(impl):
    stencil._stencil._set_fault(1)
    try:
        for operator in exp.OPERATORS:
            with pytest.raises(stencil.KernelError, match=r"rank 0: w at global point .* "
                                                          r"wrong weight, stencil or halo"):
                stencil.RUNNERS[impl](SELF, operator=operator, order=4, n1=9, n2=8, n3=7,
                                      applications=1, repetitions=1)
    finally:
        stencil._stencil._set_fault(0)
    t = stencil.RUNNERS[impl](SELF, order=4, n1=9, n2=8, n3=7, repetitions=2)
    assert t.shape == (4, 2) and (t[:3] > 0).all() and (t[3] < 1e-3).all()


def test_refusals_say_what_to_do():
    with pytest.raises(ValueError, match="both block sizes"):
        stencil.run_c(SELF, block2=4, block3=0)
    with pytest.raises(ValueError, match=r"does not fit 1 ranks"):
        stencil.run_c(SELF, p1=2)
    with pytest.raises(ValueError, match="multiple of 2"):
        stencil.run_c(SELF, order=5)
    assert stencil.process_grid(4, p1=1) in {(1, 2, 2)}
    assert stencil.process_grid(8, p1=1, p2=4, p3=2) == (1, 4, 2)


def test_the_propagator_is_the_numpy_reference_and_its_errors_fall_with_order(cli_run):
    # order 16 takes the three passes (stencil.c, from radius 7 on), with the wave's update
    for order, fraction in ((2, 0.5), (8, 0.1), (16, 0.1)):
        c = stencil.propagate(SELF, order=order, n=13, mode=3, periods=1.5,
                              dt_fraction=fraction)
        ref, steps, _ = fd.standing_mode(13, order, mode=3, periods=1.5,
                                         dt_fraction=fraction)
        assert c[4, 0] == steps and c[3, 0] == pytest.approx(ref, rel=1e-9)
    df, _ = cli_run
    e = df[(df["kind"] == "propagator") & (df["metric"] == "error")]
    finest = e[e["dt_fraction"] == e["dt_fraction"].min()].groupby("order")["value"].median()
    assert finest.is_monotonic_decreasing and len(finest) == 3, finest
    with pytest.raises(ValueError, match="mode 9 needs at least 9 points"):
        stencil.propagate(SELF, n=8, mode=9)
    # beyond the stable step the wave grows until it overflows: an infinite error, no failure
    assert np.isinf(stencil.propagate(SELF, order=8, n=23, mode=11, periods=400,
                                      dt_fraction=1.5)[3, 0])


@pytest.mark.parametrize("order", [14, 16])
@pytest.mark.parametrize("blocks", [(0, 0), (3, 2)])
def test_the_passes_check_themselves_on_rows_longer_than_their_buffer(order, blocks):
    # 530 points on axis 1: two chunks of the passes' 512-point buffer, the second short
    t = stencil.run_c(SELF, operator="laplacian", order=order, n1=530, n2=9, n3=10,
                      block3=blocks[0], block2=blocks[1], applications=1, repetitions=1)
    assert np.all(np.isfinite(t)) and t[3, 0] < 1e-3


@pytest.mark.parametrize("impl", ["c", "cython"])
@pytest.mark.parametrize("blocks", [(8, 3), (1, 11), (20, 20)])
def test_blocks_shared_out_by_bands_or_by_shares_check_themselves(impl, blocks):
    """Three, sixteen and one band of planes on four threads: bands dealt out in turn where
    they are at least as many as the threads, else contiguous shares of the blocks; the
    kernel checks every point of w after each repetition (a block left out fails it)."""
    t = stencil.RUNNERS[impl](SELF, operator="laplacian", order=8, n1=19, n2=11, n3=16,
                              block3=blocks[0], block2=blocks[1], threads=4, applications=1,
                              repetitions=2)
    assert np.all(np.isfinite(t)) and np.all(t[3] < 1e-3)


def test_the_blocking_size_exceeds_the_cache_within_half_the_memory(monkeypatch):
    from hpclab import machine
    from hpclab.chapters.stencil.kernels import bench

    monkeypatch.setattr(machine, "last_level_cache_bytes", lambda: 32 << 20)
    monkeypatch.setattr(machine, "memory_bytes", lambda: 48 << 30)
    # the rule's size: the 9 planes of order 8 twice the cache from L = 1024
    assert bench.blocking_size(8) == (1024, None)
    assert bench.planes_bytes(1024, 8) >= 2 * (32 << 20) > bench.planes_bytes(896, 8)
    # two arrays of 1024³ need 16 GiB: the largest size within half the memory, so long as
    # its planes exceed the cache (768's do, 640's do not)
    for gib, L in ((24, 896), (16, 768)):
        monkeypatch.setattr(machine, "memory_bytes", lambda gib=gib: gib << 30)
        assert bench.blocking_size(8) == (L, None)
    assert bench.planes_bytes(768, 8) > (32 << 20) > bench.planes_bytes(640, 8)
    monkeypatch.setattr(machine, "memory_bytes", lambda: 4 << 30)
    L, why = bench.blocking_size(8)
    assert L is None and "L = 768" in why and "half this machine's 4.0 GiB" in why


def test_an_efficiency_above_one_is_flagged_in_words():
    import pandas as pd

    from hpclab.chapters.stencil import analysis as sx

    t = pd.DataFrame({"nprocs": [1, 2], "grid": ["1x1x1", "1x1x2"], "seconds": [1.0, 0.25]})
    t["speedup"] = 1.0 / t["seconds"]
    t["efficiency"] = t["speedup"] / t["nprocs"]
    words = sx.strong_scaling_words(t)
    assert "efficiency 2.00" in words and "above 1 (2.00 at P = 2) is superlinear" in words
    t["seconds"] = [1.0, 0.6]
    t["speedup"] = 1.0 / t["seconds"]
    t["efficiency"] = t["speedup"] / t["nprocs"]
    assert "superlinear" not in sx.strong_scaling_words(t)


def test_a_gain_over_order_4_is_claimed_only_where_the_runs_ranges_part():
    """The lab's words for the cheapest propagator against order 4's best: the ratio with the
    range its repeated runs allow, the winner named only when the range lies above 1."""
    def row(order, seconds, spread, runs=2):
        return {"order": order, "seconds": seconds, "seconds_min": seconds - spread,
                "seconds_max": seconds + spread, "runs": runs}

    words = exp.versus_order4(row(8, 1.0, 0.1), row(4, 5.0, 0.5))
    assert words == ("order 4's best took 5x as long as order 8's (4.09 to 6.11x between the "
                     "fastest and slowest of order 8's 2 and order 4's 2 runs: order 8 was the "
                     "cheaper in every pairing of their runs)"), words
    assert "of order 8's 2 and order 4's 5 runs" in exp.versus_order4(row(8, 1.0, 0.1),
                                                                       row(4, 5.0, 0.5, 5))
    overlap = exp.versus_order4(row(8, 1.0, 0.3), row(4, 1.2, 0.3))
    assert overlap.startswith("order 4's best took 1.2x as long as order 8's (0.692 to 2.14x")
    assert "was the cheaper" not in overlap and "does not tell the two apart" in overlap
    assert "order 4 was the cheaper" in exp.versus_order4(row(8, 3.0, 0.1), row(4, 1.0, 0.1))
    assert exp.versus_order4(row(4, 1.0, 0.1), row(4, 1.0, 0.1)) == "order 4 itself"
    assert "never got under" in exp.versus_order4(row(12, 1.0, 0.1), None)
    for best, o4 in (({"order": 8, "seconds": 1.0}, {"order": 4, "seconds": 5.0}),
                     (row(8, 1.0, 0.0, runs=1), row(4, 5.0, 0.0, runs=1))):
        one = exp.versus_order4(best, o4)
        assert "was the cheaper" not in one and "no range" in one, one


@pytest.fixture
def streaming_always():
    """Every C run streams its output (threshold 0), as a rank beyond the cache does."""
    before = stencil._stencil.streaming()
    stencil._stencil.set_streaming(0)
    yield
    stencil._stencil.set_streaming(before)


@pytest.mark.skipif(not stencil._stencil.VECTOR_DOUBLES, reason="this build has no vector "
                    "stores, so the kernel never streams")
@pytest.mark.parametrize("blocks", [(0, 0), (3, 2)])
@pytest.mark.parametrize("threads", [1, 2])
def test_streamed_outputs_check_themselves_at_every_order_and_operator(streaming_always,
                                                                        blocks, threads):
    # 29 points on axis 1: whole groups of 8, 4 or 2 and a tail; orders from 14 on stream
    # through the passes' copy, below through the vector row
    assert stencil._stencil.streamed(1, 1)
    # the propagator's step reads w: it stores plainly, and stays right, under the same
    # threshold
    assert stencil.propagate(SELF, order=4, n=12, mode=1, periods=0.5, dt_fraction=0.5,
                             threads=threads, block3=blocks[0], block2=blocks[1],
                             repetitions=1)[3, 0] < 0.05
    for order in range(2, 17, 2):
        for operator in exp.OPERATORS:
            t = stencil.run_c(SELF, operator=operator, order=order, n1=29, n2=9, n3=8,
                              block3=blocks[0], block2=blocks[1], threads=threads,
                              applications=1, repetitions=1)
            assert np.all(np.isfinite(t)) and t[3, 0] < 1e-2, (order, operator)


def test_the_streaming_threshold_is_the_machines_and_never_without_caches():
    from hpclab import machine

    described = {"logical_cpus": 2, "physical_cores": 2, "caches": [
        {"level": 2, "type": "Unified", "size_bytes": 2 << 20, "shared_by_cpus": 1},
        {"level": 3, "type": "Unified", "size_bytes": 480 << 20, "shared_by_cpus": 2}]}
    # the node's: for each of its 2 cores its share (240 MiB), at most 16 times its L2
    expect = 64 << 20 if stencil._stencil.VECTOR_DOUBLES else stencil.NEVER
    assert stencil.streaming_threshold(described) == expect
    assert machine.streaming_threshold_bytes(described) == 2 * min(
        240 << 20, machine.STREAMING_L2_CAP * 2 << 20)
    assert stencil.streaming_threshold({"logical_cpus": 2, "physical_cores": 2,
                                        "caches": []}) == stencil.NEVER
    # last-level caches: the cores over those that share one
    assert machine.last_level_caches(described) == 1
    two = {**described, "logical_cpus": 16, "physical_cores": 8, "caches": [
        {"level": 3, "type": "Unified", "size_bytes": 32 << 20, "shared_by_cpus": 8}]}
    assert machine.last_level_caches(two) == 2
    # two arrays of 2^20 doubles are 16 MiB: under a threshold of 24 MiB one rank on the
    # node stores plainly, two (32 MiB together) stream
    before = stencil._stencil.streaming()
    try:
        stencil._stencil.set_streaming(24 << 20)
        assert not stencil._stencil.streamed(2**20, 1)
        assert stencil._stencil.streamed(2**20, 2) == bool(stencil._stencil.VECTOR_DOUBLES)
        # n = 126 at order 8: 2 x 134 x 134 x 136 doubles, 37 MiB: under 48 MiB plain alone,
        # streamed with a second rank on the node
        stencil._stencil.set_streaming(48 << 20)
        n = 126
        assert stencil.stores("c", 1, n, 8) == "plain"
        assert stencil.stores("c", 1, n, 8, on_node=2) == (
            "streaming" if stencil._stencil.VECTOR_DOUBLES else "plain")
        assert stencil.stores("c", 1, n, 8, kind="propagator", on_node=2) == "plain"
        # a node of two last-level caches: a rank alone reaches one, half the threshold
        stencil._stencil.set_streaming(48 << 20, 2)
        assert stencil._stencil.streaming_caches() == 2
        assert stencil.stores("c", 1, n, 8) == (
            "streaming" if stencil._stencil.VECTOR_DOUBLES else "plain")
        stencil._stencil.set_streaming(before, machine.last_level_caches())
    finally:
        stencil._stencil.set_streaming(before)


def test_the_roof_and_the_minimum_bandwidth_follow_the_stores_a_run_made():
    """A run that streamed its output is held to 16 bytes a point, one that stored plainly
    (or whose records do not say) to 24: the page's bound and words, and the rates table."""
    import pandas as pd

    def records(stores):
        rows = [{"kind": "derivative", "metric": "apply", "impl": "c", "operator": "laplacian",
                 "order": 8, "n": 200, "blocked": False, "block3": 0, "block2": 0,
                 "nprocs": 1, "value": 0.1, "stores": stores}]
        df = pd.DataFrame(rows)
        return df.drop(columns="stores") if stores is None else df

    stream = ({1: 12.0}, "a test")
    plain = exp.roofline_mlups({1: 12.0})[1]
    assert exp.roofline_mlups({1: 12.0}, stores="streaming")[1] == pytest.approx(1.5 * plain)
    for stores, per in (("streaming", 16), ("plain", 24), (None, 24)):
        r = exp.rates(records(stores))
        assert r["gbs_minimum"].iloc[0] == pytest.approx(per * 200**3 / 0.1 / 1e9)
        assert r["stores"].iloc[0] == (stores or "plain")
        df = records(stores)
        nums = exp.roof(df, {}, 1, stream)
        assert nums["roof_bound"] == pytest.approx(plain * 24 / per)
        assert f"at {per} bytes a point" in nums["roof_words"], nums["roof_words"]
        assert exp.stores_words(stores or "plain") in nums["roof_words"]
        assert f"{per} bytes a point" in nums["roof_label"]


def test_the_strong_scaling_words_say_when_the_stores_change_with_the_ranks():
    import pandas as pd

    rows = [{"kind": "scaling", "metric": "apply", "nprocs": p, "grid": g, "value": v,
             "stores": st} for p, g, v, st in ((1, "1x1x1", 1.0, "streaming"),
                                               (2, "1x1x2", 0.6, "plain"))]
    words = exp.strong_scaling_words(exp.strong_scaling(pd.DataFrame(rows)))
    assert "stores change with P here (plain at P = 2; streaming at P = 1)" in words, words
    rows[1]["stores"] = "streaming"
    assert "stores change" not in exp.strong_scaling_words(exp.strong_scaling(pd.DataFrame(rows)))
    assert "stores change" not in exp.strong_scaling_words(
        exp.strong_scaling(pd.DataFrame(rows).drop(columns="stores")))


def test_the_rates_figure_names_the_roofline_by_its_own_label():
    """The roofline's legend entry is the label given, not the last line's (a loop variable
    of the same name once took its place)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    rows = [{"kind": "derivative", "metric": "apply", "impl": impl, "operator": "laplacian",
             "order": o, "n": 16, "blocked": False, "block3": 0, "block2": 0, "nprocs": 1,
             "value": 0.01, "stores": "plain"} for impl in ("c", "cython") for o in (2, 4)]
    ax = exp.rates_figure(pd.DataFrame(rows), 123.0, "the roof, C's stores")
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[-1] == "the roof, C's stores" and labels.count("cython, baseline") == 1, labels
