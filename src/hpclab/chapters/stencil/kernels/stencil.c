/*
 * NAME
 *   stencil.c - second derivatives and the Laplacian of order 2 to 16 (see stencil.h).
 *
 * PURPOSE
 *   The FD_D2 test case of report 003 (hpcscan): W = d2U/dx_a^2 along each axis and
 *   W = Laplacian(U), at orders 2, 4, 8, 12 and 16, baseline and cache-blocked, with the
 *   halo exchange of a 3D decomposition. Compute and halo time are kept apart.
 *
 * NOTES
 *   Arrays hold (l3 + 2r) x (l2 + 2r) x (l1 + 2r) doubles, r = order / 2 halo layers all
 *   round (kernels/common/hpclab_topo.c with hpclab_topo_set_halo), each row padded to whole
 *   cache lines with its first interior point at the start of one (hpclab_topo_set_align). The weights come from
 *   Fornberg's algorithm, scaled by 1/h^2 per axis; the loops are compiled once per radius
 *   (1 to 8) so that the sum over the stencil unrolls and axis 1 runs in vector
 *   lanes. One output point reads 2r + 1 points of u along an axis (6r + 1 for the
 *   Laplacian) and writes one: from memory at least u once and w once when the planes it
 *   reads stay in cache, which blocking is for: 24 bytes where a store first reads the line
 *   it writes (write-allocate), 16 where the node's arrays pass the streaming threshold
 *   (hpclab_stencil_set_streaming) and w goes past the cache in vector groups
 *   (hpclab_simd.h). The wave's step reads w, so it never streams.
 */
#include "stencil.h"
#include "hpclab_common.h"
#include "hpclab_simd.h"
#include "hpclab_topo.h"

#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

int hpclab_stencil_fault = 0;

/* where the two arrays of the node's ranks take more than this many bytes together, a rank
 * writes the operator's output past the cache (hpclab_simd.h); the largest size_t: never */
static size_t stream_above = (size_t)-1;

static int stream_caches = 1;

void hpclab_stencil_set_streaming(size_t above, int caches)
{
    stream_above = above;
    if (caches >= 1) /* else the count in force */
        stream_caches = caches;
}

int hpclab_stencil_streaming_caches(void)
{
    return stream_caches;
}

size_t hpclab_stencil_streaming(void)
{
    return stream_above;
}

int hpclab_stencil_streamed(size_t points, int node_ranks)
{
    return points <= SIZE_MAX / (2 * sizeof(double))
        && hpclab_streams_past(2 * points * sizeof(double), node_ranks, stream_caches,
                               stream_above, HPCLAB_VW);
}

/* wave numbers of u along axes 1, 2, 3 (radians per unit length) */
static const double WAVE[3] = {2.0, 3.0, 1.5};

int hpclab_stencil_weights(int order, double *out)
{
    /* Fornberg (1988) for the nodes -r .. r, derivatives 0 .. 2 at 0 */
    double c[HPCLAB_STENCIL_MAX_ORDER + 1][3], x[HPCLAB_STENCIL_MAX_ORDER + 1];
    double c1 = 1, c4;
    int r = order / 2, n = order + 1;

    if (order < 2 || order % 2 || order > HPCLAB_STENCIL_MAX_ORDER)
        return 1;
    for (int i = 0; i < n; i++) {
        x[i] = (double)(i - r);
        c[i][0] = c[i][1] = c[i][2] = 0;
    }
    c[0][0] = 1;
    c4 = x[0];
    for (int i = 1; i < n; i++) {
        int mn = i < 2 ? i : 2;
        double c2 = 1, c5 = c4;

        c4 = x[i];
        for (int j = 0; j < i; j++) {
            double c3 = x[i] - x[j];

            c2 *= c3;
            if (j == i - 1) {
                for (int k = mn; k > 0; k--)
                    c[i][k] = c1 * (k * c[i - 1][k - 1] - c5 * c[i - 1][k]) / c2;
                c[i][0] = -c1 * c5 * c[i - 1][0] / c2;
            }
            for (int k = mn; k > 0; k--)
                c[j][k] = (c4 * c[j][k] - k * c[j][k - 1]) / c3;
            c[j][0] = c4 * c[j][0] / c3;
        }
        c1 = c2;
    }
    for (int j = 0; j <= r; j++)
        out[j] = c[r + j][2];
    return 0;
}

typedef hpclab_stencil_problem problem;

static size_t at(const problem *P, long i3, long i2, long i1)
{
    return (size_t)i3 * P->s[0] + (size_t)i2 * P->s[1] + (size_t)i1;
}

