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

from importlib import import_module
from pathlib import Path
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


def sandbox_folders() -> dict[str, str]:
    """{environment variable: folder} of what the chapters' labs need inside the grading
    sandbox beyond the sources (mounted read-only there, the variable telling the lab where):
    the simulated cluster's cache of programs and runs (:func:`hpclab.simulate.sandbox_folders`)
    and each chapter package's own ``sandbox_folders()``, when it has one; only the folders
    that exist."""
    from hpclab import simulate
    from hpclab.kernels import registry

    out: dict[str, str] = dict(simulate.sandbox_folders())
    for slug in registry.chapter_order():
        hook = getattr(import_module(f"hpclab.chapters.{slug}"), "sandbox_folders", None)
        if hook is not None:
            out.update({k: str(v) for k, v in hook().items() if Path(v).is_dir()})
    return out


def shared_simulations(slug: str) -> bool:
    """Run what chapter ``slug``'s lab simulates alike for every student (its package's
    ``shared_simulations()``, when it has one; SimGrid's SMPI installed), so that this
    account's cache of simulated runs holds it; whether there was anything to run."""
    from hpclab import simulate
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    hook = getattr(import_module(f"hpclab.chapters.{slug}"), "shared_simulations", None)
    if hook is None or not simulate.available():
        return False
    hook()
    return True


def unready(slug: str) -> str | None:
    """Why chapter ``slug``'s lab and page cannot measure on this machine (something they need
    beyond the package is not set up: the chapter package's own ``unready()``), or None."""
    from hpclab.kernels import registry

    registry.get(slug)  # a clear error for an unknown name
    hook = getattr(import_module(f"hpclab.chapters.{slug}"), "unready", None)
    return hook() if hook is not None else None


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


README_BEGIN = "<!-- the chapters: made from their declarations by `make readme` -->"
README_END = "<!-- end of the chapters -->"


NBSP = "\u00a0"


def readme_list(order: list[str] | None = None) -> str:
    """The README's paragraph of chapters, from the declarations (``title``, ``teaches``),
    in the book's order (``order``: slugs; the others follow), wrapped at 100 columns."""
    import textwrap

    from hpclab.kernels import registry

    kernels = registry.kernels()
    slugs = [s for s in (order or []) if s in kernels]
    slugs += [s for s in kernels if s not in slugs]
    # a title of several words stays on one line (bold across a line break does not render as
    # one title, and the list is searched by title)
    items = [f"**{kernels[s].title.replace(' ', NBSP)}** ({kernels[s].teaches})" for s in slugs]
    text = "Chapters so far: " + ", ".join(items) + "."
    return textwrap.fill(text, 100, break_long_words=False,
                         break_on_hyphens=False).replace(NBSP, " ")


def book_order(root: str | Path) -> list[str]:
    """The chapters' slugs in the order of the book's table of contents (``_toc.yml``)."""
    import re

    toc = Path(root) / "_toc.yml"
    return re.findall(r"file:\s*book/([\w-]+)/index", toc.read_text()) if toc.exists() else []


def write_readme(path: str | Path) -> bool:
    """Rewrite the README's list of chapters between its markers from the declarations;
    True when it changed."""
    path = Path(path)
    text = path.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise ValueError(f"{path} has no {README_BEGIN!r} ... {README_END!r} markers")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    new = (head + README_BEGIN + "\n" + readme_list(book_order(path.parent)) + "\n"
           + README_END + tail)
    if new != text:
        path.write_text(new)
    return new != text
