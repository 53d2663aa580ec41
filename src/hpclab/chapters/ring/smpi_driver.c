/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_ring on a simulated platform.
 *
 * USAGE
 *   smpirun -np P ... ring VARIANT WARMUP ITERATIONS REPETITIONS NBYTES...
 *   VARIANT is the number of enum hpclab_ring_variant. Rank 0 prints one result line
 *   per size: HPCLAB-JSON {"nbytes": n, "times": [...]}. The kernel is ring.c, compiled
 *   unchanged, and checks every message as it does under mpiexec.
 */
#include "smpi_driver.h"
#include "ring.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 5, 1, "VARIANT WARMUP ITERATIONS REPETITIONS NBYTES...");
    if (rank < 0)
        return 2;
    int variant = atoi(argv[1]), warmup = atoi(argv[2]), iterations = atoi(argv[3]);
    int repetitions = atoi(argv[4]);
    double *times = malloc(sizeof(double) * (size_t)(repetitions > 0 ? repetitions : 1));
    for (int a = 5; a < argc; a++) {
        size_t nbytes = (size_t)strtoull(argv[a], NULL, 10);
        if (hpclab_ring(MPI_COMM_WORLD, variant, nbytes, warmup, iterations, repetitions, 0,
                        times, errmsg, sizeof errmsg)) {
            return hpclab_driver_fail(rank, "ring", errmsg, times);
        }
        if (rank == 0)
            hpclab_emit_times(nbytes, times, repetitions);
    }
    free(times);
    MPI_Finalize();
    return 0;
}
