# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Finite-difference stencils in Cython: a thin wrapper of stencil.c and a native
implementation of its loops (prange over rows or blocks; the decomposition, halo, check and
record from the C layer).

Both take an mpi4py communicator and release the GIL for the whole measurement. Use
hpclab.chapters.stencil.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from cython.parallel cimport prange
from mpi4py cimport MPI
from mpi4py.libmpi cimport MPI_Comm, MPI_Barrier, MPI_Wtime
from hpclab_common cimport HPCLAB_ERRLEN, hpclab_topo

cdef extern from "stencil.h" nogil:
    enum:
        HPCLAB_STENCIL_MAX_ORDER
        HPCLAB_STENCIL_NMETRICS
        HPCLAB_STENCIL_LAPLACIAN
    ctypedef struct hpclab_stencil_problem:
        hpclab_topo t
        int op, r, threads
        long l[3]
        size_t e[3]
        size_t s[3]
        double a[3][9]
        double centre
        double *u
        double *w
    int hpclab_stencil_weights(int order, double *c)
    int hpclab_stencil(MPI_Comm comm, int op, int order, const int *dims, long n3, long n2,
                       long n1, long block3, long block2, int threads, int applications,
                       int repetitions, double *times, char *errmsg, size_t errlen)
    int hpclab_stencil_setup(MPI_Comm comm, int op, int order, const int *dims, long n3,
                             long n2, long n1, int threads, hpclab_stencil_problem *P,
                             char *errmsg, size_t errlen)
    void hpclab_stencil_poison(hpclab_stencil_problem *P)
    void hpclab_stencil_exchange(hpclab_stencil_problem *P)
    int hpclab_stencil_record(hpclab_stencil_problem *P, int rep, int repetitions,
                              double wall, double compute, double halo, double *times,
                              char *msg, size_t msglen)
    void hpclab_stencil_free(hpclab_stencil_problem *P)
    int hpclab_stencil_fault
    void hpclab_stencil_set_streaming(size_t above, int caches)
    int hpclab_stencil_streaming_caches()
    size_t hpclab_stencil_streaming()
    int hpclab_stencil_streamed(size_t points, int node_ranks)
    enum:
        HPCLAB_WAVE_NMETRICS
    double hpclab_stencil_symbol_max(int order)
    int hpclab_stencil_wave(MPI_Comm comm, int order, const int *dims, long n, int mode,
                            double periods, double dt_fraction, long block3, long block2,
                            int threads, int repetitions, double *times, char *errmsg,
                            size_t errlen)

cdef extern from "hpclab_simd.h" nogil:
    enum:
        HPCLAB_VW

OPERATORS = ("d2x1", "d2x2", "d2x3", "laplacian")
VECTOR_DOUBLES = HPCLAB_VW  # doubles per streamed group in this build (0: never streams)


def set_streaming(size_t above, int caches=0):
    """The C kernel stores the operator's output past the cache when the two arrays of the
    node's ranks take more than ``above`` bytes together (see stencil.h), ``caches`` the
    node's last-level caches (0: the count in force); SIZE_MAX: never."""
    hpclab_stencil_set_streaming(above, caches)


def streaming_caches():
    """The last-level caches the threshold in force counts (set_streaming)."""
    return hpclab_stencil_streaming_caches()


def streaming():
    """The threshold in force (set_streaming)."""
    return hpclab_stencil_streaming()


def streamed(size_t points, int node_ranks=1):
    """Whether the C kernel on a rank of ``points`` doubles per array (halo and padding
    included), one of ``node_ranks`` on its node, streams its stores."""
    return bool(hpclab_stencil_streamed(points, node_ranks))


class StencilError(RuntimeError):
    """Raised on every rank when any rank's result went wrong."""


