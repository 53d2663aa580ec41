"""Experiments: the sweep of each chapter, run on MPI engines or under mpiexec.

Every declared kernel (:mod:`hpclab.kernels.registry`) has an experiment module
``hpclab.experiments.<slug>``, which defines

* ``KERNEL`` (its declaration: slug, implementations, rank counts, profiles);
* ``tasks(profile, impls, **options)`` - the list of measurements (dicts of keyword
  arguments) a profile asks for, in the order they run;
* ``measure(**task, comm=None)`` - one measurement, called on every rank, returning
  record rows on rank 0 and ``[]`` elsewhere;
* ``run(...)`` and ``run_mpi(...)`` - thin calls of :func:`on_engines` (notebooks, the
  book: MPI engines started through :mod:`hpclab.launch`) and :func:`in_job` (``mpiexec
  -n N python -m hpclab run <slug>``).

Both paths call the same ``measure`` on every rank, so they write the same records,
and both record where every rank ran (:func:`hpclab.launch.whoami`). Both return a
:class:`hpclab.records.Run`: the records and their metadata together.
"""
from importlib import import_module

from tqdm import tqdm  # text, not a widget: a saved notebook keeps no widget state

from hpclab import launch, profiles, records
from hpclab.kernels import registry

EXPERIMENTS = registry.chapter_order()


def get(name):
    """The experiment module called name."""
    registry.get(name)  # a clear error for an unknown name
    return import_module(f"hpclab.experiments.{name}")


def sweep(experiment, tasks, call, progress=True):
    """Run call(**task) for every task with a progress bar; gather the record rows."""
    rows = []
    for task in tqdm(tasks, desc=experiment, disable=not progress, leave=False):
        rows.extend(call(**task))
    return records.frame(rows)


def _meta(exp, profile, nprocs, launcher, placement, mpi_args=(), extra=None):
    return records.metadata(exp.NAME, profiles.name(profile), {
        "nprocs": nprocs, "launcher": launcher, "placement": placement,
        "mpi_args": list(mpi_args), "settings": profiles.get(exp.NAME, profile), **(extra or {})})


def _check_procs(exp, n, how):
    kernel = registry.get(exp.NAME)
    low, default = kernel.min_procs, kernel.procs("default_procs")
    if n < low:
        raise ValueError(f"{exp.NAME} needs at least {low} MPI ranks, {how} {n}: "
                         f"run `mpiexec -n {default} python -m hpclab run {exp.NAME}` or use "
                         f"n={default}")


def on_engines(exp, todo, profile=None, n=None, engines=None, timeout=None, mpi_args=(),
               progress=True, describe=str, extra=None):
    """Run an experiment's tasks on MPI engines and return its records.

    Engines are started (and stopped at the end, however it ends) unless
    ``engines`` is given. ``describe(task)`` names a task in timeout messages.
    Returns a :class:`hpclab.records.Run` (records and metadata).
    """
    n = n or (engines.n if engines is not None else registry.get(exp.NAME).procs("default_procs"))
    _check_procs(exp, n, "got n =")
    timeout = timeout or profiles.get(exp.NAME, profile)["timeout"]
    owned = engines is None
    if owned:
        engines = launch.cluster(n=n, timeout=timeout, mpi_args=mpi_args, what=exp.NAME).start()
    try:
        placement = engines.run(launch.whoami, timeout=timeout, what=f"{exp.NAME} placement")

        def call(**task):
            return engines.run(exp.measure, timeout=timeout, what=f"{exp.NAME} {describe(task)}",
                               **task)[0]

        df = sweep(exp.NAME, todo, call, progress)
    finally:
        if owned:
            engines.stop()
    return records.Run(df, _meta(exp, profile, n, "ipyparallel", placement, mpi_args, extra))


def in_job(exp, todo, comm=None, profile=None, progress=True, extra=None):
    """Run an experiment's tasks in this MPI job; records on rank 0, None elsewhere."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    _check_procs(exp, comm.Get_size(), "this job has")
    placement = comm.gather(launch.whoami(), root=0)

    def call(**task):
        return exp.measure(comm=comm, **task)

    if comm.Get_rank() != 0:
        for task in todo:
            call(**task)
        return None
    df = sweep(exp.NAME, todo, call, progress)
    return records.Run(df, _meta(exp, profile, comm.Get_size(), launch.launcher_name(), placement,
                                 (), extra))
