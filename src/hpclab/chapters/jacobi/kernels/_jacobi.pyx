# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Jacobi sweeps in Cython: a thin wrapper of jacobi.c and a native implementation.

Both take an mpi4py communicator and release the GIL for the whole measurement. Use
hpclab.chapters.jacobi.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_Request, MPI_Barrier, MPI_Allreduce, MPI_Bcast, MPI_Wtime,
                            MPI_DOUBLE, MPI_INT, MPI_MAX)
from hpclab_common cimport (HPCLAB_ERRLEN, HPCLAB_HALO_REQUESTS, hpclab_alloc, hpclab_free,
                            hpclab_alloc_doubles, hpclab_free_doubles,
                            hpclab_fail_together, hpclab_node_ranks, hpclab_set_errmsg,
                            hpclab_topo,
                            hpclab_topo_free, hpclab_topo_points, hpclab_topo_extent,
                            hpclab_topo_lead,
                            hpclab_topo_scatter, hpclab_topo_gather, hpclab_halo_start,
                            hpclab_halo_finish)
from libc.stdlib cimport free
from libc.string cimport memcpy

cdef extern from "jacobi.h" nogil:
    enum:
        HPCLAB_JACOBI_NDECOMPOSITIONS
        HPCLAB_JACOBI_NMETRICS
    int hpclab_jacobi(MPI_Comm comm, int decomposition, long nx, long ny, long nz,
                      int overlap, int sweeps, int repetitions, const double *u0,
                      double *uout, double *times, char *errmsg, size_t errlen)
    void hpclab_jacobi_dims(int decomposition, int *dims)
    int hpclab_jacobi_topo(MPI_Comm comm, const int *dims, const long *glob, hpclab_topo *t,
                           char *errmsg, size_t errlen)
    double *hpclab_jacobi_factors(const hpclab_topo *t)
    void hpclab_jacobi_manufactured(const hpclab_topo *t, const double *factors, double *u,
                                    double *f)
    double hpclab_jacobi_error(const hpclab_topo *t, const double *factors, const double *u)
    void hpclab_jacobi_weights(const hpclab_topo *t, double *w, double *diag)
    int hpclab_jacobi_fault
    double hpclab_jacobi_streams(long l, int sweeps, int repetitions, int node_ranks)
    void hpclab_jacobi_set_cache(size_t budget)
    size_t hpclab_jacobi_cache()
    long hpclab_jacobi_block_rows(size_t budget, long ny, long nz)
    void hpclab_jacobi_set_streaming(size_t above, int caches)
    int hpclab_jacobi_streaming_caches()
    size_t hpclab_jacobi_streaming()
    int hpclab_jacobi_streamed(size_t points, int node_ranks)

# vector loads and streaming stores (see hpclab_simd.h): a group of HPCLAB_VW doubles
cdef extern from "hpclab_simd.h" nogil:
    enum:
        HPCLAB_VW
    ctypedef struct hpclab_vd:
        pass
    hpclab_vd hpclab_vload(const double *p)
    hpclab_vd hpclab_vset(double x)
    hpclab_vd hpclab_vadd(hpclab_vd a, hpclab_vd b)
    hpclab_vd hpclab_vmul(hpclab_vd a, hpclab_vd b)
    void hpclab_vstream(double *p, hpclab_vd v)
    void hpclab_vfence()
    void hpclab_vprefetch(const double *p)
    long hpclab_vpeel(const double *p)

DECOMPOSITIONS = ("slab", "pencil", "cube")
METRICS = ("sweep", "compute", "halo", "cut")


class JacobiError(RuntimeError):
    """Raised on every rank when any rank's sweep went wrong."""


def streams(long L, int sweeps=10, int repetitions=5, int node_ranks=1):
    """The bench's yardstick: best seconds per pass of unew = u(next plane) + f over a block
    of L^3 points with its halo, the memory traffic of a sweep without its stencil (see
    jacobi.h), ``node_ranks`` running it at once on the node (the streaming rule). Raises
    JacobiError when the result is wrong or memory is short."""
    cdef double best
    with nogil:
        best = hpclab_jacobi_streams(L, sweeps, repetitions, node_ranks)
    if best < 0:
        raise JacobiError(f"the streams-only pass on {L}^3 points computed a wrong value "
                          "or could not allocate its arrays")
    return best


def set_cache(size_t budget):
    """The bytes of cache the three planes of u a sweep reads may fill (spatial blocking of
    both kernels, see jacobi.h); 0: no blocking."""
    hpclab_jacobi_set_cache(budget)


def cache():
    """The budget in force (set_cache)."""
    return hpclab_jacobi_cache()


