"""The Jacobi experiment: CLI records with compute and halo metrics, the model predicted from
PingPong and STREAM numbers, the halo bandwidth, and report 001's Table 5 read right."""
import sys

import numpy as np
import pytest

import quick_run
from hpclab import launch, records, reference
from hpclab.chapters.jacobi import analysis as exp


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    return quick_run.records_of(tmp_path_factory, "jacobi")


def test_cli_writes_compute_and_halo_for_every_decomposition(cli_run):
    df, meta = cli_run
    assert set(df["metric"]) == {"sweep", "compute", "halo", "cut"}
    assert set(df["decomposition"]) == set(exp.DECOMPOSITIONS)
    assert set(df["kind"]) == {"weak", "strong"} and set(df["nprocs"]) == {1, 2}
    w = exp.wide(df)
    assert (w.loc[w["nprocs"] == 1, "k"] == 0).all() and (w.loc[w["nprocs"] == 2, "k"] == 1).all()
    assert (w["mlups"] > 0).all() and ((w["halo_share"] >= 0) & (w["halo_share"] <= 1)).all()
    weak = w[w["kind"] == "weak"]
    assert set(weak["points"]) == {12**3, 2 * 12**3}
    assert meta["launcher"] == "mpiexec" and meta["profile"] == "quick"
    assert meta["oversubscribed"] is False


def test_a_sweep_asked_for_more_ranks_than_cores_starts_and_times_only_the_cores():
    """run(n > cores) starts no more engines than the ranks it times (P up to the cores)
    instead of being refused as oversubscribed."""
    cores = launch.usable_cores()
    df, meta = exp.run(profile="quick", impls=["c"], n=cores + 1, progress=False, timeout=120)
    assert meta["nprocs"] == cores and meta["oversubscribed"] is False, meta
    assert int(df["nprocs"].max()) == cores


def test_more_ranks_than_cores_measure_nothing_unless_asked_and_then_say_so(tmp_path):
    cores = launch.usable_cores()
    cmd = [sys.executable, "-m", "hpclab", "run", "jacobi", "--profile", "quick", "--quiet",
           "--out", str(tmp_path)]
    with pytest.warns(launch.OversubscriptionWarning):
        r = launch.mpirun(cmd, n=cores + 1, timeout=300, what="jacobi CLI", check=False)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{cores + 1} MPI ranks on the {cores} cores of" in r.stderr
    assert "--oversubscribe" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir()), "an oversubscribed run saved records"
    with pytest.warns(launch.OversubscriptionWarning):
        launch.mpirun(cmd + ["--oversubscribe"], n=cores + 1, timeout=300, what="jacobi CLI")
    (csv,) = tmp_path.glob("jacobi-*.csv")
    _, meta = records.load(csv)
    assert meta["oversubscribed"] is True and meta["nprocs"] == cores + 1


def test_the_model_is_predicted_from_the_pieces(cli_run):
    df, _ = cli_run
    # each measurement says how its sweeps stored (cache-sized blocks: plainly)
    t = records.table(df)
    assert set(t["stores"]) == {"plain"}
    assert exp.run_stores(df) and set(exp.run_stores(df).values()) == {"plain"}
    # a run saved before the sweeps recorded their stores stored plainly
    old = t.drop(columns="stores")
    assert set(exp.run_stores(old).values()) == {"plain"}
    lam, bandwidth, stream = 2e-6, 5e9, {1: 20.0, 2: 30.0}
    p = exp.predict(df, lam, bandwidth, stream)
    one = p[p["nprocs"] == 1]
    np.testing.assert_allclose(one["predicted"], one["L"] ** 3 / one["T_s"] / 1e6)
    two = p[p["nprocs"] == 2].iloc[0]
    assert two["T_c"] == pytest.approx(16 * 12**2 / bandwidth + lam)
    assert two["T_s_roof"] == pytest.approx(24 * 12**3 / 20e9)
    # a latency below every measured halo time, so that the formula below holds whatever
    # the machine measured (halo_bandwidth bounds the denominator where halo < k λ)
    halo = df[(df["metric"] == "halo") & (df["nprocs"] == 2)]["value"]
    lam = 0.5 * float(halo.min())
    b = exp.halo_bandwidth(df, lam)
    assert (b["k"] == 1).all() and (b["B_halo"] > 0).all()
    # two ranks: each sends one face of 8 L² bytes, not eq. (8)'s 16 L² k
    np.testing.assert_allclose(b["B_halo"], 8 * b["L"] ** 2 / (b["halo"] - lam))


