/*
 * NAME
 *   jacobi.c - Jacobi sweeps of the 7-point stencil with a halo exchange (see jacobi.h).
 *
 * PURPOSE
 *   The kernel of report 001, section 4: every sweep exchanges one halo layer of faces with
 *   the neighbours of a 3D Cartesian decomposition (kernels/common/hpclab_topo.c: subarray
 *   datatypes, non-blocking sends and receives) and updates every point from its six
 *   neighbours. Compute and halo time are timed apart, so the model
 *   P = L^3 N / (T_s + T_c) can be checked term by term.
 *
 * NOTES
 *   Arrays hold (lx + 2) x (ly + 2) x (lz + 2) points in C order, one halo layer all
 *   round, each row padded to whole cache lines with its first interior point on a line
 *   (hpclab_jacobi_topo); at the global boundary the halo holds u = 0 and is never written. One lattice
 *   update reads u at seven points (six from cache when the planes fit) and f, and writes
 *   unew: 24 bytes from memory per update, 32 when a plain store first reads the line it
 *   writes (write-allocate); where the fields of the node's ranks pass
 *   hpclab_jacobi_set_streaming's threshold a rank stores past the cache instead (hpclab_simd.h) and moves the 24. The fields ask for
 *   transparent huge pages (madvise, where the kernel allows it): on 4 KiB pages the sweep
 *   ran 9-30% slower in paired runs of one core (TLB misses). Devito's allocator does not ask
 *   for them: where the machine gives huge pages only when asked, the bench says so beside
 *   its comparison with Devito.
 */
#include "jacobi.h"
#include "hpclab_common.h"
#include "hpclab_simd.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hpclab_jacobi_fault = 0;

/* rows padded to whole cache lines (hpclab_topo_set_align): the stored row is
 * hpclab_topo_extent(t, 2) doubles, not local[2] + 2 */
#define IDX(t, i, j, k) ((((size_t)(i)) * (size_t)((t)->local[1] + 2) + (size_t)(j)) \
                         * (size_t)hpclab_topo_extent(t, 2) + (size_t)(k))

int hpclab_jacobi_topo(MPI_Comm comm, const int *dims, const long *global, hpclab_topo *t,
                       char *errmsg, size_t errlen)
{
    return hpclab_topo_create_aligned(comm, 3, global, dims, NULL, 1, HPCLAB_LINE_DOUBLES, t,
                                      errmsg, errlen);
}

void hpclab_jacobi_dims(int decomposition, int *dims)
{
    for (int d = 0; d < 3; d++)
        dims[d] = d <= decomposition ? 0 : 1;
}

void hpclab_jacobi_weights(const hpclab_topo *t, double *w, double *diag)
{
    *diag = 0;
    for (int d = 0; d < 3; d++) {
        double h = 1.0 / (double)(t->global[d] + 1);

        w[d] = 1.0 / (h * h);
        *diag += 2 * w[d];
    }
}

/* u* = s_0(g0) s_1(g1) s_2(g2), s_d(g) = sin(pi (g + 1) / (global_d + 1)), 0 outside the
 * interior (the boundary). The check multiplies three factors per point from tables made
 * once instead of calling sin three times: a sweep timed after milliseconds of sin calls
 * (the check after each repetition) ran 8% slower over 20 sweeps than after none, one core,
 * L = 128, and as fast after the products. */
double *hpclab_jacobi_factors(const hpclab_topo *t)
{
    const size_t n = (size_t)(t->local[0] + t->local[1] + t->local[2] + 6);
    double *tab = malloc(n * sizeof *tab), *s = tab;

    for (int d = 0; tab && d < 3; s += t->local[d] + 2, d++)
        for (long i = 0; i <= t->local[d] + 1; i++) {
            const long g = t->offset[d] + i - 1;

            s[i] = g < 0 || g >= t->global[d]
                ? 0 : sin(M_PI * (double)(g + 1) / (double)(t->global[d] + 1));
        }
    return tab;
}

/* the factor tables of dimensions 0, 1, 2 in s[0], s[1], s[2], at local indices 0 .. local + 1 */
static void factor_tables(const hpclab_topo *t, const double *tab, const double *s[3])
{
    s[0] = tab;
    s[1] = s[0] + t->local[0] + 2;
    s[2] = s[1] + t->local[1] + 2;
}

