"""The kernel registry: every kernel is declared once, in its chapter's
``chapters/<slug>/declaration.py``.

A declaration is pure data (no compiled code, no numpy, no MPI), so that
``setup.py`` can read it before anything is built. Everything else reads the
declarations through this module: the build (which extensions, which need
OpenMP, extra compiler flags), the experiments and the CLI (which slugs exist,
rank counts, implementations), the profiles (sweep sizes per profile), the
correctness runner and the test parametrisation. Adding a chapter adds a
declaration; no other file names its slug.

A declaration module defines one object, ``KERNEL = Kernel(...)``.
"""
from __future__ import annotations

import importlib.util
import numbers
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
INT_MAX = 2**31 - 1
PROFILES = ("quick", "standard", "full")

class Required:
    """Marker for a parameter without a default."""

    def __repr__(self):
        return "required"


REQUIRED = Required()


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel, with its valid range.

    ``kind`` is ``"int"``, ``"bool"`` or ``"choice"``. ``none`` allows None
    (the kernel then chooses, e.g. osu_latency's iteration counts).
    ``multiple_of`` constrains integers further (int32 elements: 4 bytes).
    """

    name: str
    kind: str
    doc: str
    default: object = REQUIRED
    low: int | None = None
    high: int | None = None
    choices: tuple = ()
    none: bool = False
    multiple_of: int | None = None
    note: str = ""

    def check(self, value, owner=""):
        """The value, converted, or a ValueError/TypeError that says what is allowed
        (``owner``, the kernel's slug, names whose parameter it is)."""
        if value is None and self.none:
            return None
        if self.kind == "bool":
            if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
                raise TypeError(f"{self.name} must be True or False, got {value!r}")
            return bool(value)
        if self.kind == "choice":
            if value not in self.choices:
                raise ValueError(f"unknown {(owner + ' ') if owner else ''}{self.name} {value!r}: "
                             f"choose one of "
                                 f"{', '.join(map(str, self.choices))}")
            return value
        if self.kind != "int":
            raise TypeError(f"parameter kind {self.kind!r} is not known")
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise TypeError(f"{self.name} must be an integer, got {value!r}")
        value = int(value)
        low = self.low if self.low is not None else -INT_MAX - 1
        high = self.high if self.high is not None else INT_MAX
        bad = not low <= value <= high or (self.multiple_of and value % self.multiple_of)
        if bad:
            what = f"a multiple of {self.multiple_of} " if self.multiple_of else ""
            raise ValueError(f"{self.name} must be {what}between {low} and {high}"
                             f"{self.hint()}, got {value}")
        return value

    def hint(self):
        return f" ({self.note})" if self.note else ""

    def describe(self):
        """The numpydoc line of this parameter."""
        if self.kind == "choice":
            kind = "str"
        else:
            kind = self.kind
        if self.none or self.default is not REQUIRED:
            kind += ", optional"
        rng = ""
        if self.kind == "int":
            rng = f" From {self.low if self.low is not None else '-inf'} to {self.high}."
        elif self.kind == "choice":
            rng = f" One of {', '.join(map(str, self.choices))}."
        return f"{self.name} : {kind}\n    {self.doc}{rng}"


@dataclass(frozen=True)
class Metric:
    """One timing a repetition returns: row ``i`` of the (metric x repetition) array."""

    name: str
    unit: str
    doc: str


@dataclass(frozen=True)
class ReportQuantity:
    """A number a chapter's lab reports to the class report (each student's, beside the
    published clusters'): its label with the unit shown, and the factor from the value the
    lab's variable holds to that unit (the notebook's metadata may add a factor of its own,
    ``to_unit``). ``log``: drawn on a logarithmic axis."""

    label: str
    to_unit: float = 1.0
    log: bool = False


@dataclass(frozen=True)
class Kernel:
    """The declaration of one kernel (and of the chapter's experiment that sweeps it).

    Attributes
    ----------
    slug : str
        The name used for the kernel, its experiment, book folder, lab and solution.
    title : str
        The chapter's name, for messages and tables.
    summary : str
        One line: what the kernel measures.
    implementations : tuple of str
        ``c`` and ``cython`` always; ``python`` (mpi4py) where it teaches something.
    params : tuple of Param
        The keyword parameters of ``run_<impl>``, in order.
    metrics : tuple of Metric
        What one repetition returns, one row each.
    comm : str
        ``"first"``: ``run_<impl>(comm, ...)``; ``"optional"``: ``comm=None`` last (a
        threaded kernel that can also run on every rank of a communicator).
    min_procs, default_procs : int or "cores"
        Smallest and default MPI rank counts ("cores": the cores of this machine).
    check_procs : tuple of int
        Rank counts of the correctness matrix in the tests (``python -m hpclab check``).
    openmp : bool
        Compiled with OpenMP.
    cflags : tuple of str
        Extra compiler flags, used when the compiler accepts them (recorded).
    profiles : dict
        Sweep settings per profile (quick, standard, full); each has a ``timeout``.
    record_metric : (str, str) or None
        ``(column, metric)``: write the metric name into ``column`` and call every row's
        metric ``metric`` (e.g. column ``op`` for the operations of a memory kernel, all
        of metric ``time``). None: the metric names are the records' metrics.
    inputs : dict
        The measurements the chapter takes from other chapters: ``{slug: what it takes}``,
        resolved by :mod:`hpclab.inputs` (``python -m hpclab inputs <slug>``).
    lab_needs : str
        What the chapter's lab runs on (ranks, threads, tools), for the book's table of what
        each chapter needs; the other chapters whose records help come from ``inputs``.
    report : dict
        The quantities the chapter's lab reports to the instructor's class report:
        ``{quantity: ReportQuantity}``. A lab's notebook metadata (``hpclab.report``) names
        the variable that holds each; the published clusters' values come from the chapter
        analysis's ``report_references()``.
    teaches : str
        What the chapter teaches, in a few words: the README's list of chapters
        (:func:`hpclab.chapters.readme_list`).
    extension : bool
        True: the kernels are an extension of this package (``kernels/_<slug>.pyx`` and
        ``<slug>.c``), built by ``setup.py``, checked by ``python -m hpclab check`` and run by
        ``python -m hpclab run``. False: the chapter builds and runs programs of its own (the
        MPI libraries' one per library, each with that library's compiler and launcher).
    """

    slug: str
    title: str
    summary: str
    implementations: tuple
    params: tuple
    metrics: tuple
    profiles: dict
    comm: str = "first"
    min_procs: int = 1
    default_procs: object = "cores"
    check_procs: tuple = (1, 2, 4)
    openmp: bool = False
    cflags: tuple = ()
    record_metric: tuple | None = None
    extra: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    lab_needs: str = ""
    report: dict = field(default_factory=dict)
    teaches: str = ""
    extension: bool = True

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.slug} has no parameter {name!r}")

    @property
    def metric_names(self):
        return tuple(m.name for m in self.metrics)

    def procs(self, which):
        """min_procs or default_procs as a number (``"cores"``: the usable cores)."""
        value = getattr(self, which)
        if value == "cores":
            from hpclab.launch import usable_cores

            return max(self.min_procs, usable_cores())
        return int(value)

    def check_profiles(self):
        """Problems of the profile table, as a list of sentences (empty: fine)."""
        problems = []
        if set(self.profiles) != set(PROFILES):
            problems.append(f"{self.slug}: profiles {sorted(self.profiles)} are not "
                            f"{list(PROFILES)}")
        keys = None
        for name in PROFILES:
            settings = self.profiles.get(name, {})
            timeout = settings.get("timeout")
            if not isinstance(timeout, (int, float)) or timeout <= 0:
                problems.append(f"{self.slug}: profile {name} has no positive timeout")
            if keys is not None and set(settings) != keys:
                problems.append(f"{self.slug}: profile {name} has the keys {sorted(settings)}, "
                                f"the others {sorted(keys)}")
            keys = set(settings)
        if self.profiles and self.profiles["quick"].get("timeout", 0) > \
                self.profiles["full"].get("timeout", 0):
            problems.append(f"{self.slug}: the quick profile allows more time than full")
        return problems


def _load_declaration(path):
    name = f"hpclab.chapters.{path.parent.name}.declaration"
    if name in sys.modules:
        return sys.modules[name].KERNEL
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    kernel = getattr(module, "KERNEL", None)
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{path} must define KERNEL = Kernel(...)")
    if kernel.slug != path.parent.name:
        raise ValueError(f"{path}: the slug {kernel.slug!r} must be the folder's name")
    return kernel


def _discover(root=HERE.parent / "chapters"):
    found = {}
    for path in sorted(Path(root).glob("*/declaration.py")):
        kernel = _load_declaration(path)
        found[kernel.slug] = kernel
    return found


_FOUND: dict[str, Kernel] = {}


def _declared():
    """Every declaration, found on first use: a declaration imports this module, so finding
    them all at its import would load a declaration that is itself still being imported."""
    if not _FOUND:
        _FOUND.update(_discover())
    return _FOUND


def kernels():
    """Every declared kernel, by slug, in a stable (alphabetical) order."""
    return dict(_declared())


def slugs():
    return tuple(_declared())


def extensions():
    """The slugs whose kernels are an extension of this package (``Kernel.extension``): what
    the build compiles, ``python -m hpclab check`` checks and ``python -m hpclab run`` runs."""
    return tuple(s for s, k in _declared().items() if k.extension)


def get(slug):
    """The declaration of one kernel; a ValueError lists the known ones."""
    try:
        return _declared()[slug]
    except KeyError:
        raise ValueError(f"unknown kernel or experiment {slug!r}: choose one of "
                         f"{', '.join(_declared())}") from None


def consumers(slug):
    """The chapters (slugs, in book order) that declare an input from ``slug``."""
    return tuple(s for s in chapter_order() if slug in _declared()[s].inputs)


def chapter_order(toc=None):
    """The slugs in the order of the book's _toc.yml (chapters not in it come last)."""
    toc = Path(toc) if toc else HERE.parents[2] / "_toc.yml"
    order = []
    if toc.exists():
        for line in toc.read_text().splitlines():
            for slug in _declared():
                if line.strip().endswith(f"book/{slug}/index") and slug not in order:
                    order.append(slug)
    return tuple(order) + tuple(s for s in _declared() if s not in order)


def import_all():
    """Import every declared kernel's module (and so its compiled extension); the build's
    last step, so that a kernel that does not load fails `make setup`, not a lecture."""
    from importlib import import_module

    return [import_module(f"hpclab.chapters.{slug}.kernels") for slug in extensions()]
