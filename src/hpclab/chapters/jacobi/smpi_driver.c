/*
 * NAME
 *   smpi_driver.c - SMPI driver: hpclab_jacobi (3D Jacobi sweeps with halo exchange) on a
 *   simulated platform.
 *
 * USAGE
 *   smpirun -np P ... jacobi DECOMPOSITION NX NY NZ OVERLAP SWEEPS REPETITIONS PX PY PZ
 *   DECOMPOSITION is the number of enum hpclab_jacobi_decomposition; PX PY PZ the process
 *   grid that MPI_Dims_create gives under mpiexec (see smpi_driver.h). Rank 0 prints
 *   HPCLAB-JSON {"nbytes": NX, "times": [...]}: the kernel's metrics, metric by metric, each
 *   over the repetitions (jacobi.h). The kernel is jacobi.c, compiled unchanged, and checks
 *   after every batch that the field still holds the discrete solution.
 */
#include "smpi_driver.h"
#include "jacobi.h"

int main(int argc, char **argv)
{
    char errmsg[512];
    int rank = hpclab_driver_start(&argc, &argv, 10, 0, "DECOMPOSITION NX NY NZ OVERLAP SWEEPS "
                                   "REPETITIONS PX PY PZ");
    if (rank < 0)
        return 2;
    int decomposition = atoi(argv[1]), overlap = atoi(argv[5]), sweeps = atoi(argv[6]);
    int repetitions = atoi(argv[7]);
    long nx = atol(argv[2]), ny = atol(argv[3]), nz = atol(argv[4]);
    for (int d = 0; d < 3; d++)
        hpclab_grid[d] = atoi(argv[8 + d]);
    int count = HPCLAB_JACOBI_NMETRICS * (repetitions > 0 ? repetitions : 1);
    double *times = malloc(sizeof(double) * (size_t)count);
    if (hpclab_jacobi(MPI_COMM_WORLD, decomposition, nx, ny, nz, overlap, sweeps, repetitions,
                      NULL, NULL, times, errmsg, sizeof errmsg))
        return hpclab_driver_fail(rank, "jacobi", errmsg, times);
    if (rank == 0)
        hpclab_emit_times((size_t)nx, times, count);
    free(times);
    MPI_Finalize();
    return 0;
}
