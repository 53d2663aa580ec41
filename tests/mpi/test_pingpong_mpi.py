"""PingPong correctness; runs unchanged under mpiexec -n 1, 2 and 4 (see test_kernels.py).

With one rank every implementation must refuse with a clear error; with two or
more, ranks 0 and 1 measure and the others only join the barriers.
"""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.pingpong import kernels as pingpong
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()
IMPLS = pingpong.IMPLEMENTATIONS
needs2 = pytest.mark.skipif(SIZE < 2, reason="needs 2 ranks")


@pytest.mark.skipif(SIZE != 1, reason="a ring of one")
@pytest.mark.parametrize("impl", IMPLS)
def test_one_rank_is_refused_clearly(impl):
    with pytest.raises(ValueError, match="at least 2 MPI ranks.*mpiexec -n 2"):
        pingpong.RUNNERS[impl](COMM, 8)


@needs2
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("nbytes", [0, 1, 7, 4096, 8193, 1 << 20, (1 << 20) + 3])
def test_times_are_positive_and_agree_on_every_rank(impl, nbytes):
    times = pingpong.RUNNERS[impl](COMM, nbytes, warmup=2, iterations=5, repetitions=3)
    assert times.shape == (1, 3)  # (metrics, repetitions): one_way_time
    assert np.all(times > 0) and np.all(np.isfinite(times))
    everyone = COMM.allgather(times)
    for other in everyone:
        np.testing.assert_array_equal(other, times)


@needs2
@pytest.mark.parametrize("impl", IMPLS)
def test_huge_page_buffers_work_too(impl):
    times = pingpong.RUNNERS[impl](COMM, 4 << 20, warmup=1, iterations=2, repetitions=1,
                                   hugepages=True)
    assert times[0, 0] > 0


@needs2
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("kwargs,match", [
    ({"nbytes": -1}, "between 0 and"),
    ({"nbytes": 2**31}, "between 0 and"),
    ({"nbytes": 1.5}, "integer"),
    ({"nbytes": 8, "iterations": 0}, "iterations must be"),
    ({"nbytes": 8, "repetitions": 0}, "repetitions must be"),
    ({"nbytes": 8, "warmup": -1}, "warmup must be"),
])
def test_bad_arguments_are_refused_on_every_rank(impl, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        pingpong.RUNNERS[impl](COMM, **kwargs)


@needs2
@pytest.mark.parametrize("impl", ["c", "cython"])
def test_compiled_kernels_detect_wrong_bytes(impl):
    """Rank 1 corrupts what it received: every rank must raise, none may hang."""
    from hpclab.chapters.pingpong.kernels import _pingpong

    _pingpong._set_fault_byte(5)
    try:
        with pytest.raises(KernelError, match="rank 1: repetition 0 of a 64-byte message: byte 5"):
            pingpong.RUNNERS[impl](COMM, 64, warmup=1, iterations=3, repetitions=2)
    finally:
        _pingpong._set_fault_byte(-1)
    assert pingpong.RUNNERS[impl](COMM, 64, warmup=1, iterations=3, repetitions=1)[0, 0] > 0


@needs2
@pytest.mark.parametrize("impl,bad_rank,byte", [("python", 0, 63), ("pickle", 1, 0)])
def test_python_kernels_detect_wrong_bytes(monkeypatch, impl, bad_rank, byte):
    """One rank sends (and expects) other bytes than its partner: every rank raises."""
    from hpclab.chapters.pingpong.kernels import _python

    real = _python._pattern

    def corrupt(nbytes, seed):
        p = real(nbytes, seed).copy()
        if COMM.Get_rank() == bad_rank and nbytes:
            p[byte] ^= 0xFF
        return p

    monkeypatch.setattr(_python, "_pattern", corrupt)
    with pytest.raises(KernelError, match=f"rank [01]: repetition 0 .* byte {byte} is"):
        pingpong.RUNNERS[impl](COMM, 64, warmup=1, iterations=3, repetitions=2)
    COMM.Barrier()


def test_pattern_matches_the_c_pattern():
    from hpclab.chapters.pingpong.kernels import pattern

    p = pattern(300, 5)
    assert p[0] == (5 * 17 + 1) & 0xFF
    assert p[1] == (131 + 5 * 17 + 1) & 0xFF


def test_kernels_run_the_mpi_they_were_built_with():
    from hpclab.kernels import build_info, check_mpi_match

    built, running = check_mpi_match()
    assert built.split()[0].lower() in MPI.Get_library_version().lower()
    assert build_info()["mpicc"]
