"""A chapter's sweep is what every MPI rank runs: it loads none of the analysis libraries."""
import sys
import textwrap

import pytest

from hpclab import launch
from hpclab.kernels import registry

ANALYSIS = ("pandas", "scipy", "matplotlib")
PROBE = textwrap.dedent(f"""
    import sys
    from hpclab import cli
    code = cli.main(["run", sys.argv[1], "--profile", "quick", "--out", sys.argv[2], "--quiet",
                     "--impl", sys.argv[3]])
    from mpi4py import MPI
    if MPI.COMM_WORLD.Get_rank() == 1:
        print("RANK1 LOADED", sorted(m for m in {ANALYSIS!r} if m in sys.modules), flush=True)
    sys.exit(code)
""")


@pytest.mark.slow
@pytest.mark.parametrize("slug", registry.chapter_order())
def test_rank_1_of_python_m_hpclab_run_loads_no_analysis_library(slug, tmp_path):
    impls = registry.get(slug).implementations
    impl = "c" if "c" in impls else impls[0]
    r = launch.mpirun([sys.executable, "-c", PROBE, slug, str(tmp_path), impl], n=2,
                      timeout=300, what=f"python -m hpclab run {slug}")
    loaded = [line for line in r.stdout.splitlines() if line.startswith("RANK1 LOADED")]
    assert loaded == ["RANK1 LOADED []"], r.stdout[-3000:] + r.stderr[-2000:]
    assert list(tmp_path.glob(f"{slug}-*.csv")), "rank 0 saved no records"
