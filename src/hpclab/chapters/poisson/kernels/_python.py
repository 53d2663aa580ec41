"""Conjugate gradient with mpi4py and numpy: the solver of poisson.c, written with
whole-array slices and the mpi4py topology layer (:class:`hpclab.kernels.topology.Topology`).

The right-hand side, the exact solution and the answer check are the C layer's formulas,
computed here with numpy, so all three implementations solve the same system and are
checked the same way.
"""
import numpy as np
from mpi4py import MPI

from hpclab.kernels.topology import Topology

from ._poisson import METRICS, TOL, PoissonError, _fault, vmrss


def f(x, y):
    """f of report 000 eq. (3.1), vectorised."""
    sx, sy = np.sin(np.pi * x), np.sin(np.pi * y)
    return -2 * np.pi ** 2 * (np.cos(2 * np.pi * x) * sy ** 2 + sx ** 2 * np.cos(2 * np.pi * y))


def exact(x, y):
    """u = sin²(πx) sin²(πy), vectorised."""
    return (np.sin(np.pi * x) * np.sin(np.pi * y)) ** 2


def mesh(n, offset=0, rows=None):
    """(x, y) of the mesh points of rows offset .. offset + rows - 1 (all n by default)."""
    h = 1.0 / (n + 1)
    rows = n if rows is None else rows
    return np.meshgrid(h * (offset + 1 + np.arange(rows)), h * (1 + np.arange(n)),
                       indexing="ij")


def apply_a(p, q, rows=None):
    """q = A p on the interior rows of p (an array with its halo), or on ``rows``, a
    half-open range of row indices of the array; returns the local p.q on those rows."""
    i0, i1 = rows or (1, p.shape[0] - 1)
    c = p[i0:i1, 1:-1]
    v = 4 * c - p[i0 - 1:i1 - 1, 1:-1] - p[i0 + 1:i1 + 1, 1:-1] - p[i0:i1, :-2] - p[i0:i1, 2:]
    q[i0:i1, 1:-1] = v
    return float(np.vdot(c, v))


def product(t, p, q, interleave):
    """q = A p on the rank's rows of Topology ``t`` with p's halo rows exchanged on the way
    (with ``interleave``, the rows that need no halo while it travels): the Python solver's
    product, every iteration's. Returns the rank's part of p·q and the times the halo was
    started, the inner rows were done and the halo had arrived."""
    lr = t.local[0]
    reqs = t.start_exchange(p)
    b = MPI.Wtime()
    pq = apply_a(p, q, (2, lr)) if interleave and lr > 2 else 0.0
    c = MPI.Wtime()
    MPI.Request.Waitall(reqs)
    if _fault() and t.rank == t.size - 1:
        p[0, 1] += 1.0
    d = MPI.Wtime()
    if not interleave:
        pq = apply_a(p, q)
    else:
        pq += apply_a(p, q, (1, 2))
        if lr > 1:
            pq += apply_a(p, q, (lr, lr + 1))
    return pq, (b, c, d)


