"""STREAM: sustainable memory bandwidth of copy, scale, add and triad (OpenMP threads)."""
from hpclab.kernels.registry import Kernel, Metric, Param, ReportQuantity

# STREAM's NTIMES bound of stream.h (trials per run)
MAX_NTIMES = 200

KERNEL = Kernel(
    slug="stream",
    title="STREAM",
    summary="memory bandwidth of copy, scale, add and triad with OpenMP threads",
    teaches=("memory bandwidth, threads and binding, the roofline, close and distant memory: "
             "measured when the machine has more than one NUMA node and `numactl` is installed, "
             "otherwise shown from published data"),
    implementations=("c", "cython"),
    params=(
        Param("n", "int", "Elements (doubles) per array; default: STREAM's minimum here "
              "(each array four times all caches).", default=None, none=True, low=1,
              high=2**40),
        Param("ntimes", "int", "Trials, the first of which is not returned (STREAM counts "
              "the trials after the first).", default=10, low=2, high=MAX_NTIMES,
              note="STREAM counts the trials after the first: at least 2"),
        Param("threads", "int", "OpenMP threads; default OMP_NUM_THREADS or the usable cores.",
              default=None, none=True, low=1),
        Param("hugepages", "bool", "Ask for transparent huge pages for the arrays.",
              default=False),
    ),
    metrics=(Metric("copy", "s", "seconds of one copy  a = b"),
             Metric("scale", "s", "seconds of one scale b = q c"),
             Metric("add", "s", "seconds of one add   c = a + b"),
             Metric("triad", "s", "seconds of one triad a = b + q c")),
    comm="optional",
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 4),
    openmp=True,
    # without this one gcc turns STREAM's copy loop into a call to memcpy
    cflags=("-fno-tree-loop-distribute-patterns",),
    record_metric=("op", "time"),
    profiles={
        # n: doubles per array; None applies STREAM's rule (each array >= 4x all caches).
        # ntimes: trials, the first not counted (STREAM's NTIMES >= 10 outside `quick`).
        "quick": {"n": 1 << 18, "ntimes": 3, "binds": ["close", "spread"], "timeout": 120},
        "standard": {"n": None, "ntimes": 10, "binds": ["close", "spread"], "timeout": 900},
        "full": {"n": None, "ntimes": 20, "binds": ["close", "spread"], "timeout": 1800},
    },
    lab_needs=("OpenMP threads 1 .. cores; a second NUMA node and `numactl` for close and "
               "distant memory"),
    report={"triad": ReportQuantity("STREAM triad, all threads [GB/s]")},
)