/* The Laplacian of one row segment [0, n) starting at u + c (w + c), for a compile-time
 * radius R, in three passes over a buffer that stays in L1: axis 1 with the centre, then
 * the 2R rows of axis 2, then the 2R planes of axis 3, then the store. One pass reads
 * 2R + 1 streams where the point loop below reads 6R + 1 at once, and holds their
 * addresses in registers: from R = 7 on the point loop's addresses spill to the stack in
 * every iteration (at order 16 it ran at about half the rate of these passes). */
#define PASSES_CHUNK 512

/* q[0, m) = v[0, m): plain stores up to a group boundary, whole groups past the cache, plain
 * stores for the rest */
static inline void stream_copy(double *restrict q, const double *restrict v, long m)
{
    long i = 0, peel = hpclab_vpeel(q);

    for (; i < peel && i < m; i++)
        q[i] = v[i];
#if HPCLAB_VW > 0
    for (; i + HPCLAB_VW <= m; i += HPCLAB_VW)
        hpclab_vstream(q + i, hpclab_vload(v + i));
#endif
    for (; i < m; i++)
        q[i] = v[i];
}
#define DEFINE_PASSES(R)                                                                      \
    static void passes_##R(const problem *P, const double *restrict u, double *restrict w,    \
                           size_t c, long n)                                                  \
    {                                                                                         \
        const size_t s2 = P->s[1], s3 = P->s[0];                                              \
        const double k2 = P->k2;                                                              \
        double v[PASSES_CHUNK];                                                               \
        for (long i0 = 0; i0 < n; i0 += PASSES_CHUNK) {                                       \
            const long m = n - i0 < PASSES_CHUNK ? n - i0 : PASSES_CHUNK;                     \
            const double *restrict p = u + c + (size_t)i0;                                    \
            double *restrict q = w + c + (size_t)i0;                                          \
            _Pragma("omp simd")                                                               \
            for (long i = 0; i < m; i++) {                                                    \
                double t = P->centre * p[i];                                                  \
                for (long j = 1; j <= R; j++)                                                 \
                    t += P->a[2][j] * (p[i + j] + p[i - j]);                                  \
                v[i] = t;                                                                     \
            }                                                                                 \
            for (int d = 1; d >= 0; d--) { /* axis 2, then axis 3 */                          \
                const size_t s = d ? s2 : s3;                                                 \
                const double *a = P->a[d];                                                    \
                _Pragma("omp simd")                                                           \
                for (long i = 0; i < m; i++) {                                                \
                    double t = v[i];                                                          \
                    for (size_t j = 1; j <= R; j++)                                           \
                        t += a[j] * (p[i + j * s] + p[i - j * s]);                            \
                    v[i] = t;                                                                 \
                }                                                                             \
            }                                                                                 \
            if (P->wave) {                                                                    \
                _Pragma("omp simd")                                                           \
                for (long i = 0; i < m; i++)                                                  \
                    q[i] = 2 * p[i] - q[i] + k2 * v[i];                                       \
            } else if (P->stream) {                                                           \
                stream_copy(q, v, m);                                                         \
            } else {                                                                          \
                _Pragma("omp simd")                                                           \
                for (long i = 0; i < m; i++)                                                  \
                    q[i] = v[i];                                                              \
            }                                                                                 \
        }                                                                                     \
    }
DEFINE_PASSES(1)
DEFINE_PASSES(2)
DEFINE_PASSES(3)
DEFINE_PASSES(4)
DEFINE_PASSES(5)
DEFINE_PASSES(6)
DEFINE_PASSES(7)
DEFINE_PASSES(8)
#define PASSES_FROM 7 /* the first radius done in passes */

/* The Laplacian at point c of u, for a compile-time radius R */
static inline __attribute__((always_inline)) double
laplacian_at(const problem *P, const double *restrict u, size_t c, size_t s2, size_t s3, int R)
{
    double v = P->centre * u[c];

    for (size_t j = 1; j <= (size_t)R; j++)
        v += P->a[2][j] * (u[c + j] + u[c - j]) + P->a[1][j] * (u[c + j * s2] + u[c - j * s2])
             + P->a[0][j] * (u[c + j * s3] + u[c - j * s3]);
    return v;
}

/* The operator op at point c: the Laplacian, or the derivative along one axis */
static inline __attribute__((always_inline)) double
point_at(const problem *P, const double *restrict u, size_t c, size_t s2, size_t s3, int R,
         int op)
{
    if (op == HPCLAB_STENCIL_LAPLACIAN)
        return laplacian_at(P, u, c, s2, s3, R);
    {
        const size_t s = P->s[2 - op];
        const double *a = P->a[2 - op];
        double v = a[0] * u[c];

        for (size_t j = 1; j <= (size_t)R; j++)
            v += a[j] * (u[c + j * s] + u[c - j * s]);
        return v;
    }
}

