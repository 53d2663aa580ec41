"""Jacobi: sweeps of the 7-point stencil with a halo exchange on a 3D decomposition."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param

# the decompositions in the order of jacobi.h's enum
DECOMPOSITIONS = ("slab", "pencil", "cube")

KERNEL = Kernel(
    slug="jacobi",
    title="Jacobi",
    summary="time per Jacobi sweep of a 3D grid, split into compute and halo exchange",
    teaches=("a 3D halo exchange, slabs, pencils and cubes, the model of report 001 predicted from "
             "PingPong and STREAM before it is measured"),
    implementations=("c", "cython", "python"),
    params=(
        Param("decomposition", "choice", "The process grid: slabs (P x 1 x 1), pencils "
              "(px x py x 1) or cubes (px x py x pz), from MPI_Dims_create.", default="cube",
              choices=DECOMPOSITIONS),
        Param("nx", "int", "Global interior points in the first dimension.", default=64, low=1,
              high=INT_MAX - 2),
        Param("ny", "int", "Global interior points in the second dimension.", default=64,
              low=1, high=INT_MAX - 2),
        Param("nz", "int", "Global interior points in the third (contiguous) dimension.",
              default=64, low=1, high=INT_MAX - 2),
        Param("overlap", "bool", "Update the points that need no halo while the exchange is "
              "in flight.", default=False),
        Param("sweeps", "int", "Sweeps per repetition (timed together).", default=10, low=1),
        Param("repetitions", "int", "Timed batches of sweeps.", default=3, low=1),
    ),
    metrics=(Metric("sweep", "s", "seconds per sweep, wall clock between barriers"),
             Metric("compute", "s", "seconds per sweep updating points, the slowest rank's"),
             Metric("halo", "s", "seconds per sweep exchanging halos, the slowest rank's"),
             Metric("cut", "directions", "k: directions cut into more than one block")),
    # the sweep is memory-bound only once its loads and arithmetic are cheap: with the
    # building CPU's vector width it runs about 1.5 times as fast as with the baseline's
    # (make bench); HPCLAB_MARCH chooses another target (setup.py, README)
    cflags=("-march=native",),
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 3, 4),
    extra={
        # memory traffic of one lattice update: read u (its neighbours from cache) and f,
        # write unew; with write-allocate the cache first reads unew's line
        "bytes_per_update": 24, "bytes_per_update_write_allocate": 32,
    },
    profiles={
        # weak: points per rank and dimension (L); strong: global points per dimension;
        # compare: the implementations at the first strong size; check_upto: correctness
        # simulated: L, rank counts (report 001's) and sweeps on a simulated cluster
        "quick": {"weak": [12], "strong": [20], "sweeps": 4, "repetitions": 3,
                  "check_upto": 4, "timeout": 60,
                  "simulated": {"L": 16, "ranks": [1, 4, 8, 12, 24, 48], "sweeps": 2}},
        "standard": {"weak": [64, 128], "strong": [96, 192], "sweeps": 20, "repetitions": 3,
                     "check_upto": 4, "timeout": 300,
                     "simulated": {"L": 64, "ranks": [1, 4, 8, 12, 24, 48], "sweeps": 10}},
        "full": {"weak": [128, 256], "strong": [256, 512], "sweeps": 20, "repetitions": 5,
                 "check_upto": 8, "timeout": 1800,
                 "simulated": {"L": 128, "ranks": [1, 4, 8, 12, 24, 48], "sweeps": 10}},
    },
    inputs={"pingpong": "Hockney's λ and B, the C kernel's line through every size",
            "stream": "add bandwidth per thread count, best trial, close binding"},
    lab_needs="1 .. cores for timings, 4 engines for its checks",
)
