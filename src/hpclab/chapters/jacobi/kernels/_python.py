"""Jacobi sweeps with mpi4py and numpy: the sweeps of jacobi.c, written with whole-array
slices and the mpi4py topology layer (:class:`hpclab.kernels.topology.Topology`).

The answer check and the manufactured solution are the C layer's formulas, computed here
with numpy, so all three implementations start from the same field and test the same way.
"""
import numpy as np
from mpi4py import MPI

from hpclab.kernels.topology import Topology

from ._jacobi import DECOMPOSITIONS, METRICS, JacobiError, _fault

DIMS = {"slab": (0, 1, 1), "pencil": (0, 0, 1), "cube": (0, 0, 0)}


def _ustar(t):
    """u* on this rank's block with its halo (zero outside the global interior)."""
    axes = []
    for d in range(3):
        g = np.arange(t.offset[d] - 1, t.offset[d] + t.local[d] + 1)
        v = np.sin(np.pi * (g + 1) / (t.global_shape[d] + 1))
        v[(g < 0) | (g >= t.global_shape[d])] = 0.0
        axes.append(v)
    return axes[0][:, None, None] * axes[1][None, :, None] * axes[2][None, None, :]


def minus_laplacian(v, w, diag):
    """-Laplace_h(v) on the interior of v (an array with its halo), zero on the halo."""
    f = np.zeros_like(v)
    f[1:-1, 1:-1, 1:-1] = diag * v[1:-1, 1:-1, 1:-1] - (
        w[0] * (v[:-2, 1:-1, 1:-1] + v[2:, 1:-1, 1:-1])
        + w[1] * (v[1:-1, :-2, 1:-1] + v[1:-1, 2:, 1:-1])
        + w[2] * (v[1:-1, 1:-1, :-2] + v[1:-1, 1:-1, 2:]))
    return f


def manufactured(t):
    """(u, f, w, diag): u* with its halo set to zero, f = -Laplace_h(u*), the weights."""
    w = np.array([(n + 1.0) ** 2 for n in t.global_shape])
    diag = 2 * w.sum()
    full = _ustar(t)
    c = (slice(1, -1),) * 3
    f = minus_laplacian(full, w, diag)
    u = t.field()
    u[c] = full[c]
    return u, f, w, diag


def sweep(u, f, unew, w, diag, box=None):
    """unew = (w · neighbours + f) / diag on the interior, or on ``box``: half-open index
    ranges ((i0, i1), (j0, j1), (k0, k1)) of the array with its halo."""
    (a0, b0), (a1, b1), (a2, b2) = box or tuple((1, n - 1) for n in u.shape)

    def sh(d0, d1, d2):
        # the block's interior shifted by (d0, d1, d2): a neighbour of every point
        return u[a0 + d0:b0 + d0, a1 + d1:b1 + d1, a2 + d2:b2 + d2]

    unew[a0:b0, a1:b1, a2:b2] = (w[0] * (sh(-1, 0, 0) + sh(1, 0, 0))
                                 + w[1] * (sh(0, -1, 0) + sh(0, 1, 0))
                                 + w[2] * (sh(0, 0, -1) + sh(0, 0, 1))
                                 + f[a0:b0, a1:b1, a2:b2]) / diag


def _shell(local):
    """The six boxes of points next to a face of the block (they read the halo)."""
    lx, ly, lz = local
    return (((1, 2), (1, ly + 1), (1, lz + 1)), ((lx, lx + 1), (1, ly + 1), (1, lz + 1)),
            ((2, lx), (1, 2), (1, lz + 1)), ((2, lx), (ly, ly + 1), (1, lz + 1)),
            ((2, lx), (2, ly), (1, 2)), ((2, lx), (2, ly), (lz, lz + 1)))


def run_python(comm, decomposition, nx, ny, nz, overlap, sweeps, repetitions, u0=None):
    """``sweeps`` Jacobi sweeps of the 7-point stencil on an nx x ny x nz grid split by
    ``decomposition`` (slab, pencil or cube blocks), the halo exchanged before each
    sweep, or overlapped with the points that need no halo when ``overlap``. Starts from the
    manufactured solution (a fixed point of the sweep) unless rank 0 gives ``u0``. Returns
    per repetition the time per sweep, its update and halo parts (the slowest rank's) and
    the number of directions cut, and the field on rank 0 when ``u0`` was given; raises
    JacobiError on every rank when the fixed point moved (a wrong halo or stencil)."""
    from ._jacobi import _root_field

    given, start, out = _root_field(comm, u0, (nx, ny, nz))
    try:
        t = Topology(comm, (nx, ny, nz), dims=DIMS[DECOMPOSITIONS[decomposition]],
                     impl="python")
    except ValueError as exc:
        raise JacobiError(str(exc)) from None
    try:
        u, f, w, diag = manufactured(t)
        if given:
            u[t.interior] = t.scatter(start if t.rank == 0 else None)
        unew = u.copy()
        times = np.zeros((len(METRICS), repetitions))
        lx, ly, lz = t.local
        inner = tuple((2, n) for n in t.local)  # the points that need no halo
        for r in range(repetitions):
            loc = np.zeros(2)
            t.cart.Barrier()
            t0 = MPI.Wtime()
            for _ in range(sweeps):
                a = MPI.Wtime()
                reqs = t.start_exchange(u)
                b = MPI.Wtime()
                if overlap:
                    sweep(u, f, unew, w, diag, inner)
                c = MPI.Wtime()
                MPI.Request.Waitall(reqs)
                if _fault() and t.rank == t.size - 1:
                    u[0, 1, 1] += 1.0
                d = MPI.Wtime()
                if overlap:  # the shell: every point next to a face of the block
                    for box in _shell(t.local):
                        sweep(u, f, unew, w, diag, box)
                else:
                    sweep(u, f, unew, w, diag)
                loc += (c - b) + (MPI.Wtime() - d), (b - a) + (d - c)
                u, unew = unew, u
            t.cart.Barrier()
            mine = np.array([loc[0], loc[1], MPI.Wtime() - t0])
            slowest = np.empty(3)
            t.cart.Allreduce(mine, slowest, op=MPI.MAX)
            times[0, r] = slowest[2] / sweeps
            times[1:3, r] = slowest[:2] / sweeps
            times[3, r] = t.cut
            message = None
            if not given:
                e = float(np.max(np.abs(u - _ustar(t))[t.interior]))
                if not e <= 1e-10:
                    message = (f"repetition {r}, rank {t.rank} of {t.size}: after {sweeps} "
                               f"sweeps the field is {e:.3g} away from the solution it started "
                               "at (a fixed point: a wrong halo or stencil)")
            found = next((m for m in t.cart.allgather(message) if m), None)
            if found:
                raise JacobiError(found)
        field = t.collect(u[t.interior], out=out) if given else None
        return times, field if t.rank == 0 else None
    finally:
        t.free()
