"""Chapters, one folder each: ``hpclab.chapters.<slug>``.

A chapter's folder holds everything of one chapter:

* ``declaration.py``: ``KERNEL = Kernel(...)``, pure data (implementations, parameters,
  metrics, profiles) that the build, the CLI, the profiles and the tests read through
  :mod:`hpclab.kernels.registry`;
* ``kernels/``: the C, Cython and mpi4py implementations and the API generated from the
  declaration (``run_c``, ``run_cython``, ...), its correctness cases and its bench;
* ``sweep.py``: the measurements and what every MPI rank runs for them, run by
  :mod:`hpclab.sweeps` on engines or inside an MPI job. It imports numpy, mpi4py, its
  kernels and hpclab's light shared modules (launch, profiles, records, sweeps), so that a
  rank other than 0 loads no pandas, scipy or matplotlib;
* ``model.py`` (when the chapter has models of its own): ``MODEL`` (and any other
  :class:`hpclab.models.Model`), which :func:`hpclab.models.get` finds by name;
* ``analysis.py``: what the chapter computes from its records (models, tables, the words
  of its page and the report); pandas and scipy live here;
* ``exercises.py`` (when the lab has harnesses): what the lab's self-checks and hidden
  tests run on the student's code, found by name through :mod:`hpclab.exercises`.

* ``smpi_driver.c`` and ``simulation.py`` (when it runs on a simulated cluster): a small C
  program around its C kernel for SimGrid's SMPI, and the function that runs it on a
  platform (``on_platform``) and for ``python -m hpclab simulate <slug>`` (``run``), through
  :mod:`hpclab.simulate`.
"""

import sys
from importlib import import_module
from types import ModuleType


def sweep(slug: str) -> ModuleType:
    """The sweep module of chapter ``slug`` (``hpclab.chapters.<slug>.sweep``)."""
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    return import_module(f"hpclab.chapters.{slug}.sweep")


def analysis(slug: str) -> ModuleType:
    """The analysis module of chapter ``slug`` (``hpclab.chapters.<slug>.analysis``)."""
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    return import_module(f"hpclab.chapters.{slug}.analysis")


def models() -> dict:
    """{name: model} of the chapters' own models: every :class:`hpclab.models.Model` of
    each ``hpclab.chapters.<slug>.model``."""
    from pathlib import Path

    from hpclab.models import Model

    out = {}
    for path in sorted(Path(__file__).parent.glob("*/model.py")):
        module = import_module(f"hpclab.chapters.{path.parent.name}.model")
        for value in vars(module).values():
            if isinstance(value, Model):
                out[value.name] = value
    return out


def reexport(here, module):
    """A module's ``__getattr__`` and ``__dir__`` that add the names of ``module``: what
    ``hpclab.chapters.<slug>.analysis`` (``here``) gives for its chapter's sweep, so that
    a page's ``analysis.run`` works, completes and is listed by ``dir``."""

    def __getattr__(name):
        if name.startswith("__") or not hasattr(module, name):
            raise AttributeError(f"module {here!r} has no attribute {name!r}", name=name,
                                 obj=sys.modules[here])
        return getattr(module, name)

    def __dir__():
        return sorted(set(vars(sys.modules[here])) | set(dir(module)))

    return __getattr__, __dir__


def needs_table(order: list[str] | None = None) -> str:
    """The Markdown table of what each chapter's lab needs (the book's *Getting started*),
    from the declarations: ``lab_needs``, and the chapters whose records help (``inputs``).
    ``order``: slugs in the book's order (the others follow, alphabetically)."""
    from hpclab.kernels import registry

    kernels = registry.kernels()
    slugs = [s for s in (order or []) if s in kernels]
    slugs += [s for s in kernels if s not in slugs]
    rows = ["| chapter | ranks, threads and tools | lab notebook |", "|---|---|---|"]
    for slug in slugs:
        k = kernels[slug]
        helps = [kernels[s].title for s in k.inputs if s in kernels]
        needs = k.lab_needs + (f"; {' and '.join(helps)} records help" if helps else "")
        rows.append(f"| {k.title} | {needs} | `labs/{slug}/{slug}.ipynb` |")
    return "\n".join(rows)