def set_streaming(size_t above, int caches=0):
    """Store the new values past the cache when the three fields of the node's ranks take
    more than ``above`` bytes together (see jacobi.h), ``caches`` the node's last-level
    caches (0: the count in force); SIZE_MAX: never."""
    hpclab_jacobi_set_streaming(above, caches)


def streaming_caches():
    """The last-level caches the threshold in force counts (set_streaming)."""
    return hpclab_jacobi_streaming_caches()


def streaming():
    """The threshold in force (set_streaming)."""
    return hpclab_jacobi_streaming()


def streamed(size_t points, int node_ranks=1):
    """Whether a rank whose fields hold ``points`` points each, one of ``node_ranks`` on its
    node, streams its stores."""
    return bool(hpclab_jacobi_streamed(points, node_ranks))


VECTOR_DOUBLES = HPCLAB_VW  # doubles per streamed group in this build (0: never streams)


def block_rows(size_t budget, long ny, long nz):
    """Rows of j per block on ny x nz points per plane under ``budget`` (see jacobi.h)."""
    return hpclab_jacobi_block_rows(budget, ny, nz)


def _set_fault(int on):
    """Test hook: the last rank adds 1 to its halo point (0, 1, 1) after every exchange."""
    global hpclab_jacobi_fault
    hpclab_jacobi_fault = on


def _fault():
    return hpclab_jacobi_fault


def _root_field(MPI.Comm comm, u0, shape):
    """(u0 array or None, out array or None) on rank 0; checked on every rank."""
    problem = None
    if comm.Get_rank() == 0 and u0 is not None:
        u0 = np.ascontiguousarray(u0, dtype=np.float64)
        if u0.shape != tuple(shape):
            problem = f"u0 must have the grid's shape {tuple(shape)}, got {u0.shape}"
    given = comm.bcast(comm.Get_rank() == 0 and u0 is not None, root=0)
    problem = comm.bcast(problem, root=0)
    if problem:
        raise ValueError(problem)
    if given and comm.Get_rank() == 0:
        return given, u0, np.empty(shape)
    return given, None, None


