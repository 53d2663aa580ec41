# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The ring in Cython: a thin wrapper of ring.c and a native implementation.

Both take an mpi4py communicator, build the periodic 1D Cartesian
communicator from it and release the GIL for the whole measurement. Use
hpclab.chapters.ring.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memset
from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_Request, MPI_COMM_NULL, MPI_Comm_rank, MPI_Comm_size,
                            MPI_Send, MPI_Ssend,
                            MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Sendrecv, MPI_Waitall,
                            MPI_Barrier, MPI_Allreduce, MPI_Wtime, MPI_INT32_T, MPI_DOUBLE,
                            MPI_MAX, MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE)
from hpclab_common cimport (HPCLAB_ERRLEN, hpclab_alloc, hpclab_free, hpclab_fail_together,
                            hpclab_set_errmsg, hpclab_topo, hpclab_topo_create,
                            hpclab_topo_free)

cdef extern from "ring.h" nogil:
    enum:
        HPCLAB_RING_SSEND_ORDERED
        HPCLAB_RING_SEND
        HPCLAB_RING_ISEND
        HPCLAB_RING_IRECV
        HPCLAB_RING_SENDRECV
        HPCLAB_RING_NAIVE
        HPCLAB_RING_NVARIANTS
        HPCLAB_RING_TAG_RIGHT
        HPCLAB_RING_TAG_LEFT
    int hpclab_ring(MPI_Comm comm, int variant, size_t nbytes, int warmup, int iterations,
                    int repetitions, int hugepages, double *times, char *errmsg, size_t errlen)
    int32_t hpclab_ring_pattern(int origin, size_t i, int dir)
    int32_t hpclab_ring_expected(int rank, int size, int dir)
    int hpclab_ring_check_home(int rank, int size, int count, const int32_t *home_r,
                               const int32_t *home_l, int rep, char *msg, size_t len)
    long hpclab_ring_fault_element
    int hpclab_ring_fault_rank

# The variants in the order of ring.h's enum.
VARIANTS = ("ssend_ordered", "send", "isend", "irecv", "sendrecv", "naive")
TAG_RIGHT, TAG_LEFT = HPCLAB_RING_TAG_RIGHT, HPCLAB_RING_TAG_LEFT

cdef enum:
    RIGHT = 0
    LEFT = 1


class RingError(RuntimeError):
    """Raised on every rank when any rank's ring went wrong."""


def _set_fault(long element, int rank=0):
    """Test hook: `rank` adds 1 to element `element` of what it receives from the left
    (-1: never). Applies to run_c and run_cython."""
    global hpclab_ring_fault_element, hpclab_ring_fault_rank
    hpclab_ring_fault_element = element
    hpclab_ring_fault_rank = rank


def _fault():
    return hpclab_ring_fault_element, hpclab_ring_fault_rank


def pattern(int origin, Py_ssize_t count, int direction):
    """Elements 1..count-1 of the message `origin` sends (direction 0: right, 1: left);
    element 0 is returned as 0."""
    out = np.zeros(count, dtype=np.int32)
    cdef int32_t[::1] v = out
    cdef Py_ssize_t i
    for i in range(1, count):
        v[i] = hpclab_ring_pattern(origin, i, direction)
    return out


def expected(int rank, int size, int direction):
    """The sum that comes home to `rank` from the left (0) or the right (1)."""
    return int(hpclab_ring_expected(rank, size, direction))


def run_c(MPI.Comm comm not None, int variant, Py_ssize_t nbytes, int warmup, int iterations,
          int repetitions, bint hugepages=False):
    """Call ``hpclab_ring`` from ring.c; seconds per full ring, per repetition."""
    cdef double[::1] times = np.zeros(repetitions, dtype=np.float64)
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    errmsg[0] = 0
    with nogil:
        status = hpclab_ring(comm.ob_mpi, variant, <size_t>nbytes, warmup, iterations,
                             repetitions, hugepages, &times[0], errmsg, HPCLAB_ERRLEN)
    if status:
        raise RingError(errmsg.decode(errors="replace"))
    return np.asarray(times)


