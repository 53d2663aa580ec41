/*
 * NAME
 *   stream.c - sustainable memory bandwidth: STREAM's four kernels.
 *
 * PURPOSE
 *   copy   c = a          16 bytes per element
 *   scale  b = s*c        16 bytes
 *   add    c = a + b      24 bytes
 *   triad  a = b + s*c    24 bytes
 *   The byte counts are STREAM's: what the kernel reads and writes, not the
 *   extra read of the written line that a write-allocate cache performs.
 *
 * USAGE
 *   hpclab_stream(MPI_COMM_NULL, n, ntimes, nthreads, hugepages, times,
 *                 errmsg, sizeof errmsg)
 *   from C, or hpclab.chapters.stream.kernels.run_c(n, ntimes, threads) from Python.
 *
 * NOTES
 *   Follows STREAM 5.10's rules: a, b, c start at 1, 2, 0 and a is doubled
 *   once; every trial runs copy, scale, add and triad in order; the caller
 *   drops the first trial and reports the best of the rest. Arrays come from
 *   fresh pages and are first written inside a parallel loop with the
 *   kernels' static schedule, so each thread's part lives on its NUMA node.
 *   Compile with -fno-tree-loop-distribute-patterns, or gcc replaces the copy
 *   loop by a call to memcpy (non-temporal stores, a different benchmark).
 */
#include "stream.h"
#include "hpclab_common.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>

long hpclab_stream_fault_index = -1;

void hpclab_stream_expected(int ntimes, double *aj, double *bj, double *cj)
{
    const double s = HPCLAB_STREAM_SCALAR;
    double a = 2.0 * 1.0, b = 2.0, c = 0.0;

    for (int k = 0; k < ntimes; k++) {
        c = a;
        b = s * c;
        c = a + b;
        a = b + s * c;
    }
    *aj = a;
    *bj = b;
    *cj = c;
}

void hpclab_stream_errors(const double *a, const double *b, const double *c, size_t n,
                          int ntimes, int nthreads, double err[3])
{
    double aj, bj, cj, sa = 0.0, sb = 0.0, sc = 0.0;
    const long len = (long)n;

    hpclab_stream_expected(ntimes, &aj, &bj, &cj);
#pragma omp parallel for schedule(static) num_threads(nthreads) reduction(+ : sa, sb, sc)
    for (long j = 0; j < len; j++) {
        sa += fabs(a[j] - aj);
        sb += fabs(b[j] - bj);
        sc += fabs(c[j] - cj);
    }
    err[0] = fabs(sa / (double)n / aj);
    err[1] = fabs(sb / (double)n / bj);
    err[2] = fabs(sc / (double)n / cj);
}

static void sync(MPI_Comm comm)
{
    if (comm != MPI_COMM_NULL)
        MPI_Barrier(comm);
}

/* Non-zero when this rank (or, with a communicator, any rank) failed; then
 * errmsg holds the first failing rank's message on every rank. */
static int agree(MPI_Comm comm, int failed, char *errmsg, size_t errlen)
{
    if (comm == MPI_COMM_NULL)
        return failed;
    return hpclab_fail_together(comm, failed, errmsg, errlen);
}

int hpclab_stream(MPI_Comm comm, size_t n, int ntimes, int nthreads, int hugepages,
                  double *times, char *errmsg, size_t errlen)
{
    const double s = HPCLAB_STREAM_SCALAR;
    const long len = (long)n;
    const size_t bytes = n * sizeof(double);
    double *a, *b, *c, err[3];
    int counted = 0, status = 0;

    if (n < 1 || n > (size_t)1 << 40 || ntimes < 2 || ntimes > HPCLAB_STREAM_MAX_NTIMES
        || nthreads < 1) {
        snprintf(errmsg, errlen, "bad arguments: n=%zu ntimes=%d (2..%d) nthreads=%d", n, ntimes,
                 HPCLAB_STREAM_MAX_NTIMES, nthreads);
        return 1;
    }
    a = hpclab_alloc_untouched(bytes, hugepages);
    b = hpclab_alloc_untouched(bytes, hugepages);
    c = hpclab_alloc_untouched(bytes, hugepages);
    if (!a || !b || !c) {
        snprintf(errmsg, errlen, "cannot allocate three arrays of %zu bytes", bytes);
        status = 1;
    } else {
#pragma omp parallel num_threads(nthreads)
        {
#pragma omp atomic
            counted++;
        }
        if (counted != nthreads) {
            snprintf(errmsg, errlen, "asked for %d OpenMP threads, got %d (OMP_THREAD_LIMIT or "
                     "OMP_DYNAMIC?)", nthreads, counted);
            status = 1;
        }
    }
    if (agree(comm, status, errmsg, errlen)) {
        status = 1;
        goto done;
    }

    /* first touch, with the kernels' schedule */
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (long j = 0; j < len; j++) {
        a[j] = 1.0;
        b[j] = 2.0;
        c[j] = 0.0;
    }
#pragma omp parallel for schedule(static) num_threads(nthreads)
    for (long j = 0; j < len; j++)
        a[j] = 2.0 * a[j];

    for (int k = 0; k < ntimes; k++) {
        double t;

        sync(comm);
        t = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (long j = 0; j < len; j++)
            c[j] = a[j];
        times[0 * ntimes + k] = omp_get_wtime() - t;

        sync(comm);
        t = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (long j = 0; j < len; j++)
            b[j] = s * c[j];
        times[1 * ntimes + k] = omp_get_wtime() - t;

        sync(comm);
        t = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (long j = 0; j < len; j++)
            c[j] = a[j] + b[j];
        times[2 * ntimes + k] = omp_get_wtime() - t;

        sync(comm);
        t = omp_get_wtime();
#pragma omp parallel for schedule(static) num_threads(nthreads)
        for (long j = 0; j < len; j++)
            a[j] = b[j] + s * c[j];
        times[3 * ntimes + k] = omp_get_wtime() - t;
    }

    if (hpclab_stream_fault_index >= 0 && (size_t)hpclab_stream_fault_index < n)
        a[hpclab_stream_fault_index] = 0.0;
    hpclab_stream_errors(a, b, c, n, ntimes, nthreads, err);
    for (int i = 0; i < 3; i++) {
        if (!(err[i] <= HPCLAB_STREAM_EPSILON)) {
            snprintf(errmsg, errlen, "failed validation: array %c has an average relative error "
                     "of %.3e (more than %.0e)", "abc"[i], err[i], HPCLAB_STREAM_EPSILON);
            status = 1;
            break;
        }
    }
    status = agree(comm, status, errmsg, errlen) != 0;

done:
    hpclab_free_untouched(a, bytes);
    hpclab_free_untouched(b, bytes);
    hpclab_free_untouched(c, bytes);
    return status;
}