def run_python(comm, n, interleave, iterations, repetitions, want=False):
    """Conjugate gradients on the 2D Poisson problem of n x n interior points, rows split
    among the ranks: each iteration exchanges the halo rows of p, applies the 5-point
    operator (the inner rows while the halo travels when ``interleave``), and reduces two
    dot products. Stops at the relative residual TOL or after ``iterations`` (0: 10 n + 100).
    Returns per repetition the time per iteration and its parts, the iterations, the
    residual, the error against the exact solution and the memory used, and the solution on
    rank 0 when ``want``; raises PoissonError on every rank when CG did not converge (without
    a cap) or the true residual differs from the recurrence's (a wrong stencil, halo or
    update)."""
    want = comm.bcast(bool(want) if comm.Get_rank() == 0 else None, root=0)
    try:
        t = Topology(comm, (n, n), dims=(0, 1), impl="python")
    except ValueError as exc:
        raise PoissonError(str(exc)) from None
    try:
        base = vmrss()
        lr = t.local[0]
        h = 1.0 / (n + 1)
        b = t.field()
        b[t.interior] = h * h * f(*mesh(n, t.offset[0], lr))
        u = exact(*mesh(n, t.offset[0], lr))
        x, r, p, q = t.field(), t.field(), t.field(), t.field()
        times = np.zeros((len(METRICS), repetitions))
        cap = iterations or 10 * n + 100
        mid = slice(1, lr + 1)  # the block's rows, halo columns included
        for rep in range(repetitions):
            x[:] = 0
            q[:] = 0
            r[:] = b
            p[:] = b
            loc = np.zeros(5)
            rr0 = rr = t.cart.allreduce(float(np.vdot(r[mid], r[mid])), op=MPI.SUM)
            k = 0
            t.cart.Barrier()
            t0 = MPI.Wtime()
            while k < cap and not np.sqrt(rr) <= TOL * np.sqrt(rr0):
                a = MPI.Wtime()
                pq, (bb, c, d) = product(t, p, q, interleave)
                e = MPI.Wtime()
                pq = t.cart.allreduce(pq, op=MPI.SUM)
                ff = MPI.Wtime()
                alpha = rr / pq
                x[mid] += alpha * p[mid]
                r[mid] -= alpha * q[mid]
                mine = float(np.vdot(r[mid], r[mid]))
                g = MPI.Wtime()
                rrnew = t.cart.allreduce(mine, op=MPI.SUM)
                hh = MPI.Wtime()
                p[mid] *= rrnew / rr
                p[mid] += r[mid]
                rr = rrnew
                k += 1
                i = MPI.Wtime()
                loc += ((c - bb) + (e - d), (bb - a) + (d - c), (ff - e) + (hh - g),
                        (g - ff) + (i - hh), 0.0)
            t.cart.Barrier()
            loc[4] = MPI.Wtime() - t0
            times[:, rep] = _record(t, x, q, b, u, k, iterations, rr, rr0, loc, base, rep)
        out = t.collect(np.ascontiguousarray(x[t.interior])) if want else None
        return times, out if t.rank == 0 else None
    finally:
        t.free()


def _record(t, x, q, b, u, k, iterations, rr, rr0, loc, base, rep):
    """The metrics of one solve and the answer check (hpclab_poisson_record's twin)."""
    slowest = np.empty(5)
    t.cart.Allreduce(loc, slowest, op=MPI.MAX)
    err = float(np.max(np.abs(x[t.interior] - u))) if u.size else 0.0
    reqs = t.start_exchange(x)
    MPI.Request.Waitall(reqs)
    apply_a(x, q)
    d = (b - q)[t.interior]
    sums = t.cart.allreduce(np.array([float(np.vdot(d, d)), vmrss(), base]), op=MPI.SUM)
    worst = t.cart.allreduce(err, op=MPI.MAX)
    kk = max(k, 1)
    rec, tru = np.sqrt(rr / rr0), np.sqrt(sums[0] / rr0)
    out = [slowest[4] / kk, (slowest[0] + slowest[1]) / kk, slowest[1] / kk, slowest[2] / kk,
           slowest[3] / kk, k, rec, worst, sums[1], sums[2]]
    message = None
    if not iterations and not rec <= TOL:
        message = (f"repetition {rep}: CG did not converge in {k} iterations (relative "
                   f"residual {rec:.3g}): a wrong stencil, halo or update")
    elif not abs(tru - rec) <= 1e-9 + 1e-3 * rec:
        message = (f"repetition {rep}: after {k} iterations the true residual ||b - Ax||/||b|| "
                   f"= {tru:.6g} differs from the recurrence's {rec:.6g} (a wrong stencil, "
                   "halo or update)")
    found = next((m for m in t.cart.allgather(message) if m), None)
    if found:
        raise PoissonError(found)
    return out