def test_the_busiest_rank_sends_one_face_per_end_and_two_from_the_middle():
    assert exp.faces_sent("slab", 2) == 1
    assert exp.faces_sent("slab", 3) == 2
    assert exp.faces_sent("cube", 8) == 3  # 2x2x2: one neighbour in each direction
    assert exp.faces_sent("cube", 1) == 0


def test_report_001_table_5_and_eq_8():
    t = exp.orfeo_table(reference.load("orfeo_jacobi")).set_index("nprocs")
    assert t.loc[48, "c eq. (8) [MB]"] == pytest.approx(1200**2 * 3 * 16 / 1e6)
    assert t.loc[48, "c_MB"] == pytest.approx(1105.92)  # as printed: 16 L^2 N
    assert t.loc[48, "measured (implied) [MLUP/s]"] == pytest.approx(48 * 113.45 / 1.0883)
    m = exp.model_elsewhere(0.99e-6, 12162.93e6, 1 / 113.45e6)
    assert m.loc[48, "grid"] == "4x4x3" and m.loc[48, "k"] == 3
    assert 1 < m.loc[48, "slow-down"] < 1.001


def test_a_cube_has_less_halo_than_a_slab_on_many_ranks():
    s = exp.surface_to_volume()
    assert (s.loc[48, "cube"] < s.loc[48, "pencil"] < s.loc[48, "slab"])
    assert s.loc[2, "cube"] == s.loc[2, "slab"]


def test_unknown_implementations_are_refused():
    with pytest.raises(ValueError, match="unknown jacobi implementation"):
        exp.tasks("quick", impls=("fortran",))


def test_the_weak_sweep_adds_another_implementation_on_cubes_only_when_asked():
    """weak_impls adds another implementation to the weak sweep, at the most ranks with cube
    blocks without overlap; by default the weak sweep is the C kernel's alone."""
    plain = exp.tasks("quick", impls=("c", "python"), max_procs=2, strong=False)
    assert {t["impl"] for t in plain} == {"c"}
    both = exp.tasks("quick", impls=("c", "python"), max_procs=2, strong=False,
                     weak_impls=("c", "python"))
    extra = [t for t in both if t["impl"] == "python"]
    assert [(t["nprocs"], t["decomposition"], t["overlap"]) for t in extra] == \
        [(2, "cube", False)]
    assert [t for t in both if t["impl"] == "c"] == plain
    with pytest.raises(ValueError, match="not among the implementations measured"):
        exp.tasks("quick", impls=("c",), weak_impls=("c", "python"))


def test_the_benchs_streams_only_pass_checks_itself_and_times_something():
    """The bench's yardstick (the sweep's memory traffic without its stencil) runs in the
    kernel's extension, checks what it wrote and returns seconds per pass."""
    code = ("from mpi4py import MPI; from hpclab.chapters.jacobi.kernels import _jacobi; "
            "t = _jacobi.streams(16, 2, 2); assert 0 < t < 1, t; "
            # with streaming stores past the cache too (rows of 16: two groups of 8, or more)
            "_jacobi.set_streaming(0); assert _jacobi.streamed(18 ** 3) or "
            "not _jacobi.VECTOR_DOUBLES; t = _jacobi.streams(16, 2, 2); assert 0 < t < 1, t; "
            "print('ok')")
    r = launch.mpirun([sys.executable, "-c", code], n=1, timeout=60, what="streams pass")
    assert r.stdout.strip().endswith("ok")


