"""make bench: every kernel's bench is found through the registry, and the outside references'
tables are read as those programs print them (osu_latency 5.3, IMB-MPI1, mpi4py.bench).
Timings themselves are never checked here."""
import subprocess
import sys
from pathlib import Path

import pytest

from hpclab import bench
from hpclab.kernels import registry

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