void hpclab_jacobi_manufactured(const hpclab_topo *t, const double *factors, double *u,
                                double *f)
{
    double w[3], diag;
    const double *s[3];

    factor_tables(t, factors, s);
    hpclab_jacobi_weights(t, w, &diag);
    memset(u, 0, hpclab_topo_points(t) * sizeof *u);
    memset(f, 0, hpclab_topo_points(t) * sizeof *f);
    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= t->local[1]; j++)
            for (long k = 1; k <= t->local[2]; k++) {
                const double c = s[0][i] * s[1][j] * s[2][k];

                u[IDX(t, i, j, k)] = c;
                f[IDX(t, i, j, k)] = diag * c
                    - w[0] * (s[0][i - 1] + s[0][i + 1]) * s[1][j] * s[2][k]
                    - w[1] * s[0][i] * (s[1][j - 1] + s[1][j + 1]) * s[2][k]
                    - w[2] * s[0][i] * s[1][j] * (s[2][k - 1] + s[2][k + 1]);
            }
}

double hpclab_jacobi_error(const hpclab_topo *t, const double *factors, const double *u)
{
    double worst = 0;
    const double *s[3];
    int nan = 0;

    factor_tables(t, factors, s);
    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= t->local[1]; j++) {
            const double *row = u + IDX(t, i, j, 0), a = s[0][i] * s[1][j];

            for (long k = 1; k <= t->local[2]; k++) {
                const double e = fabs(row[k] - a * s[2][k]);

                nan |= e != e;
                worst = e > worst ? e : worst;
            }
        }
    return nan ? NAN : worst;
}

static size_t cache_budget = 0;
static size_t stream_above = SIZE_MAX;

static int stream_caches = 1;

void hpclab_jacobi_set_streaming(size_t above, int caches)
{
    stream_above = above;
    if (caches >= 1) /* else the count in force */
        stream_caches = caches;
}

size_t hpclab_jacobi_streaming(void)
{
    return stream_above;
}

int hpclab_jacobi_streaming_caches(void)
{
    return stream_caches;
}

int hpclab_jacobi_streamed(size_t points, int node_ranks)
{
    return points <= SIZE_MAX / (3 * sizeof(double))
        && hpclab_streams_past(3 * points * sizeof(double), node_ranks, stream_caches,
                               stream_above, HPCLAB_VW);
}

void hpclab_jacobi_set_cache(size_t budget)
{
    cache_budget = budget;
}

size_t hpclab_jacobi_cache(void)
{
    return cache_budget;
}

long hpclab_jacobi_block_rows(size_t budget, long ny, long nz)
{
    /* a row of one plane with its two halo points and its padding; a block of b rows reads
     * b + 2 of them
     * in each of the three planes */
    const size_t row = (size_t)hpclab_round_up(nz + 2, HPCLAB_LINE_DOUBLES) * sizeof(double);
    long b;

    if (budget == 0 || ny < 1 || 3 * (size_t)(ny + 2) * row <= budget)
        return ny < 1 ? 1 : ny;
    b = (long)(budget / (3 * row)) - 2;
    return b < 1 ? 1 : b;
}

/* unew = (sum of w * neighbours + f) / diag on the box [i0, i1] x [j0, j1] x [k0, k1],
 * in blocks of j rows (hpclab_jacobi_block_rows): each block through every plane i.
 * stream: the new values go past the cache (hpclab_simd.h) in groups of HPCLAB_VW, each
 * row's first points up to a group boundary and its last ones after the last whole group
 * with plain stores */