/* The operator (the Laplacian or a derivative along one axis) at the n points of the row
 * that starts at c, for a compile-time radius R, its output stored past the cache: plain
 * stores up to a group boundary (rows start at a cache line, so none where a group is one),
 * then groups of HPCLAB_VW points, each a sum over the weights of the axes the operator acts
 * on (an axis whose weights are 0 adds 0), then plain stores for the rest. */
static inline __attribute__((always_inline)) void
streamed_row(const problem *P, const double *restrict u, double *restrict w, size_t c, long n,
             int R)
{
    const size_t s2 = P->s[1], s3 = P->s[0];
    const int op = P->op;
    long i = hpclab_vpeel(w + c);

    i = i < n ? i : n;
    for (long k = 0; k < i; k++)
        w[c + k] = point_at(P, u, c + (size_t)k, s2, s3, R, op);
#if HPCLAB_VW > 0
    if (op == HPCLAB_STENCIL_LAPLACIAN) {
        const hpclab_vd centre = hpclab_vset(P->centre);

        for (; i + HPCLAB_VW <= n; i += HPCLAB_VW) {
            const double *p = u + c + (size_t)i;
            hpclab_vd v = hpclab_vmul(centre, hpclab_vload(p));

            for (size_t j = 1; j <= (size_t)R; j++) {
                v = hpclab_vadd(v, hpclab_vmul(hpclab_vset(P->a[2][j]),
                                               hpclab_vadd(hpclab_vload(p + j),
                                                           hpclab_vload(p - j))));
                v = hpclab_vadd(v, hpclab_vmul(hpclab_vset(P->a[1][j]),
                                               hpclab_vadd(hpclab_vload(p + j * s2),
                                                           hpclab_vload(p - j * s2))));
                v = hpclab_vadd(v, hpclab_vmul(hpclab_vset(P->a[0][j]),
                                               hpclab_vadd(hpclab_vload(p + j * s3),
                                                           hpclab_vload(p - j * s3))));
            }
            hpclab_vstream(w + c + (size_t)i, v);
        }
    } else {
        const int d = 2 - op;
        const size_t s = P->s[d];
        const double *a = P->a[d];

        for (; i + HPCLAB_VW <= n; i += HPCLAB_VW) {
            const double *p = u + c + (size_t)i;
            hpclab_vd v = hpclab_vmul(hpclab_vset(a[0]), hpclab_vload(p));

            for (size_t j = 1; j <= (size_t)R; j++)
                v = hpclab_vadd(v, hpclab_vmul(hpclab_vset(a[j]),
                                               hpclab_vadd(hpclab_vload(p + j * s),
                                                           hpclab_vload(p - j * s))));
            hpclab_vstream(w + c + (size_t)i, v);
        }
    }
#endif
    for (; i < n; i++)
        w[c + (size_t)i] = point_at(P, u, c + (size_t)i, s2, s3, R, op);
}

/* The loops over rows [i3a, i3b) x [i2a, i2b) of the interior, for a compile-time radius:
 * along one axis (d, stride s) or all three. The Laplacian alone and the wave's step are two
 * loops, not one with the choice inside each point: the one loop ran the Laplacian of order 8
 * at L = 256 slower (one thread, 295-315 against 328-339 MLUP/s in three A/B turns). */
