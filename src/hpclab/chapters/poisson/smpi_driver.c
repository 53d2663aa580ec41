/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_poisson (CG on the 2D Poisson problem) on a simulated
 *   platform.
 *
 * USAGE
 *   smpirun -np P ... poisson N INTERLEAVE ITERATIONS REPETITIONS
 *   Rank 0 prints HPCLAB-JSON {"nbytes": N, "times": [...]}: the kernel's metrics, metric by
 *   metric, each over the repetitions (poisson.h). The kernel is poisson.c, compiled
 *   unchanged, and checks its true residual after every solve as it does under mpiexec.
 */
#include "smpi_driver.h"
#include "poisson.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 4, 0, "N INTERLEAVE ITERATIONS REPETITIONS");
    if (rank < 0)
        return 2;
    long n = atol(argv[1]), iterations = atol(argv[3]);
    int interleave = atoi(argv[2]), repetitions = atoi(argv[4]);
    int count = HPCLAB_POISSON_NMETRICS * (repetitions > 0 ? repetitions : 1);
    double *times = malloc(sizeof(double) * (size_t)count);
    if (hpclab_poisson(MPI_COMM_WORLD, n, interleave, iterations, repetitions, NULL, times,
                       errmsg, sizeof errmsg))
        return hpclab_driver_fail(rank, "poisson", errmsg, times);
    if (rank == 0)
        hpclab_emit_times((size_t)n, times, count);
    free(times);
    MPI_Finalize();
    return 0;
}