def test_the_sweeps_stream_their_stores_beyond_the_nodes_share_of_the_cache():
    """The threshold is the node's: for each core its share of the last level, at most 16
    times its L2 (a virtual machine's 480 MiB over two cores is not its own); the fields of
    every rank on the node count against it; no caches reported: never."""
    from hpclab.chapters.jacobi import kernels as jk

    def machine(l3, shared_by, l2=2 << 20):
        return {"logical_cpus": 2, "physical_cores": 2,
                "caches": [{"level": 2, "type": "Unified", "size_bytes": l2, "shared_by_cpus": 1},
                           {"level": 3, "type": "Unified", "size_bytes": l3,
                            "shared_by_cpus": shared_by}]}

    if not jk._jacobi.VECTOR_DOUBLES:
        pytest.skip("this build has no vector stores: the sweeps never stream")
    assert jk.streaming_threshold(machine(480 << 20, 2)) == 2 * (32 << 20)  # the L2 cap
    assert jk.streaming_threshold(machine(32 << 20, 16)) == 2 * (2 << 20)  # the share
    assert jk.streaming_threshold({"logical_cpus": 2, "physical_cores": 2, "caches": []}) \
        == jk.NEVER
    # L = 64: 3 x 66 x 66 x 72 doubles (rows padded to lines) = 7.5 MiB; L = 96: 23 MiB
    assert jk.field_bytes(64) == 3 * 66 * 66 * 72 * 8
    assert "within the 16 MiB threshold: plain" in jk.streaming_words(64, 16 << 20)
    assert "pass the 16 MiB threshold: streaming" in jk.streaming_words(96, 16 << 20)
    assert "does not report its caches" in jk.streaming_words(96, jk.NEVER)
    # L = 128: 53 MiB of fields (52.5), within 64 MiB alone, past it with a second rank
    assert "its fields, 53 MiB, are within the 64 MiB threshold: plain" \
        in jk.streaming_words(128, 64 << 20)
    assert "the fields of its 2 ranks, 105 MiB, pass the 64 MiB threshold: streaming" \
        in jk.streaming_words(128, 64 << 20, ranks=2)
    before = jk._jacobi.streaming()
    try:
        jk._jacobi.set_streaming(64 << 20)
        points = jk.field_bytes(128) // 24
        assert not jk._jacobi.streamed(points, 1) and jk._jacobi.streamed(points, 2)
        assert jk.stores_at(128, 1) == "plain" and jk.stores_at(128, 2) == "streaming"
        # a node of two last-level caches: a rank alone reaches one (32 MiB of the 64)
        jk._jacobi.set_streaming(64 << 20, 2)
        assert jk._jacobi.streaming_caches() == 2 and jk._jacobi.streamed(points, 1)
        words = jk.streaming_words(128, 64 << 20, 1, 2)
        assert "one of its 2 last-level caches counted for 32 MiB" in words \
            and "streaming stores" in words, words
    finally:
        jk._jacobi.set_streaming(before, jk.machine.last_level_caches())
    # the model's bytes per update in STREAM add's counting (add moves 32 for 24 counted):
    # plain stores move what add moves, streaming stores 24 of add's 32
    meta = {"machine": machine(480 << 20, 2)}
    assert exp.bytes_per_update(64, "plain") == 24 and exp.bytes_per_update(128, "streaming") == 18
    assert "within the 64 MiB" in exp.stores_words(64, "plain", meta)
    words = exp.stores_words(256, "streaming", meta)
    assert "more than the 64 MiB" in words and "streaming stores" in words \
        and "over 18 of its bytes" in words, words
    # a run that stored plainly beyond the threshold (saved before the sweeps streamed, or
    # built without vector stores) is counted as it ran, and one that streamed within it
    # (another threshold) too
    assert "used plain stores" in exp.stores_words(256, "plain", meta)
    words = exp.stores_words(128, "streaming", meta)
    assert "more than" not in words and "and in this run the sweeps write" in words, words


