/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_pingpong on a simulated platform.
 *
 * USAGE
 *   smpirun -np 2 ... pingpong WARMUP ITERATIONS REPETITIONS NBYTES...
 *   Rank 0 prints one result line per size: HPCLAB-JSON {"nbytes": n, "times": [...]}.
 *   The kernel is pingpong.c, compiled unchanged.
 */
#include "smpi_driver.h"
#include "pingpong.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 4, 1, "WARMUP ITERATIONS REPETITIONS NBYTES...");
    if (rank < 0)
        return 2;
    int warmup = atoi(argv[1]), iterations = atoi(argv[2]), repetitions = atoi(argv[3]);
    double *times = malloc(sizeof(double) * (size_t)(repetitions > 0 ? repetitions : 1));
    for (int a = 4; a < argc; a++) {
        size_t nbytes = (size_t)strtoull(argv[a], NULL, 10);
        if (hpclab_pingpong(MPI_COMM_WORLD, nbytes, warmup, iterations, repetitions, 0, times,
                            errmsg, sizeof errmsg)) {
            return hpclab_driver_fail(rank, "pingpong", errmsg, times);
        }
        if (rank == 0)
            hpclab_emit_times(nbytes, times, repetitions);
    }
    free(times);
    MPI_Finalize();
    return 0;
}
