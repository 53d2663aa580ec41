"""Amdahl: C = A + B on 3D arrays that rank 0 creates, distributes and collects."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param

# the distributions in the order of amdahl.h's enum
DISTRIBUTIONS = ("none", "1d", "2d", "3d")
# report 001's three shapes, 24 million elements each
REPORT_SHAPES = ([2400, 100, 100], [1200, 200, 100], [800, 300, 100])

KERNEL = Kernel(
    slug="amdahl",
    title="Amdahl",
    summary="phases of a matrix addition that rank 0 creates, distributes and collects",
    teaches=("a program with a serial part, timed phase by phase; the serial fraction measured, "
             "predicted and fitted; virtual topologies with subarray datatypes; Gustafson"),
    implementations=("c", "cython", "python"),
    params=(
        Param("distribution", "choice", "How rank 0 hands out the blocks: no topology "
              "(Scatterv of the flattened array) or a 1D, 2D or 3D Cartesian grid (subarray "
              "datatypes).", default="none", choices=DISTRIBUTIONS),
        Param("nx", "int", "Extent of the first (slowest) dimension.", default=2400, low=1,
              high=INT_MAX),
        Param("ny", "int", "Extent of the second dimension.", default=100, low=1,
              high=INT_MAX),
        Param("nz", "int", "Extent of the third (contiguous) dimension.", default=100, low=1,
              high=INT_MAX),
        Param("repetitions", "int", "Runs of the whole program (create, distribute, add, "
              "collect).", default=3, low=1),
        Param("hugepages", "bool", "Ask for transparent huge pages for the arrays.",
              default=False),
    ),
    metrics=(Metric("create", "s", "rank 0 fills A and B (serial)"),
             Metric("distribute", "s", "every rank receives its blocks of A and B"),
             Metric("add", "s", "every rank adds its blocks (parallel)"),
             Metric("collect", "s", "rank 0 receives every block of C"),
             Metric("total", "s", "the four phases together")),
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 3, 4),
    extra={
        # memory traffic of one addition c = a + b per element: read a and b, write c;
        # with write-allocate the cache first reads c's line too
        "bytes_per_element": 24, "bytes_per_element_write_allocate": 32,
    },
    profiles={
        # shapes: strong scaling, every distribution (C); compare: the implementations at
        # the first shape; weak: the first extent grows with P; synthetic: the sleeping
        # program of known serial fraction s on 1 .. procs ranks (sleeping ranks need no
        # core of their own); check_upto: correctness runs (oversubscribed allowed);
        # simulated: the shape and rank counts on a simulated cluster (hpclab.simulate)
        "quick": {"shapes": [[48, 20, 20], [24, 40, 20]], "weak": [24, 20, 20],
                  "compare": ["none", "3d"], "repetitions": 3,
                  "synthetic": {"s": 0.3, "work": 0.2, "procs": 4, "jitter": 0.03,
                                "repetitions": 3, "seed": 1},
                  "check_upto": 4, "timeout": 60,
                  "simulated": {"shape": [48, 20, 20], "ranks": [1, 2, 4, 12, 24, 48]}},
        "standard": {"shapes": REPORT_SHAPES, "weak": [600, 100, 100],
                     "compare": ["none", "3d"], "repetitions": 3,
                     "synthetic": {"s": 0.3, "work": 0.2, "procs": 4, "jitter": 0.03,
                                   "repetitions": 4, "seed": 1},
                     "check_upto": 4, "timeout": 300,
                     "simulated": {"shape": [2400, 100, 100], "ranks": [1, 2, 4, 8, 12, 24, 48]}},
        "full": {"shapes": REPORT_SHAPES, "weak": [2400, 100, 100],
                 "compare": ["none", "1d", "2d", "3d"], "repetitions": 10,
                 "synthetic": {"s": 0.3, "work": 0.5, "procs": 8, "jitter": 0.03,
                               "repetitions": 5, "seed": 1},
                 "check_upto": 8, "timeout": 1800,
                 "simulated": {"shape": [2400, 100, 100], "ranks": [1, 2, 4, 8, 12, 24, 48]}},
    },
    inputs={"stream": "add bandwidth per thread count, best trial, close binding"},
    lab_needs="1 .. cores for timings, 4 engines for its checks",
)
