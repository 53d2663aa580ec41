/*
 * NAME
 *   amdahl.h - C = A + B on 3D arrays that rank 0 creates, distributes and collects:
 *   a program with a serial part and a parallel part, timed phase by phase.
 */
#ifndef HPCLAB_AMDAHL_H
#define HPCLAB_AMDAHL_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

/* How rank 0 hands out the arrays. */
enum hpclab_amdahl_distribution {
    HPCLAB_AMDAHL_NONE = 0, /* no topology: MPI_Scatterv/MPI_Gatherv of the flattened array */
    HPCLAB_AMDAHL_1D = 1,   /* blocks of a 1D process grid (P x 1 x 1), subarray datatypes */
    HPCLAB_AMDAHL_2D = 2,   /* a 2D grid (MPI_Dims_create over the first two dimensions) */
    HPCLAB_AMDAHL_3D = 3,   /* a 3D grid (MPI_Dims_create over all three) */
    HPCLAB_AMDAHL_NDISTRIBUTIONS = 4
};

/* The phases of one repetition, in the order of the times array. */
enum hpclab_amdahl_phase {
    HPCLAB_AMDAHL_CREATE = 0,     /* rank 0 fills A and B (serial) */
    HPCLAB_AMDAHL_DISTRIBUTE = 1, /* every rank receives its blocks of A and B */
    HPCLAB_AMDAHL_ADD = 2,        /* every rank adds its blocks (parallel) */
    HPCLAB_AMDAHL_COLLECT = 3,    /* rank 0 receives every block of C */
    HPCLAB_AMDAHL_TOTAL = 4,      /* the four together */
    HPCLAB_AMDAHL_NPHASES = 5
};

/*
 * Run `repetitions` times the whole program on arrays of nx x ny x nz doubles (C order):
 * rank 0 fills A and B with hpclab_amdahl_value (seeds 2r and 2r + 1 in repetition r),
 * distributes them, every rank adds its blocks, rank 0 collects C and checks every
 * element against A + B (not timed). Each phase is timed between two barriers
 * (MPI_Wtime on rank 0, so a phase ends when its slowest rank is done):
 * times[phase * repetitions + r] in seconds.
 *
 * Collective on comm. Returns 0, or non-zero on every rank with errmsg set when any
 * rank failed (bad arguments, allocation, a wrong element).
 */
int hpclab_amdahl(MPI_Comm comm, int distribution, long nx, long ny, long nz, int repetitions,
                  int hugepages, double *times, char *errmsg, size_t errlen);

/* Element i of the array created with `seed`: a double in [0, 1) (splitmix64). */
double hpclab_amdahl_value(uint64_t seed, uint64_t i);

/* Fill a[0 .. n) with hpclab_amdahl_value(seed, i). */
void hpclab_amdahl_fill(double *a, size_t n, uint64_t seed);

/* The answer check every compiled implementation uses: -1 when c[i] == a[i] + b[i]
 * for every i < n, else the first i where it is not. */
long hpclab_amdahl_first_wrong(const double *a, const double *b, const double *c, size_t n);

/* The process grid of a distribution: dims[3] for hpclab_topo_create (0: MPI chooses). */
void hpclab_amdahl_dims(int distribution, int *dims);

/* Test hook: when >= 0, the last rank adds 1 to element hpclab_amdahl_fault_element of
 * its block of C, so tests can prove that a wrong sum is caught. */
extern long hpclab_amdahl_fault_element;

#endif