static void update(const hpclab_topo *t, const double *restrict u, const double *restrict f,
                   double *restrict unew, const double *w, double diag, int stream, long i0,
                   long i1, long j0, long j1, long k0, long k1)
{
    const size_t sy = (size_t)hpclab_topo_extent(t, 2);
    const size_t sx = (size_t)(t->local[1] + 2) * sy;
    const double w0 = w[0], w1 = w[1], w2 = w[2], inv = 1.0 / diag;
    const long rows = hpclab_jacobi_block_rows(cache_budget, t->local[1], t->local[2]);
#if HPCLAB_VW > 0
    const hpclab_vd v0 = hpclab_vset(w0), v1 = hpclab_vset(w1), v2 = hpclab_vset(w2);
    const hpclab_vd vinv = hpclab_vset(inv);
#endif

    for (long jb = j0; jb <= j1; jb += rows) {
        const long je = jb + rows - 1 < j1 ? jb + rows - 1 : j1;

        for (long i = i0; i <= i1; i++)
            for (long j = jb; j <= je; j++) {
                const size_t row = IDX(t, i, j, 0);
                long k = k0;

#if HPCLAB_VW > 0
                if (stream) {
                    const long head = k0 + hpclab_vpeel(unew + row + k0);

                    for (; k < head && k <= k1; k++) {
                        const size_t c = row + (size_t)k;

                        unew[c] = (w0 * (u[c - sx] + u[c + sx]) + w1 * (u[c - sy] + u[c + sy])
                                   + w2 * (u[c - 1] + u[c + 1]) + f[c]) * inv;
                    }
                    for (; k + HPCLAB_VW - 1 <= k1; k += HPCLAB_VW) {
                        const double *c = u + row + (size_t)k;
                        hpclab_vprefetch(c + sx);
                        hpclab_vprefetch(f + row + (size_t)k);
                        const hpclab_vd x = hpclab_vmul(v0, hpclab_vadd(hpclab_vload(c - sx),
                                                                        hpclab_vload(c + sx)));
                        const hpclab_vd y = hpclab_vmul(v1, hpclab_vadd(hpclab_vload(c - sy),
                                                                        hpclab_vload(c + sy)));
                        const hpclab_vd z = hpclab_vmul(v2, hpclab_vadd(hpclab_vload(c - 1),
                                                                        hpclab_vload(c + 1)));
                        const hpclab_vd s = hpclab_vadd(hpclab_vadd(hpclab_vadd(x, y), z),
                                                        hpclab_vload(f + row + (size_t)k));

                        hpclab_vstream(unew + row + (size_t)k, hpclab_vmul(s, vinv));
                    }
                }
#endif
                for (; k <= k1; k++) {
                    const size_t c = row + (size_t)k;

                    unew[c] = (w0 * (u[c - sx] + u[c + sx]) + w1 * (u[c - sy] + u[c + sy])
                               + w2 * (u[c - 1] + u[c + 1]) + f[c]) * inv;
                }
            }
    }
    if (stream)
        hpclab_vfence();
}

/* the points next to a face of the block (they read the halo) */
static void update_shell(const hpclab_topo *t, const double *u, const double *f, double *unew,
                         const double *w, double diag, int stream)
{
    const long lx = t->local[0], ly = t->local[1], lz = t->local[2];

    update(t, u, f, unew, w, diag, stream, 1, 1, 1, ly, 1, lz);
    update(t, u, f, unew, w, diag, stream, lx, lx, 1, ly, 1, lz);
    update(t, u, f, unew, w, diag, stream, 2, lx - 1, 1, 1, 1, lz);
    update(t, u, f, unew, w, diag, stream, 2, lx - 1, ly, ly, 1, lz);
    update(t, u, f, unew, w, diag, stream, 2, lx - 1, 2, ly - 1, 1, 1);
    update(t, u, f, unew, w, diag, stream, 2, lx - 1, 2, ly - 1, lz, lz);
}

/* copy between a halo-layout field and a contiguous block of this rank's interior */
static void interior(const hpclab_topo *t, double *field, double *block, int to_block)
{
    size_t n = 0;

    for (long i = 1; i <= t->local[0]; i++)
        for (long j = 1; j <= t->local[1]; j++) {
            double *row = field + IDX(t, i, j, 1);

            if (to_block)
                memcpy(block + n, row, (size_t)t->local[2] * sizeof *row);
            else
                memcpy(row, block + n, (size_t)t->local[2] * sizeof *row);
            n += (size_t)t->local[2];
        }
}

