/*
 * NAME
 *   poisson.c - matrix-free CG for -Laplace(u) = f on the unit square (see poisson.h).
 *
 * PURPOSE
 *   The solver of report 000: four vectors x, r, p, q; per iteration one q = A p with a
 *   halo exchange of one row with each neighbour, two inner products (two MPI_Allreduce),
 *   three vector updates. The time of each part is kept apart, so a model built from
 *   STREAM, PingPong and Allreduce can be checked part by part.
 *
 * NOTES
 *   Every vector is stored as lr + 2 rows of the block with a halo row and a halo column
 *   all round, each row padded to a multiple of 8 doubles and the vector offset so that
 *   column 1 of every row starts a 64-byte line: the product's aligned loads and stores
 *   then line up with the cache lines (unaligned rows cost the product about a third more
 *   time from memory on one machine). Halos other than p's neighbour rows and the padding
 *   stay zero, so the updates run over whole contiguous rows. Loops are fused where the algorithm
 *   allows: q = A p with p.q; x += a p, r -= a q with r.r; p = r + b p. Memory traffic per
 *   point and iteration: 16 + 48 + 24 = 88 bytes (96 with write-allocate of q).
 */
#include "poisson.h"
#include "hpclab_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hpclab_poisson_fault = 0;

double hpclab_poisson_f(double x, double y)
{
    double sx = sin(M_PI * x), sy = sin(M_PI * y);

    return -2 * M_PI * M_PI * (cos(2 * M_PI * x) * sy * sy + sx * sx * cos(2 * M_PI * y));
}

double hpclab_poisson_exact(double x, double y)
{
    double sx = sin(M_PI * x), sy = sin(M_PI * y);

    return sx * sx * sy * sy;
}

double hpclab_vmrss(void)
{
    char line[256];
    double kb = 0;
    FILE *fp = fopen("/proc/self/status", "r");

    if (!fp)
        return 0;
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kb = strtod(line + 6, NULL);
            break;
        }
    fclose(fp);
    return kb * 1024;
}

/* q = A p on the K rows from row i; returns their part of p.q. In each column the values
 * of p pass from one row's stencil to the next in registers. */
static inline __attribute__((always_inline)) double
product_rows(const double *restrict p, double *restrict q, long n, size_t s, long i, size_t K)
{
    const size_t row = (size_t)i * s;
    double pq = 0;

#pragma omp simd reduction(+ : pq)
    for (size_t c = row + 1; c <= row + (size_t)n; c++) {
        double up = p[c - s], mid = p[c];

        for (size_t k = 0; k < K; k++) {
            const size_t ck = c + k * s;
            const double down = p[ck + s], v = 4 * mid - up - down - p[ck - 1] - p[ck + 1];

            q[ck] = v;
            pq += mid * v;
            up = mid;
            mid = down;
        }
    }
    return pq;
}

/* q = A p on rows [i0, i1] of the block; returns the local part of p.q on those rows.
 * `omp simd` (compiled with -fopenmp-simd where the compiler has it) lets the sum run in
 * vector lanes; without it one running sum waits for every addition to finish.
 * HPCLAB_POISSON_PRODUCT_ROWS rows at a time (product_rows), then the rows left one at a
 * time: a group reads the rows of p above and below it once from the cache, where one row
 * at a time reads them for every row. Alone on one core at N = 2048 the product from memory
 * took 1.5-1.6 times a pass of q = 4 p with 3 to 8 rows at a time, 1.8-2.0 times with 2
 * and 2.0-2.2 with one (two runs). */
static double matvec(const double *restrict p, double *restrict q, long n, size_t s, long i0,
                     long i1)
{
    double pq = 0;
    long i = i0;

    for (; i + HPCLAB_POISSON_PRODUCT_ROWS - 1 <= i1; i += HPCLAB_POISSON_PRODUCT_ROWS)
        pq += product_rows(p, q, n, s, i, HPCLAB_POISSON_PRODUCT_ROWS);
    for (; i <= i1; i++)
        pq += product_rows(p, q, n, s, i, 1);
    return pq;
}

