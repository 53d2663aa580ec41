# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Conjugate gradient in Cython: a thin wrapper of poisson.c and a native implementation.

Both take an mpi4py communicator and release the GIL for the whole solve. Use
hpclab.chapters.poisson.kernels, which checks arguments, rather than this module.
"""
import numpy as np

from mpi4py cimport MPI
from mpi4py.libmpi cimport (MPI_Comm, MPI_COMM_NULL, MPI_Request, MPI_Barrier, MPI_Allreduce,
                            MPI_Wtime, MPI_DOUBLE, MPI_SUM)
from hpclab_common cimport (HPCLAB_ERRLEN, HPCLAB_HALO_REQUESTS, hpclab_fail_together,
                            hpclab_alloc_doubles, hpclab_free_doubles,
                            hpclab_set_errmsg, hpclab_topo, hpclab_topo_free,
                            hpclab_topo_points, hpclab_topo_extent, hpclab_topo_lead,
                            hpclab_topo_gather, hpclab_halo_start, hpclab_halo_finish)
from libc.math cimport sqrt
from libc.string cimport memcpy, memset

cdef extern from "poisson.h" nogil:
    enum:
        HPCLAB_POISSON_NMETRICS
        HPCLAB_POISSON_PRODUCT_ROWS
    double HPCLAB_POISSON_TOL
    int hpclab_poisson(MPI_Comm comm, long n, int interleave, long iterations,
                       int repetitions, double *uout, double *times, char *errmsg,
                       size_t errlen)
    double hpclab_poisson_f(double x, double y)
    double hpclab_poisson_exact(double x, double y)
    double hpclab_vmrss()
    void hpclab_poisson_rhs(const hpclab_topo *t, double *b)
    int hpclab_poisson_record(const hpclab_topo *t, double *x, double *q, long k,
                              long iterations, double rr, double rr0, const double *loc,
                              double base, int rep, int repetitions, double *times,
                              char *msg, size_t msglen)
    int hpclab_poisson_fault
    double hpclab_poisson_product(const hpclab_topo *t, double *p, double *q, int interleave,
                                  double *stamps)
    int hpclab_poisson_topo(MPI_Comm comm, long n, hpclab_topo *t, char *errmsg,
                            size_t errlen)
    double hpclab_poisson_streams(MPI_Comm comm, long rows, long n, int iterations,
                                  int repetitions)

METRICS = ("iteration", "matvec", "halo", "reduce", "update", "iterations", "residual",
           "error", "rss", "rss_base")
TOL = HPCLAB_POISSON_TOL


class PoissonError(RuntimeError):
    """Raised on every rank when any rank's solve went wrong."""


def streams(long rows, long n, int iterations=20, int repetitions=3, MPI.Comm comm=None):
    """The bench's bound: best seconds per iteration of a CG iteration's vector traffic
    without the stencil (q = 4 p, then the solver's own updates) on one rank's block of rows x
    n points, with CG's two global sums over ``comm`` when one is given (collective on it; see
    poisson.h). Raises PoissonError when the result is wrong or memory is short."""
    cdef double best
    cdef MPI_Comm c = MPI_COMM_NULL
    if comm is not None:
        c = comm.ob_mpi
    with nogil:
        best = hpclab_poisson_streams(c, rows, n, iterations, repetitions)
    if best < 0:
        raise PoissonError(f"the streams-only pass on {rows} x {n} points computed a wrong "
                           "value or could not allocate its vectors")
    return best


def _set_fault(int on):
    """Test hook: the last rank adds 1 to its halo point (0, 1) of p after every exchange."""
    global hpclab_poisson_fault
    hpclab_poisson_fault = on


def _fault():
    return hpclab_poisson_fault


def f(double x, double y):
    """f of report 000 eq. (3.1), the C function."""
    return hpclab_poisson_f(x, y)


def exact(double x, double y):
    """u = sin²(πx) sin²(πy), the C function."""
    return hpclab_poisson_exact(x, y)


def vmrss():
    """This process's VmRSS in bytes (0 where /proc/self/status has none)."""
    return hpclab_vmrss()


