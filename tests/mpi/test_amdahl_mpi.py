"""The Amdahl kernel under mpiexec -n 1, 2 and 4: phases, values, bad input on every rank."""
import numpy as np
import pytest
from mpi4py import MPI

from hpclab.chapters.amdahl import kernels as amdahl
from hpclab.kernels import KernelError

COMM = MPI.COMM_WORLD
SIZE = COMM.Get_size()


@pytest.mark.parametrize("impl", amdahl.IMPLEMENTATIONS)
@pytest.mark.parametrize("distribution", amdahl.DISTRIBUTIONS)
def test_phases_are_returned_and_add_up(impl, distribution):
    t = amdahl.RUNNERS[impl](COMM, distribution, 9, 7, 5, repetitions=3)
    assert t.shape == (5, 3) and (t > 0).all()
    np.testing.assert_allclose(t[:4].sum(axis=0), t[4], rtol=1e-12)
    assert np.array_equal(t, COMM.bcast(t, root=0)), "every rank returns rank 0's times"


def test_python_values_are_the_c_values():
    from hpclab.chapters.amdahl.kernels._amdahl import values as c_values

    for seed in (0, 1, 7, 2**40):
        np.testing.assert_array_equal(amdahl.values(seed, 1000), c_values(seed, 1000))
    v = amdahl.values(3, 100_000)
    assert 0 <= v.min() and v.max() < 1 and abs(v.mean() - 0.5) < 0.01


def test_the_check_finds_a_wrong_element():
    a, b = np.ones(5), np.full(5, 2.0)
    c = a + b
    assert amdahl.first_wrong(a, b, c) == -1
    c[3] = 0
    assert amdahl.first_wrong(a, b, c) == 3


def test_a_grid_with_too_few_points_is_refused_before_any_mpi_call():
    if SIZE == 1:
        pytest.skip("one rank fits any shape")
    with pytest.raises(ValueError, match="every rank needs at least one point"):
        amdahl.run_c(COMM, "1d", 1, 4, 4)


def test_bad_arguments_and_too_much_memory_are_refused():
    with pytest.raises(ValueError, match="unknown amdahl distribution"):
        amdahl.run_c(COMM, "4d", 4, 4, 4)
    with pytest.raises(ValueError, match="nx must be between 1"):
        amdahl.run_cython(COMM, "none", 0, 4, 4)
    with pytest.raises(ValueError, match="more than half of this machine's"):
        amdahl.run_python(COMM, "3d", 100_000, 10_000, 1_000)


def test_synthetic_program_sleeps_its_serial_fraction():
    t = amdahl.synthetic(COMM, 0.5, work=0.04, repetitions=2)
    assert t.shape == (4, 2)
    np.testing.assert_allclose(t[3], 0.02 + 0.02 / SIZE)  # no jitter: exactly what was asked
    # how long past its deadline a sleep ends is the machine's business (a loaded machine
    # oversleeps by milliseconds), so only what holds on any machine is checked
    assert (t[0] >= 0.02).all() and (t[1] >= 0.02 / SIZE).all(), "no sleep ends early"
    assert (t[2] >= t[3]).all(), "a sleep cannot end before it was asked to"
    np.testing.assert_allclose(t[2], t[0] + t[1])
    assert all(np.array_equal(t, other) for other in COMM.allgather(t)), "one answer, every rank"
    with pytest.raises(ValueError, match="serial_fraction must be between 0 and 1"):
        amdahl.synthetic(COMM, 1.5)


def test_fault_is_caught_on_every_rank():
    from hpclab.chapters.amdahl.kernels import _amdahl

    _amdahl._set_fault(0)
    try:
        for impl in amdahl.IMPLEMENTATIONS:
            with pytest.raises(KernelError, match="element .* of C is"):
                amdahl.RUNNERS[impl](COMM, "2d", 8, 6, 4, repetitions=1)
    finally:
        _amdahl._set_fault(-1)
