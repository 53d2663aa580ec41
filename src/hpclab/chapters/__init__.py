"""Chapters, one folder each: ``hpclab.chapters.<slug>``.

A chapter's folder holds, so far, its sweep (``sweep.py``: the measurements and what every
MPI rank runs for them, importing numpy, mpi4py and the chapter's kernels only). Its
kernels (``hpclab.kernels.<slug>``), its analysis and page code
(``hpclab.experiments.<slug>``), its lab harness (``hpclab.exercises.<slug>``) and its
simulation driver (``hpclab/simulate/drivers``) are still kept by layer.
"""

from importlib import import_module


def sweep(slug):
    """The sweep module of chapter ``slug`` (``hpclab.chapters.<slug>.sweep``)."""
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    return import_module(f"hpclab.chapters.{slug}.sweep")


def reexport(module):
    """A module ``__getattr__`` that finds the names of ``module``: what
    ``hpclab.experiments.<slug>`` gives for the names of its chapter's sweep."""

    def __getattr__(name):
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}") \
                from None

    return __getattr__
