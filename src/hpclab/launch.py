"""Start MPI work with a timeout, and always clean up after it.

Two ways to run MPI code:

* :func:`cluster` - ipyparallel MPI engines for notebooks and experiments::

      with hpclab.launch.cluster(n=2, timeout=60) as engines:
          times = engines.run(pingpong.measure, "c", 1024, what="pingpong c 1 KiB")

  ``engines.run`` calls a function on every engine (one engine per MPI rank)
  and returns the results in rank order. A call that does not finish within
  its timeout (a deadlock, usually) raises :class:`TimeoutError` naming what
  was running; the stuck engines are stopped and fresh ones started, so the
  context stays usable. The engines, the controller and their mpiexec are
  stopped when the block ends, by an exception or by KeyboardInterrupt too.

* :func:`mpirun` - a plain ``mpiexec -n N ...`` with a timeout, for scripts
  and tests; on timeout the whole process group is killed.

More ranks than cores make timings meaningless (ranks take turns on a core, and MPICH
ranks busy-poll): engines refuse to start that way (:class:`OversubscribedError`, naming
the cores) unless asked with ``oversubscribe=True`` for a correctness check, and
:func:`mpirun` (scripts, tests) warns with :class:`OversubscriptionWarning`. A run's
placement says whether it was oversubscribed (:func:`oversubscribed`), and its records
keep that.

The work is done by three modules, one job each: :mod:`hpclab.ranks` (cores, the MPI library,
rank counts, binding, placement), :mod:`hpclab.mpirun` (processes and MPI jobs with a
timeout) and :mod:`hpclab.engines` (the engines). This module is the one name pages, labs
and the command line import; a test that replaces a function replaces it in the module that
defines it.
"""
from hpclab.engines import (
    DEFAULT_WHAT,
    HEARTBEAT,
    START_TIMEOUT,
    Engines,
    cluster,
    remote_frames,
    running,
)
from hpclab.mpirun import (
    DEFAULT_TIMEOUT,
    clean_environment,
    mpirun,
    run_process,
    without_job_identity,
)
from hpclab.ranks import (
    OVERSUBSCRIBED_THREAD_LEVEL,
    THREAD_LEVEL,
    MPILaunchError,
    OversubscribedError,
    OversubscriptionWarning,
    allow_overload,
    bind_to_core,
    check_ranks,
    crowded,
    find_mpiexec,
    launcher_name,
    library_version,
    mpi_family,
    mpi_library,
    mpiexec_options,
    oversubscribed,
    rank_cores,
    srun_mpi_plugin,
    usable_cores,
    whoami,
)

__all__ = ["DEFAULT_TIMEOUT", "DEFAULT_WHAT", "HEARTBEAT", "OVERSUBSCRIBED_THREAD_LEVEL",
           "START_TIMEOUT", "THREAD_LEVEL", "Engines", "MPILaunchError", "OversubscribedError",
           "OversubscriptionWarning", "allow_overload", "bind_to_core", "check_ranks",
           "clean_environment", "cluster", "crowded", "find_mpiexec", "launcher_name",
           "library_version", "mpi_family", "mpi_library", "mpiexec_options", "mpirun",
           "oversubscribed", "rank_cores", "remote_frames", "run_process", "running",
           "srun_mpi_plugin", "usable_cores", "whoami", "without_job_identity"]
