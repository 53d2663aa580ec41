"""make bench: every kernel's bench is found through the registry, and the outside references'
tables are read as those programs print them (osu_latency 5.3, IMB-MPI1, mpi4py.bench).
Timings themselves are never checked here."""
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab import bench
from hpclab.kernels import registry
from hpclab.kernels.topology import padded_row

ROOT = Path(__file__).resolve().parents[1]

OSU = """# OSU MPI Latency Test v5.3
# Size          Latency (us)
0                       1.30
1                       1.33
4194304               744.97
"""

IMB = """#---------------------------------------------------
# Benchmarking PingPong 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         1.32         0.00
            1         1000         1.28         0.78

#---------------------------------------------------
# Benchmarking PingPing 
# #processes = 2 
#---------------------------------------------------
       #bytes #repetitions      t[usec]   Mbytes/sec
            0         1000         9.99         0.00
"""

MPI4PY = """# MPI PingPong Test
# Size [B]  Bandwidth [MB/s] | Time Mean [s] ± StdDev [s]  Samples
         1              0.44 | 2.2477346e-06 ± 1.5844e-06    10000
         2              0.90 | 2.2261068e-06 ± 1.1827e-06    10000
"""


def test_every_bench_belongs_to_a_declared_kernel():
    found = bench.benches()
    assert set(found) <= set(registry.slugs()) and found
    for module in found.values():
        assert callable(module.add_arguments) and callable(module.run)


def test_reference_tables_are_read_as_one_way_seconds():
    from hpclab.chapters.pingpong.kernels import bench as pp

    assert pp.parse_osu_latency(OSU) == {0: 1.30e-6, 1: 1.33e-6, 4194304: 744.97e-6}
    assert pp.parse_imb_pingpong(IMB) == {0: 1.32e-6, 1: 1.28e-6}  # not PingPing's rows
    assert pp.parse_mpi4py_bench(MPI4PY) == {1: 2.2477346e-06, 2: 2.2261068e-06}