def _want(MPI.Comm comm, want):
    return comm.bcast(bool(want) if comm.Get_rank() == 0 else None, root=0)


def run_c(MPI.Comm comm not None, long n, bint interleave, long iterations, int repetitions,
          want=False):
    """Call ``hpclab_poisson`` from poisson.c: (times (metrics, repetitions), u or None)."""
    times = np.zeros((HPCLAB_POISSON_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] t = times
    cdef double[:, ::1] o
    cdef double *pout = NULL
    cdef char errmsg[HPCLAB_ERRLEN]
    cdef int status
    out = np.empty((n, n)) if _want(comm, want) and comm.Get_rank() == 0 else None
    if out is not None:
        o = out
        pout = &o[0, 0]
    errmsg[0] = 0
    with nogil:
        status = hpclab_poisson(comm.ob_mpi, n, interleave, iterations, repetitions, pout,
                                &t[0, 0], errmsg, HPCLAB_ERRLEN)
    if status:
        raise PoissonError(errmsg.decode(errors="replace"))
    return times, out


cdef class Product:
    """The C solver's product q = A p with p's halo rows (``hpclab_poisson_product``, what
    every iteration of ``run_c`` calls) on this rank's rows of an n x n mesh split over
    comm, in the solver's padded layout, p random and fixed: each call is one product, to
    time it alone. Collective: every rank of comm makes one, calls it as often, and calls
    :meth:`free`."""
    cdef hpclab_topo t
    cdef bint alive
    cdef bint interleave
    cdef size_t lead
    cdef double *p
    cdef double *q

    def __cinit__(self, MPI.Comm comm not None, long n, bint interleave=True, seed=0):
        cdef char errmsg[HPCLAB_ERRLEN]
        cdef size_t points, s
        cdef long i
        self.alive = False
        self.p = self.q = NULL
        errmsg[0] = 0
        if hpclab_poisson_topo(comm.ob_mpi, n, &self.t, errmsg, HPCLAB_ERRLEN):
            raise PoissonError(errmsg.decode(errors="replace"))
        self.alive = True
        self.interleave = interleave
        points = hpclab_topo_points(&self.t)
        s = <size_t>hpclab_topo_extent(&self.t, 1)
        self.lead = hpclab_topo_lead(&self.t)
        self.p = hpclab_alloc_doubles(points, self.lead, 0)
        self.q = hpclab_alloc_doubles(points, self.lead, 0)
        if self.p == NULL or self.q == NULL:
            self.free()
            raise MemoryError(f"rank {comm.Get_rank()} cannot allocate two vectors of "
                              f"{points} doubles")
        values = np.random.default_rng(seed + self.t.rank).random((self.t.local[0], n))
        cdef double[:, ::1] v = values
        for i in range(self.t.local[0]):
            memcpy(self.p + <size_t>(i + 1) * s + 1, &v[i, 0], <size_t>n * sizeof(double))

    def __call__(self):
        """One product; returns this rank's part of p·q."""
        cdef double pq
        if not self.alive:
            raise ValueError("this product was freed")
        with nogil:
            pq = hpclab_poisson_product(&self.t, self.p, self.q, self.interleave, NULL)
        return pq

    def free(self):
        """Free the Cartesian communicator, the halo datatypes (collective) and the vectors;
        safe twice."""
        hpclab_free_doubles(self.p, self.lead)
        hpclab_free_doubles(self.q, self.lead)
        self.p = self.q = NULL
        if self.alive:
            hpclab_topo_free(&self.t)
            self.alive = False

    def __dealloc__(self):
        hpclab_free_doubles(self.p, self.lead)
        hpclab_free_doubles(self.q, self.lead)


# ----------------------------------------------------------------------------- native


cdef inline double _product_rows(double *p, double *q, long n, size_t s, long i,
                                 size_t rows) noexcept nogil:
    """q = A p on the rows from row i; their part of p.q. In each column the values of p
    pass from one row's stencil to the next in registers, as in the C kernel."""
    cdef size_t row = <size_t>i * s, c, ck, k
    cdef double v, up, mid, down, pq = 0
    for c in range(row + 1, row + <size_t>n + 1):
        up = p[c - s]
        mid = p[c]
        for k in range(rows):
            ck = c + k * s
            down = p[ck + s]
            v = 4 * mid - up - down - p[ck - 1] - p[ck + 1]
            q[ck] = v
            pq += mid * v
            up = mid
            mid = down
    return pq


cdef double _matvec(double *p, double *q, long n, size_t s, long i0,
                    long i1) noexcept nogil:
    """q = A p on rows i0..i1 (stride s); the local p.q on those rows. As the C kernel,
    HPCLAB_POISSON_PRODUCT_ROWS rows at a time, then the rows left one at a time."""
    cdef long i = i0
    cdef double pq = 0
    while i + HPCLAB_POISSON_PRODUCT_ROWS - 1 <= i1:
        pq += _product_rows(p, q, n, s, i, HPCLAB_POISSON_PRODUCT_ROWS)
        i += HPCLAB_POISSON_PRODUCT_ROWS
    while i <= i1:
        pq += _product_rows(p, q, n, s, i, 1)
        i += 1
    return pq


cdef double _update_xr(double *x, double *r, double *p, double *q, double a,
                       size_t m) noexcept nogil:
    cdef size_t c
    cdef double rr = 0
    for c in range(m):
        x[c] += a * p[c]
        r[c] -= a * q[c]
        rr += r[c] * r[c]
    return rr


cdef double _dot_self(double *v, size_t m) noexcept nogil:
    cdef size_t c
    cdef double sum = 0
    for c in range(m):
        sum += v[c] * v[c]
    return sum


cdef void _update_p(double *p, double *r, double b, size_t m) noexcept nogil:
    cdef size_t c
    for c in range(m):
        p[c] = r[c] + b * p[c]


def run_cython(MPI.Comm comm not None, long n, bint interleave, long iterations,
               int repetitions, want=False):
    """The same solver written in Cython; halos, right-hand side and the answer check from
    the C layer."""
    times = np.zeros((HPCLAB_POISSON_NMETRICS, repetitions), dtype=np.float64)
    cdef double[:, ::1] tt = times
    cdef hpclab_topo t
    cdef bint have = False
    cdef int rep, failed = 0
    cdef size_t points, m, s, lead = 0
    cdef double *x = NULL
    cdef double *r = NULL
    cdef double *p = NULL
    cdef double *q = NULL
    cdef double loc[5]
    cdef double mine[2]
    cdef double base, rr, rr0, rrnew, pq, alpha, t0, a, b, c, d, e, f_, g, h, i_
    cdef long k, cap, lr, ii
    cdef MPI_Request req[HPCLAB_HALO_REQUESTS]
    cdef char errmsg[HPCLAB_ERRLEN]
    errmsg[0] = 0
    out = None
    try:
        with nogil:
            if hpclab_poisson_topo(comm.ob_mpi, n, &t, errmsg, HPCLAB_ERRLEN):
                with gil:
                    raise PoissonError(errmsg.decode(errors="replace"))
            have = True
            base = hpclab_vmrss()
            points = hpclab_topo_points(&t)
            lead = hpclab_topo_lead(&t)
            s = <size_t>hpclab_topo_extent(&t, 1)
            lr = t.local[0]
            m = <size_t>lr * s
            x = hpclab_alloc_doubles(points, lead, 0)
            r = hpclab_alloc_doubles(points, lead, 0)
            p = hpclab_alloc_doubles(points, lead, 0)
            q = hpclab_alloc_doubles(points, lead, 0)
            failed = x == NULL or r == NULL or p == NULL or q == NULL
            if failed:
                with gil:
                    hpclab_set_errmsg(errmsg, f"rank {t.rank} cannot allocate four vectors "
                                      f"of {points} doubles")
            if hpclab_fail_together(t.cart, failed, errmsg, HPCLAB_ERRLEN):
                failed = 1
            cap = iterations if iterations else 10 * n + 100
            rep = 0
            while rep < repetitions and not failed:
                for ii in range(5):
                    loc[ii] = 0
                memset(x, 0, points * sizeof(double))
                memset(r, 0, points * sizeof(double))
                memset(q, 0, points * sizeof(double))
                hpclab_poisson_rhs(&t, r)
                memcpy(p, r, points * sizeof(double))
                mine[0] = _dot_self(r + s, m)
                MPI_Allreduce(mine, &rr0, 1, MPI_DOUBLE, MPI_SUM, t.cart)
                rr = rr0
                k = 0
                MPI_Barrier(t.cart)
                t0 = MPI_Wtime()
                while k < cap and not sqrt(rr) <= HPCLAB_POISSON_TOL * sqrt(rr0):
                    a = MPI_Wtime()
                    hpclab_halo_start(&t, p, req)
                    b = MPI_Wtime()
                    mine[0] = _matvec(p, q, n, s, 2, lr - 1) if interleave and lr > 2 else 0.0
                    c = MPI_Wtime()
                    hpclab_halo_finish(req)
                    if hpclab_poisson_fault and t.rank == t.size - 1:
                        p[1] += 1.0
                    d = MPI_Wtime()
                    if not interleave:
                        mine[0] = _matvec(p, q, n, s, 1, lr)
                    elif lr > 0:
                        mine[0] += _matvec(p, q, n, s, 1, 1)
                        if lr > 1:
                            mine[0] += _matvec(p, q, n, s, lr, lr)
                    e = MPI_Wtime()
                    MPI_Allreduce(mine, &pq, 1, MPI_DOUBLE, MPI_SUM, t.cart)
                    f_ = MPI_Wtime()
                    alpha = rr / pq
                    mine[1] = _update_xr(x + s, r + s, p + s, q + s, alpha, m)
                    g = MPI_Wtime()
                    MPI_Allreduce(mine + 1, &rrnew, 1, MPI_DOUBLE, MPI_SUM, t.cart)
                    h = MPI_Wtime()
                    _update_p(p + s, r + s, rrnew / rr, m)
                    rr = rrnew
                    k += 1
                    i_ = MPI_Wtime()
                    loc[0] += (c - b) + (e - d)
                    loc[1] += (b - a) + (d - c)
                    loc[2] += (f_ - e) + (h - g)
                    loc[3] += (g - f_) + (i_ - h)
                MPI_Barrier(t.cart)
                loc[4] = MPI_Wtime() - t0
                failed = hpclab_poisson_record(&t, x, q, k, iterations, rr, rr0, loc, base,
                                               rep, repetitions, &tt[0, 0], errmsg,
                                               HPCLAB_ERRLEN)
                rep += 1
        if not failed and _want(comm, want):
            out = _gather(comm, &t, x, n)
    finally:
        hpclab_free_doubles(x, lead)
        hpclab_free_doubles(r, lead)
        hpclab_free_doubles(p, lead)
        hpclab_free_doubles(q, lead)
        if have:
            hpclab_topo_free(&t)
    if failed or errmsg[0]:
        raise PoissonError(errmsg.decode(errors="replace") or "the root cannot allocate")
    return times, out


cdef _gather(MPI.Comm comm, hpclab_topo *t, double *x, long n):
    """The global solution on rank 0 (None elsewhere), from every rank's block of x."""
    cdef long lr = t.local[0], i
    cdef size_t s = <size_t>hpclab_topo_extent(t, 1)
    block = np.empty((lr, n))
    cdef double[:, ::1] bv = block
    cdef double[:, ::1] ov
    cdef double *pout = NULL
    for i in range(lr):
        memcpy(&bv[i, 0], x + <size_t>(i + 1) * s + 1, <size_t>n * sizeof(double))
    out = np.empty((n, n)) if t.rank == 0 else None
    if out is not None:
        ov = out
        pout = &ov[0, 0]
    if hpclab_topo_gather(t, 0, &bv[0, 0] if lr > 0 else NULL, pout):
        raise PoissonError("rank 0 cannot allocate its requests")
    return out
