/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_stencil (a finite-difference derivative of any even
 *   order with its halo exchange) on a simulated platform.
 *
 * USAGE
 *   smpirun -np P ... stencil OP ORDER N3 N2 N1 BLOCK3 BLOCK2 APPLICATIONS REPETITIONS P3 P2 P1
 *   OP is the number of enum hpclab_stencil_operator; P3 P2 P1 the process grid that
 *   MPI_Dims_create gives under mpiexec (see smpi_driver.h), in C order (axis 3 first).
 *   Rank 0 prints HPCLAB-JSON {"nbytes": N1, "times": [...]}: the kernel's metrics, metric
 *   by metric, each over the repetitions (stencil.h). The kernel is stencil.c, compiled
 *   unchanged (one thread: SMPI ranks are threads of one process), and checks every
 *   repetition against the stencil's exact value.
 */
#include "smpi_driver.h"
#include "stencil.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 12, 0, "OP ORDER N3 N2 N1 BLOCK3 BLOCK2 "
                                   "APPLICATIONS REPETITIONS P3 P2 P1");
    if (rank < 0)
        return 2;
    int op = atoi(argv[1]), order = atoi(argv[2]);
    long n3 = atol(argv[3]), n2 = atol(argv[4]), n1 = atol(argv[5]);
    long block3 = atol(argv[6]), block2 = atol(argv[7]);
    int applications = atoi(argv[8]), repetitions = atoi(argv[9]);
    for (int d = 0; d < 3; d++)
        hpclab_grid[d] = atoi(argv[10 + d]);
    int count = HPCLAB_STENCIL_NMETRICS * (repetitions > 0 ? repetitions : 1);
    double *times = malloc(sizeof(double) * (size_t)count);
    if (hpclab_stencil(MPI_COMM_WORLD, op, order, NULL, n3, n2, n1, block3, block2, 1,
                       applications, repetitions, times, errmsg, sizeof errmsg))
        return hpclab_driver_fail(rank, "stencil", errmsg, times);
    if (rank == 0)
        hpclab_emit_times((size_t)n1, times, count);
    free(times);
    MPI_Finalize();
    return 0;
}
