"""Experiments: each chapter's analysis, page and simulated-cluster code, by slug.

``hpclab.experiments.<slug>`` holds what a chapter computes from its records (models,
tables, the words of its page) and re-exports its sweep (``hpclab.chapters.<slug>.sweep``:
``tasks``, ``measure``, ``run``, ``run_mpi``), which :mod:`hpclab.sweeps` runs on MPI engines
or inside an MPI job.
"""
from importlib import import_module

from hpclab.kernels import registry
from hpclab.sweeps import in_job, on_engines, sweep

__all__ = ["EXPERIMENTS", "get", "in_job", "on_engines", "sweep"]

EXPERIMENTS = registry.chapter_order()


def get(name):
    """The experiment module called name."""
    registry.get(name)  # a clear error for an unknown name
    return import_module(f"hpclab.experiments.{name}")
