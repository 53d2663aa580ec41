"""Ring correctness; runs unchanged under mpiexec -n 1, 2 and 4 (see test_kernels.py).

A single rank is a ring of one. Every safe variant of every implementation must
bring both messages home with the closed-form sums and the rank's own payload,
and a corrupted message must raise on every rank.
"""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.ring import kernels as ring
from hpclab.chapters.ring.kernels import _ring
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
SIZE, RANK = COMM.Get_size(), COMM.Get_rank()
IMPLS = ring.IMPLEMENTATIONS


def _buffered(nbytes):
    return SIZE == 1 or ring.send_is_buffered(COMM, nbytes)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("variant", ring.SAFE_VARIANTS)
@pytest.mark.parametrize("nbytes", [4, 12, 4096, 1 << 18])
def test_every_variant_comes_home_right(impl, variant, nbytes):
    if variant == "send" and not _buffered(nbytes):
        pytest.skip("MPI does not buffer this size: the plain send ring would deadlock")
    times = ring.RUNNERS[impl](COMM, variant, nbytes, warmup=1, iterations=4, repetitions=2)
    assert times.shape == (1, 2)  # (metrics, repetitions): ring_time
    assert np.all(times > 0) and np.all(np.isfinite(times))
    for other in COMM.allgather(times):  # the slowest rank's time, on every rank
        np.testing.assert_array_equal(other, times)


def test_closed_form_sums_match_a_direct_simulation():
    # walk both messages around a ring in plain Python and compare
    for size in range(1, 9):
        for origin in range(size):
            right = -origin
            left = origin
            for hop in range(1, size):
                right += (origin + hop) % size
                left -= (origin - hop) % size
            assert ring.expected(origin, size, 0) == right
            assert ring.expected(origin, size, 1) == left


def test_sums_wrap_around_in_32_bits():
    size = 100_000  # S = size(size-1)/2 does not fit in an int32
    s = size * (size - 1) // 2
    want = (s - 2 * 5 + 2**31) % 2**32 - 2**31
    assert ring.expected(5, size, 0) == want


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("element,match", [(0, "sum that came home"),
                                           (3, "not this rank's own")])
def test_a_corrupted_message_raises_on_every_rank(impl, element, match):
    _ring._set_fault(element, rank=SIZE - 1)
    try:
        with pytest.raises(KernelError, match=match):
            ring.RUNNERS[impl](COMM, "irecv", 64, warmup=0, iterations=3, repetitions=1)
    finally:
        _ring._set_fault(-1)
    # and the next ring is right again
    ring.RUNNERS[impl](COMM, "irecv", 64, warmup=0, iterations=3, repetitions=1)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("kwargs,match", [
    ({"nbytes": 0}, "multiple of 4"),
    ({"nbytes": 6}, "multiple of 4"),
    ({"nbytes": 4.0}, "integer"),
    ({"variant": "ring"}, "unknown ring variant"),
    ({"iterations": 0}, "iterations must be"),
    ({"repetitions": 0}, "repetitions must be"),
    ({"variant": "naive"}, "deadlocks.*demonstrate_deadlock"),
])
def test_bad_arguments_are_refused_on_every_rank(impl, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ring.RUNNERS[impl](COMM, **kwargs)


def test_huge_page_buffers_work_too():
    times = ring.run_c(COMM, "irecv", 1 << 20, warmup=0, iterations=2, repetitions=1,
                       hugepages=True)
    assert times[0, 0] > 0


def test_a_sub_communicator_is_a_ring_of_its_own():
    color = RANK % 2
    sub = COMM.Split(color, RANK)
    try:
        times = ring.run_cython(sub, "sendrecv", 8, warmup=0, iterations=3, repetitions=1)
        assert times[0, 0] > 0
    finally:
        sub.Free()


def test_eager_probe_never_hangs_and_agrees():
    small = ring.send_is_buffered(COMM, 4)
    big = ring.send_is_buffered(COMM, 64 << 20)
    assert COMM.allgather((small, big)) == [(small, big)] * SIZE
    if SIZE > 1:
        assert small, "MPI should buffer a 4-byte message"
        assert not big, "no MPI buffers 64 MiB messages eagerly"