def weights(int order):
    """The centred weights c_0 .. c_r of d²/dx² with accuracy ``order`` from stencil.c's
    Fornberg (for comparison with hpclab.chapters.stencil.fd)."""
    cdef double c[9]
    if hpclab_stencil_weights(order, c):
        raise ValueError(f"order {order}: even, 2 to {HPCLAB_STENCIL_MAX_ORDER}")
    return np.array([c[j] for j in range(order // 2 + 1)])


def symbol_max(int order):
    """The largest value of the second derivative's symbol at this order (stencil.c)."""
    return hpclab_stencil_symbol_max(order)


WAVE_METRICS = ("step", "compute", "halo", "error", "steps")


def wave_c(MPI.Comm comm not None, int order, dims, long n, int mode, double periods,
           double dt_fraction, long block3, long block2, int threads, int repetitions):
    """Call ``hpclab_stencil_wave`` from stencil.c: times (WAVE_METRICS, repetitions)."""
    times = np.zeros((HPCLAB_WAVE_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef int grid[3]
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    grid[0], grid[1], grid[2] = dims
    errmsg[0] = 0
    with nogil:
        status = hpclab_stencil_wave(comm.ob_mpi, order, grid, n, mode, periods, dt_fraction,
                                     block3, block2, threads, repetitions, &t[0, 0], errmsg,
                                     HPCLAB_ERRLEN)
    if status:
        raise StencilError(errmsg.decode(errors="replace"))
    return times


def _set_fault(int on):
    """Test hook: the last rank adds 1 to a halo point the operator reads, every exchange."""
    global hpclab_stencil_fault
    hpclab_stencil_fault = on


def _fault():
    return hpclab_stencil_fault


def run_c(MPI.Comm comm not None, int op, int order, dims, long n3, long n2, long n1,
          long block3, long block2, int threads, int applications, int repetitions):
    """Call ``hpclab_stencil`` from stencil.c: times (metrics, repetitions)."""
    times = np.zeros((HPCLAB_STENCIL_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef int grid[3]
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    grid[0], grid[1], grid[2] = dims
    errmsg[0] = 0
    with nogil:
        status = hpclab_stencil(comm.ob_mpi, op, order, grid, n3, n2, n1, block3, block2,
                                threads, applications, repetitions, &t[0, 0], errmsg,
                                HPCLAB_ERRLEN)
    if status:
        raise StencilError(errmsg.decode(errors="replace"))
    return times


# ----------------------------------------------------------------------------- native


cdef void _rows(hpclab_stencil_problem *P, long i3, long i2a, long i2b) noexcept nogil:
    """w on the rows [i2a, i2b) of plane i3 (interior indices), axis 1 whole. The sum over
    the stencil is the outer loop and the row the inner one: each pass over the row adds
    one distance j for every point, a loop the C compiler runs in vector lanes (with the
    radius known only at run time, a sum over j inside would not be)."""
    cdef long r = P.r, n1 = P.l[2], i2, i1, j
    # signed offsets: i1 - offset is negative at the start of a row (the halo)
    cdef long s2 = <long>P.s[1], s3 = <long>P.s[0], s, sj, sk
    cdef int d = 0 if P.op == HPCLAB_STENCIL_LAPLACIAN else 2 - P.op
    cdef double a0, a1, a2, c0
    cdef double *u
    cdef double *w
    for i2 in range(i2a, i2b):
        u = P.u + (<size_t>(i3 + r)) * s3 + (<size_t>(i2 + r)) * s2 + <size_t>r
        w = P.w + (<size_t>(i3 + r)) * s3 + (<size_t>(i2 + r)) * s2 + <size_t>r
        if P.op == HPCLAB_STENCIL_LAPLACIAN:
            c0 = P.centre
            for i1 in range(n1):
                w[i1] = c0 * u[i1]
            for j in range(1, r + 1):
                a0, a1, a2 = P.a[0][j], P.a[1][j], P.a[2][j]
                sk = j * s2
                s = j * s3
                for i1 in range(n1):
                    w[i1] = w[i1] + a2 * (u[i1 + j] + u[i1 - j]) \
                        + a1 * (u[i1 + sk] + u[i1 - sk]) + a0 * (u[i1 + s] + u[i1 - s])
        else:
            c0 = P.a[d][0]
            for i1 in range(n1):
                w[i1] = c0 * u[i1]
            for j in range(1, r + 1):
                a0 = P.a[d][j]
                sj = j * <long>P.s[d]
                for i1 in range(n1):
                    w[i1] = w[i1] + a0 * (u[i1 + sj] + u[i1 - sj])


cdef void _compute(hpclab_stencil_problem *P, long b3, long b2) noexcept nogil:
    # the C kernel's schedules (stencil.c, compute): unblocked, each thread a contiguous share
    # of the rows; blocked, bands of b3 planes walked in blocks of b2 rows, dealt out in turn
    # (chunks of a band) while there are as many bands as threads, else contiguous shares
    cdef long n3 = P.l[0], n2 = P.l[1], m3, m2, k, k3, k2, i3, e3, e2, chunk
    if b3 <= 0 or b2 <= 0:
        for k in prange(n3 * n2, schedule="static", num_threads=P.threads):
            _rows(P, k // n2, k % n2, k % n2 + 1)
        return
    m3 = (n3 + b3 - 1) // b3
    m2 = (n2 + b2 - 1) // b2
    chunk = min(m2, (m3 * m2 + P.threads - 1) // P.threads)
    for k in prange(m3 * m2, schedule="static", chunksize=chunk, num_threads=P.threads):
        k3 = k // m2
        k2 = k % m2
        e3 = min((k3 + 1) * b3, n3)
        e2 = min((k2 + 1) * b2, n2)
        for i3 in range(k3 * b3, e3):
            _rows(P, i3, k2 * b2, e2)


def run_cython(MPI.Comm comm not None, int op, int order, dims, long n3, long n2, long n1,
               long block3, long block2, int threads, int applications, int repetitions):
    """The same measurement with the loops written in Cython: times (metrics, repetitions)."""
    times = np.zeros((HPCLAB_STENCIL_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef int grid[3]
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef hpclab_stencil_problem P
    cdef int failed = 0, rep, k
    cdef double t0, a, b, tc, th, wall
    grid[0], grid[1], grid[2] = dims
    errmsg[0] = 0
    with nogil:
        failed = hpclab_stencil_setup(comm.ob_mpi, op, order, grid, n3, n2, n1, threads, &P,
                                      errmsg, HPCLAB_ERRLEN)
    if failed:
        raise StencilError(errmsg.decode(errors="replace"))
    with nogil:
        hpclab_stencil_exchange(&P)  # warm-up, not timed
        _compute(&P, block3, block2)
        for rep in range(repetitions):
            tc = 0
            th = 0
            hpclab_stencil_poison(&P)
            MPI_Barrier(P.t.cart)
            t0 = MPI_Wtime()
            for k in range(applications):
                a = MPI_Wtime()
                hpclab_stencil_exchange(&P)
                b = MPI_Wtime()
                _compute(&P, block3, block2)
                th += b - a
                tc += MPI_Wtime() - b
            MPI_Barrier(P.t.cart)
            wall = (MPI_Wtime() - t0) / applications
            failed = hpclab_stencil_record(&P, rep, repetitions, wall, tc / applications,
                                           th / applications, &t[0, 0], errmsg,
                                           HPCLAB_ERRLEN)
            if failed:
                break
        hpclab_stencil_free(&P)
    if failed:
        raise StencilError(errmsg.decode(errors="replace"))
    return times
