"""The matrix addition with mpi4py's buffer API and numpy: the program of amdahl.c.

Written in Python so the chapter can show that for large arrays the interpreter adds
little to a program whose work is done by MPI and numpy. Arrays come from
hpclab_alloc, like the C and Cython ones; the values are amdahl.c's (splitmix64).
"""
import numpy as np
from mpi4py import MPI

from hpclab.kernels.common._common import Buffer
from hpclab.kernels.topology import Topology, block_range

from ._amdahl import DISTRIBUTIONS, PHASES, AmdahlError, _fault

_M64 = (1 << 64) - 1


def values(seed, n, out=None):
    """Elements 0 .. n-1 of the array created with seed (splitmix64, as amdahl.c)."""
    z = np.arange(n, dtype=np.uint64) if out is None else out.view(np.uint64)
    if out is not None:
        z[:] = np.arange(n, dtype=np.uint64)
    z += np.uint64((seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & _M64)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    z >>= np.uint64(11)
    x = z.view(np.float64)
    x[:] = z  # the integer, converted in place
    x *= 2.0**-53
    return x


def _array(n, hugepages):
    """n doubles in memory from hpclab_alloc (hugepages when asked), like the C version's."""
    return np.frombuffer(Buffer(max(n, 1) * 8, hugepages), dtype=np.float64)[:n]


def run_python(comm, distribution, nx, ny, nz, repetitions, hugepages):
    """Report 001's matrix addition C = A + B of nx x ny x nz doubles, in four timed phases:
    rank 0 creates A and B, distributes them (``Scatterv`` without a topology, else the
    topology's blocks: 1d, 2d or 3d), every rank adds its block, rank 0 collects C.
    Returns the times of the phases and their total per repetition (rank 0's, on every
    rank); raises AmdahlError on every rank when C differs from A + B."""
    name = DISTRIBUTIONS[distribution]
    shape, n = (nx, ny, nz), nx * ny * nz
    topo = None
    if name != "none":
        dims = {"1d": (0, 1, 1), "2d": (0, 0, 1), "3d": (0, 0, 0)}[name]
        try:
            topo = Topology(comm, shape, dims=dims, impl="python")
        except ValueError as exc:
            raise AmdahlError(str(exc)) from None
        work, nlocal = topo.cart, int(np.prod(topo.local))
    else:
        if n > 2**31 - 1:
            raise AmdahlError(f"{n} elements do not fit the int displacements of "
                              "MPI_Scatterv: use a topology or fewer than 2^31 elements")
        work = comm
        size = comm.Get_size()
        blocks = [block_range(n, size, r) for r in range(size)]
        counts, displs = [c for _, c in blocks], [o for o, _ in blocks]
        nlocal = counts[comm.Get_rank()]
    rank, size = work.Get_rank(), work.Get_size()
    times = np.zeros((len(PHASES), repetitions))
    try:
        A = B = C = None
        if rank == 0:
            A, B, C = (_array(n, hugepages) for _ in range(3))
        a, b, c = (_array(nlocal, hugepages) for _ in range(3))
        for r in range(repetitions):
            phase = np.zeros(len(PHASES))
            work.Barrier()
            t0 = MPI.Wtime()
            if rank == 0:
                values(2 * r, n, A)
                values(2 * r + 1, n, B)
            work.Barrier()
            phase[0] = MPI.Wtime() - t0

            t0 = MPI.Wtime()
            if topo is None:
                work.Scatterv([A, counts, displs, MPI.DOUBLE], a, root=0)
                work.Scatterv([B, counts, displs, MPI.DOUBLE], b, root=0)
            else:
                topo.scatter(A.reshape(shape) if rank == 0 else None, out=a.reshape(topo.local))
                topo.scatter(B.reshape(shape) if rank == 0 else None, out=b.reshape(topo.local))
            work.Barrier()
            phase[1] = MPI.Wtime() - t0

            t0 = MPI.Wtime()
            np.add(a, b, out=c)
            work.Barrier()
            phase[2] = MPI.Wtime() - t0
            fault = _fault()
            if 0 <= fault < nlocal and rank == size - 1:
                c[fault] += 1.0

            t0 = MPI.Wtime()
            if topo is None:
                work.Gatherv(c, [C, counts, displs, MPI.DOUBLE], root=0)
            else:
                topo.collect(c.reshape(topo.local), out=C.reshape(shape) if rank == 0 else None)
            work.Barrier()
            phase[3] = MPI.Wtime() - t0
            phase[4] = phase[:4].sum()
            work.Bcast(phase, root=0)
            times[:, r] = phase

            message = ""
            if rank == 0:
                wrong = np.flatnonzero(C != A + B)
                if wrong.size:
                    i = int(wrong[0])
                    message = (f"repetition {r}, {size} ranks: element {i} of C is "
                               f"{C[i]!r}, A + B is {A[i] + B[i]!r}")
            message = work.bcast(message, root=0)
            if message:
                raise AmdahlError(message)
    finally:
        if topo is not None:
            topo.free()
    return times