#define DEFINE_APPLY(R)                                                                       \
    static void apply_##R(const problem *P, const double *restrict u, double *restrict w,     \
                          long i3a, long i3b, long i2a, long i2b)                             \
    {                                                                                         \
        const long r = P->r, n1 = P->l[2];                                                    \
        const size_t s2 = P->s[1], s3 = P->s[0];                                              \
        const int op = P->op, wave = P->wave;                                                 \
        const double k2 = P->k2;                                                              \
        for (long i3 = i3a; i3 < i3b; i3++)                                                   \
            for (long i2 = i2a; i2 < i2b; i2++) {                                             \
                const size_t row = at(P, i3 + r, i2 + r, r);                                  \
                if (op == HPCLAB_STENCIL_LAPLACIAN && R >= PASSES_FROM) {                     \
                    passes_##R(P, u, w, row, n1);                                             \
                } else if (P->stream && !wave) {                                              \
                    streamed_row(P, u, w, row, n1, R);                                        \
                } else if (op == HPCLAB_STENCIL_LAPLACIAN && !wave) {                         \
                    _Pragma("omp simd")                                                       \
                    for (long i1 = 0; i1 < n1; i1++) {                                        \
                        const size_t c = row + (size_t)i1;                                    \
                        w[c] = laplacian_at(P, u, c, s2, s3, R);                              \
                    }                                                                         \
                } else if (op == HPCLAB_STENCIL_LAPLACIAN) { /* the wave's step */            \
                    _Pragma("omp simd")                                                       \
                    for (long i1 = 0; i1 < n1; i1++) {                                        \
                        const size_t c = row + (size_t)i1;                                    \
                        w[c] = 2 * u[c] - w[c] + k2 * laplacian_at(P, u, c, s2, s3, R);       \
                    }                                                                         \
                } else {                                                                      \
                    const int d = 2 - op;                                                     \
                    const size_t s = P->s[d];                                                 \
                    const double *a = P->a[d];                                                \
                    _Pragma("omp simd")                                                       \
                    for (long i1 = 0; i1 < n1; i1++) {                                        \
                        const size_t c = row + (size_t)i1;                                    \
                        double v = a[0] * u[c];                                               \
                        for (size_t j = 1; j <= R; j++)                                       \
                            v += a[j] * (u[c + j * s] + u[c - j * s]);                        \
                        w[c] = v;                                                             \
                    }                                                                         \
                }                                                                             \
            }                                                                                 \
    }

DEFINE_APPLY(1)
DEFINE_APPLY(2)
DEFINE_APPLY(3)
DEFINE_APPLY(4)
DEFINE_APPLY(5)
DEFINE_APPLY(6)
DEFINE_APPLY(7)
DEFINE_APPLY(8)

typedef void (*apply_fn)(const problem *, const double *restrict, double *restrict, long,
                         long, long, long);

static apply_fn apply_for(int r)
{
    switch (r) {
    case 1: return apply_1;
    case 2: return apply_2;
    case 3: return apply_3;
    case 4: return apply_4;
    case 5: return apply_5;
    case 6: return apply_6;
    case 7: return apply_7;
    case 8: return apply_8;
    default: return NULL;
    }
}

/* One application's loops on P->threads threads. Unblocked, report 003's baseline (hpcscan's
 * "omp parallel for collapse(2)" over planes and rows): each thread a contiguous share of the
 * rows. Blocked: the planes in bands of b3, each walked in blocks of b2 rows, the bands dealt
 * out to the threads in turn while there are at least as many bands as threads, else each
 * thread a contiguous share of the blocks (so that none idles: 16 bands on 32 threads).
 * Bands of one plane and every row (b3 = 1, b2 = n2) are the unblocked loop with its planes
 * dealt out, whose threads sweep neighbouring planes and share the 2r + 1 planes they read in
 * the cache (as Devito's schedule does): a gain of its own over the baseline on several
 * threads (two, order 8, L = 256: 822-901 against 615-618 MLUP/s), which the bench prints
 * beside blocking's. Bands dealt out and contiguous shares of the blocks ran level in blocks
 * of 8 x 4, 16 x 2 and 16 x 4 (L = 256 and 384, two threads). */
static void compute(apply_fn f, const problem *P, long b3, long b2)
{
    const long n3 = P->l[0], n2 = P->l[1];
    const double *u = P->u;
    double *w = P->w;

    if (b3 <= 0 || b2 <= 0) {
#pragma omp parallel num_threads(P->threads)
        {
#pragma omp for collapse(2) schedule(static) nowait
            for (long i3 = 0; i3 < n3; i3++)
                for (long i2 = 0; i2 < n2; i2++)
                    f(P, u, w, i3, i3 + 1, i2, i2 + 1);
            if (P->stream) /* this thread's stores past the cache, before the region's end */
                hpclab_vfence();
        }
        return;
    }
    {
        const long m3 = (n3 + b3 - 1) / b3, m2 = (n2 + b2 - 1) / b2;
        const long share = (m3 * m2 + P->threads - 1) / P->threads;
        const long chunk = share < m2 ? share : m2; /* a band, or a thread's share */

#pragma omp parallel num_threads(P->threads)
        {
#pragma omp for collapse(2) schedule(static, chunk) nowait
            for (long k3 = 0; k3 < m3; k3++)
                for (long k2 = 0; k2 < m2; k2++) {
                    const long e3 = (k3 + 1) * b3 < n3 ? (k3 + 1) * b3 : n3;
                    const long e2 = (k2 + 1) * b2 < n2 ? (k2 + 1) * b2 : n2;

                    f(P, u, w, k3 * b3, e3, k2 * b2, e2);
                }
            if (P->stream)
                hpclab_vfence();
        }
    }
}

