# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""STREAM in Cython: a thin wrapper of stream.c and a native implementation with prange.

Use hpclab.chapters.stream.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from cython.parallel cimport prange, parallel
from mpi4py cimport MPI
from mpi4py.libmpi cimport MPI_Comm, MPI_COMM_NULL, MPI_Barrier
from hpclab_common cimport (HPCLAB_ERRLEN, hpclab_alloc_untouched, hpclab_free_untouched,
                            hpclab_fail_together, hpclab_set_errmsg)

cdef extern from "omp.h" nogil:
    double omp_get_wtime()
    int omp_get_max_threads()
    int omp_get_num_places()
    int omp_get_proc_bind()
    int omp_get_num_threads()
    int omp_get_thread_num()

cdef extern from "stream.h" nogil:
    enum:
        HPCLAB_STREAM_NOPS
        HPCLAB_STREAM_MAX_NTIMES
    double HPCLAB_STREAM_SCALAR
    double HPCLAB_STREAM_EPSILON
    int hpclab_stream(MPI_Comm comm, size_t n, int ntimes, int nthreads, int hugepages,
                      double *times, char *errmsg, size_t errlen)
    void hpclab_stream_expected(int ntimes, double *aj, double *bj, double *cj)
    void hpclab_stream_errors(const double *a, const double *b, const double *c, size_t n,
                              int ntimes, int nthreads, double err[3])
    long hpclab_stream_fault_index

MAX_NTIMES = HPCLAB_STREAM_MAX_NTIMES
SCALAR = HPCLAB_STREAM_SCALAR
EPSILON = HPCLAB_STREAM_EPSILON
_BINDS = {0: "false", 1: "true", 2: "primary", 3: "close", 4: "spread"}


class StreamError(RuntimeError):
    """A STREAM run failed: allocation, threads, or validation."""


def _set_fault(long index):
    """Test hook: zero element `index` of a[] after the trials (-1: never)."""
    global hpclab_stream_fault_index
    hpclab_stream_fault_index = index


def expected(int ntimes):
    """(a, b, c): the value every element holds after ntimes trials."""
    cdef double aj, bj, cj
    hpclab_stream_expected(ntimes, &aj, &bj, &cj)
    return aj, bj, cj


def openmp():
    """What the OpenMP runtime of this process offers: threads, places, binding."""
    return {"max_threads": omp_get_max_threads(), "places": omp_get_num_places(),
            "proc_bind": _BINDS.get(omp_get_proc_bind(), str(omp_get_proc_bind()))}


cdef MPI_Comm _handle(comm) noexcept:
    if comm is None:
        return MPI_COMM_NULL
    return (<MPI.Comm>comm).ob_mpi


def run_c(Py_ssize_t n, int ntimes, int nthreads, bint hugepages=False, comm=None):
    """Call ``hpclab_stream`` from stream.c; times[op, trial] in seconds."""
    times = np.zeros((HPCLAB_STREAM_NOPS, ntimes), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    cdef MPI_Comm c = _handle(comm)
    errmsg[0] = 0
    with nogil:
        status = hpclab_stream(c, <size_t>n, ntimes, nthreads, hugepages, &t[0, 0], errmsg,
                               HPCLAB_ERRLEN)
    if status:
        raise StreamError(errmsg.decode(errors="replace"))
    return times


# ----------------------------------------------------------------------------- native

cdef inline void _sync(MPI_Comm comm) noexcept nogil:
    if comm != MPI_COMM_NULL:
        MPI_Barrier(comm)


def run_cython(Py_ssize_t n, int ntimes, int nthreads, bint hugepages=False, comm=None):
    """The same run written in Cython: prange loops with the static schedule."""
    times = np.zeros((HPCLAB_STREAM_NOPS, ntimes), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef MPI_Comm c = _handle(comm)
    cdef size_t nbytes = <size_t>n * sizeof(double)
    cdef double *a = <double *>hpclab_alloc_untouched(nbytes, hugepages)
    cdef double *b = <double *>hpclab_alloc_untouched(nbytes, hugepages)
    cdef double *cc = <double *>hpclab_alloc_untouched(nbytes, hugepages)
    cdef double s = HPCLAB_STREAM_SCALAR
    cdef double t0
    cdef double err[3]
    cdef Py_ssize_t j
    cdef int k, i, failed = 0, counted = 0
    cdef int *shared_count = &counted  # written inside the parallel block
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0
    try:
        if a == NULL or b == NULL or cc == NULL:
            failed = 1
            hpclab_set_errmsg(errmsg, f"cannot allocate three arrays of {nbytes} bytes")
        else:
            with nogil, parallel(num_threads=nthreads):
                if omp_get_thread_num() == 0:
                    shared_count[0] = omp_get_num_threads()
            if counted != nthreads:
                failed = 1
                hpclab_set_errmsg(errmsg, f"asked for {nthreads} OpenMP threads, got {counted} "
                                     "(OMP_THREAD_LIMIT or OMP_DYNAMIC?)")
        if c != MPI_COMM_NULL:
            failed = hpclab_fail_together(c, failed, errmsg, HPCLAB_ERRLEN) != 0
        if failed:
            raise StreamError(errmsg.decode(errors="replace"))
        with nogil:
            for j in prange(n, schedule="static", num_threads=nthreads):  # first touch
                a[j] = 1.0
                b[j] = 2.0
                cc[j] = 0.0
            for j in prange(n, schedule="static", num_threads=nthreads):
                a[j] = 2.0 * a[j]
            for k in range(ntimes):
                _sync(c)
                t0 = omp_get_wtime()
                for j in prange(n, schedule="static", num_threads=nthreads):
                    cc[j] = a[j]
                t[0, k] = omp_get_wtime() - t0

                _sync(c)
                t0 = omp_get_wtime()
                for j in prange(n, schedule="static", num_threads=nthreads):
                    b[j] = s * cc[j]
                t[1, k] = omp_get_wtime() - t0

                _sync(c)
                t0 = omp_get_wtime()
                for j in prange(n, schedule="static", num_threads=nthreads):
                    cc[j] = a[j] + b[j]
                t[2, k] = omp_get_wtime() - t0

                _sync(c)
                t0 = omp_get_wtime()
                for j in prange(n, schedule="static", num_threads=nthreads):
                    a[j] = b[j] + s * cc[j]
                t[3, k] = omp_get_wtime() - t0
            if hpclab_stream_fault_index >= 0 and hpclab_stream_fault_index < n:
                a[hpclab_stream_fault_index] = 0.0
            hpclab_stream_errors(a, b, cc, <size_t>n, ntimes, nthreads, err)
        for i in range(3):
            if not err[i] <= HPCLAB_STREAM_EPSILON:
                failed = 1
                hpclab_set_errmsg(errmsg, f"failed validation: array {'abc'[i]} has an average "
                                     f"relative error of {err[i]:.3e} (more than "
                                     f"{HPCLAB_STREAM_EPSILON:.0e})")
                break
        if c != MPI_COMM_NULL:
            failed = hpclab_fail_together(c, failed, errmsg, HPCLAB_ERRLEN) != 0
        if failed:
            raise StreamError(errmsg.decode(errors="replace"))
    finally:
        hpclab_free_untouched(a, nbytes)
        hpclab_free_untouched(b, nbytes)
        hpclab_free_untouched(cc, nbytes)
    return times
