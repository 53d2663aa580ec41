/*
 * NAME
 *   amdahl.c - the matrix addition of report 001, section 2, phase by phase.
 *
 * PURPOSE
 *   Rank 0 creates two 3D arrays of doubles, hands every rank its block of each,
 *   every rank adds its blocks, and rank 0 collects the sum. Creation and collection
 *   are serial (rank 0 alone); distribution is serial on rank 0's side; only the
 *   addition runs on every rank. Timing the four phases separately measures the serial
 *   fraction of Amdahl's law instead of guessing it.
 *
 * USAGE
 *   hpclab_amdahl(comm, HPCLAB_AMDAHL_3D, 2400, 100, 100, repetitions, 0, times,
 *                 errmsg, sizeof errmsg)
 *   from C, or hpclab.chapters.amdahl.kernels.run_c(comm, "3d", 2400, 100, 100) from Python.
 *
 * DISTRIBUTIONS
 *   none  the flattened array in P contiguous pieces, MPI_Scatterv / MPI_Gatherv:
 *         what report 001 did for every topology.
 *   1d    a P x 1 x 1 process grid: slabs, contiguous in memory.
 *   2d    a px x py x 1 grid from MPI_Dims_create: pencils, strided.
 *   3d    a px x py x pz grid: cubes, strided in two dimensions.
 *   For the grids rank 0 sends each block as one MPI subarray datatype of the global
 *   array (kernels/common/hpclab_topo.c), so the topology decides what each rank
 *   receives. Extents that do not divide give blocks that differ by one plane.
 *
 * NOTES
 *   The barriers that separate the phases are not part of the report's program;
 *   they cost microseconds against phases of milliseconds. The check (every element
 *   of C against A + B, on rank 0) is not timed.
 */
#include "amdahl.h"
#include "hpclab_common.h"
#include "hpclab_topo.h"

#include <stdio.h>
#include <stdlib.h>

long hpclab_amdahl_fault_element = -1;

/* static, so that the fill loop inlines it: an exported function of a shared library may
 * be interposed at load time, and the compiler then calls it for every element */
