"""MPI libraries side by side: MPICH, Open MPI and Intel MPI running one C program."""
from hpclab.kernels.registry import Kernel, Metric

KERNEL = Kernel(
    slug="mpilibs",
    title="MPI libraries",
    summary=("time per operation of PingPong, HPCC's ring, IMB's Exchange and Allreduce on two "
             "ranks, under each MPI library set up in .mpilibs, unbound and bound to cores"),
    teaches=("MPICH, Open MPI and Intel MPI side by side with intervals, their protocol "
             "switches from the data, process binding, report 002's cluster beside them"),
    # one C program (kernels/mpilibs.c), compiled by each library's own mpicc and started by
    # its own mpiexec (libraries.py): not an extension of this package
    implementations=("c",),
    extension=False,
    params=(),
    metrics=(Metric("time", "s", "seconds per operation: rank 0's batch over its operations "
                    "(half a round trip for PingPong)"),),
    min_procs=2,
    default_procs=2,
    check_procs=(2,),
    profiles={
        # sizes in bytes; a batch's operations scale down with the size (and by ``scale``);
        # timeout: seconds for any one launch of the program
        # quick: seven sizes, so that Hockney's model has three on each side of a switch; one
        # round (each launch costs about a second of start-up, 24 launches a round under three
        # libraries), three repetitions, so that an interval has two degrees of freedom
        "quick": {"sizes": [8, 64, 512, 4096, 32768, 262144, 1048576],
                  "tests": ["pingpong", "ring", "exchange", "allreduce"],
                  "repetitions": 3, "rounds": 1, "scale": 20, "timeout": 120},
        "standard": {"sizes": [2**k for k in range(0, 23)],
                     "tests": ["pingpong", "ring", "exchange", "allreduce"],
                     "repetitions": 10, "rounds": 3, "scale": 1, "timeout": 600},
        "full": {"sizes": [2**k for k in range(0, 25)],
                 "tests": ["pingpong", "ring", "exchange", "allreduce"], "repetitions": 20,
                 "rounds": 5, "scale": 1, "timeout": 1200},
    },
    inputs={},
    lab_needs=("2 cores, and the three MPI libraries that make mpilibs sets up, each in its "
               "own environment; SimGrid's SMPI for its simulated cluster"),
)