def test_the_page_says_when_the_memory_bound_does_not_apply():
    meta = {"machine": {"caches": [{"type": "Unified", "size_bytes": 32 << 20},
                                   {"type": "Instruction", "size_bytes": 1 << 30}]}}
    assert "fit in the 32 MiB cache" in exp.roof_words(0.4, 12, meta)
    assert "does not reach the bound" in exp.roof_words(0.7, 256, meta)
    assert exp.roof_words(0.96, 256, meta) == "That is the bound, within 5%."
    assert exp.roof_words(1.05, 256, meta).startswith("That is more than the bound")
    # the words name the target the recorded build compiled the kernel for
    assert exp.roof_words(0.7, 256, meta).startswith("The kernel, and one core")
    for flags, target in (({"-march=native": True}, "this CPU's vector instructions"),
                          ({"-march=x86-64-v3": True}, "x86-64-v3 (-march=x86-64-v3)"),
                          ({}, "the compiler's default target")):
        built = {"machine": {**meta["machine"], "mpi": {"kernel_flags": {"jacobi": flags}}}}
        assert exp.roof_words(0.7, 256, built).startswith(f"The kernel is compiled for {target}")


@pytest.mark.parametrize("sizes, says", [
    ([16, 32, 64, 256], "from L = 256 on here; at L = 16, 32, 64 the arrays fit"),
    ([16, 32], "so it bounds none of these runs"),
    ([256, 512], "as at every L measured here"),
])
def test_the_memory_bound_is_quoted_with_the_regime_it_holds_in(sizes, says):
    """A bound beside rates that exceed it must say where it holds: cache-resident sizes
    (three arrays of (L+2)³ doubles within the 32 MiB cache) are not bounded by memory."""
    from hpclab.chapters.jacobi import analysis as jacobi

    meta = {"machine": {"caches": [{"type": "Unified", "size_bytes": 32 * 2**20},
                                   {"type": "Instruction", "size_bytes": 64 * 2**20}]}}
    words = jacobi.bound_regime_words(sizes, meta)
    assert "32 MiB cache" in words and says in words, words


def test_the_c_column_is_described_row_by_row_not_by_one_formula():
    """Table 5's c is 16·L²·N in most rows but not in the two-node N = 12 row: the words
    count the rows instead of calling the whole column one formula."""
    words = exp.c_column_words(reference.load("orfeo_jacobi"))
    assert "8 print c = 16·L²·N" in words and "0 eq. (8)" in words, words
    assert "the two nodes row at N = 12 prints 92.16 MB, which is neither" in words


def test_a_direction_cut_in_two_gives_one_face_not_two():
    """Not periodic: with two ranks along a direction each has one neighbour there."""
    assert exp.neighbours_per_direction((2, 1, 1)) == [1, 0, 0]
    assert exp.neighbours_per_direction((4, 3, 2)) == [2, 2, 1]
    t = exp.surface_to_volume(points=120, procs=(2,))
    # P = 2 slab: blocks of 60 x 120 x 120, one face of 120² halo points
    assert t.loc[2, "slab"] == pytest.approx(120 * 120 / (60 * 120 * 120), rel=1e-2)


def _slab_from_the_wrong_plane(cart, u):
    """Fills the upper halo with the neighbour's second plane instead of its first."""
    lower, upper = cart.Shift(0, 1)
    cart.Sendrecv(u[2], dest=lower, sendtag=1, recvbuf=u[-1], source=upper, recvtag=1)
    cart.Sendrecv(u[-2], dest=upper, sendtag=2, recvbuf=u[0], source=lower, recvtag=2)


def _slab_tags_crossed(cart, u):
    """Each receive waits for the tag of the other exchange: the ranks wait for ever."""
    lower, upper = cart.Shift(0, 1)
    cart.Sendrecv(u[1], dest=lower, sendtag=1, recvbuf=u[-1], source=upper, recvtag=2)
    cart.Sendrecv(u[-2], dest=upper, sendtag=2, recvbuf=u[0], source=lower, recvtag=1)


