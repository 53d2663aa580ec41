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

/* Say what failed (rank 0), free, finalize; the driver's exit code. */
static int hpclab_driver_fail(int rank, const char *kernel, const char *errmsg, double *times)
{
    if (rank == 0)
        fprintf(stderr, "%s: %s\n", kernel, errmsg);
    free(times);
    MPI_Finalize();
    return 1;
}

#endif