/* the factors of u = sin(k1 x1) sin(k2 x2) sin(k3 x3) along dimension d at every local
 * index, halo included */
static int sines(problem *P)
{
    for (int d = 0; d < 3; d++) {
        double h = 1.0 / (double)(P->t.global[d] + 1);

        P->sine[d] = hpclab_alloc(P->e[d] * sizeof(double), 0);
        if (!P->sine[d])
            return 1;
        for (long i = 0; i < (long)P->e[d]; i++)
            P->sine[d][i] = sin(WAVE[2 - d] * h * (double)(P->t.offset[d] + i - P->r + 1));
    }
    return 0;
}

static double field(const problem *P, long i3, long i2, long i1)
{
    return P->sine[0][i3] * P->sine[1][i2] * P->sine[2][i1];
}

/* u everywhere, halo included (the exchange then overwrites the neighbours' layers) */
static void initial(problem *P)
{
#pragma omp parallel for schedule(static) num_threads(P->threads)
    for (long i3 = 0; i3 < (long)P->e[0]; i3++)
        for (long i2 = 0; i2 < (long)P->e[1]; i2++)
            for (long i1 = 0; i1 < (long)P->e[2]; i1++)
                P->u[at(P, i3, i2, i1)] = field(P, i3, i2, i1);
}

void hpclab_stencil_poison(problem *P)
{
    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            long lo[3] = {P->r, P->r, P->r}, hi[3];

            if ((side ? P->t.hi[d] : P->t.lo[d]) == MPI_PROC_NULL)
                continue;
            for (int k = 0; k < 3; k++)
                hi[k] = lo[k] + P->l[k];
            lo[d] = side ? P->l[d] + P->r : 0;
            hi[d] = lo[d] + P->r;
            for (long i3 = lo[0]; i3 < hi[0]; i3++)
                for (long i2 = lo[1]; i2 < hi[1]; i2++)
                    for (long i1 = lo[2]; i1 < hi[2]; i1++)
                        P->u[at(P, i3, i2, i1)] = NAN;
        }
}

void hpclab_stencil_exchange(problem *P)
{
    hpclab_halo_exchange(&P->t, P->u);
    if (hpclab_stencil_fault && P->t.rank == P->t.size - 1) {
        int d = P->op == HPCLAB_STENCIL_LAPLACIAN ? 0 : 2 - P->op;
        long i[3] = {P->r, P->r, P->r};

        i[d] = P->r - 1;
        P->u[at(P, i[0], i[1], i[2])] += 1.0;
    }
}

/* the weights scaled per dimension, and the operator's exact results on u: w = lam u
 * (discrete), cont u (continuous), with the round-off tolerance of a sum of its terms */
static void weights_of(problem *P, const double *c)
{
    double absw = 0;

    P->centre = P->lam = P->cont = 0;
    for (int d = 0; d < 3; d++) {
        double h = 1.0 / (double)(P->t.global[d] + 1), k = WAVE[2 - d], s = c[0];
        double a = fabs(c[0]);
        int acts = P->op == HPCLAB_STENCIL_LAPLACIAN || d == 2 - P->op;

        for (int j = 0; j <= P->r; j++)
            P->a[d][j] = acts ? c[j] / (h * h) : 0;
        for (int j = P->r + 1; j <= HPCLAB_STENCIL_MAX_ORDER / 2; j++)
            P->a[d][j] = 0;
        P->centre += P->a[d][0];
        if (!acts)
            continue;
        for (int j = 1; j <= P->r; j++) {
            s += 2 * c[j] * cos((double)j * k * h);
            a += 2 * fabs(c[j]);
        }
        P->lam += s / (h * h);
        P->cont -= k * k;
        absw += a / (h * h);
    }
    /* a sum of 2r + 1 terms per axis, each at most |c_j| / h^2 (|u| <= 1) */
    P->tol = 64 * DBL_EPSILON * absw;
}

/* checks w on this rank: 1 with msg at the first wrong point; *err: max |w - cont u| and
 * *scale: max |cont u| over this rank's points */
static int check(const problem *P, double *err, double *scale, char *msg, size_t msglen)
{
    const long r = P->r;

    *err = *scale = 0;
    for (long i3 = r; i3 < P->l[0] + r; i3++)
        for (long i2 = r; i2 < P->l[1] + r; i2++)
            for (long i1 = r; i1 < P->l[2] + r; i1++) {
                const size_t c = at(P, i3, i2, i1);
                double uu = field(P, i3, i2, i1), w = P->w[c], e = fabs(w - P->cont * uu);

                if (!(fabs(w - P->lam * uu) <= P->tol)) {
                    snprintf(msg, msglen, "rank %d: w at global point (i3, i2, i1) = (%ld, %ld, "
                             "%ld) is %.17g, the stencil's exact value is %.17g (a wrong "
                             "weight, stencil or halo)", P->t.rank, P->t.offset[0] + i3 - r,
                             P->t.offset[1] + i2 - r, P->t.offset[2] + i1 - r, w, P->lam * uu);
                    return 1;
                }
                *err = e > *err ? e : *err;
                *scale = fabs(P->cont * uu) > *scale ? fabs(P->cont * uu) : *scale;
            }
    return 0;
}