/* x += a p; r -= a q over m contiguous points; returns the local r.r */
static double update_xr(double *restrict x, double *restrict r, const double *restrict p,
                        const double *restrict q, double a, size_t m)
{
    double rr = 0;

#pragma omp simd reduction(+ : rr)
    for (size_t c = 0; c < m; c++) {
        x[c] += a * p[c];
        r[c] -= a * q[c];
        rr += r[c] * r[c];
    }
    return rr;
}

/* the local v.v over m contiguous points */
static double dot_self(const double *v, size_t m)
{
    double sum = 0;

#pragma omp simd reduction(+ : sum)
    for (size_t c = 0; c < m; c++)
        sum += v[c] * v[c];
    return sum;
}

/* p = r + b p over m contiguous points */
static void update_p(double *restrict p, const double *restrict r, double b, size_t m)
{
    for (size_t c = 0; c < m; c++)
        p[c] = r[c] + b * p[c];
}

/* q = 4 p over m contiguous points; returns p.q: the streams pass's matrix-vector product */
static double scale(const double *restrict p, double *restrict q, size_t m)
{
    double pq = 0;

#pragma omp simd reduction(+ : pq)
    for (size_t c = 0; c < m; c++) {
        q[c] = 4 * p[c];
        pq += p[c] * q[c];
    }
    return pq;
}

int hpclab_poisson_topo(MPI_Comm comm, long n, hpclab_topo *t, char *errmsg, size_t errlen)
{
    long global[2] = {n, n};
    int dims[2] = {0, 1};

    return hpclab_topo_create_aligned(comm, 2, global, dims, NULL, 1, HPCLAB_LINE_DOUBLES, t,
                                      errmsg, errlen);
}

double hpclab_poisson_streams(MPI_Comm comm, long rows, long n, int iterations, int repetitions)
{
    /* a = 1/4 and b = 1: per point r' = r - p and p' = r, a rotation of period 6 (x gains
     * p/4, which sums to 0 over a period): the values neither grow nor decay to denormal
     * numbers, however many iterations */
    const double a = 0.25, b = 1.0;
    const size_t s = (size_t)hpclab_round_up(n + 2, HPCLAB_LINE_DOUBLES);
    const size_t points = ((size_t)rows + 2) * s, m = (size_t)rows * s;
    const size_t lead = hpclab_row_lead(1, HPCLAB_LINE_DOUBLES); /* as a solve's */
    double *x = hpclab_alloc_doubles(points, lead, 0), *r = hpclab_alloc_doubles(points, lead, 0);
    double *p = hpclab_alloc_doubles(points, lead, 0), *q = hpclab_alloc_doubles(points, lead, 0);
    double best = -1, sink = 0;
    int wrong = rows < 1 || n < 1 || iterations < 1 || !(x && r && p && q);

    if (comm != MPI_COMM_NULL) /* all stop where one must: none is left in a reduction */
        MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, comm);
    for (int rep = 0; rep < repetitions && !wrong; rep++) {
        double t0, dt;

        for (size_t c = 0; c < points; c++) {
            x[c] = 0;
            r[c] = p[c] = (double)(c % 11) + 1;
            q[c] = 0;
        }
        if (comm != MPI_COMM_NULL)
            MPI_Barrier(comm);
        t0 = MPI_Wtime();
        for (int k = 0; k < iterations; k++) {
            double pq = scale(p + s, q + s, m), rr;

            if (comm != MPI_COMM_NULL) /* the solver's global p.q: every rank waits there */
                MPI_Allreduce(MPI_IN_PLACE, &pq, 1, MPI_DOUBLE, MPI_SUM, comm);
            rr = update_xr(x + s, r + s, p + s, q + s, a, m);
            if (comm != MPI_COMM_NULL) /* and its r.r */
                MPI_Allreduce(MPI_IN_PLACE, &rr, 1, MPI_DOUBLE, MPI_SUM, comm);
            sink += pq + rr;
            update_p(p + s, r + s, b, m);
        }
        dt = (MPI_Wtime() - t0) / iterations;
        best = best < 0 || dt < best ? dt : best;
        /* every point follows the same scalar recurrence from its start: check a few */
        for (size_t c = s; c < s + m && !wrong; c += m / 7 + 1) {
            double xx = 0, rr = (double)(c % 11) + 1, pp = rr;

            for (int k = 0; k < iterations; k++) {
                double qq = 4 * pp;

                xx += a * pp;
                rr -= a * qq;
                pp = rr + b * pp;
            }
            wrong = !(fabs(x[c] - xx) <= 1e-12 * (1 + fabs(xx))
                      && fabs(p[c] - pp) <= 1e-12 * (1 + fabs(pp)));
        }
        if (comm != MPI_COMM_NULL)
            MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT, MPI_MAX, comm);
    }
    if (!(x && r && p && q) || !(sink == sink))
        wrong = 1;
    hpclab_free_doubles(x, lead);
    hpclab_free_doubles(r, lead);
    hpclab_free_doubles(p, lead);
    hpclab_free_doubles(q, lead);
    return wrong ? -1 : best;
}