double hpclab_jacobi_streams(long l, int sweeps, int repetitions, int node_ranks)
{
    /* the sweep's layout: rows padded to whole cache lines, column 1 on a line */
    const size_t sy = (size_t)hpclab_round_up(l + 2, HPCLAB_LINE_DOUBLES);
    const size_t sx = sy * (size_t)(l + 2), n = sx * (size_t)(l + 2);
    const size_t lead = hpclab_row_lead(1, HPCLAB_LINE_DOUBLES);
    double *u = hpclab_alloc_doubles(n, lead, 1), *f = hpclab_alloc_doubles(n, lead, 1);
    double *unew = hpclab_alloc_doubles(n, lead, 1), best = -1;
    int wrong = 0;
    const int stream = hpclab_jacobi_streamed(n, node_ranks);

    if (u && f && unew && l >= 1 && sweeps >= 1) {
        for (size_t c = 0; c < n; c++) {
            u[c] = (double)(c % 7);
            f[c] = 1;
        }
        for (int r = 0; r < repetitions; r++) {
            double t0 = MPI_Wtime(), dt;

            for (int s = 0; s < sweeps; s++) {
                double *swap;

                for (long i = 1; i <= l; i++)
                    for (long j = 1; j <= l; j++) {
                        const size_t row = (size_t)i * sx + (size_t)j * sy;
                        long k = 1;

#if HPCLAB_VW > 0
                        if (stream) {
                            const long head = 1 + hpclab_vpeel(unew + row + 1);

                            for (; k < head && k <= l; k++)
                                unew[row + (size_t)k] = u[row + (size_t)k + sx] + f[row + (size_t)k];
                            for (; k + HPCLAB_VW - 1 <= l; k += HPCLAB_VW)
                                hpclab_vstream(unew + row + (size_t)k,
                                               hpclab_vadd(hpclab_vload(u + row + (size_t)k + sx),
                                                           hpclab_vload(f + row + (size_t)k)));
                        }
#endif
                        for (; k <= l; k++)
                            unew[row + (size_t)k] = u[row + (size_t)k + sx] + f[row + (size_t)k];
                    }
                if (stream)
                    hpclab_vfence();
                swap = u;
                u = unew;
                unew = swap;
            }
            dt = (MPI_Wtime() - t0) / sweeps;
            best = best < 0 || dt < best ? dt : best;
        }
        /* after the swap u holds the last pass's output and unew its input: check the
         * first interior row of every plane against that input */
        for (long i = 1; i <= l && !wrong; i++)
            for (long k = 1; k <= l && !wrong; k++) {
                const size_t c = (size_t)i * sx + sy + (size_t)k;

                wrong = u[c] != unew[c + sx] + f[c];
            }
    }
    hpclab_free_doubles(u, lead);
    hpclab_free_doubles(f, lead);
    hpclab_free_doubles(unew, lead);
    return wrong ? -1 : best;
}

