import pytest

from hpclab import profiles, reference


def test_profiles_grow_from_quick_to_full():
    q, s, f = (profiles.get("pingpong", p) for p in profiles.PROFILES)
    assert len(q["sizes"]) < len(s["sizes"]) <= len(f["sizes"])
    assert q["scale"] > s["scale"] == f["scale"] == 1
    assert s["sizes"][0] == 0 and s["sizes"][-1] == 4 << 20


def test_profile_errors_name_the_choices(monkeypatch):
    with pytest.raises(ValueError, match="quick, standard, full"):
        profiles.get("pingpong", "huge")
    monkeypatch.setenv("HPCLAB_PROFILE", "nope")
    with pytest.raises(ValueError, match="HPCLAB_PROFILE"):
        profiles.name()
    with pytest.raises(ValueError, match="unknown experiment"):
        profiles.get("nope", "quick")


@pytest.mark.parametrize("name", reference.names())
def test_reference_datasets_cite_a_report_and_table_on_every_row(name):
    df = reference.load(name)
    assert len(df) > 0
    assert df["source"].str.contains(r"\[report 00\d\]").all()
    assert df["source"].str.contains(r"Table|Section|Test Case").all()
    assert reference.cite(name)


def test_reference_tables_match_their_reports():
    ul = reference.load("ulysses_imb_pingpong")
    assert ul["nbytes"].tolist() == [0] + [2**k for k in range(23)]
    ex = reference.load("hamburg_imb_exchange")
    assert ex.groupby(["mpi", "nprocs"]).size().tolist() == [24, 24, 24, 24]
    ring = reference.load("orfeo_ring").set_index(["placement", "variant"])["lambda_s"]
    assert ring[("intranode", "ssend_ordered")] == 1.417544
    assert ring[("internode", "irecv")] == 1.33861


def test_report_003_rows_agree_with_the_ratios_the_report_prints():
    """Transcription checks: the ratios report 003 prints beside its numbers follow from them
    (to the rounding it prints), and its efficiencies fall with the order as it says."""
    fd = reference.load("shaheen_hpcscan_fd_d2").set_index(["mode", "quantity"])["value"]
    node = reference.load("shaheen_node").set_index("quantity")["value"]
    assert round(fd[("CacheBlk", "max_bandwidth_GBps")] / fd[("Baseline", "max_bandwidth_GBps")],
                 1) == fd[("CacheBlk", "speedup_over_baseline")] == 3.2
    assert round(fd[("CacheBlk", "max_bandwidth_GBps")] / float(node["peak_memory_bandwidth"])) == 7
    assert round(100 * fd[("CacheBlk", "max_gflops")] / (1000 * float(node["peak_single"]))) == \
        fd[("CacheBlk", "percent_of_peak_gflops")] == 17
    propa = reference.load("shaheen_hpcscan_propa").set_index(["fd_order", "quantity"])["value"]
    slower = propa[(4, "elapsed_s")] / propa[(8, "elapsed_s")]
    assert round(slower, 1) == propa[(4, "slowdown_vs_o8")]
    eff = reference.load("shaheen_hpcscan_scaling")
    for _, g in eff.groupby("scaling"):
        assert g.sort_values("fd_order")["parallel_efficiency_percent"].is_monotonic_decreasing
    grid = reference.load("shaheen_hpcscan_grid")
    share = round(100 * grid["bandwidth_GBps"] / grid["peak_GBps"])
    assert (share == grid["percent_of_peak"]).all()


def test_report_002_rows_hold_what_the_report_says_of_them():
    """Transcription checks: HPCC's min, average and max are in order, a random ring is
    slower than a natural one, HPCG's default size is the best, as the report says, and the
    library table has the five implementations of Table 5.1."""
    hpcc = reference.load("hamburg_hpcc").set_index("quantity")["value"]
    for what in ("PingPongLatency", "PingPongBandwidth"):
        assert hpcc[f"Min{what}"] <= hpcc[f"Avg{what}"] <= hpcc[f"Max{what}"]
    assert hpcc["RandomlyOrderedRingLatency"] > hpcc["NaturallyOrderedRingLatency"]
    assert hpcc["RandomlyOrderedRingBandwidth"] < hpcc["NaturallyOrderedRingBandwidth"]
    assert hpcc["HPL (N=296400 NB=192 P=8 Q=20)"] == 3106  # printed 3.106e+03
    hpcg = reference.load("hamburg_hpcg").set_index("problem_size")["gflops"]
    assert hpcg.idxmax() == "104x104x104" and hpcg.max() == 72.573
    libs = reference.load("hamburg_mpi_libraries")
    assert list(libs["implementation"]) == ["Open MPI", "MPICH2", "MVAPICH2", "Intel MPI",
                                            "IBM MPI"]


def test_ring_profiles_never_time_beyond_the_checks():
    for p in profiles.PROFILES:
        s = profiles.get("ring", p)
        assert s["payloads"][0] == 4 and all(n % 4 == 0 for n in s["payloads"])
        assert s["check_upto"] >= 4


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="ulysses_imb_pingpong"):
        reference.load("nope")
