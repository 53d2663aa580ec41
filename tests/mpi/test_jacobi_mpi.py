"""The Jacobi kernel under mpiexec -n 1, 2 and 4: the distributed sweeps equal a serial numpy
sweep of the same global grid, from a field that is not a fixed point, for every
implementation, decomposition and overlap; metrics; bad input refused on every rank."""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.jacobi import kernels as jacobi
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()


@pytest.mark.parametrize("impl", jacobi.IMPLEMENTATIONS)
@pytest.mark.parametrize("decomposition", jacobi.DECOMPOSITIONS)
@pytest.mark.parametrize("overlap", [False, True])
def test_distributed_sweeps_equal_a_serial_sweep(impl, decomposition, overlap):
    shape = (9, 7, 5)  # no rank count from 2 to 4 divides every extent
    u0 = np.random.default_rng(3).random(shape) if COMM.Get_rank() == 0 else None
    got = jacobi.field(COMM, u0, impl=impl, decomposition=decomposition, overlap=overlap,
                       sweeps=3)
    if COMM.Get_rank() == 0:
        want = jacobi.serial_sweeps(u0, sweeps=3)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
        assert not np.allclose(want, u0), "the sweeps must change the field"
    else:
        assert got is None


# a row of 5 + 2 points is stored padded to a cache line's 8 doubles: 3 planes of 5 such rows
# hold blocks of 3 rows (each block reads its 3 rows and the 2 beside them)
@pytest.mark.parametrize("budget", [1, 3 * 8 * 8 * 5])
def test_blocked_sweeps_equal_a_serial_sweep(budget):
    """Spatial blocking (rows of j in blocks, each through every plane): blocks of one row,
    and of three with a remainder, give the serial sweep's field."""
    from hpclab.chapters.jacobi.kernels import _jacobi

    shape = (6, 11, 5)
    u0 = np.random.default_rng(5).random(shape) if COMM.Get_rank() == 0 else None
    before = _jacobi.cache()
    _jacobi.set_cache(budget)
    try:
        assert _jacobi.block_rows(budget, 11, 5) == (1 if budget == 1 else 3)
        # three planes of 13 rows of 5 + 2 points, each row padded to a cache line's 8
        assert _jacobi.block_rows(0, 11, 5) == _jacobi.block_rows(3 * 13 * 8 * 8, 11, 5) == 11
        assert _jacobi.block_rows(3 * 13 * 8 * 8 - 1, 11, 5) < 11
        for impl in ("c", "cython"):
            for decomposition, overlap in (("slab", False), ("cube", True)):
                got = jacobi.field(COMM, u0, impl=impl, decomposition=decomposition,
                                   overlap=overlap, sweeps=3)
                if COMM.Get_rank() == 0:
                    np.testing.assert_allclose(got, jacobi.serial_sweeps(u0, sweeps=3),
                                               rtol=1e-13, atol=1e-13,
                                               err_msg=f"{impl} {decomposition}")
    finally:
        _jacobi.set_cache(before)


@pytest.mark.parametrize("budget", [0, 3 * 8 * 40 * 5])
def test_streamed_sweeps_equal_a_serial_sweep(budget):
    """Streaming stores on every field (threshold 0): rows of 29 points take plain stores up
    to a group boundary (from column 2 in the overlap's inner box), whole groups past the
    cache, and plain stores again for the rest; a vector loop that reads a wrong neighbour or
    skips a point moves the field away from the serial sweep's."""
    from hpclab.chapters.jacobi.kernels import _jacobi

    if not _jacobi.VECTOR_DOUBLES:
        pytest.skip("this build has no vector stores: the sweeps never stream")
    shape = (6, 11, 29)
    u0 = np.random.default_rng(7).random(shape) if COMM.Get_rank() == 0 else None
    before, above = _jacobi.cache(), _jacobi.streaming()
    _jacobi.set_cache(budget)
    _jacobi.set_streaming(0)
    try:
        assert _jacobi.streamed(1) and not _jacobi.streamed(0)
        wrong = []  # every rank makes every call; rank 0 reports after the last
        for impl in ("c", "cython"):
            for decomposition, overlap in (("slab", False), ("cube", True), ("pencil", True)):
                got = jacobi.field(COMM, u0, impl=impl, decomposition=decomposition,
                                   overlap=overlap, sweeps=3)
                if COMM.Get_rank() == 0:
                    off = float(np.max(np.abs(got - jacobi.serial_sweeps(u0, sweeps=3))))
                    if not off <= 1e-13:
                        wrong.append(f"{impl} {decomposition} overlap={overlap}: {off:.3g}")
            # and the checked runs, from the fixed point (they raise on every rank)
            jacobi.RUNNERS[impl](COMM, "cube", 6, 11, 29, overlap=True, sweeps=2,
                                 repetitions=1)
        assert not wrong, f"streamed sweeps differ from the serial sweep: {wrong}"
    finally:
        _jacobi.set_cache(before)
        _jacobi.set_streaming(above)


@pytest.mark.parametrize("impl", jacobi.IMPLEMENTATIONS)
def test_metrics_of_a_run(impl):
    t = jacobi.RUNNERS[impl](COMM, "cube", 10, 8, 6, sweeps=2, repetitions=2)
    assert t.shape == (4, 2) and (t[:3] > 0).all()
    grid = jacobi.process_grid("cube", SIZE)
    assert (t[3] == sum(p > 1 for p in grid)).all(), "k: the directions cut"
    assert np.array_equal(t, COMM.bcast(t, root=0))


def test_bad_grids_are_refused_on_every_rank():
    if SIZE > 1:
        with pytest.raises(ValueError, match="every rank needs at least one point"):
            jacobi.run_c(COMM, "slab", 1, 4, 4)
    with pytest.raises(ValueError, match="unknown jacobi decomposition"):
        jacobi.run_c(COMM, "sphere", 4, 4, 4)
    with pytest.raises(ValueError, match="more than half of this machine's"):
        jacobi.run_python(COMM, "cube", 100_000, 100_000, 1_000)


def test_a_corrupted_halo_is_caught_on_every_rank():
    from hpclab.chapters.jacobi.kernels import _jacobi

    _jacobi._set_fault(1)
    try:
        for impl in jacobi.IMPLEMENTATIONS:
            with pytest.raises(KernelError, match="fixed point"):
                jacobi.RUNNERS[impl](COMM, "cube", 8, 6, 4, sweeps=2, repetitions=1)
    finally:
        _jacobi._set_fault(0)
