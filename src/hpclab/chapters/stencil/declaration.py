"""Stencils: finite-difference second derivatives and the Laplacian, orders 2 to 16."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param

# the operators in the order of stencil.h's enum; axes as report 003 names them (1 fastest)
OPERATORS = ("d2x1", "d2x2", "d2x3", "laplacian")

KERNEL = Kernel(
    slug="stencil",
    title="Stencils",
    summary=("time per application of a finite-difference second derivative or Laplacian of "
             "order 2 to 16, baseline or cache-blocked, with its halo exchange"),
    teaches=("finite differences of any order from Fornberg's weights, their error and "
             "cost, cache blocking and the roofline, halos as wide as the stencil: report "
             "003's hpcscan tests"),
    implementations=("c", "cython"),
    params=(
        Param("operator", "choice", "What to compute: d²/dx₁² (axis 1, the contiguous one), "
              "d²/dx₂², d²/dx₃² (axis 3, the slowest) or the Laplacian.", default="laplacian",
              choices=OPERATORS),
        Param("order", "int", "Order of accuracy: even, 2 to 16; the halo is order / 2 "
              "points wide.", default=8, low=2, high=16, multiple_of=2),
        Param("n1", "int", "Global interior points along axis 1 (the contiguous one).",
              default=64, low=1, high=INT_MAX - 32),
        Param("n2", "int", "Global interior points along axis 2.", default=64, low=1,
              high=INT_MAX - 32),
        Param("n3", "int", "Global interior points along axis 3 (the slowest).", default=64,
              low=1, high=INT_MAX - 32),
        Param("p1", "int", "Ranks along axis 1 in the process grid p1 x p2 x p3, as report "
              "003 writes its decompositions (1x4x2); 0: MPI_Dims_create chooses.", default=0,
              low=0),
        Param("p2", "int", "Ranks along axis 2; 0: MPI_Dims_create chooses.", default=0, low=0),
        Param("p3", "int", "Ranks along axis 3; 0: MPI_Dims_create chooses.", default=0, low=0),
        Param("block2", "int", "Cache blocking: points of axis 2 per block (0: no blocking).",
              default=0, low=0),
        Param("block3", "int", "Cache blocking: points of axis 3 per block (0: no blocking; "
              "both or neither).", default=0, low=0),
        Param("threads", "int", "OpenMP threads per rank.", default=1, low=1, high=1024),
        Param("applications", "int", "Applications per repetition (timed together).",
              default=5, low=1),
        Param("repetitions", "int", "Timed batches of applications.", default=3, low=1),
    ),
    metrics=(Metric("apply", "s", "seconds per application, wall clock between barriers"),
             Metric("compute", "s", "seconds per application computing, the slowest rank's"),
             Metric("halo", "s", "seconds per application exchanging halos, the slowest "
                    "rank's"),
             Metric("error", "1", "max |w - the exact derivative| / max |exact derivative|")),
    # the sums over the stencil run in vector lanes of the building CPU's width
    cflags=("-march=native",),
    openmp=True,
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 3, 4),
    profiles={
        # derivative: every operator at these orders on cubes of n points (global), baseline
        # and blocked by each (block3, block2); convergence: the Laplacian on these small
        # cubes for the error's fall; check_upto: correctness
        # simulated: the Laplacian on n³ points on 1 .. 8 simulated Shaheen II nodes
        # propagator: the wave propagator of orders 4, 8, 12 on cubes of n interior points,
        # standing mode m (m / 2 wavelengths across the box) for some periods, at these
        # shares of the stable time step; standard's four wavelengths for four periods are
        # where order 4 needs a finer grid than order 8 for an error under 1%; quick's two
        # wavelengths for two periods are the least where it does (on 21 points, not 13),
        # so that its gain over order 4 is a number there too. Standard's and full's shares of
        # the stable step are the report's, 100, 50 and 10%: at 20% order 4's errors in space
        # and time, of opposite signs, cancel on 39 points (0.8% where 10% gives 1.7%), a luck
        # of one grid that made order 4 the cheapest there
        "quick": {"orders": [2, 4, 8, 12, 16], "n": [24], "blocks": [[4, 4]],
                  "convergence_n": [10, 14, 20], "applications": 2, "repetitions": 2,
                  "propagator": {"orders": [4, 8, 12], "n": [13, 21], "mode": 4, "periods": 2,
                                 "dt_fractions": [0.5, 0.1, 0.02]},
                  "simulated": {"n": 24, "ranks": [1, 2, 4, 8], "orders": [4, 8, 12],
                                "applications": 2, "repetitions": 2},
                  "check_upto": 4, "timeout": 120},
        "standard": {"orders": [2, 4, 8, 12, 16], "n": [128], "blocks": [[16, 4], [8, 8]],
                     "convergence_n": [16, 32, 64], "applications": 5, "repetitions": 3,
                     "propagator": {"orders": [4, 8, 12], "n": [23, 31, 39, 47],
                                    "mode": 8, "periods": 4,
                                    "dt_fractions": [1.0, 0.5, 0.1]},
                     "simulated": {"n": 128, "ranks": [1, 2, 4, 8], "orders": [4, 8, 12],
                                   "applications": 3, "repetitions": 3},
                     "check_upto": 4, "timeout": 900},
        "full": {"orders": [2, 4, 8, 12, 16], "n": [128, 256], "blocks": [[16, 4], [8, 8]],
                 "convergence_n": [16, 32, 64, 128], "applications": 10, "repetitions": 5,
                 "propagator": {"orders": [4, 8, 12], "n": [23, 31, 39, 47, 63],
                                "mode": 8, "periods": 4,
                                "dt_fractions": [1.0, 0.5, 0.1]},
                 "simulated": {"n": 192, "ranks": [1, 2, 4, 8], "orders": [4, 8, 12],
                               "applications": 3, "repetitions": 5},
                 "check_upto": 8, "timeout": 3600},
    },
    inputs={"stream": "add bandwidth per thread count, best trial, close binding"},
    lab_needs=("1 .. cores for timings, 4 engines for its checks; SimGrid's SMPI for its "
               "simulated cluster"),
)
