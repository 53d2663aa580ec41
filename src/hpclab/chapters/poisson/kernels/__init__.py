"""Poisson: matrix-free conjugate gradient for -Laplace(u) = f on the unit square.

The solver of report 000 in three implementations with one signature generated from the
declaration (:mod:`hpclab.chapters.poisson.declaration`)::

    run_c(comm, n=64, interleave=True, iterations=0, repetitions=1)
    run_cython(...)   # Cython loops, halos and the answer check from the C layer
    run_python(...)   # numpy slices and the mpi4py topology layer

Each returns an array of shape (10, repetitions): seconds per iteration (wall clock) and
its parts (matvec with its halo, the halo alone, the reductions, the updates, the slowest
rank's), the iterations, the final relative residual, the max-norm error against the exact
solution, and VmRSS summed over the ranks after and before the vectors were allocated.
After every solve the true residual ||b - A x|| is compared with the recurrence's; a
disagreement (a wrong stencil, halo or update) or a solve that does not converge raises
:class:`hpclab.kernels.KernelError` on every rank. :func:`solution` returns the solution
itself on rank 0.
"""
import numpy as np

from hpclab.chapters.poisson.declaration import KERNEL
from hpclab.kernels import KernelError, check_isa_match, check_mpi_match
from hpclab.kernels.api import build, check_comm
from hpclab.kernels.topology import padded_row

check_mpi_match()
check_isa_match("poisson")

from . import _poisson
from ._python import apply_a, exact, f, mesh, run_python as _run_python

IMPLEMENTATIONS = KERNEL.implementations
TOL = _poisson.TOL
_RAW = {"c": _poisson.run_c, "cython": _poisson.run_cython, "python": _run_python}


def memory_predicted(n):
    """Bytes of the four vectors of n² doubles: the report's predicted memory."""
    return KERNEL.extra["vectors"] * n * n * 8


def _prepare(comm, v):
    from hpclab import machine

    n, size = v["n"], comm.Get_size()
    if n < size:
        raise ValueError(f"n = {n} rows cannot be split over {size} ranks: every rank needs at "
                         f"least one row; use n >= {size} or fewer ranks")
    need = KERNEL.extra["vectors"] * 8 * (n // size + 3) * padded_row(n + 2) * size
    have = machine.memory_bytes()
    if have and need > have / 2:
        raise ValueError(f"n = {n} needs {need / 2**30:.1f} GiB for its four vectors, more "
                         f"than half of this machine's {have / 2**30:.1f} GiB; use a smaller n")
    return (n, v["interleave"], v["iterations"], v["repetitions"])


RUNNERS = build(KERNEL, _RAW, (_poisson.PoissonError, KernelError), prepare=_prepare,
                finish=lambda result, values: result[0])
run_c, run_cython, run_python = (RUNNERS[i] for i in IMPLEMENTATIONS)


def solution(comm, n, impl="c", interleave=True):
    """(u_h, times) of one converged solve: the n x n solution on rank 0 (None elsewhere)
    and the metrics of the solve. Collective."""
    check_comm(KERNEL, comm)
    if impl not in _RAW:
        raise ValueError(f"unknown poisson implementation {impl!r}: choose one of "
                         f"{', '.join(IMPLEMENTATIONS)}")
    v = {"n": n, "interleave": interleave, "iterations": 0, "repetitions": 1}
    args = _prepare(comm, {k: KERNEL.param(k).check(x, KERNEL.slug) for k, x in v.items()})
    try:
        times, u = _RAW[impl](comm, *args, want=True)
    except _poisson.PoissonError as exc:
        raise KernelError(f"poisson ({impl}) failed: {exc}") from None
    return u, times[:, 0]


def serial_cg(n, tol=None, maxiter=None):
    """The same CG on one process with numpy and no MPI: (x, iterations, relative
    residual), the reference for the distributed solvers."""
    tol = TOL if tol is None else tol
    h = 1.0 / (n + 1)
    b = np.zeros((n + 2, n + 2))
    b[1:-1, 1:-1] = h * h * f(*mesh(n))
    x, r, p, q = np.zeros_like(b), b.copy(), b.copy(), np.zeros_like(b)
    rr0 = rr = float(np.vdot(r, r))
    k, cap = 0, maxiter or 10 * n + 100
    while k < cap and not np.sqrt(rr) <= tol * np.sqrt(rr0):
        alpha = rr / apply_a(p, q)
        x += alpha * p
        r -= alpha * q
        rrnew = float(np.vdot(r, r))
        p = r + rrnew / rr * p
        rr = rrnew
        k += 1
    return x[1:-1, 1:-1].copy(), k, float(np.sqrt(rr / rr0))


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check poisson``: interleaved and not, on
    meshes that 2, 3 and 4 ranks do not divide evenly, converged and stopped early."""
    for n in (7, 13):
        for interleave in (False, True):
            yield {"n": n, "interleave": interleave, "iterations": 0, "repetitions": 2}
    yield {"n": 30, "interleave": True, "iterations": 5, "repetitions": 1}


def inject_fault(comm):
    """Test hook of the correctness runner: the last rank corrupts one halo point of p."""
    _poisson._set_fault(1)


__all__ = ["run_c", "run_cython", "run_python", "RUNNERS", "IMPLEMENTATIONS", "KERNEL",
           "solution", "serial_cg", "memory_predicted", "apply_a", "exact", "f", "mesh",
           "TOL", "KernelError"]