/* b = h^2 f at this block's points (halo zero) */
void hpclab_poisson_rhs(const hpclab_topo *t, double *b)
{
    const long n = t->global[1];
    const size_t s = (size_t)hpclab_topo_extent(t, 1);
    const double h = 1.0 / (double)(n + 1);

    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= n; j++)
            b[(size_t)i * s + (size_t)j] = h * h * hpclab_poisson_f(h * (double)(t->offset[0] + i),
                                                                    h * (double)j);
}

/* max |u - x| over this block */
double hpclab_poisson_error(const hpclab_topo *t, const double *x)
{
    const long n = t->global[1];
    const size_t s = (size_t)hpclab_topo_extent(t, 1);
    const double h = 1.0 / (double)(n + 1);
    double worst = 0;

    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= n; j++) {
            double e = fabs(x[(size_t)i * s + (size_t)j]
                            - hpclab_poisson_exact(h * (double)(t->offset[0] + i), h * (double)j));
            worst = e > worst ? e : worst;
        }
    return worst;
}

/* the local ||b - A x||^2, with q as scratch (x's halo rows are exchanged first) */
double hpclab_poisson_true_residual(const hpclab_topo *t, double *x, double *q)
{
    const long n = t->global[1];
    const size_t s = (size_t)hpclab_topo_extent(t, 1);
    const double h = 1.0 / (double)(n + 1);
    double sum = 0;

    hpclab_halo_exchange(t, x);
    matvec(x, q, n, s, 1, t->local[0]);
    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= n; j++) {
            const size_t c = (size_t)i * s + (size_t)j;
            double d = h * h * hpclab_poisson_f(h * (double)(t->offset[0] + i), h * (double)j) - q[c];

            sum += d * d;
        }
    return sum;
}

