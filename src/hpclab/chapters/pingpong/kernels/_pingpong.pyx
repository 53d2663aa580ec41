# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""PingPong in Cython: a thin wrapper of pingpong.c and a native implementation.

Both take an mpi4py communicator, hand its MPI handle to compiled code and
release the GIL for the whole measurement. Use hpclab.chapters.pingpong.kernels, which
checks arguments, rather than this module.
"""
import numpy as np

from libc.string cimport memset
from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_Comm_rank, MPI_Comm_size, MPI_Send, MPI_Recv,
                            MPI_Barrier, MPI_Allreduce, MPI_Wtime, MPI_BYTE, MPI_DOUBLE,
                            MPI_MAX, MPI_STATUS_IGNORE)
from hpclab_common cimport (HPCLAB_ERRLEN, hpclab_alloc, hpclab_free, hpclab_fail_together,
                            hpclab_set_errmsg)

cdef extern from "pingpong.h" nogil:
    int hpclab_pingpong(MPI_Comm comm, size_t nbytes, int warmup, int iterations,
                        int repetitions, int hugepages, double *times,
                        char *errmsg, size_t errlen)
    unsigned char hpclab_pingpong_pattern(size_t i, int seed)
    size_t hpclab_pingpong_first_wrong(const unsigned char *buf, size_t n, int seed)
    long hpclab_pingpong_fault_byte

cdef enum:
    TAG = 17


def _set_fault_byte(long index):
    """Test hook: rank 1 flips byte `index` of what it received (-1: never)."""
    global hpclab_pingpong_fault_byte
    hpclab_pingpong_fault_byte = index


class PingPongError(RuntimeError):
    """Raised on every rank when any rank's ping-pong went wrong."""


def run_c(MPI.Comm comm not None, Py_ssize_t nbytes, int warmup, int iterations,
          int repetitions, bint hugepages=False):
    """Call ``hpclab_pingpong`` from pingpong.c; one-way seconds per repetition."""
    cdef double[::1] times = np.zeros(repetitions, dtype=np.float64)
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    errmsg[0] = 0
    with nogil:
        status = hpclab_pingpong(comm.ob_mpi, <size_t>nbytes, warmup, iterations, repetitions,
                                 hugepages, &times[0], errmsg, HPCLAB_ERRLEN)
    if status:
        raise PingPongError(errmsg.decode(errors="replace"))
    return np.asarray(times)


cdef inline void _round_trips(MPI_Comm comm, int rank, unsigned char *sbuf,
                              unsigned char *rbuf, int count, int n) noexcept nogil:
    cdef int i
    if rank == 0:
        for i in range(n):
            MPI_Send(sbuf, count, MPI_BYTE, 1, TAG, comm)
            MPI_Recv(rbuf, count, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE)
    elif rank == 1:
        for i in range(n):
            MPI_Recv(rbuf, count, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE)
            MPI_Send(sbuf, count, MPI_BYTE, 0, TAG, comm)


def run_cython(MPI.Comm comm not None, Py_ssize_t nbytes, int warmup, int iterations,
               int repetitions, bint hugepages=False):
    """The same measurement written in Cython against mpi4py's libmpi cimports."""
    cdef MPI_Comm c = comm.ob_mpi
    cdef int rank = comm.Get_rank()
    cdef int count = <int>nbytes
    cdef int r, seed, failed = 0
    cdef Py_ssize_t i, bad
    cdef double t0, elapsed, slowest
    cdef double[::1] times = np.zeros(repetitions, dtype=np.float64)
    cdef unsigned char *sbuf = NULL
    cdef unsigned char *rbuf = NULL
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0

    if rank < 2:
        sbuf = <unsigned char *>hpclab_alloc(nbytes, hugepages)
        rbuf = <unsigned char *>hpclab_alloc(nbytes, hugepages)
        if sbuf == NULL or rbuf == NULL:
            failed = 1
            hpclab_set_errmsg(errmsg, f"cannot allocate two buffers of {nbytes} bytes")
    try:
        with nogil:
            if hpclab_fail_together(c, failed, errmsg, HPCLAB_ERRLEN):
                failed = 1
            if not failed:
                if rank < 2:
                    for i in range(nbytes):
                        sbuf[i] = hpclab_pingpong_pattern(i, 0)
                _round_trips(c, rank, sbuf, rbuf, count, warmup)
            r = 0
            while r < repetitions and not failed:
                seed = r + 1
                elapsed = 0.0
                if rank < 2:
                    for i in range(nbytes):
                        sbuf[i] = hpclab_pingpong_pattern(i, seed)
                    memset(rbuf, 0, nbytes)
                MPI_Barrier(c)
                _round_trips(c, rank, sbuf, rbuf, count, 1)  # lines the ranks up (pingpong.c)
                t0 = MPI_Wtime()
                _round_trips(c, rank, sbuf, rbuf, count, iterations)
                if rank < 2:
                    elapsed = (MPI_Wtime() - t0) / (2.0 * iterations)
                MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, c)
                times[r] = slowest
                if (rank == 1 and hpclab_pingpong_fault_byte >= 0
                        and hpclab_pingpong_fault_byte < nbytes):
                    rbuf[hpclab_pingpong_fault_byte] ^= 0xFF
                if rank < 2:
                    bad = hpclab_pingpong_first_wrong(rbuf, nbytes, seed)
                    if bad < nbytes:
                        failed = 1
                        with gil:
                            hpclab_set_errmsg(errmsg,
                                         f"repetition {r} of a {nbytes}-byte message: byte {bad} "
                                         f"is {rbuf[bad]}, expected "
                                         f"{hpclab_pingpong_pattern(bad, seed)}")
                if hpclab_fail_together(c, failed, errmsg, HPCLAB_ERRLEN):
                    failed = 1
                r += 1
    finally:
        hpclab_free(sbuf)
        hpclab_free(rbuf)
    if failed:
        raise PingPongError(errmsg.decode(errors="replace"))
    return np.asarray(times)
