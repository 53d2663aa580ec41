"""Running a chapter's sweep: on MPI engines (notebooks, the book) or inside an MPI job.

Every chapter's sweep module (``hpclab.chapters.<slug>.sweep``) defines

* ``NAME`` and ``KERNEL`` (its declaration: slug, implementations, rank counts, profiles);
* ``tasks(profile, impls, **options)`` - the list of measurements (dicts of keyword
  arguments) a profile asks for, in the order they run;
* ``measure(**task, comm=None)`` - one measurement, called on every rank, returning
  record rows on rank 0 and ``[]`` elsewhere;
* ``run(...)`` and ``run_mpi(...)`` - thin calls of :func:`on_engines` (notebooks, the
  book: MPI engines started through :mod:`hpclab.launch`) and :func:`in_job` (``mpiexec
  -n N python -m hpclab run <slug>``).

Both paths call the same ``measure`` on every rank, so they write the same records,
and both record where every rank ran (:func:`hpclab.launch.whoami`). Both return a
:class:`hpclab.records.Run`: the records and their metadata together. A rank other than 0
imports nothing of the analysis (pandas, scipy, matplotlib): it measures and sends.
"""
from __future__ import annotations

from hpclab import launch, profiles, records
from hpclab.kernels import registry


def some_impls(impls, chosen, name):
    """The implementations ``chosen`` for one part of a sweep, all of them among ``impls``
    (a ValueError naming the option ``name`` otherwise); None: the C kernel, when measured."""
    chosen = tuple(chosen) if chosen is not None else tuple(i for i in impls if i == "c")
    unknown = set(chosen) - set(impls)
    if unknown:
        raise ValueError(f"{name} {sorted(unknown)} are not among the implementations "
                         f"measured ({', '.join(impls)})")
    return chosen


def sweep(experiment, tasks, call, progress=True):
    """Run call(**task) for every task with a progress bar; gather the record rows."""
    from tqdm import tqdm  # text, not a widget: a saved notebook keeps no widget state

    rows = []
    for task in tqdm(tasks, desc=experiment, disable=not progress, leave=False):
        rows.extend(call(**task))
    return records.frame(rows)


def _timed(todo, n):
    """How many ranks the tasks time at most (their ``nprocs``; all n when they do not say):
    the other ranks wait outside MPI."""
    counts = [t["nprocs"] for t in todo if isinstance(t.get("nprocs"), int)]
    return max(counts) if len(counts) == len(todo) and counts else n


def _meta(exp, profile, nprocs, launcher, placement, mpi_args=(), extra=None, timed=None):
    # oversubscribed: the ranks that were timed had fewer cores than ranks on some host
    return records.metadata(exp.NAME, profiles.name(profile), {
        "nprocs": nprocs, "launcher": launcher, "placement": placement,
        "oversubscribed": launch.oversubscribed(placement[:timed or len(placement)]),
        "mpi_args": list(mpi_args), "settings": profiles.get(exp.NAME, profile), **(extra or {})})


def _check_procs(exp, n, how):
    kernel = registry.get(exp.NAME)
    low, default = kernel.min_procs, kernel.procs("default_procs")
    if n < low:
        raise ValueError(f"{exp.NAME} needs at least {low} MPI ranks, {how} {n}: "
                         f"run `mpiexec -n {default} python -m hpclab run {exp.NAME}` or use "
                         f"n={default}")


def on_engines(exp, todo, profile=None, n=None, engines=None, timeout=None, mpi_args=(),
               progress=True, describe=str, extra=None, oversubscribe=False):
    """Run an experiment's tasks on MPI engines and return its records.

    Engines are started (and stopped at the end, however it ends) unless
    ``engines`` is given; more of them than cores only with ``oversubscribe``.
    ``describe(task)`` names a task in timeout messages.
    Returns a :class:`hpclab.records.Run` (records and metadata).
    """
    n = n or (engines.n if engines is not None else registry.get(exp.NAME).procs("default_procs"))
    _check_procs(exp, n, "got n =")
    timeout = timeout or profiles.get(exp.NAME, profile)["timeout"]
    owned = engines is None
    if owned:
        engines = launch.cluster(n=n, timeout=timeout, mpi_args=mpi_args, what=exp.NAME,
                                 oversubscribe=oversubscribe).start()
    try:
        placement = engines.run(launch.whoami, timeout=timeout, what=f"{exp.NAME} placement")

        def call(**task):
            return engines.run(exp.measure, timeout=timeout, what=f"{exp.NAME} {describe(task)}",
                               **task)[0]

        df = sweep(exp.NAME, todo, call, progress)
    finally:
        if owned:
            engines.stop()
    return records.Run(df, _meta(exp, profile, n, "ipyparallel", placement, mpi_args, extra,
                                 _timed(todo, n)))


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
                                 (), extra, _timed(todo, comm.Get_size())))


def over_ranks(exp, profile, impls, n=None, mpi_args=(), progress=True, engines=None,
               timeout=None, **task_options):
    """:func:`on_engines` for a sweep over P = 1 .. n ranks (``exp.tasks(profile, impls,
    largest P, **task_options)``; default n: the chapter's ``NPROCS``), P never above the
    cores. Engines it
    starts itself are no more than the ranks it times (and the chapter's minimum), so an n
    above the cores sweeps up to the cores instead of being refused as oversubscribed."""
    n = n or (engines.n if engines is not None else exp.NPROCS)
    largest = min(n, launch.usable_cores())
    todo = exp.tasks(profile, impls, largest, **task_options)
    if engines is None:
        n = min(n, max(largest, registry.get(exp.NAME).min_procs))
    return on_engines(exp, todo, profile=profile, n=n, engines=engines, timeout=timeout,
                      mpi_args=mpi_args, progress=progress, describe=exp._describe,
                      extra={"implementations": list(impls)})


def over_ranks_in_job(exp, profile, impls, comm=None, progress=True):
    """:func:`in_job` for a sweep over P = 1 .. the job's size; records on rank 0."""
    from mpi4py import MPI

    comm = comm or MPI.COMM_WORLD
    return in_job(exp, exp.tasks(profile, impls, comm.Get_size()), comm=comm, profile=profile,
                  progress=progress, extra={"implementations": list(impls)})
