"""STREAM correctness; runs unchanged under mpiexec -n 1, 2 and 4 (see test_kernels.py).

Threaded runs on this rank alone, and the StarSTREAM mode on all ranks at once.
Small arrays: correctness, not bandwidth.
"""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.stream import kernels as stream
from hpclab.chapters.stream.kernels import _stream
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
IMPLS = stream.IMPLEMENTATIONS


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 17, 10_007])
def test_runs_validate_and_time_every_counted_trial(impl, threads, n):
    times = stream.RUNNERS[impl](n, ntimes=4, threads=threads)
    assert times.shape == (4, 3)
    assert np.all(times > 0) and np.all(np.isfinite(times))


@pytest.mark.parametrize("impl", IMPLS)
def test_star_mode_runs_on_every_rank_together(impl):
    times = stream.RUNNERS[impl](50_000, ntimes=3, threads=1, comm=COMM)
    assert times.shape == (4, 2)
    assert len(COMM.allgather(times.shape)) == COMM.Get_size()


@pytest.mark.parametrize("impl", IMPLS)
def test_a_wrong_array_fails_validation(impl):
    _stream._set_fault(5)
    try:
        with pytest.raises(KernelError, match="failed validation: array a"):
            stream.RUNNERS[impl](1000, ntimes=3, threads=2)
    finally:
        _stream._set_fault(-1)
    stream.RUNNERS[impl](1000, ntimes=3, threads=2)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_wrong_array_on_one_rank_fails_on_every_rank(impl):
    _stream._set_fault(3 if COMM.Get_rank() == COMM.Get_size() - 1 else -1)
    try:
        with pytest.raises(KernelError, match="failed validation"):
            stream.RUNNERS[impl](1000, ntimes=3, threads=1, comm=COMM)
    finally:
        _stream._set_fault(-1)


def test_expected_values_follow_stream_arithmetic():
    a, b, c = 2.0, 2.0, 0.0
    for _ in range(5):
        c = a
        b = 3.0 * c
        c = a + b
        a = b + 3.0 * c
    assert stream.expected(5) == (a, b, c)


@pytest.mark.parametrize("kwargs,match", [
    ({"n": 0}, "n must be between"),
    ({"n": 2.5}, "n must be an integer"),
    ({"n": 10, "ntimes": 1}, "at least 2"),
    ({"n": 10, "ntimes": 201}, "between 2 and 200"),
    ({"n": 10, "threads": 0}, "threads must be"),
])
def test_bad_arguments_say_what_to_do(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        stream.run_c(**kwargs)


def test_bandwidth_uses_stream_byte_counts():
    times = np.ones((4, 1))
    np.testing.assert_allclose(stream.bandwidth(times, 10).ravel(), [160, 160, 240, 240])
    assert stream.min_elements(cache_bytes=8 << 20) == 4 * (8 << 20) // 8


def test_an_error_of_rank_0_alone_is_raised_on_every_rank():
    """Rank 0 runs the threaded and SingleSTREAM runs while the others wait: when it fails,
    every rank raises (instead of the others waiting for it in the next task until the
    job's timeout), and rank 0 its own error."""
    from hpclab.chapters.stream.sweep import _on_rank0

    def fail():
        raise RuntimeError("the threaded run could not start")

    if COMM.Get_rank() == 0:
        with pytest.raises(RuntimeError, match="could not start"):
            _on_rank0(COMM, fail)
    else:
        with pytest.raises(KernelError, match="rank 0 failed: the threaded run could not start"):
            _on_rank0(COMM, fail)
    assert _on_rank0(COMM, lambda: "rows") == ("rows" if COMM.Get_rank() == 0 else None)
