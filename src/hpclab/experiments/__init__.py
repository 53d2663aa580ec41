"""Experiments: the sweep of each chapter, run on MPI engines or under mpiexec.

Each experiment module ``hpclab.experiments.<slug>`` offers

* ``run(profile=None, ...)`` - start MPI engines through :mod:`hpclab.launch`,
  sweep, stop the engines, return the records as a DataFrame (notebooks, book);
* ``run_mpi(comm, profile=None, ...)`` - the same sweep in-process, for
  ``mpiexec -n N python -m hpclab run <slug>`` (records on rank 0);
* ``MIN_PROCS`` and ``NPROCS`` - the smallest and the default rank count.

Both paths call the same ``measure`` function on every rank, so they write
the same records.
"""
from importlib import import_module

from tqdm.auto import tqdm

from hpclab import records

EXPERIMENTS = ("pingpong",)


def get(name):
    """The experiment module called name."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: choose one of {', '.join(EXPERIMENTS)}")
    return import_module(f"hpclab.experiments.{name}")


def sweep(experiment, tasks, call, progress=True):
    """Run call(**task) for every task with a progress bar; gather the record rows."""
    rows = []
    for task in tqdm(tasks, desc=experiment, disable=not progress, leave=False):
        rows.extend(call(**task))
    return records.frame(rows)