# ----------------------------------------------------------------------------- native


cdef inline int32_t _wrap(int32_t a, int64_t b) noexcept nogil:
    return <int32_t>(<uint32_t>(<uint32_t>a + <uint32_t>(<uint64_t>b)))


cdef struct Ring:
    MPI_Comm cart
    int rank, size, left, right, count
    int32_t *origin[2]
    int32_t *buf[2][2]


cdef void _exchange(Ring *g, int variant, int32_t *sr, int32_t *sl, int32_t *rr,
                    int32_t *rl) noexcept nogil:
    cdef MPI_Comm c = g.cart
    cdef int n = g.count
    cdef MPI_Request req[4]
    if g.size == 1 and (variant == HPCLAB_RING_SSEND_ORDERED or variant == HPCLAB_RING_SEND):
        variant = HPCLAB_RING_SENDRECV  # a ring of one: see ring.c's NOTES
    if variant == HPCLAB_RING_SSEND_ORDERED:
        if g.rank % 2 == 0:
            MPI_Ssend(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c)
            MPI_Recv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
            MPI_Ssend(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c)
            MPI_Recv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)
        else:
            MPI_Recv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
            MPI_Ssend(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c)
            MPI_Recv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)
            MPI_Ssend(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c)
    elif variant == HPCLAB_RING_SEND:
        MPI_Send(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c)
        MPI_Send(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c)
        MPI_Recv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
        MPI_Recv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)
    elif variant == HPCLAB_RING_ISEND:
        MPI_Isend(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c, &req[0])
        MPI_Isend(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c, &req[1])
        MPI_Recv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
        MPI_Recv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE)
    elif variant == HPCLAB_RING_IRECV:
        MPI_Irecv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, &req[0])
        MPI_Irecv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, &req[1])
        MPI_Isend(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c, &req[2])
        MPI_Isend(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c, &req[3])
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE)
    elif variant == HPCLAB_RING_SENDRECV:
        MPI_Sendrecv(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT,
                     rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
        MPI_Sendrecv(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT,
                     rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)
    else:  # naive: deadlocks
        MPI_Ssend(sr, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_RIGHT, c)
        MPI_Ssend(sl, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_LEFT, c)
        MPI_Recv(rr, n, MPI_INT32_T, g.left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE)
        MPI_Recv(rl, n, MPI_INT32_T, g.right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE)


cdef int _one_ring(Ring *g, int variant, int32_t **home) noexcept nogil:
    """One full ring; the number of wrong home sums. home[0..1]: what came home."""
    cdef int32_t *sr = g.origin[RIGHT]
    cdef int32_t *sl = g.origin[LEFT]
    cdef int32_t *rr = sr
    cdef int32_t *rl = sl
    cdef int step
    for step in range(g.size):
        rr = g.buf[RIGHT][step & 1]
        rl = g.buf[LEFT][step & 1]
        _exchange(g, variant, sr, sl, rr, rl)
        if (hpclab_ring_fault_element >= 0 and g.rank == hpclab_ring_fault_rank
                and hpclab_ring_fault_element < g.count):
            rr[hpclab_ring_fault_element] = _wrap(rr[hpclab_ring_fault_element], 1)
        if step < g.size - 1:
            rr[0] = _wrap(rr[0], g.rank)
            rl[0] = _wrap(rl[0], -<int64_t>g.rank)
        sr = rr
        sl = rl
    home[0] = rr
    home[1] = rl
    return ((rr[0] != hpclab_ring_expected(g.rank, g.size, RIGHT))
            + (rl[0] != hpclab_ring_expected(g.rank, g.size, LEFT)))


cdef str _check_home(Ring *g, int32_t **home, int rep):
    cdef char msg[HPCLAB_ERRLEN]
    msg[0] = 0
    if hpclab_ring_check_home(g.rank, g.size, g.count, home[0], home[1], rep, msg,
                              HPCLAB_ERRLEN):
        return msg.decode(errors="replace")
    return ""


def run_cython(MPI.Comm comm not None, int variant, Py_ssize_t nbytes, int warmup,
               int iterations, int repetitions, bint hugepages=False):
    """The same measurement written in Cython against mpi4py's libmpi cimports."""
    cdef Ring g
    cdef hpclab_topo ring
    cdef long points[1]
    cdef bint have_ring = False
    cdef int dims[1]
    cdef int periods[1]
    cdef int d, i, w, it, r, failed = 0
    cdef long wrong
    cdef int32_t *home[2]
    cdef double t0, elapsed, slowest
    cdef double[::1] times = np.zeros(repetitions, dtype=np.float64)
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0
    if not 0 <= variant < HPCLAB_RING_NVARIANTS or nbytes < 4 or nbytes % 4:
        raise RingError(f"bad arguments: variant={variant} nbytes={nbytes}")
    g.count = <int>(nbytes // 4)
    g.cart = MPI_COMM_NULL
    MPI_Comm_size(comm.ob_mpi, &g.size)
    dims[0] = g.size
    periods[0] = 1
    for d in range(2):
        g.origin[d] = NULL
        g.buf[d][0] = NULL
        g.buf[d][1] = NULL
    try:
        with nogil:
            # the periodic 1D grid of the topology layer, one point per rank
            points[0] = g.size
            if hpclab_topo_create(comm.ob_mpi, 1, points, dims, periods, &ring, errmsg,
                                  HPCLAB_ERRLEN):
                with gil:
                    raise RingError(errmsg.decode(errors="replace"))
            have_ring = True
            g.cart = ring.cart
            g.rank = ring.rank
            g.left = ring.lo[0]
            g.right = ring.hi[0]
            for d in range(2):
                g.origin[d] = <int32_t *>hpclab_alloc(nbytes, hugepages)
                g.buf[d][0] = <int32_t *>hpclab_alloc(nbytes, hugepages)
                g.buf[d][1] = <int32_t *>hpclab_alloc(nbytes, hugepages)
                if g.origin[d] == NULL or g.buf[d][0] == NULL or g.buf[d][1] == NULL:
                    failed = 1
                    break
                g.origin[d][0] = -g.rank if d == RIGHT else g.rank
                for i in range(1, g.count):
                    g.origin[d][i] = hpclab_ring_pattern(g.rank, i, d)
            if failed:
                with gil:
                    hpclab_set_errmsg(errmsg, f"cannot allocate six buffers of {nbytes} bytes")
            if hpclab_fail_together(g.cart, failed, errmsg, HPCLAB_ERRLEN):
                failed = 1
            if not failed:
                for w in range(warmup):
                    _one_ring(&g, variant, home)
            r = 0
            while r < repetitions and not failed:
                wrong = 0
                for d in range(2):
                    memset(g.buf[d][0], 0, nbytes)
                    memset(g.buf[d][1], 0, nbytes)
                MPI_Barrier(g.cart)
                t0 = MPI_Wtime()
                for it in range(iterations):
                    wrong += _one_ring(&g, variant, home)
                elapsed = (MPI_Wtime() - t0) / iterations
                MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, g.cart)
                times[r] = slowest
                with gil:
                    text = _check_home(&g, home, r)
                    if not text and wrong:
                        text = (f"repetition {r}, ring of {g.size} ranks: {wrong} of "
                                f"{2 * iterations} sums that came home were wrong")
                    if text:
                        hpclab_set_errmsg(errmsg, text)
                if hpclab_fail_together(g.cart, errmsg[0] != 0, errmsg, HPCLAB_ERRLEN):
                    failed = 1
                r += 1
    finally:
        for d in range(2):
            hpclab_free(g.origin[d])
            hpclab_free(g.buf[d][0])
            hpclab_free(g.buf[d][1])
        if have_ring:
            hpclab_topo_free(&ring)
    if failed:
        raise RingError(errmsg.decode(errors="replace"))
    return np.asarray(times)
