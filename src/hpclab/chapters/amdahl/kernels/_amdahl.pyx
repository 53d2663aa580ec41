# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The matrix addition in Cython: a thin wrapper of amdahl.c and a native implementation.

Both take an mpi4py communicator and release the GIL for the whole measurement.
Use hpclab.chapters.amdahl.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc
from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_Comm_rank, MPI_Comm_size, MPI_Scatterv, MPI_Gatherv,
                            MPI_Barrier, MPI_Bcast, MPI_Wtime, MPI_DOUBLE)
from hpclab_common cimport (HPCLAB_ERRLEN, hpclab_alloc, hpclab_free, hpclab_fail_together,
                            hpclab_set_errmsg, hpclab_topo, hpclab_topo_create,
                            hpclab_topo_free, hpclab_block_range, hpclab_topo_scatter,
                            hpclab_topo_gather)

cdef extern from "amdahl.h" nogil:
    enum:
        HPCLAB_AMDAHL_NONE
        HPCLAB_AMDAHL_NDISTRIBUTIONS
        HPCLAB_AMDAHL_CREATE
        HPCLAB_AMDAHL_DISTRIBUTE
        HPCLAB_AMDAHL_ADD
        HPCLAB_AMDAHL_COLLECT
        HPCLAB_AMDAHL_TOTAL
        HPCLAB_AMDAHL_NPHASES
    int hpclab_amdahl(MPI_Comm comm, int distribution, long nx, long ny, long nz,
                      int repetitions, int hugepages, double *times, char *errmsg,
                      size_t errlen)
    double hpclab_amdahl_value(uint64_t seed, uint64_t i)
    long hpclab_amdahl_first_wrong(const double *a, const double *b, const double *c,
                                   size_t n)
    void hpclab_amdahl_dims(int distribution, int *dims)
    long hpclab_amdahl_fault_element

# The distributions in the order of amdahl.h's enum, and the phases of one repetition.
DISTRIBUTIONS = ("none", "1d", "2d", "3d")
PHASES = ("create", "distribute", "add", "collect", "total")


class AmdahlError(RuntimeError):
    """Raised on every rank when any rank's part went wrong."""


def _set_fault(long element):
    """Test hook: the last rank adds 1 to element `element` of its block of C (-1: never).
    Applies to run_c and run_cython."""
    global hpclab_amdahl_fault_element
    hpclab_amdahl_fault_element = element


def _fault():
    return hpclab_amdahl_fault_element


def values(uint64_t seed, Py_ssize_t n):
    """The first n elements of the array created with seed (as rank 0 fills A and B)."""
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] v = out
    cdef Py_ssize_t i
    for i in range(n):
        v[i] = hpclab_amdahl_value(seed, i)
    return out


def first_wrong(double[::1] a not None, double[::1] b not None, double[::1] c not None):
    """-1 when c == a + b element by element, else the first index where it is not."""
    if not a.shape[0] == b.shape[0] == c.shape[0]:
        raise ValueError("a, b and c must have the same length")
    if a.shape[0] == 0:
        return -1
    return hpclab_amdahl_first_wrong(&a[0], &b[0], &c[0], a.shape[0])


