"""The stencil kernels under mpiexec -n 1, 2, 3 and 4: both implementations give the same
error whatever the ranks (the field is the same global sine; only the sums' order could
differ), the wave propagator gives the same error to the last digits, and a halo wider than a
cut block is refused by the C layer with the same words on every rank, not a hang."""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.stencil import kernels as stencil
from hpclab.chapters.stencil.kernels import _stencil

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()


@pytest.mark.parametrize("impl", stencil.IMPLEMENTATIONS)
@pytest.mark.parametrize("operator", stencil.OPERATORS)
def test_the_error_does_not_depend_on_the_ranks(impl, operator):
    t = stencil.RUNNERS[impl](COMM, operator=operator, order=8, n1=23, n2=21, n3=27,
                              block3=3, block2=5, threads=1, applications=1, repetitions=1)
    one = stencil.RUNNERS[impl](MPI.COMM_SELF, operator=operator, order=8, n1=23, n2=21,
                                n3=27, threads=1, applications=1, repetitions=1)
    assert t[3, 0] == pytest.approx(one[3, 0], rel=1e-6, abs=1e-14)


def test_the_propagator_gives_the_same_error_on_any_ranks():
    t = stencil.propagate(COMM, order=4, n=23, mode=3, periods=0.5, dt_fraction=0.5)
    one = stencil.propagate(MPI.COMM_SELF, order=4, n=23, mode=3, periods=0.5,
                            dt_fraction=0.5)
    assert t[4, 0] == one[4, 0] and t[3, 0] == pytest.approx(one[3, 0], rel=1e-12)


@pytest.mark.skipif(SIZE == 1, reason="one rank cuts nothing")
def test_a_halo_wider_than_a_block_is_refused_on_every_rank():
    # every rank cuts the slowest axis: 2 * SIZE - 1 points in SIZE blocks, one of 1 point
    with pytest.raises(_stencil.StencilError, match=r"a halo of 8 layers needs blocks at "
                                                    r"least 8 points thick"):
        _stencil.run_c(COMM, 3, 16, (SIZE, 1, 1), 2 * SIZE - 1, 20, 20, 0, 0, 1, 1, 1)
    with pytest.raises(ValueError, match="make blocks thinner than the halo of order 16"):
        stencil.run_c(COMM, order=16, n1=20, n2=20, n3=2 * SIZE - 1, p1=1, p2=1, p3=SIZE)
    assert np.isfinite(stencil.run_c(COMM, order=2, n1=20, n2=20, n3=2 * SIZE - 1, p1=1,
                                     p2=1, p3=SIZE)).all()