def test_make_bench_takes_references_from_the_command_line():
    makefile = (ROOT / "Makefile").read_text()
    assert "python -m hpclab.bench" in makefile
    r = subprocess.run([sys.executable, "-m", "hpclab.bench", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0
    for slug in bench.benches():
        assert slug in r.stdout
    import argparse

    from hpclab.chapters.pingpong.kernels import bench as pp

    with pytest.MonkeyPatch.context() as mp:  # make passes OSU=... IMB=... as environment
        mp.setenv("OSU", "/x/osu_latency")
        mp.setenv("IMB", "/x/IMB-MPI1")
        p = argparse.ArgumentParser()
        pp.add_arguments(p)
        args = p.parse_args([])
    assert args.osu == "/x/osu_latency" and args.imb == "/x/IMB-MPI1"


def test_a_comparison_is_above_one_when_ours_is_faster():
    """Times: the reference's over ours; rates: ours over the reference's; the median of the
    rounds' ratios, and the medians of each side."""
    t = bench.compare([1.0, 2.0, 4.0], [2.0, 2.0, 2.0], "ms", lower_is_better=True)
    assert t == {"ratio": 1.0, "ours": 2.0, "reference": 2.0, "unit": "ms"}
    assert bench.compare([1.0], [3.0], "ms", lower_is_better=True)["ratio"] == 3.0
    assert bench.compare([1.0], [3.0], "GB/s", lower_is_better=False)["ratio"] == 1 / 3
    with pytest.raises(ValueError, match="same number of rounds"):
        bench.compare([1.0, 2.0], [1.0], "ms", lower_is_better=True)


class _FakeBench:
    """A kernel's bench module that measures nothing."""

    __doc__ = "A bench that measures nothing."

    def __init__(self, key):
        self.key, self.ran = key, 0

    def add_arguments(self, p):
        p.add_argument("--rounds", type=int, default=1)

    def run(self, args):
        self.ran += 1
        return {self.key: bench.compare([1.0], [2.0], "ms", lower_is_better=True)}


def test_json_holds_one_kernels_comparisons_or_every_kernels(tmp_path, monkeypatch):
    import json

    fakes = {"alpha": _FakeBench("a/b N=1"), "beta": _FakeBench("c/d L=2")}
    monkeypatch.setattr(bench, "benches", lambda: fakes)
    one, every = tmp_path / "one.json", tmp_path / "every.json"
    assert bench.main(["alpha", "--rounds", "2", "--json", str(one)]) == 0
    assert json.loads(one.read_text()) == {"a/b N=1": {"ratio": 2.0, "ours": 1.0,
                                                       "reference": 2.0, "unit": "ms"}}
    assert bench.main(["--json", str(every)]) == 0  # every bench, each with its defaults
    assert set(json.loads(every.read_text())) == {"alpha", "beta"}
    assert fakes["beta"].ran == 1 and fakes["alpha"].ran == 2
    with pytest.raises(SystemExit):
        bench.main(["alpha", "--json", str(tmp_path / "no" / "such" / "folder.json")])
    assert fakes["alpha"].ran == 2, "a bench ran although its file could not be written"
    # a reference that gave no number: null, as strict JSON readers take it, not NaN
    bench.write_json(one, {"a/b N=1": bench.compare([1.0], [float("nan")], "ms", True)})
    assert json.loads(one.read_text())["a/b N=1"]["ratio"] is None
    assert "NaN" not in one.read_text()


@pytest.mark.parametrize("pages", [[], ["--small-pages"]])
def test_a_real_bench_writes_its_comparisons(tmp_path, pages):
    """The Amdahl bench on one rank and a small array, one round: what it prints as ratios is
    in the file, each with its four fields (the numbers themselves are not checked), and it
    says which pages both sides asked for."""
    import json

    out = tmp_path / "amdahl.json"
    r = subprocess.run([sys.executable, "-m", "hpclab.bench", "amdahl", "--rounds", "1",
                        "--shape", "40x20x10", "--ranks", "1", "--json", str(out), *pages],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    said = "pages: 4 KiB (both sides)" if pages else "pages: huge pages asked (both sides)"
    assert said in r.stdout, r.stdout[-2000:]
    found = json.loads(out.read_text())
    assert set(found) == {"c/stream_add shape=40x20x10", "cython/c shape=40x20x10"}
    for value in found.values():
        assert set(value) == {"ratio", "ours", "reference", "unit"}
        assert value["ratio"] > 0 and value["unit"] == "GB/s, all ranks"


def test_the_jacobi_bench_sets_devito_beside_ours_or_says_how_to_get_it(tmp_path):
    """With Devito importable, its MLUP/s stand beside ours in the file (its update checked
    against numpy first); without it, the bench says how to get it and compares the rest."""
    import importlib.util
    import json

    from hpclab.chapters.jacobi.kernels import bench as jb

    out = tmp_path / "jacobi.json"
    r = subprocess.run([sys.executable, "-m", "hpclab.bench", "jacobi", "--rounds", "1",
                        "--L", "10", "12", "--flat-planes", "2", "--flat-side", "96", "--ranks",
                        "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    found = set(json.loads(out.read_text()))
    assert {"c/roof24 L=10", "c/streams L=10", "cython/c L=10", "c/c_plain L=10",
            "c/c_cached L=10", "c/roof24 L=12"} <= found
    # blocked and unblocked sweeps on flat planes (here of the side asked for: planes
    # beyond the cache budget take 40 s; jb.flat_side is checked on its own)
    assert "c/c_plain flat=2x96x96" in found, found
    assert "narrower than the default (--flat-side: a quick look" in r.stdout, r.stdout[-2000:]
    bad = subprocess.run([sys.executable, "-m", "hpclab.bench", "jacobi", "--flat-side", "0"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "give a whole number of points >= 1" in bad.stderr
    # by default, the least multiple of 256 whose three planes (with halos) hold four times
    # the budget; none without a budget
    side = jb.flat_side(2**20)
    assert side % 256 == 0 and 3 * (side + 2) ** 2 * 8 >= 4 * 2**20 > 3 * (side - 254) ** 2 * 8
    assert jb.flat_side(0) == 0
    # the planes asked for, or as many as the ranks' fields allow in half the memory
    # (4608 x 4608 here once asked 9 GiB per rank of 23.5 GiB on two ranks, and failed)
    from hpclab import machine

    plane = 3 * 8 * 4611 * padded_row(4611)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(machine, "memory_bytes", lambda: 2 * 2 * 13 * plane)
        assert jb.flat_planes(4608, 2, 16) == 10 and jb.flat_planes(4608, 2, 8) == 8
        assert jb.flat_planes(4608, 8, 16) < jb.FLAT_LEAST
        mp.setattr(machine, "memory_bytes", lambda: None)
        assert jb.flat_planes(4608, 2, 16) == 16
    if importlib.util.find_spec("devito") is None:
        assert jb.DEVITO_HINT in r.stdout and not any("devito" in k for k in found)
    else:
        assert {"c/devito L=10", "cython/devito L=10"} <= found
        assert "C / Devito" in r.stdout


def test_the_poisson_bench_fails_when_a_solver_beats_its_bound(tmp_path, monkeypatch):
    """One small round for real: the bound and the three comparisons are in the file. Then a
    bound beaten in every round (and only then) makes the bench exit 1, its comparisons
    still written; beaten in one round of two is noise, not a failure."""
    import json

    from hpclab.chapters.poisson.kernels import bench as pb

    out = tmp_path / "poisson.json"
    r = subprocess.run([sys.executable, "-m", "hpclab.bench", "poisson", "--rounds", "1",
                        "--N", "32", "--iterations", "5", "--ranks", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    # N = 32 is in cache, where a solver may beat the streams pass: exit 1, but only for that
    assert r.returncode == 0 or (r.returncode == 1 and "beat the bound in every round"
                                 in r.stderr), r.stderr[-2000:]
    # once in CI the file was missing after an exit allowed above: say what the bench said
    assert out.exists(), \
        f"exit {r.returncode}, no {out.name}:\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}"
    found = json.loads(out.read_text())
    assert {"c/cython N=32", "c/bound N=32", "cython/bound N=32", "c/traffic N=32",
            "c/model88 N=32"} == set(found)
    assert "bytes per point" in r.stdout
    fast = {"c": 1.0, "cython": 2.0, "bound": 1.5, "traffic": 1.4}
    slow = {"c": 2.0, "cython": 2.0, "bound": 1.5, "traffic": 1.4}
    assert pb.beaten([fast, fast]) == ["c"]
    assert pb.beaten([fast, slow]) == []
    rounds = [dict(fast, stream_add=10.0), dict(fast, stream_add=10.0)]
    monkeypatch.setattr("hpclab.bench.rounds", lambda *a, **k: rounds)
    monkeypatch.setattr(pb.launch, "usable_cores", lambda: 1)
    fails = tmp_path / "fails.json"
    assert bench.main(["poisson", "--json", str(fails)]) == 1
    assert json.loads(fails.read_text())["c/bound N=2048"]["ratio"] == 1.5