def test_the_slab_check_names_the_rank_and_plane_and_says_when_the_exchange_hangs(engines):
    """The slab lab's check: a halo filled from the wrong plane is found in the plane of the
    whole grid and in the rank's own u that holds it; receives whose tags match no send are
    a deadlock the check reports (and the engines are replaced), not an error to read."""
    from hpclab.chapters.jacobi import exercises

    wrong = exercises.halo_check(engines, _slab_from_the_wrong_plane, nprocs=2, timeout=30)
    # (12, 8, 6) on two ranks: rank 0 holds planes 0-5, and its upper halo feeds plane 5
    # in the first sweep (three sweeps carry the error down to plane 3)
    assert not wrong["ok"] and not wrong["deadlocked"], wrong
    assert (wrong["first_wrong_plane"], wrong["first_wrong_rank"], wrong["first_wrong_local"],
            wrong["halo"]) == (5, 0, 6, "upper"), wrong
    hung = exercises.halo_check(engines, _slab_tags_crossed, nprocs=2, timeout=5)
    assert hung["deadlocked"] and not hung["ok"], hung
    assert exercises.halo_check(engines, _slab_from_the_wrong_plane, nprocs=1, timeout=30)["ok"]


TYPES_COUNTED = '''
import json
from mpi4py import MPI
from hpclab.chapters.jacobi.exercises import _types_on_rank
from hpclab.exercises import take_turns


def exchange(cart, u, skip_null=False, wait_each_direction=False):
    sizes, types, requests = list(u.shape), [], []
    for d in range(3):
        lower, upper = cart.Shift(d, 1)
        faces = []
        for index in (0, 1, sizes[d] - 2, sizes[d] - 1):
            counts, starts = [n - 2 for n in sizes], [1, 1, 1]
            counts[d], starts[d] = 1, index
            faces.append(MPI.DOUBLE.Create_subarray(sizes, counts, starts).Commit())
        types += faces
        if not skip_null or upper != MPI.PROC_NULL:
            requests += [cart.Irecv([u, 1, faces[3]], source=upper, tag=d),
                         cart.Isend([u, 1, faces[2]], dest=upper, tag=3 + d)]
        if not skip_null or lower != MPI.PROC_NULL:
            requests += [cart.Irecv([u, 1, faces[0]], source=lower, tag=3 + d),
                         cart.Isend([u, 1, faces[1]], dest=lower, tag=d)]
        if wait_each_direction:
            MPI.Request.Waitall(requests[-4:])
    for r in requests:
        r.Wait()
    for t in types:
        t.Free()


out = {"all": _types_on_rank(exchange, 4),
       "skip": _types_on_rank(lambda c, u: exchange(c, u, skip_null=True), 4),
       "each": _types_on_rank(lambda c, u: exchange(c, u, wait_each_direction=True), 4),
       "none": _types_on_rank(lambda c, u: None, 4)}
order = []
times = take_turns(MPI.COMM_WORLD, {"a": lambda: order.append("a"),
                                    "b": lambda: order.append("b")}, 3, warmup=2)
out["order"], out["times"] = order, times
print(json.dumps(out))
'''


def test_the_posted_exchanges_count_reads_what_one_call_made_posted_and_waited():
    """The check of Jacobi's posted exchange counts, on a rank that is its own neighbour in
    every direction, the datatypes made from a real MPI.DOUBLE (a counting subclass, so a
    real message can carry them), the requests posted and how many were posted at the first
    wait; an exchange that skips MPI.PROC_NULL counts the same; the shared turn-taking timer
    times each call once per repetition after the untimed rounds."""
    import json

    r = launch.mpirun([sys.executable, "-c", TYPES_COUNTED], n=1, timeout=60,
                      what="the posted exchange counted")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    whole = {"made": 12, "committed": 12, "freed": 12, "posted": 12,
             "posted_before_first_wait": 12}
    assert out["all"] == whole and out["skip"] == whole
    assert out["each"]["posted_before_first_wait"] == 4 and out["each"]["posted"] == 12
    assert out["none"]["posted"] == 0 and out["none"]["posted_before_first_wait"] is None
    assert out["order"] == ["a", "b"] * 5
    assert [len(out["times"][k]) for k in "ab"] == [3, 3]
    assert all(t >= 0 for k in "ab" for t in out["times"][k])