int hpclab_jacobi(MPI_Comm comm, int decomposition, long nx, long ny, long nz, int overlap,
                  int sweeps, int repetitions, const double *u0, double *uout, double *times,
                  char *errmsg, size_t errlen)
{
    hpclab_topo t;
    long global[3] = {nx, ny, nz};
    int dims[3], given, failed = 0, stream;
    size_t points, nlocal, lead = 0;
    double *u = NULL, *unew = NULL, *f = NULL, *block = NULL, *factors = NULL, w[3], diag;
    char msg[HPCLAB_ERRLEN] = "";

    if (decomposition < 0 || decomposition >= HPCLAB_JACOBI_NDECOMPOSITIONS || nx < 1
        || ny < 1 || nz < 1 || sweeps < 1 || repetitions < 1) {
        snprintf(errmsg, errlen, "bad arguments: decomposition=%d grid=%ldx%ldx%ld sweeps=%d "
                 "repetitions=%d", decomposition, nx, ny, nz, sweeps, repetitions);
        return 1;
    }
    hpclab_jacobi_dims(decomposition, dims);
    if (hpclab_jacobi_topo(comm, dims, global, &t, errmsg, errlen))
        return 1;
    given = t.rank == 0 && u0 != NULL;
    MPI_Bcast(&given, 1, MPI_INT, 0, t.cart);
    points = hpclab_topo_points(&t);
    stream = hpclab_jacobi_streamed(points, hpclab_node_ranks(t.cart));
    lead = hpclab_topo_lead(&t);
    nlocal = (size_t)t.local[0] * (size_t)t.local[1] * (size_t)t.local[2];
    u = hpclab_alloc_doubles(points, lead, 1);
    unew = hpclab_alloc_doubles(points, lead, 1);
    f = hpclab_alloc_doubles(points, lead, 1);
    block = given ? hpclab_alloc(nlocal * sizeof *block, 0) : NULL;
    factors = hpclab_jacobi_factors(&t);
    if (!u || !unew || !f || !factors || (given && !block)) {
        snprintf(msg, sizeof msg, "rank %d cannot allocate the fields of %zu points", t.rank,
                 points);
        failed = 1;
    }
    if (hpclab_fail_together(t.cart, failed, msg, sizeof msg))
        goto done;
    hpclab_jacobi_weights(&t, w, &diag);
    hpclab_jacobi_manufactured(&t, factors, u, f);
    if (given) {
        failed = hpclab_topo_scatter(&t, 0, u0, block);
        interior(&t, u, block, 0);
    }
    memcpy(unew, u, points * sizeof *u); /* the halo of unew: the boundary's zeros */

    for (int r = 0; r < repetitions && !failed; r++) {
        double t0, local[3] = {0, 0, 0}, slowest[3];
        const long lx = t.local[0], ly = t.local[1], lz = t.local[2];

        MPI_Barrier(t.cart);
        t0 = MPI_Wtime();
        for (int s = 0; s < sweeps; s++) {
            MPI_Request req[HPCLAB_HALO_REQUESTS];
            double a = MPI_Wtime(), b, c, d;
            double *swap;

            hpclab_halo_start(&t, u, req);
            b = MPI_Wtime();
            if (overlap)
                update(&t, u, f, unew, w, diag, stream, 2, lx - 1, 2, ly - 1, 2, lz - 1);
            c = MPI_Wtime();
            hpclab_halo_finish(req);
            if (hpclab_jacobi_fault && t.rank == t.size - 1)
                u[IDX(&t, 0, 1, 1)] += 1.0;
            d = MPI_Wtime();
            if (overlap)
                update_shell(&t, u, f, unew, w, diag, stream);
            else
                update(&t, u, f, unew, w, diag, stream, 1, lx, 1, ly, 1, lz);
            local[0] += (c - b) + (MPI_Wtime() - d); /* compute */
            local[1] += (b - a) + (d - c);           /* halo: start and wait */
            swap = u;
            u = unew;
            unew = swap;
        }
        MPI_Barrier(t.cart);
        local[2] = MPI_Wtime() - t0;
        MPI_Allreduce(local, slowest, 3, MPI_DOUBLE, MPI_MAX, t.cart);
        times[HPCLAB_JACOBI_SWEEP * repetitions + r] = slowest[2] / sweeps;
        times[HPCLAB_JACOBI_COMPUTE * repetitions + r] = slowest[0] / sweeps;
        times[HPCLAB_JACOBI_HALO * repetitions + r] = slowest[1] / sweeps;
        times[HPCLAB_JACOBI_CUT * repetitions + r] = t.cut;
        if (!given) {
            double e = hpclab_jacobi_error(&t, factors, u);

            if (!(e <= 1e-10))
                snprintf(msg, sizeof msg, "repetition %d, rank %d of %d: after %d sweeps the "
                         "field is %.3g away from the solution it started at (a fixed point: "
                         "a wrong halo or stencil)", r, t.rank, t.size, sweeps, e);
        }
        if (hpclab_fail_together(t.cart, msg[0] != 0, msg, sizeof msg))
            failed = 1;
    }
    if (given && !failed) {
        interior(&t, u, block, 1);
        failed = hpclab_topo_gather(&t, 0, block, uout);
    }

done:
    hpclab_free_doubles(u, lead);
    hpclab_free_doubles(unew, lead);
    hpclab_free_doubles(f, lead);
    hpclab_free(block);
    free(factors);
    hpclab_topo_free(&t);
    if (failed || msg[0]) {
        snprintf(errmsg, errlen, "%s", msg[0] ? msg : "rank 0 cannot allocate its requests");
        return 1;
    }
    return 0;
}