int hpclab_poisson_record(const hpclab_topo *t, double *x, double *q, long k, long iterations,
                          double rr, double rr0, const double *loc, double base, int rep,
                          int repetitions, double *times, char *msg, size_t msglen)
{
    const double kk = k > 0 ? (double)k : 1.0;
    double slowest[5], mine[3], sums[3], worst, e, rec, tru;

    MPI_Allreduce(loc, slowest, 5, MPI_DOUBLE, MPI_MAX, t->cart);
    e = hpclab_poisson_error(t, x);
    mine[0] = hpclab_poisson_true_residual(t, x, q);
    mine[1] = hpclab_vmrss();
    mine[2] = base;
    MPI_Allreduce(mine, sums, 3, MPI_DOUBLE, MPI_SUM, t->cart);
    MPI_Allreduce(&e, &worst, 1, MPI_DOUBLE, MPI_MAX, t->cart);
    rec = sqrt(rr / rr0);
    tru = sqrt(sums[0] / rr0);
    times[HPCLAB_POISSON_ITERATION * repetitions + rep] = slowest[4] / kk;
    times[HPCLAB_POISSON_MATVEC * repetitions + rep] = (slowest[0] + slowest[1]) / kk;
    times[HPCLAB_POISSON_HALO * repetitions + rep] = slowest[1] / kk;
    times[HPCLAB_POISSON_REDUCE * repetitions + rep] = slowest[2] / kk;
    times[HPCLAB_POISSON_UPDATE * repetitions + rep] = slowest[3] / kk;
    times[HPCLAB_POISSON_ITERATIONS * repetitions + rep] = (double)k;
    times[HPCLAB_POISSON_RESIDUAL * repetitions + rep] = rec;
    times[HPCLAB_POISSON_ERROR * repetitions + rep] = worst;
    times[HPCLAB_POISSON_RSS * repetitions + rep] = sums[1];
    times[HPCLAB_POISSON_RSS_BASE * repetitions + rep] = sums[2];
    msg[0] = 0;
    if (!iterations && !(rec <= HPCLAB_POISSON_TOL))
        snprintf(msg, msglen, "repetition %d: CG did not converge in %ld iterations "
                 "(relative residual %.3g): a wrong stencil, halo or update", rep, k, rec);
    else if (!(fabs(tru - rec) <= 1e-9 + 1e-3 * rec))
        snprintf(msg, msglen, "repetition %d: after %ld iterations the true residual "
                 "||b - Ax||/||b|| = %.6g differs from the recurrence's %.6g (a wrong "
                 "stencil, halo or update)", rep, k, tru, rec);
    return hpclab_fail_together(t->cart, msg[0] != 0, msg, msglen);
}

/* the interior of a block (no halo) to or from a contiguous lr x n array */
static void interior(const hpclab_topo *t, double *field, double *block)
{
    const long n = t->global[1];
    const size_t s = (size_t)hpclab_topo_extent(t, 1);

    for (long i = 1; i <= t->local[0]; i++)
        memcpy(block + (size_t)(i - 1) * (size_t)n, field + (size_t)i * s + 1,
               (size_t)n * sizeof *block);
}

double hpclab_poisson_product(const hpclab_topo *t, double *p, double *q, int interleave,
                             double *stamps)
{
    MPI_Request req[HPCLAB_HALO_REQUESTS];
    const long lr = t->local[0], n = t->global[1];
    const size_t s = (size_t)hpclab_topo_extent(t, 1);
    double pq, b, c, d;

    hpclab_halo_start(t, p, req);
    b = MPI_Wtime();
    pq = interleave && lr > 2 ? matvec(p, q, n, s, 2, lr - 1) : 0.0;
    c = MPI_Wtime();
    hpclab_halo_finish(req);
    if (hpclab_poisson_fault && t->rank == t->size - 1)
        p[1] += 1.0;
    d = MPI_Wtime();
    if (!interleave)
        pq = matvec(p, q, n, s, 1, lr);
    else if (lr > 0) {
        pq += matvec(p, q, n, s, 1, 1);
        if (lr > 1)
            pq += matvec(p, q, n, s, lr, lr);
    }
    if (stamps) {
        stamps[0] = b;
        stamps[1] = c;
        stamps[2] = d;
    }
    return pq;
}