int hpclab_stencil_setup(MPI_Comm comm, int op, int order, const int *dims, long n3, long n2,
                         long n1, int threads, problem *P, char *errmsg, size_t errlen)
{
    double c[HPCLAB_STENCIL_MAX_ORDER / 2 + 1];
    long global[3] = {n3, n2, n1};
    int grid[3] = {0, 0, 0}, failed = 0;
    char msg[HPCLAB_ERRLEN] = "";

    memset(P, 0, sizeof *P);
    if (op < 0 || op >= HPCLAB_STENCIL_NOPERATORS || hpclab_stencil_weights(order, c)
        || !apply_for(order / 2) || threads < 1) {
        snprintf(errmsg, errlen, "bad arguments: operator %d (0 to 3), order %d (even, 2 to "
                 "16), threads %d", op, order, threads);
        return 1;
    }
    if (dims)
        memcpy(grid, dims, sizeof grid);
    if (hpclab_topo_create_aligned(comm, 3, global, grid, NULL, order / 2, HPCLAB_LINE_DOUBLES,
                                   &P->t, errmsg, errlen))
        return 1;
    P->op = op;
    P->r = order / 2;
    P->threads = threads;
    for (int d = 0; d < 3; d++) {
        P->l[d] = P->t.local[d];
        P->e[d] = (size_t)(P->t.local[d] + 2 * P->r);
    }
    P->s[2] = 1;
    P->s[1] = (size_t)hpclab_topo_extent(&P->t, 2);
    P->s[0] = P->e[1] * P->s[1];
    weights_of(P, c);
    P->lead = hpclab_topo_lead(&P->t);
    P->stream = hpclab_stencil_streamed(hpclab_topo_points(&P->t), hpclab_node_ranks(P->t.cart));
    P->u = hpclab_alloc_doubles(hpclab_topo_points(&P->t), P->lead, 1);
    P->w = hpclab_alloc_doubles(hpclab_topo_points(&P->t), P->lead, 1);
    if (!P->u || !P->w || sines(P)) {
        snprintf(msg, sizeof msg, "rank %d cannot allocate two arrays of %zu doubles",
                 P->t.rank, hpclab_topo_points(&P->t));
        failed = 1;
    }
    if (hpclab_fail_together(P->t.cart, failed, msg, sizeof msg)) {
        snprintf(errmsg, errlen, "%s", msg);
        hpclab_stencil_free(P);
        return 1;
    }
    initial(P);
    return 0;
}

int hpclab_stencil_record(problem *P, int rep, int repetitions, double wall, double compute,
                          double halo, double *times, char *msg, size_t msglen)
{
    double mine[2] = {compute, halo}, slowest[2], local[2], worst[2];
    int failed;

    MPI_Allreduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, P->t.cart);
    times[HPCLAB_STENCIL_APPLY * repetitions + rep] = wall;
    times[HPCLAB_STENCIL_COMPUTE * repetitions + rep] = slowest[0];
    times[HPCLAB_STENCIL_HALO * repetitions + rep] = slowest[1];
    msg[0] = 0;
    failed = check(P, &local[0], &local[1], msg, msglen);
    if (hpclab_fail_together(P->t.cart, failed, msg, msglen))
        return 1;
    MPI_Allreduce(local, worst, 2, MPI_DOUBLE, MPI_MAX, P->t.cart);
    times[HPCLAB_STENCIL_ERROR * repetitions + rep] = worst[0] / worst[1];
    return 0;
}

void hpclab_stencil_free(problem *P)
{
    hpclab_free_doubles(P->u, P->lead);
    hpclab_free_doubles(P->w, P->lead);
    for (int d = 0; d < 3; d++)
        hpclab_free(P->sine[d]);
    P->u = P->w = P->sine[0] = P->sine[1] = P->sine[2] = NULL;
    hpclab_topo_free(&P->t);
}