static inline double value(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL + i + 0x632BE59BD9B4E019ULL;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

double hpclab_amdahl_value(uint64_t seed, uint64_t i)
{
    return value(seed, i);
}

void hpclab_amdahl_fill(double *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        a[i] = value(seed, i);
}

long hpclab_amdahl_first_wrong(const double *a, const double *b, const double *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (c[i] != a[i] + b[i])
            return (long)i;
    return -1;
}

void hpclab_amdahl_dims(int distribution, int *dims)
{
    for (int d = 0; d < 3; d++)
        dims[d] = d < distribution ? 0 : 1;
    if (distribution == HPCLAB_AMDAHL_NONE)
        dims[0] = 0;
}

static void add(const double *restrict a, const double *restrict b, double *restrict c,
                size_t n)
{
    for (size_t i = 0; i < n; i++)
        c[i] = a[i] + b[i];
}

int hpclab_amdahl(MPI_Comm comm, int distribution, long nx, long ny, long nz, int repetitions,
                  int hugepages, double *times, char *errmsg, size_t errlen)
{
    hpclab_topo t;
    MPI_Comm work = comm;
    long global[3] = {nx, ny, nz};
    int dims[3], rank, size, grid = distribution != HPCLAB_AMDAHL_NONE, failed = 0;
    int *counts = NULL, *displs = NULL;
    size_t n = (size_t)nx * (size_t)ny * (size_t)nz, nlocal = 1;
    double *A = NULL, *B = NULL, *C = NULL, *a = NULL, *b = NULL, *c = NULL;
    char msg[HPCLAB_ERRLEN] = "";

    if (distribution < 0 || distribution >= HPCLAB_AMDAHL_NDISTRIBUTIONS || nx < 1 || ny < 1
        || nz < 1 || repetitions < 1) {
        snprintf(errmsg, errlen, "bad arguments: distribution=%d shape=%ldx%ldx%ld "
                 "repetitions=%d", distribution, nx, ny, nz, repetitions);
        return 1;
    }
    if (grid) {
        hpclab_amdahl_dims(distribution, dims);
        if (hpclab_topo_create(comm, 3, global, dims, NULL, &t, errmsg, errlen))
            return 1;
        work = t.cart;
    }
    MPI_Comm_rank(work, &rank);
    MPI_Comm_size(work, &size);
    if (!grid) {
        long offset, count;

        hpclab_block_range((long)n, size, rank, &offset, &count);
        nlocal = (size_t)count;
        if (rank == 0) {
            counts = malloc((size_t)size * sizeof *counts);
            displs = malloc((size_t)size * sizeof *displs);
            if (!counts || !displs) {
                snprintf(msg, sizeof msg, "cannot allocate the counts of %d ranks", size);
                failed = 1;
            } else {
                for (int r = 0; r < size; r++) {
                    hpclab_block_range((long)n, size, r, &offset, &count);
                    counts[r] = (int)count;
                    displs[r] = (int)offset;
                }
            }
        }
    } else {
        for (int d = 0; d < 3; d++)
            nlocal *= (size_t)t.local[d];
    }
    if (n > 2147483647UL && distribution == HPCLAB_AMDAHL_NONE) {
        snprintf(msg, sizeof msg, "%zu elements do not fit the int displacements of "
                 "MPI_Scatterv: use a topology or fewer than 2^31 elements", n);
        failed = 1;
    }
    if (rank == 0 && !failed) {
        A = hpclab_alloc(n * sizeof *A, hugepages);
        B = hpclab_alloc(n * sizeof *B, hugepages);
        C = hpclab_alloc(n * sizeof *C, hugepages);
        if (!A || !B || !C) {
            snprintf(msg, sizeof msg, "rank 0 cannot allocate three arrays of %zu doubles", n);
            failed = 1;
        }
    }
    if (!failed) {
        size_t bytes = (nlocal ? nlocal : 1) * sizeof(double); /* a rank may get nothing */

        a = hpclab_alloc(bytes, hugepages);
        b = hpclab_alloc(bytes, hugepages);
        c = hpclab_alloc(bytes, hugepages);
        if (!a || !b || !c) {
            snprintf(msg, sizeof msg, "rank %d cannot allocate three blocks of %zu doubles",
                     rank, nlocal);
            failed = 1;
        }
    }
    if (hpclab_fail_together(work, failed, msg, sizeof msg))
        goto done;

    for (int r = 0; r < repetitions && !failed; r++) {
        double t0, phase[HPCLAB_AMDAHL_NPHASES] = {0};

        MPI_Barrier(work);
        t0 = MPI_Wtime();
        if (rank == 0) {
            hpclab_amdahl_fill(A, n, 2 * (uint64_t)r);
            hpclab_amdahl_fill(B, n, 2 * (uint64_t)r + 1);
        }
        MPI_Barrier(work);
        phase[HPCLAB_AMDAHL_CREATE] = MPI_Wtime() - t0;

        t0 = MPI_Wtime();
        if (distribution == HPCLAB_AMDAHL_NONE) {
            MPI_Scatterv(A, counts, displs, MPI_DOUBLE, a, (int)nlocal, MPI_DOUBLE, 0, work);
            MPI_Scatterv(B, counts, displs, MPI_DOUBLE, b, (int)nlocal, MPI_DOUBLE, 0, work);
        } else {
            failed |= hpclab_topo_scatter(&t, 0, A, a);
            failed |= hpclab_topo_scatter(&t, 0, B, b);
        }
        MPI_Barrier(work);
        phase[HPCLAB_AMDAHL_DISTRIBUTE] = MPI_Wtime() - t0;

        t0 = MPI_Wtime();
        add(a, b, c, nlocal);
        MPI_Barrier(work);
        phase[HPCLAB_AMDAHL_ADD] = MPI_Wtime() - t0;
        if (hpclab_amdahl_fault_element >= 0 && rank == size - 1
            && (size_t)hpclab_amdahl_fault_element < nlocal)
            c[hpclab_amdahl_fault_element] += 1.0;

        t0 = MPI_Wtime();
        if (distribution == HPCLAB_AMDAHL_NONE)
            MPI_Gatherv(c, (int)nlocal, MPI_DOUBLE, C, counts, displs, MPI_DOUBLE, 0, work);
        else
            failed |= hpclab_topo_gather(&t, 0, c, C);
        MPI_Barrier(work);
        phase[HPCLAB_AMDAHL_COLLECT] = MPI_Wtime() - t0;

        for (int p = 0; p < HPCLAB_AMDAHL_TOTAL; p++)
            phase[HPCLAB_AMDAHL_TOTAL] += phase[p];
        MPI_Bcast(phase, HPCLAB_AMDAHL_NPHASES, MPI_DOUBLE, 0, work);
        for (int p = 0; p < HPCLAB_AMDAHL_NPHASES; p++)
            times[p * repetitions + r] = phase[p];

        if (failed) {
            snprintf(msg, sizeof msg, "rank 0 cannot allocate the requests of %d blocks", size);
        } else if (rank == 0) {
            long i = hpclab_amdahl_first_wrong(A, B, C, n);

            if (i >= 0)
                snprintf(msg, sizeof msg, "repetition %d, %d ranks: element %ld of C is %.17g, "
                         "A + B is %.17g", r, size, i, C[i], A[i] + B[i]);
        }
        if (hpclab_fail_together(work, msg[0] != 0, msg, sizeof msg))
            failed = 1;
    }

done:
    hpclab_free(A);
    hpclab_free(B);
    hpclab_free(C);
    hpclab_free(a);
    hpclab_free(b);
    hpclab_free(c);
    free(counts);
    free(displs);
    if (grid)
        hpclab_topo_free(&t);
    if (failed || msg[0]) {
        snprintf(errmsg, errlen, "%s", msg);
        return 1;
    }
    return 0;
}
