"""Kernel correctness under mpiexec at 1, 2 and 4 ranks (tests/mpi run unchanged at each)."""
import sys
import warnings
from pathlib import Path

import pytest

from hpclab import launch

MPI_TESTS = Path(__file__).parent / "mpi"


@pytest.mark.parametrize("nprocs", [1, 2, 4])
def test_kernel_suite_under_mpiexec(nprocs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", launch.OversubscriptionWarning)
        result = launch.mpirun(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
             str(MPI_TESTS)], n=nprocs, timeout=300, what=f"kernel tests on {nprocs} ranks",
            check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout


def test_build_mismatch_is_explained(monkeypatch):
    from mpi4py import MPI

    import hpclab.kernels as k

    monkeypatch.setattr(MPI, "Get_library_version", lambda: "Open MPI v5.0.3, package: ...")
    with pytest.raises(k.BuildMismatchError, match="compiled against MPICH.*Open MPI"):
        k.check_mpi_match()