int hpclab_stencil(MPI_Comm comm, int op, int order, const int *dims, long n3, long n2,
                   long n1, long block3, long block2, int threads, int applications,
                   int repetitions, double *times, char *errmsg, size_t errlen)
{
    problem P;
    apply_fn f = apply_for(order / 2);
    char msg[HPCLAB_ERRLEN] = "";
    int failed = 0;

    if (applications < 1 || repetitions < 1 || block3 < 0 || block2 < 0
        || (block3 > 0) != (block2 > 0)) {
        snprintf(errmsg, errlen, "bad arguments: applications %d, repetitions %d, blocks %ld "
                 "x %ld (both > 0, or both 0 for none)", applications, repetitions, block3,
                 block2);
        return 1;
    }
    if (hpclab_stencil_setup(comm, op, order, dims, n3, n2, n1, threads, &P, errmsg, errlen))
        return 1;
    /* warm-up: one application, not timed */
    hpclab_stencil_exchange(&P);
    compute(f, &P, block3, block2);

    for (int rep = 0; rep < repetitions && !failed; rep++) {
        double t0, tc = 0, th = 0, wall;

        hpclab_stencil_poison(&P);
        MPI_Barrier(P.t.cart);
        t0 = MPI_Wtime();
        for (int k = 0; k < applications; k++) {
            double a = MPI_Wtime(), b;

            hpclab_stencil_exchange(&P);
            b = MPI_Wtime();
            compute(f, &P, block3, block2);
            th += b - a;
            tc += MPI_Wtime() - b;
        }
        MPI_Barrier(P.t.cart);
        wall = (MPI_Wtime() - t0) / applications;
        failed = hpclab_stencil_record(&P, rep, repetitions, wall, tc / applications,
                                       th / applications, times, msg, sizeof msg);
    }
    hpclab_stencil_free(&P);
    if (failed) {
        snprintf(errmsg, errlen, "%s", msg);
        return 1;
    }
    return 0;
}

double hpclab_stencil_symbol_max(int order)
{
    double c[HPCLAB_STENCIL_MAX_ORDER / 2 + 1], best = 0;
    const int samples = 4096;

    if (hpclab_stencil_weights(order, c))
        return -1;
    for (int i = 0; i <= samples; i++) {
        double theta = M_PI * i / samples, s = -c[0];

        for (int j = 1; j <= order / 2; j++)
            s -= 2 * c[j] * cos(j * theta);
        best = s > best ? s : best;
    }
    return best;
}

/* the halo layers at the faces of the domain: the odd reflection about the face (u = 0 on
 * it, one spacing outside the last interior point) */
static void mirror(problem *P)
{
    const long r = P->r;

    for (int d = 0; d < 3; d++)
        for (int side = 0; side < 2; side++) {
            long lo[3] = {0, 0, 0}, hi[3];

            if ((side ? P->t.hi[d] : P->t.lo[d]) != MPI_PROC_NULL)
                continue;
            for (int k = 0; k < 3; k++)
                hi[k] = (long)P->e[k];
            for (long k = 1; k <= r; k++) {
                /* the layer k outside the face and its image, k - 2 inside the first or
                 * last interior point (the face itself, k = 1, holds 0) */
                long out = side ? P->l[d] + r - 1 + k : r - k;
                long in = side ? P->l[d] + r + 1 - k : r + k - 2;
                long i[3];

                lo[d] = out;
                hi[d] = out + 1;
                for (i[0] = lo[0]; i[0] < hi[0]; i[0]++)
                    for (i[1] = lo[1]; i[1] < hi[1]; i[1]++)
                        for (i[2] = lo[2]; i[2] < hi[2]; i[2]++) {
                            long j[3] = {i[0], i[1], i[2]};

                            j[d] = in;
                            P->u[at(P, i[0], i[1], i[2])] =
                                k == 1 ? 0.0 : -P->u[at(P, j[0], j[1], j[2])];
                        }
            }
        }
}

/* max |u - phi cos(omega t)| over this rank's interior */
static double wave_error(const problem *P, double phase)
{
    const long r = P->r;
    double worst = 0;

    for (long i3 = r; i3 < P->l[0] + r; i3++)
        for (long i2 = r; i2 < P->l[1] + r; i2++)
            for (long i1 = r; i1 < P->l[2] + r; i1++) {
                double e = fabs(P->u[at(P, i3, i2, i1)] - phase * field(P, i3, i2, i1));

                worst = e > worst || e != e ? e : worst;
            }
    return worst;
}