def run_c(MPI.Comm comm not None, int distribution, long nx, long ny, long nz, int repetitions,
          bint hugepages=False):
    """Call ``hpclab_amdahl`` from amdahl.c; an array (phases, repetitions) of seconds."""
    times = np.zeros((HPCLAB_AMDAHL_NPHASES, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    errmsg[0] = 0
    with nogil:
        status = hpclab_amdahl(comm.ob_mpi, distribution, nx, ny, nz, repetitions, hugepages,
                               &t[0, 0], errmsg, HPCLAB_ERRLEN)
    if status:
        raise AmdahlError(errmsg.decode(errors="replace"))
    return times


# ----------------------------------------------------------------------------- native


cdef inline double _value(uint64_t seed, uint64_t i) noexcept nogil:
    """splitmix64, as hpclab_amdahl_value in amdahl.c."""
    cdef uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i + 0x632BE59BD9B4E019ULL
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    z ^= z >> 31
    return <double>(z >> 11) * (1.0 / 9007199254740992.0)


cdef void _fill(double *x, size_t n, uint64_t seed) noexcept nogil:
    cdef size_t i
    for i in range(n):
        x[i] = _value(seed, i)


cdef void _add(const double *a, const double *b, double *c, size_t n) noexcept nogil:
    cdef size_t i
    for i in range(n):
        c[i] = a[i] + b[i]


def run_cython(MPI.Comm comm not None, int distribution, long nx, long ny, long nz,
               int repetitions, bint hugepages=False):
    """The same program written in Cython against mpi4py's libmpi cimports."""
    times = np.zeros((HPCLAB_AMDAHL_NPHASES, repetitions), dtype=np.float64)
    cdef double[:, ::1] tt = times
    cdef hpclab_topo t
    cdef MPI_Comm work = comm.ob_mpi
    cdef long glob[3]
    cdef int dims[3]
    cdef int rank, size, r, p, d, failed = 0
    cdef bint grid = distribution != HPCLAB_AMDAHL_NONE, have_grid = False
    cdef int *counts = NULL
    cdef int *displs = NULL
    cdef long offset, count, wrong
    cdef size_t n = <size_t>nx * <size_t>ny * <size_t>nz, nlocal = 1, nbytes
    cdef double *A = NULL
    cdef double *B = NULL
    cdef double *C = NULL
    cdef double *a = NULL
    cdef double *b = NULL
    cdef double *c = NULL
    cdef double t0
    cdef double phase[HPCLAB_AMDAHL_NPHASES]
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0
    if not 0 <= distribution < HPCLAB_AMDAHL_NDISTRIBUTIONS or nx < 1 or ny < 1 or nz < 1 \
            or repetitions < 1:
        raise AmdahlError(f"bad arguments: distribution={distribution} "
                          f"shape={nx}x{ny}x{nz} repetitions={repetitions}")
    glob[0], glob[1], glob[2] = nx, ny, nz
    try:
        with nogil:
            if grid:
                hpclab_amdahl_dims(distribution, dims)
                if hpclab_topo_create(comm.ob_mpi, 3, glob, dims, NULL, &t, errmsg,
                                      HPCLAB_ERRLEN):
                    with gil:
                        raise AmdahlError(errmsg.decode(errors="replace"))
                have_grid = True
                work = t.cart
            MPI_Comm_rank(work, &rank)
            MPI_Comm_size(work, &size)
            if grid:
                for d in range(3):
                    nlocal *= <size_t>t.local[d]
            else:
                hpclab_block_range(<long>n, size, rank, &offset, &count)
                nlocal = <size_t>count
                if rank == 0:
                    counts = <int *>malloc(size * sizeof(int))
                    displs = <int *>malloc(size * sizeof(int))
                    if counts == NULL or displs == NULL:
                        failed = 1
                    else:
                        for r in range(size):
                            hpclab_block_range(<long>n, size, r, &offset, &count)
                            counts[r] = <int>count
                            displs[r] = <int>offset
                if n > 2147483647UL:
                    failed = 1
            if rank == 0 and not failed:
                A = <double *>hpclab_alloc(n * sizeof(double), hugepages)
                B = <double *>hpclab_alloc(n * sizeof(double), hugepages)
                C = <double *>hpclab_alloc(n * sizeof(double), hugepages)
                failed = A == NULL or B == NULL or C == NULL
            if not failed:
                nbytes = (nlocal if nlocal else 1) * sizeof(double)
                a = <double *>hpclab_alloc(nbytes, hugepages)
                b = <double *>hpclab_alloc(nbytes, hugepages)
                c = <double *>hpclab_alloc(nbytes, hugepages)
                failed = a == NULL or b == NULL or c == NULL
            if failed:
                with gil:
                    hpclab_set_errmsg(errmsg, f"rank {rank} cannot set up arrays of {n} "
                                      f"elements (memory, or more than 2^31 elements without "
                                      f"a topology)")
            if hpclab_fail_together(work, failed, errmsg, HPCLAB_ERRLEN):
                failed = 1
            r = 0
            while r < repetitions and not failed:
                MPI_Barrier(work)
                t0 = MPI_Wtime()
                if rank == 0:
                    _fill(A, n, 2 * <uint64_t>r)
                    _fill(B, n, 2 * <uint64_t>r + 1)
                MPI_Barrier(work)
                phase[HPCLAB_AMDAHL_CREATE] = MPI_Wtime() - t0

                t0 = MPI_Wtime()
                if grid:
                    failed |= hpclab_topo_scatter(&t, 0, A, a)
                    failed |= hpclab_topo_scatter(&t, 0, B, b)
                else:
                    MPI_Scatterv(A, counts, displs, MPI_DOUBLE, a, <int>nlocal, MPI_DOUBLE,
                                 0, work)
                    MPI_Scatterv(B, counts, displs, MPI_DOUBLE, b, <int>nlocal, MPI_DOUBLE,
                                 0, work)
                MPI_Barrier(work)
                phase[HPCLAB_AMDAHL_DISTRIBUTE] = MPI_Wtime() - t0

                t0 = MPI_Wtime()
                _add(a, b, c, nlocal)
                MPI_Barrier(work)
                phase[HPCLAB_AMDAHL_ADD] = MPI_Wtime() - t0
                if (hpclab_amdahl_fault_element >= 0 and rank == size - 1
                        and <size_t>hpclab_amdahl_fault_element < nlocal):
                    c[hpclab_amdahl_fault_element] += 1.0

                t0 = MPI_Wtime()
                if grid:
                    failed |= hpclab_topo_gather(&t, 0, c, C)
                else:
                    MPI_Gatherv(c, <int>nlocal, MPI_DOUBLE, C, counts, displs, MPI_DOUBLE, 0,
                                work)
                MPI_Barrier(work)
                phase[HPCLAB_AMDAHL_COLLECT] = MPI_Wtime() - t0
                phase[HPCLAB_AMDAHL_TOTAL] = (phase[0] + phase[1] + phase[2] + phase[3])
                MPI_Bcast(phase, HPCLAB_AMDAHL_NPHASES, MPI_DOUBLE, 0, work)
                for p in range(HPCLAB_AMDAHL_NPHASES):
                    tt[p, r] = phase[p]
                with gil:
                    if failed:
                        hpclab_set_errmsg(errmsg, f"rank 0 cannot allocate the requests of "
                                          f"{size} blocks")
                    elif rank == 0:
                        wrong = hpclab_amdahl_first_wrong(A, B, C, n)
                        if wrong >= 0:
                            hpclab_set_errmsg(errmsg, f"repetition {r}, {size} ranks: element "
                                              f"{wrong} of C is {C[wrong]!r}, A + B is "
                                              f"{A[wrong] + B[wrong]!r}")
                if hpclab_fail_together(work, errmsg[0] != 0, errmsg, HPCLAB_ERRLEN):
                    failed = 1
                r += 1
    finally:
        hpclab_free(A)
        hpclab_free(B)
        hpclab_free(C)
        hpclab_free(a)
        hpclab_free(b)
        hpclab_free(c)
        free(counts)
        free(displs)
        if have_grid:
            hpclab_topo_free(&t)
    if failed or errmsg[0]:
        raise AmdahlError(errmsg.decode(errors="replace"))
    return times