int hpclab_poisson(MPI_Comm comm, long n, int interleave, long iterations, int repetitions,
                   double *uout, double *times, char *errmsg, size_t errlen)
{
    hpclab_topo t;
    int failed = 0, want = 0;
    size_t points, m, s, lead = 0;
    double *x = NULL, *r = NULL, *p = NULL, *q = NULL, *block = NULL, base;
    char msg[HPCLAB_ERRLEN] = "";

    if (n < 1 || iterations < 0 || repetitions < 1) {
        snprintf(errmsg, errlen, "bad arguments: n=%ld iterations=%ld repetitions=%d", n,
                 iterations, repetitions);
        return 1;
    }
    if (hpclab_poisson_topo(comm, n, &t, errmsg, errlen))
        return 1;
    want = t.rank == 0 && uout != NULL;
    MPI_Bcast(&want, 1, MPI_INT, 0, t.cart);
    base = hpclab_vmrss();
    points = hpclab_topo_points(&t);
    lead = hpclab_topo_lead(&t);
    s = (size_t)hpclab_topo_extent(&t, 1);
    m = (size_t)t.local[0] * s; /* the block's rows, halo columns and padding included */
    x = hpclab_alloc_doubles(points, lead, 0);
    r = hpclab_alloc_doubles(points, lead, 0);
    p = hpclab_alloc_doubles(points, lead, 0);
    q = hpclab_alloc_doubles(points, lead, 0);
    block = want ? hpclab_alloc((size_t)t.local[0] * (size_t)n * sizeof *block, 0) : NULL;
    if (!x || !r || !p || !q || (want && t.local[0] > 0 && !block)) {
        snprintf(msg, sizeof msg, "rank %d cannot allocate four vectors of %zu doubles",
                 t.rank, points);
        failed = 1;
    }
    if (hpclab_fail_together(t.cart, failed, msg, sizeof msg))
        goto done;

    for (int rep = 0; rep < repetitions && !failed; rep++) {
        const long cap = iterations ? iterations : 10 * n + 100;
        double loc[5] = {0, 0, 0, 0, 0}, rr, rr0, t0, mine[2];
        long k = 0;

        memset(x, 0, points * sizeof *x);
        memset(r, 0, points * sizeof *r);
        memset(q, 0, points * sizeof *q);
        hpclab_poisson_rhs(&t, r);
        memcpy(p, r, points * sizeof *p);
        mine[0] = dot_self(r + s, m);
        MPI_Allreduce(mine, &rr0, 1, MPI_DOUBLE, MPI_SUM, t.cart);
        rr = rr0;
        MPI_Barrier(t.cart);
        t0 = MPI_Wtime();
        while (k < cap && !(sqrt(rr) <= HPCLAB_POISSON_TOL * sqrt(rr0))) {
            double a = MPI_Wtime(), st[3], b, c, d, ee, f, g, h, i, pq, alpha, rrnew;

            mine[0] = hpclab_poisson_product(&t, p, q, interleave, st);
            ee = MPI_Wtime();
            b = st[0];
            c = st[1];
            d = st[2];
            MPI_Allreduce(mine, &pq, 1, MPI_DOUBLE, MPI_SUM, t.cart);
            f = MPI_Wtime();
            alpha = rr / pq;
            mine[1] = update_xr(x + s, r + s, p + s, q + s, alpha, m);
            g = MPI_Wtime();
            MPI_Allreduce(mine + 1, &rrnew, 1, MPI_DOUBLE, MPI_SUM, t.cart);
            h = MPI_Wtime();
            update_p(p + s, r + s, rrnew / rr, m);
            rr = rrnew;
            k++;
            i = MPI_Wtime();
            loc[0] += (c - b) + (ee - d);
            loc[1] += (b - a) + (d - c);
            loc[2] += (f - ee) + (h - g);
            loc[3] += (g - f) + (i - h);
        }
        MPI_Barrier(t.cart);
        loc[4] = MPI_Wtime() - t0;
        failed = hpclab_poisson_record(&t, x, q, k, iterations, rr, rr0, loc, base, rep,
                                       repetitions, times, msg, sizeof msg);
    }
    if (want && !failed) {
        interior(&t, x, block);
        failed = hpclab_topo_gather(&t, 0, block, uout);
    }

done:
    hpclab_free_doubles(x, lead);
    hpclab_free_doubles(r, lead);
    hpclab_free_doubles(p, lead);
    hpclab_free_doubles(q, lead);
    hpclab_free(block);
    hpclab_topo_free(&t);
    if (failed || msg[0]) {
        snprintf(errmsg, errlen, "%s", msg[0] ? msg : "rank 0 cannot allocate its requests");
        return 1;
    }
    return 0;
}
