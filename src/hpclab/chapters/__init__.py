"""Chapters, one folder each: ``hpclab.chapters.<slug>``.

A chapter's folder holds, so far, its sweep (``sweep.py``: the measurements and what every
MPI rank runs for them). It imports numpy, mpi4py, the chapter's kernels and hpclab's light
shared modules (launch, profiles, records, sweeps), so that a rank other than 0 loads no
pandas, scipy or matplotlib; rank 0 loads pandas to make the records' table. Its
kernels (``hpclab.kernels.<slug>``), its analysis and page code
(``hpclab.experiments.<slug>``), its lab harness (``hpclab.exercises.<slug>``) and its
simulation driver (``hpclab/simulate/drivers``) are still kept by layer.
"""

import sys
from importlib import import_module


def sweep(slug):
    """The sweep module of chapter ``slug`` (``hpclab.chapters.<slug>.sweep``)."""
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    return import_module(f"hpclab.chapters.{slug}.sweep")


def reexport(here, module):
    """A module's ``__getattr__`` and ``__dir__`` that add the names of ``module``: what
    ``hpclab.experiments.<slug>`` (``here``) gives for its chapter's sweep, so that
    ``experiments.<slug>.run`` works, completes and is listed by ``dir``."""

    def __getattr__(name):
        if name.startswith("__") or not hasattr(module, name):
            raise AttributeError(f"module {here!r} has no attribute {name!r}", name=name,
                                 obj=sys.modules[here])
        return getattr(module, name)

    def __dir__():
        return sorted(set(vars(sys.modules[here])) | set(dir(module)))

    return __getattr__, __dir__
