/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_amdahl (create, distribute, add, collect a 3D matrix
 *   sum) on a simulated platform.
 *
 * USAGE
 *   smpirun -np P ... amdahl DISTRIBUTION NX NY NZ REPETITIONS PX PY PZ
 *   DISTRIBUTION is the number of enum hpclab_amdahl_distribution; PX PY PZ the process grid
 *   that MPI_Dims_create gives under mpiexec (see smpi_driver.h). Rank 0 prints
 *   HPCLAB-JSON {"nbytes": NX, "times": [...]}: the kernel's phases, phase by phase, each
 *   over the repetitions (amdahl.h). The kernel is amdahl.c, compiled unchanged, and checks
 *   every element it collects.
 */
#include "smpi_driver.h"
#include "amdahl.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 8, 0,
                                   "DISTRIBUTION NX NY NZ REPETITIONS PX PY PZ");
    if (rank < 0)
        return 2;
    int distribution = atoi(argv[1]), repetitions = atoi(argv[5]);
    long nx = atol(argv[2]), ny = atol(argv[3]), nz = atol(argv[4]);
    for (int d = 0; d < 3; d++)
        hpclab_grid[d] = atoi(argv[6 + d]);
    int count = HPCLAB_AMDAHL_NPHASES * (repetitions > 0 ? repetitions : 1);
    double *times = malloc(sizeof(double) * (size_t)count);
    if (hpclab_amdahl(MPI_COMM_WORLD, distribution, nx, ny, nz, repetitions, 0, times, errmsg,
                      sizeof errmsg))
        return hpclab_driver_fail(rank, "amdahl", errmsg, times);
    if (rank == 0)
        hpclab_emit_times((size_t)nx, times, count);
    free(times);
    MPI_Finalize();
    return 0;
}