int hpclab_stencil_wave(MPI_Comm comm, int order, const int *dims, long n, int mode,
                        double periods, double dt_fraction, long block3, long block2,
                        int threads, int repetitions, double *times, char *errmsg,
                        size_t errlen)
{
    problem P;
    apply_fn f = apply_for(order / 2);
    double h = 1.0 / (double)(n + 1), omega = mode * M_PI * sqrt(3.0), dt, t_end, amp = 0;
    long steps;
    int failed = 0;

    if (n < 1 || mode < 1 || mode > n || !(periods > 0) || !(dt_fraction > 0)
        || repetitions < 1 || block3 < 0 || block2 < 0 || (block3 > 0) != (block2 > 0)
        || hpclab_stencil_symbol_max(order) <= 0) {
        snprintf(errmsg, errlen, "bad arguments: n %ld, mode %d (1 to n), periods %g, "
                 "dt_fraction %g (both > 0), order %d, blocks %ld x %ld", n, mode, periods,
                 dt_fraction, order, block3, block2);
        return 1;
    }
    t_end = periods * 2 * M_PI / omega;
    dt = dt_fraction * 2 * h / sqrt(3 * hpclab_stencil_symbol_max(order));
    steps = (long)ceil(t_end / dt);
    dt = t_end / (double)steps;
    if (hpclab_stencil_setup(comm, HPCLAB_STENCIL_LAPLACIAN, order, dims, n, n, n, threads,
                             &P, errmsg, errlen))
        return 1;
    P.wave = 1;
    P.stream = 0; /* the step reads w: nothing to gain from storing past the cache */
    P.k2 = dt * dt;
    for (int d = 0; d < 3; d++)
        for (long i = 0; i < (long)P.e[d]; i++)
            P.sine[d][i] = sin(mode * M_PI * h * (double)(P.t.offset[d] + i - P.r + 1));
    for (long i3 = 0; i3 < P.l[0]; i3++) /* the amplitude: max |phi| over the whole grid */
        for (long i2 = 0; i2 < P.l[1]; i2++)
            for (long i1 = 0; i1 < P.l[2]; i1++) {
                double v = fabs(field(&P, i3 + P.r, i2 + P.r, i1 + P.r));

                amp = v > amp ? v : amp;
            }
    MPI_Allreduce(MPI_IN_PLACE, &amp, 1, MPI_DOUBLE, MPI_MAX, P.t.cart);

    for (int rep = 0; rep < repetitions && !failed; rep++) {
        double t0, tc = 0, th = 0, te = 0, worst = 0, mine[3], slowest[3];

        initial(&P); /* u(0) = phi; w = u(-dt) = phi cos(omega dt) */
        for (size_t c = 0; c < hpclab_topo_points(&P.t); c++)
            P.w[c] = P.u[c] * cos(omega * dt);
        MPI_Barrier(P.t.cart);
        t0 = MPI_Wtime();
        for (long k = 1; k <= steps; k++) {
            double a = MPI_Wtime(), b, c, *swap;

            hpclab_stencil_exchange(&P);
            mirror(&P);
            b = MPI_Wtime();
            compute(f, &P, block3, block2); /* w = u(t + dt) */
            swap = P.u;
            P.u = P.w;
            P.w = swap;
            c = MPI_Wtime();
            {
                double e = wave_error(&P, cos(omega * (double)k * dt));

                worst = e != e || e > worst ? e : worst; /* a NaN stays */
            }
            th += b - a;
            tc += c - b;
            te += MPI_Wtime() - c;
        }
        MPI_Barrier(P.t.cart);
        mine[0] = tc / (double)steps;
        mine[1] = th / (double)steps;
        mine[2] = te;
        MPI_Allreduce(mine, slowest, 3, MPI_DOUBLE, MPI_MAX, P.t.cart);
        MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, P.t.cart);
        times[HPCLAB_WAVE_STEP * repetitions + rep] =
            (MPI_Wtime() - t0 - slowest[2]) / (double)steps;
        times[HPCLAB_WAVE_COMPUTE * repetitions + rep] = slowest[0];
        times[HPCLAB_WAVE_HALO * repetitions + rep] = slowest[1];
        /* beyond the stable step the field may overflow to inf and then NaN: the error is
         * infinite, as the stability limit predicts; within it that is a wrong kernel */
        times[HPCLAB_WAVE_ERROR * repetitions + rep] = isfinite(worst) ? worst / amp : INFINITY;
        times[HPCLAB_WAVE_STEPS * repetitions + rep] = (double)steps;
        failed = !isfinite(worst) && dt_fraction <= 1;
    }
    hpclab_stencil_free(&P);
    if (failed) {
        snprintf(errmsg, errlen, "the wave propagator's field became infinite or NaN at %g of "
                 "the stable time step, where it must stay bounded: a wrong halo, mirror or "
                 "stencil", dt_fraction);
        return 1;
    }
    return 0;
}
