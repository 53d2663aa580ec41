"""Ring: two messages travel around a periodic ring of P ranks and come home."""
from hpclab.kernels.registry import INT_MAX, Kernel, Metric, Param

_KIB, _MIB = 1 << 10, 1 << 20

# the variants in the order of ring.h's enum; the last one deadlocks by design
VARIANTS = ("ssend_ordered", "send", "isend", "irecv", "sendrecv", "naive")

KERNEL = Kernel(
    slug="ring",
    title="Ring",
    summary="time of one full ring of two messages around P ranks",
    teaches="blocking and non-blocking communication, a deadlock kept safe, `T = λ·P`",
    implementations=("c", "cython", "python"),
    params=(
        Param("variant", "choice", "How one step exchanges its two messages.",
              default="irecv", choices=VARIANTS),
        Param("nbytes", "int", "Size of each message in bytes (int32 elements; the first "
              "carries the ring sum).", default=4, low=4, high=4 * INT_MAX, multiple_of=4),
        Param("warmup", "int", "Untimed full rings per repetition (default: from the size).",
              default=None, none=True, low=0),
        Param("iterations", "int", "Timed full rings per repetition (default: from the size).",
              default=None, none=True, low=1),
        Param("repetitions", "int", "Number of timed batches.", default=5, low=1),
        Param("hugepages", "bool", "Ask for transparent huge pages for the buffers.",
              default=False),
        Param("allow_deadlock", "bool", "Needed for the 'naive' variant, which never returns.",
              default=False),
    ),
    metrics=(Metric("ring_time", "s", "seconds per full ring (P steps), the slowest rank's"),),
    min_procs=1,
    default_procs="cores",
    check_procs=(1, 2, 3, 4),
    profiles={
        # payloads in bytes (4: the rank alone); `scale` divides the rings per batch;
        # rank counts 1 .. cores for timings, 1 .. `check_upto` (oversubscribed) for correctness;
        # three repetitions at least: the median of two is their mean, and a t interval from
        # two values (one degree of freedom) spans orders of magnitude. quick's rings are a
        # 500th of a timed run's: the suite's ranks sleep between polls (make test), about
        # 0.1 ms a message, and at a 50th the ring lab's quick sweep took 16 s of a run
        "quick": {"payloads": [4, 256, 4 * _KIB], "scale": 500, "repetitions": 3, "check_upto": 4,
                  "timeout": 60},
        "standard": {"payloads": [4, 64, _KIB, 16 * _KIB, 256 * _KIB, _MIB], "scale": 1,
                     "repetitions": 5, "check_upto": 8, "timeout": 300},
        "full": {"payloads": [4] + [1 << k for k in range(4, 23, 2)], "scale": 1,
                 "repetitions": 10, "check_upto": 8, "timeout": 900},
    },
    inputs={"pingpong": "the C kernel's median one-way time of messages up to 8 bytes"},
    lab_needs="1 .. cores for timings, 4 engines for its correctness checks",
)