def run_c(MPI.Comm comm not None, int decomposition, long nx, long ny, long nz, bint overlap,
          int sweeps, int repetitions, u0=None):
    """Call ``hpclab_jacobi`` from jacobi.c: (times (metrics, repetitions), field or None)."""
    times = np.zeros((HPCLAB_JACOBI_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef double[:, :, ::1] a
    cdef double[:, :, ::1] o
    cdef const double *p0 = NULL
    cdef double *pout = NULL
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    given, start, out = _root_field(comm, u0, (nx, ny, nz))
    if start is not None:
        a = start
        o = out
        p0 = &a[0, 0, 0]
        pout = &o[0, 0, 0]
    errmsg[0] = 0
    with nogil:
        status = hpclab_jacobi(comm.ob_mpi, decomposition, nx, ny, nz, overlap, sweeps,
                               repetitions, p0, pout, &t[0, 0], errmsg, HPCLAB_ERRLEN)
    if status:
        raise JacobiError(errmsg.decode(errors="replace"))
    return times, out


# ----------------------------------------------------------------------------- native


cdef void _update(hpclab_topo *t, double *u, double *f, double *unew, double *w, double diag,
                  bint stream, long i0, long i1, long j0, long j1, long k0,
                  long k1) noexcept nogil:
    cdef size_t sy = <size_t>hpclab_topo_extent(t, 2)  # rows padded to whole cache lines
    cdef size_t sx = <size_t>(t.local[1] + 2) * sy
    cdef double w0 = w[0], w1 = w[1], w2 = w[2], inv = 1.0 / diag
    cdef long rows = hpclab_jacobi_block_rows(hpclab_jacobi_cache(), t.local[1], t.local[2])
    cdef long i, j, k, jb, je, head
    cdef size_t row, c
    cdef double *p
    cdef hpclab_vd v0 = hpclab_vset(w0), v1 = hpclab_vset(w1), v2 = hpclab_vset(w2)
    cdef hpclab_vd vinv = hpclab_vset(inv), s
    stream = stream and HPCLAB_VW > 0
    # blocks of j rows, each through every plane i (spatial blocking, see jacobi.h)
    jb = j0
    while jb <= j1:
        je = min(jb + rows - 1, j1)
        for i in range(i0, i1 + 1):
            for j in range(jb, je + 1):
                row = <size_t>i * sx + <size_t>j * sy
                k = k0
                if stream:
                    # plain stores up to a group boundary, then whole groups past the cache
                    head = min(k0 + hpclab_vpeel(&unew[row + <size_t>k0]), k1 + 1)
                    while k < head:
                        c = row + <size_t>k
                        unew[c] = (w0 * (u[c - sx] + u[c + sx]) + w1 * (u[c - sy] + u[c + sy])
                                   + w2 * (u[c - 1] + u[c + 1]) + f[c]) * inv
                        k += 1
                    while k + HPCLAB_VW - 1 <= k1:
                        p = &u[row + <size_t>k]
                        hpclab_vprefetch(p + sx)
                        hpclab_vprefetch(&f[row + <size_t>k])
                        s = hpclab_vadd(hpclab_vadd(
                            hpclab_vadd(hpclab_vmul(v0, hpclab_vadd(hpclab_vload(p - sx),
                                                                    hpclab_vload(p + sx))),
                                        hpclab_vmul(v1, hpclab_vadd(hpclab_vload(p - sy),
                                                                    hpclab_vload(p + sy)))),
                            hpclab_vmul(v2, hpclab_vadd(hpclab_vload(p - 1), hpclab_vload(p + 1)))),
                            hpclab_vload(&f[row + <size_t>k]))
                        hpclab_vstream(&unew[row + <size_t>k], hpclab_vmul(s, vinv))
                        k += HPCLAB_VW
                for k in range(k, k1 + 1):
                    c = row + <size_t>k
                    unew[c] = (w0 * (u[c - sx] + u[c + sx]) + w1 * (u[c - sy] + u[c + sy])
                               + w2 * (u[c - 1] + u[c + 1]) + f[c]) * inv
        jb += rows
    if stream:
        hpclab_vfence()


cdef void _shell(hpclab_topo *t, double *u, double *f, double *unew, double *w,
                 double diag, bint stream) noexcept nogil:
    cdef long lx = t.local[0], ly = t.local[1], lz = t.local[2]
    _update(t, u, f, unew, w, diag, stream, 1, 1, 1, ly, 1, lz)
    _update(t, u, f, unew, w, diag, stream, lx, lx, 1, ly, 1, lz)
    _update(t, u, f, unew, w, diag, stream, 2, lx - 1, 1, 1, 1, lz)
    _update(t, u, f, unew, w, diag, stream, 2, lx - 1, ly, ly, 1, lz)
    _update(t, u, f, unew, w, diag, stream, 2, lx - 1, 2, ly - 1, 1, 1)
    _update(t, u, f, unew, w, diag, stream, 2, lx - 1, 2, ly - 1, lz, lz)


cdef void _interior(hpclab_topo *t, double *field, double *block, bint to_block) noexcept nogil:
    cdef size_t n = 0, sy = <size_t>hpclab_topo_extent(t, 2)
    cdef long i, j
    cdef double *row
    for i in range(1, t.local[0] + 1):
        for j in range(1, t.local[1] + 1):
            row = field + (<size_t>i * <size_t>(t.local[1] + 2) + <size_t>j) * sy + 1
            if to_block:
                memcpy(block + n, row, <size_t>t.local[2] * sizeof(double))
            else:
                memcpy(row, block + n, <size_t>t.local[2] * sizeof(double))
            n += <size_t>t.local[2]


def run_cython(MPI.Comm comm not None, int decomposition, long nx, long ny, long nz,
               bint overlap, int sweeps, int repetitions, u0=None):
    """The same sweeps written in Cython; halos from the C topology layer."""
    times = np.zeros((HPCLAB_JACOBI_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] tt = times
    cdef hpclab_topo t
    cdef bint have = False, streamed = False
    cdef long glob[3]
    cdef int dims[3]
    cdef int r, s, failed = 0
    cdef size_t points, nlocal, lead = 0
    cdef double *u = NULL
    cdef double *unew = NULL
    cdef double *f = NULL
    cdef double *block = NULL
    cdef double *factors = NULL
    cdef double *swap
    cdef double w[3]
    cdef double diag, t0, a, b, c, d, e, sweep
    cdef double loc[3]
    cdef double slowest[3]
    cdef long lx, ly, lz
    cdef MPI_Request req[HPCLAB_HALO_REQUESTS]
    cdef double[:, :, ::1] start_v
    cdef double[:, :, ::1] out_v
    cdef const double *p0 = NULL
    cdef double *pout = NULL
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0
    given, start, out = _root_field(comm, u0, (nx, ny, nz))
    cdef bint is_given = given
    if start is not None:
        start_v = start
        out_v = out
        p0 = &start_v[0, 0, 0]
        pout = &out_v[0, 0, 0]
    if not 0 <= decomposition < HPCLAB_JACOBI_NDECOMPOSITIONS:
        raise JacobiError(f"bad decomposition {decomposition}")
    glob[0], glob[1], glob[2] = nx, ny, nz
    hpclab_jacobi_dims(decomposition, dims)
    try:
        with nogil:
            if hpclab_jacobi_topo(comm.ob_mpi, dims, glob, &t, errmsg, HPCLAB_ERRLEN):
                with gil:
                    raise JacobiError(errmsg.decode(errors="replace"))
            have = True
            points = hpclab_topo_points(&t)
            streamed = hpclab_jacobi_streamed(points, hpclab_node_ranks(t.cart))
            nlocal = <size_t>t.local[0] * <size_t>t.local[1] * <size_t>t.local[2]
            lead = hpclab_topo_lead(&t)
            u = hpclab_alloc_doubles(points, lead, 1)
            unew = hpclab_alloc_doubles(points, lead, 1)
            f = hpclab_alloc_doubles(points, lead, 1)
            if is_given:
                block = <double *>hpclab_alloc(nlocal * sizeof(double), 0)
            factors = hpclab_jacobi_factors(&t)
            failed = (u == NULL or unew == NULL or f == NULL or factors == NULL
                      or (is_given and block == NULL))
            if failed:
                with gil:
                    hpclab_set_errmsg(errmsg, f"rank {t.rank} cannot allocate the fields")
            if hpclab_fail_together(t.cart, failed, errmsg, HPCLAB_ERRLEN):
                failed = 1
            if not failed:
                hpclab_jacobi_weights(&t, w, &diag)
                hpclab_jacobi_manufactured(&t, factors, u, f)
                if is_given:
                    failed = hpclab_topo_scatter(&t, 0, p0, block)
                    _interior(&t, u, block, False)
                memcpy(unew, u, points * sizeof(double))
            lx, ly, lz = t.local[0], t.local[1], t.local[2]
            r = 0
            while r < repetitions and not failed:
                loc[0] = 0
                loc[1] = 0
                MPI_Barrier(t.cart)
                t0 = MPI_Wtime()
                for s in range(sweeps):
                    a = MPI_Wtime()
                    hpclab_halo_start(&t, u, req)
                    b = MPI_Wtime()
                    if overlap:
                        _update(&t, u, f, unew, w, diag, streamed, 2, lx - 1, 2, ly - 1, 2, lz - 1)
                    c = MPI_Wtime()
                    hpclab_halo_finish(req)
                    if hpclab_jacobi_fault and t.rank == t.size - 1:
                        u[<size_t>hpclab_topo_extent(&t, 2) + 1] += 1.0  # halo point (0, 1, 1)
                    d = MPI_Wtime()
                    if overlap:
                        _shell(&t, u, f, unew, w, diag, streamed)
                    else:
                        _update(&t, u, f, unew, w, diag, streamed, 1, lx, 1, ly, 1, lz)
                    loc[0] += (c - b) + (MPI_Wtime() - d)
                    loc[1] += (b - a) + (d - c)
                    swap = u
                    u = unew
                    unew = swap
                MPI_Barrier(t.cart)
                loc[2] = MPI_Wtime() - t0
                MPI_Allreduce(loc, slowest, 3, MPI_DOUBLE, MPI_MAX, t.cart)
                tt[0, r] = slowest[2] / sweeps
                tt[1, r] = slowest[0] / sweeps
                tt[2, r] = slowest[1] / sweeps
                tt[3, r] = t.cut
                if not is_given:
                    e = hpclab_jacobi_error(&t, factors, u)
                    if not e <= 1e-10:
                        with gil:
                            hpclab_set_errmsg(errmsg, f"repetition {r}, rank {t.rank} of "
                                              f"{t.size}: after {sweeps} sweeps the field is "
                                              f"{e:.3g} away from the solution it started at "
                                              "(a fixed point: a wrong halo or stencil)")
                if hpclab_fail_together(t.cart, errmsg[0] != 0, errmsg, HPCLAB_ERRLEN):
                    failed = 1
                r += 1
            if is_given and not failed:
                _interior(&t, u, block, True)
                failed = hpclab_topo_gather(&t, 0, block, pout)
    finally:
        hpclab_free_doubles(u, lead)
        hpclab_free_doubles(unew, lead)
        hpclab_free_doubles(f, lead)
        hpclab_free(block)
        free(factors)
        if have:
            hpclab_topo_free(&t)
    if failed or errmsg[0]:
        raise JacobiError(errmsg.decode(errors="replace") or "the root cannot allocate")
    return times, out
