"""PingPong: one-way time of a message between ranks 0 and 1 (osu_latency's method)."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param, ReportQuantity

_KIB, _MIB = 1 << 10, 1 << 20

KERNEL = Kernel(
    slug="pingpong",
    title="PingPong",
    summary="one-way time of a message between ranks 0 and 1",
    teaches="latency and bandwidth, Hockney models",
    implementations=("c", "cython", "python", "pickle"),
    params=(
        Param("nbytes", "int", "Message size in bytes.", low=0, high=INT_MAX,
              note="an MPI count"),
        Param("warmup", "int", "Untimed round trips per repetition (default: osu_latency's).",
              default=None, none=True, low=0),
        Param("iterations", "int", "Timed round trips per repetition (default: osu_latency's).",
              default=None, none=True, low=1),
        Param("repetitions", "int", "Number of timed batches.", default=5, low=1),
        Param("hugepages", "bool", "Ask for transparent huge pages for the buffers.",
              default=False),
    ),
    metrics=(Metric("one_way_time", "s", "one-way time of a message, the slowest rank's"),),
    min_procs=2,
    default_procs=2,
    check_procs=(1, 2, 4),
    profiles={
        # osu_latency: 0 and powers of two to 4 MiB; 100 + 10,000 round trips up to 8 KiB,
        # 10 + 1,000 above. `scale` divides the iteration counts.
        "quick": {"sizes": [0, 1, 8, 64, 512, 4 * _KIB, 32 * _KIB, 256 * _KIB, _MIB],
                  "scale": 100, "repetitions": 3, "timeout": 90},
        "standard": {"sizes": [0] + [1 << k for k in range(23)], "scale": 1, "repetitions": 5,
                     "timeout": 300},
        "full": {"sizes": [0] + [1 << k for k in range(23)], "scale": 1, "repetitions": 20,
                 "timeout": 900},
    },
    lab_needs="2 MPI ranks; SimGrid's SMPI for its simulated cluster",
    report={"latency": ReportQuantity("ping-pong latency λ [µs]", 1e6, log=True),
            "bandwidth": ReportQuantity("ping-pong bandwidth B [GB/s]", 1e-9)},
)
