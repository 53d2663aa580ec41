/*
 * NAME
 *   smpi_driver.h - what every SMPI driver shares: parse sizes, hand results to Python.
 */
#ifndef HPCLAB_SMPI_DRIVER_H
#define HPCLAB_SMPI_DRIVER_H

#include <stdio.h>
#include <stdlib.h>
#include <mpi.h>

/* One result line for hpclab.protocol: HPCLAB-JSON {"nbytes": n, "times": [...]}. */
static void hpclab_emit_times(size_t nbytes, const double *times, int repetitions)
{
    printf("HPCLAB-JSON {\"nbytes\": %zu, \"times\": [", nbytes);
    for (int r = 0; r < repetitions; r++)
        printf("%s%.9e", r ? ", " : "", times[r]);
    printf("]}\n");
    fflush(stdout);
}

/* MPI_Init, then this rank, or -1 (after a usage line from rank 0 and MPI_Finalize) when
 * the command line has not `nargs` arguments (at least `nargs` when `more`, a list of sizes
 * following): the driver then exits with 2. */
static int hpclab_driver_start(int *argc, char ***argv, int nargs, int more, const char *usage)
{
    int rank;

    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (*argc < nargs + 1 || (!more && *argc != nargs + 1)) {
        if (rank == 0)
            fprintf(stderr, "usage: %s %s\n", (*argv)[0], usage);
        MPI_Finalize();
        return -1;
    }
    return rank;
}

/* Say what failed (rank 0), free, finalize; the driver's exit code. */
static int hpclab_driver_fail(int rank, const char *kernel, const char *errmsg, double *times)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s\n", kernel, errmsg);
    free(times);
    MPI_Finalize();
    return 1;
}

/* The process grid the real MPI libraries give, set by the driver from its command line:
 * SMPI's own MPI_Dims_create splits 25 ranks as 25x1x1 where MPICH and Open MPI give
 * 5x5x1, so a driver whose kernel asks for a grid hands it this one instead. */
static int hpclab_grid[3];

int MPI_Dims_create(int nnodes, int ndims, int dims[])
{
    int product = 1, fixed = 1, first_free = -1;
    for (int d = 0; d < ndims; d++) {
        if (dims[d] > 0)
            fixed *= dims[d];
        else if (first_free < 0)
            first_free = d;
    }
    for (int d = 0; d < ndims; d++) {
        if (dims[d] == 0) {
            if (d < 3 && hpclab_grid[d] > 0)
                dims[d] = hpclab_grid[d];
            else  /* no grid given (a 1D ring, rows of a 2D mesh): all in the first free one */
                dims[d] = d == first_free && fixed > 0 ? nnodes / fixed : 1;
        }
        product *= dims[d];
    }
    return product == nnodes ? MPI_SUCCESS : MPI_ERR_DIMS;
}

#endif
