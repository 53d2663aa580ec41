"""The Poisson kernel under mpiexec -n 1, 2 and 4: the distributed CG equals a serial numpy CG
of the same mesh (solution and iteration count) for every implementation, interleaved or not,
on meshes the ranks do not divide evenly; metrics; early stops; bad input refused on every rank;
a corrupted halo caught on every rank."""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.poisson import kernels as poisson
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()


@pytest.mark.parametrize("impl", poisson.IMPLEMENTATIONS)
@pytest.mark.parametrize("interleave", [False, True])
def test_distributed_cg_equals_a_serial_cg(impl, interleave):
    n = 13  # no rank count from 2 to 4 divides it
    u, metrics = poisson.solution(COMM, n, impl=impl, interleave=interleave)
    x, k, _ = poisson.serial_cg(n)
    # a different rank count sums the inner products in a different order: the accepted
    # difference is one iteration, and the solutions agree far below the tolerance 1e-6
    assert abs(metrics[5] - k) <= 1
    if COMM.Get_rank() == 0:
        np.testing.assert_allclose(u, x, rtol=0, atol=1e-10)
        err = np.max(np.abs(u - poisson.exact(*poisson.mesh(n))))
        assert metrics[7] == pytest.approx(err, rel=1e-12)
    else:
        assert u is None


@pytest.mark.parametrize("impl", poisson.IMPLEMENTATIONS)
def test_the_iteration_count_does_not_depend_on_the_rank_count(impl):
    t = poisson.RUNNERS[impl](COMM, n=64, repetitions=1)
    _, k, _ = poisson.serial_cg(64)
    assert abs(t[5, 0] - k) <= 1 and k == 96


@pytest.mark.parametrize("impl", poisson.IMPLEMENTATIONS)
def test_metrics_of_a_run(impl):
    t = poisson.RUNNERS[impl](COMM, n=24, repetitions=2)
    assert t.shape == (10, 2)
    assert (t[0] > 0).all() and (t[1:5] >= 0).all() and (t[1] >= t[2]).all()
    assert (t[6] <= poisson.TOL).all() and (t[7] > 0).all()
    assert (t[8] > 0).all() and (t[9] > 0).all()
    assert (t[5] == t[5, 0]).all(), "every solve from x0 = 0 takes the same iterations"
    assert np.array_equal(t, COMM.bcast(t, root=0))


@pytest.mark.parametrize("impl", poisson.IMPLEMENTATIONS)
def test_a_capped_run_stops_there_without_failing(impl):
    t = poisson.RUNNERS[impl](COMM, n=30, iterations=5, repetitions=1)
    assert t[5, 0] == 5 and t[6, 0] > poisson.TOL


def test_bad_input_is_refused_on_every_rank():
    if SIZE > 1:
        with pytest.raises(ValueError, match="every rank needs at least one row"):
            poisson.run_c(COMM, n=SIZE - 1)
    with pytest.raises(ValueError, match="more than half of this machine's"):
        poisson.run_python(COMM, n=46_000)
    with pytest.raises(ValueError, match="n"):
        poisson.run_c(COMM, n=0)


def test_a_corrupted_halo_is_caught_on_every_rank():
    from hpclab.chapters.poisson.kernels import _poisson

    _poisson._set_fault(1)
    try:
        for impl in poisson.IMPLEMENTATIONS:
            with pytest.raises(KernelError, match="did not converge|true residual"):
                poisson.RUNNERS[impl](COMM, n=12, repetitions=1)
    finally:
        _poisson._set_fault(0)


def test_the_benchs_streams_pass_reduces_over_the_ranks_and_stops_them_together():
    """The bench's bound (poisson.h): with the communicator, CG's two sums over the ranks;
    without, each rank alone. Input one rank refuses stops every rank, none left waiting in
    a reduction."""
    from hpclab.chapters.poisson.kernels import _poisson

    assert _poisson.streams(4, 16, 3, 2, COMM) > 0 and _poisson.streams(4, 16, 3, 2) > 0
    rows = 0 if COMM.Get_rank() == SIZE - 1 else 4
    with pytest.raises(_poisson.PoissonError):
        _poisson.streams(rows, 16, 3, 2, COMM)
