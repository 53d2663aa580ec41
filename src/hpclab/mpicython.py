"""Cython with mpi4py's cimports, written in a notebook cell and run on the MPI engines.

``%load_ext hpclab.mpicython`` gives the cell magic ``%%mpi_cython``::

    %%mpi_cython
    from mpi4py cimport MPI
    from mpi4py.libmpi cimport MPI_Send, ...

    def my_loop(MPI.Comm comm, ...):
        ...

The cell is compiled once, here in the notebook's kernel, without the C compiler's
optimisations (-O0: a cell's loop around MPI calls gains nothing measurable from them, and the
build takes a third of the time) unless the magic's line asks for them: ``%%mpi_cython -O3
-march=native`` for a loop whose arithmetic is what is timed, as the library's own compute
kernels are built (the flags allowed are :data:`FLAGS`). $HPCLAB_OPT, when set, replaces the
level of every cell, asked for or not, as it replaces the kernels' -O3 (-O0 where results are
checked and nothing is timed), and $HPCLAB_MARCH their target. It is compiled with the MPI compiler
wrapper the library's own kernels were built with (so the module calls the MPI that mpi4py
loads), into a module whose name is the hash of its source and flags. No engine compiles:
several engines building one module at the same moment write over each other's files. Each
function the cell defines (``def`` or ``cpdef`` at the top level) becomes a name in the notebook
that engines can call:
``engines.run(f, ...)`` and the labs' checks load the module on each engine the first time
they call one of its functions, and on engines started later too.

The notebook's kernel itself never loads the module: importing it would import mpi4py.MPI and
start MPI in the kernel. A compile error shows the compiler's messages with the cell's own
line numbers.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

COMPILE_TIMEOUT = 180  # seconds for Cython and the C compiler together
PREFIX = "_hpclab_cell_"
# the C compiler's flags a cell's magic line may ask for; -O0 when it asks for none
FLAGS = ("-O0", "-O1", "-O2", "-O3", "-march=native")
_DEFS = re.compile(r"^(?:cp)?def\s+(?:[\w.\[\]*]+\s+)*?(\w+)\s*\(", re.M)


class CythonCellError(Exception):
    """A cell that did not compile: the message holds the compiler's own lines."""

    def _render_traceback_(self):  # IPython prints this instead of a traceback
        return [f"CythonCellError: {self}"]


def build_dir(create=True):
    """Where compiled cells go: IPython's cache when it is writable (it is wherever notebooks
    run, the grading sandbox included), else a folder of this user's own in the temporary
    directory (mode 0700: a module's name follows from its source, so a folder others can
    write would let them plant one). ``create=False`` only names it."""
    path = None
    try:
        from IPython.paths import get_ipython_cache_dir

        base = Path(get_ipython_cache_dir())
        if os.access(base, os.W_OK):
            path = base / "hpclab-cython"
    except Exception:  # noqa: BLE001  (no IPython: a script)
        pass
    if path is None:
        path = Path(tempfile.gettempdir()) / f"hpclab-cython-{os.getuid()}"
        if create:
            path.mkdir(mode=0o700, exist_ok=True)
            mine = path.lstat()  # one that someone else made first is not used
            if path.is_symlink() or mine.st_uid != os.getuid() or mine.st_mode & 0o077:
                raise CythonCellError(f"{path} is not a folder of yours alone (another user "
                                      "may have made it): remove it, or set IPYTHONDIR to a "
                                      "folder of yours")
        return path
    if create:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def _build_record():
    """The library's build record (the wrapper, its flags and the MPI it wraps), read from
    its file, not from the compiled library: loading that would start MPI in the notebook's
    kernel."""
    import hpclab.kernels

    record = Path(hpclab.kernels.__file__).with_name("build_info.json")
    return record.read_text() if record.exists() else ""


def _mpicc(record):
    """The wrapper the library's kernels were built with, unless $MPICC names another."""
    import json

    built = json.loads(record).get("mpicc") if record else None
    return os.environ.get("MPICC") or built or "mpicc"


def function_names(source):
    """The functions a cell defines at its top level (``def`` and ``cpdef``; a ``cdef``
    function cannot be called from Python)."""
    return list(dict.fromkeys(m.group(1) for m in _DEFS.finditer(source)))


def _relined(text, path):
    """The compiler's messages with the .pyx file named as the cell (its line numbers are
    the cell's: the file starts with an empty line where the cell has its magic)."""
    return text.replace(str(path), "cell").replace(path.name, "cell")


def body_span(lines, name):
    """(first, end): the indices in ``lines`` of function ``name``'s definition, its def
    line, the rest of its signature and its body (up to the next line indented no deeper
    than the def); (0, 0) when there is none."""
    head = re.compile(rf"^(\s*)c?p?def\b[^(]*\b{re.escape(name)}\s*\(")
    for i, line in enumerate(lines):
        m = head.match(line)
        if m:
            depth, end = len(m.group(1)), i + 1
            while end < len(lines) and (not lines[end].strip() or lines[end].strip().startswith(
                    "#") or len(lines[end]) - len(lines[end].lstrip()) > depth
                    or lines[end].lstrip().startswith((")", "]"))):
                end += 1
            return i, end
    return 0, 0


def _body(lines, name):
    """The lines of function ``name``'s definition in ``lines`` (see :func:`body_span`)."""
    first, end = body_span(lines, name)
    return lines[first:end]


def _blank(match):
    """A triple-quoted string as lines of '""' with their indentation (blank ones blank)."""
    lines = match.group(0).split("\n")
    return "\n".join('""' if k == 0 else "" if not line.strip()
                     else line[:len(line) - len(line.lstrip())] + '""'
                     for k, line in enumerate(lines))


def without_strings(source):
    """``source`` with its string literals blanked (each ``""``), their lines kept: what a
    check reads of the code, not of its docstrings and messages."""
    source = re.sub(r'("""|\'\'\')(?:.|\n)*?\1', _blank, source)
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'', '""', source)


def source_of(func):
    """The code ``func`` was compiled from, for checks that read it: an ``%%mpi_cython``
    function's cell (its ``source``; the grader's proxy of a notebook function carries the
    same, found in the kernel), the ``.pyx`` file a ``%%cython`` cell wrote beside its
    module, or a Python function's lines. None when there is none."""
    try:
        return _find_source(func)
    except Exception:  # noqa: BLE001 - an object that raises when looked at has no source
        return None


def _find_source(func):
    import inspect

    text = getattr(func, "source", None)
    if isinstance(text, str):
        return text
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    where = getattr(module, "__file__", None)
    if module is not None and where and not where.endswith(".py"):
        try:
            return Path(where).with_name(module.__name__ + ".pyx").read_text()
        except OSError:
            return None
    try:
        return inspect.getsource(func)
    except (OSError, TypeError):
        return None


def nogil_problem(func, calls=("MPI_Send", "MPI_Recv")):
    """What is wrong with where a compiled function makes ``calls``, read from its cell's
    source: each must sit inside ``with nogil:`` (or the function be ``nogil``), where
    Cython refuses, at compile time, any call that goes through the interpreter. None when
    every one does, or when there is no source to read."""
    source = source_of(func)
    if not source:
        return None
    source = without_strings(source)  # a docstring may name MPI_Send
    body = _body(source.splitlines(), getattr(func, "name", getattr(func, "__name__", "")))
    if not body:
        return None
    end = next((k for k, line in enumerate(body) if line.rstrip().endswith(":")), 0)
    signature = " ".join(body[:end + 1])
    if re.search(r"\)\s*(?:(?:noexcept|except\s*\??\s*\S+)\s*)?nogil\b", signature):
        return None
    outside = []
    for k, line in enumerate(body):
        code = line.split("#", 1)[0]
        if not any(re.search(rf"\b{c}\s*\(", code) for c in calls):
            continue
        depth, inside = len(line) - len(line.lstrip()), None
        for above in reversed(body[:k]):  # the blocks that enclose the call, innermost first
            if not above.strip() or above.lstrip().startswith("#"):
                continue
            d = len(above) - len(above.lstrip())
            if d < depth:
                depth = d
                if re.match(r"\s*with\s+gil\s*:", above):
                    inside = False
                    break
                if re.match(r"\s*with\s+nogil\b[^:]*:", above):
                    inside = True
                    break
        if not inside:
            outside.append(code.strip())
    if not outside:
        return None
    return (f"{outside[0]} is not inside `with nogil:`: there the loop still holds the "
            "interpreter's lock and may call back into Python in every round trip (what the "
            "mpi4py loop measured); inside it, Cython refuses any such call when it compiles. "
            "Put the whole loop of MPI_Send and MPI_Recv inside `with nogil:`")


def cell_flags(line):
    """The C compiler's flags of a magic line (``-O3 -march=native``): the optimisation level
    (-O0 when none is given) and -march=native when asked; a CythonCellError that names the
    flags allowed for anything else."""
    words = line.split()
    unknown = [w for w in words if w not in FLAGS]
    if unknown:
        raise CythonCellError(f"%%mpi_cython does not take {' '.join(unknown)}: its line may "
                              f"give {', '.join(FLAGS)} (an optimisation level and the "
                              "building CPU's vector width)")
    levels = [w for w in words if w.startswith("-O")]
    if len(levels) > 1:
        raise CythonCellError(f"%%mpi_cython was given {len(levels)} optimisation levels "
                              f"({' '.join(levels)}): give one")
    return [*(levels or ["-O0"]), *(["-march=native"] if "-march=native" in words else [])]


# $HPCLAB_OPT's levels (setup.py's): the level the library's kernels are built with
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Og", "-Ofast")


def _for_this_cpu(flags):
    """``flags`` as the library's own kernels are built: $HPCLAB_OPT replaces the cell's
    optimisation level (-O0 where results are checked and nothing is timed, -Og for a
    debugger), $HPCLAB_MARCH names another target than -march=native (the oldest node of a
    cluster), "none" drops it."""
    level = os.environ.get("HPCLAB_OPT", "").strip()
    if level:
        if level not in OPT_LEVELS:
            raise CythonCellError(f"HPCLAB_OPT={level!r}: give one optimisation level, "
                                  f"{', '.join(OPT_LEVELS)}")
        flags = [level if f.startswith("-O") else f for f in flags]
    chosen = os.environ.get("HPCLAB_MARCH", "").strip()
    if "-march=native" not in flags or not chosen:
        return list(flags)
    if not re.fullmatch(r"[\w.+-]+", chosen):
        raise CythonCellError(f"HPCLAB_MARCH={chosen!r} is not a CPU target the compiler takes "
                              "(x86-64-v3, say, or none)")
    return [f for f in flags if f != "-march=native"] + (
        [] if chosen.lower() == "none" else [f"-march={chosen}"])


def compile_cell(source, timeout=COMPILE_TIMEOUT, flags=("-O0",)):
    """Compile ``source`` (a cell's Cython, without its magic line) into a module in
    :func:`build_dir`; return the module's name and the path of its shared library. The
    same source, compiler and MPI compile once: a second call finds the library. Each build
    runs in a folder of its own and moves its results in whole, so that notebooks or graders
    compiling the same cell at the same moment cannot break each other's files."""
    import Cython
    import mpi4py
    import numpy

    if any(f not in FLAGS for f in flags):
        raise CythonCellError(f"C compiler flags {list(flags)}: allowed are {', '.join(FLAGS)}")
    flags = _for_this_cpu(flags)
    record = _build_record()
    mpicc = _mpicc(record)
    cython_cmd = [sys.executable, "-m", "cython", "-3", "-I", mpi4py.get_include()]
    cc_cmd = [*shlex.split(mpicc), "-shared", "-fPIC", *flags, "-I",
              sysconfig.get_paths()["include"], "-I", numpy.get_include(), "-I",
              mpi4py.get_include()]
    from hpclab import machine

    # -march=native code runs on the CPU that built it only: a folder of modules shared by a
    # cluster's nodes keeps one per CPU model
    cpu = (machine.cpu_model() or "") if "-march=native" in flags else ""
    key = hashlib.sha256("\0".join([source, record, cpu, os.environ.get("MPICC", ""),
                                     Cython.__version__, mpi4py.__version__, sys.version,
                                     *cython_cmd[1:], *cc_cmd]).encode()).hexdigest()[:16]
    name = PREFIX + key
    out = build_dir()
    lib = out / (name + sysconfig.get_config_var("EXT_SUFFIX"))
    if lib.exists():
        return name, lib
    with tempfile.TemporaryDirectory(dir=out, prefix=".build-") as tmp:
        pyx, csrc = Path(tmp) / f"{name}.pyx", Path(tmp) / f"{name}.c"
        built = Path(tmp) / lib.name
        pyx.write_text("\n" + source)  # line n of the file is line n of the cell
        steps = [[*cython_cmd, pyx.name, "-o", csrc.name],
                 [*cc_cmd, csrc.name, "-o", built.name]]
        for what, cmd in zip(("Cython", "the C compiler"), steps):
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                      cwd=tmp)
            except subprocess.TimeoutExpired:
                raise CythonCellError(f"{what} did not finish within {timeout} s") from None
            except FileNotFoundError:
                raise CythonCellError(f"{cmd[0]} was not found: run `make setup` (it builds "
                                      "the library's kernels with the MPI compiler wrapper)"
                                      ) from None
            if done.returncode:
                said = _relined((done.stdout + done.stderr).strip(), pyx)
                raise CythonCellError(f"{what} rejected the cell (line numbers are the "
                                      f"cell's):\n{said[-4000:]}")
        # the source first (an engine's traceback reads its lines), then the library, each
        # whole or not at all; a library another build moved in meanwhile is the same
        os.replace(pyx, out / pyx.name)
        os.replace(built, lib)
    return name, lib


def _load(name, path):
    module = sys.modules.get(name)
    if module is None:
        loader = importlib.machinery.ExtensionFileLoader(name, str(path))
        spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        sys.modules[name] = module
    return module


class EngineFunction:
    """A function of a compiled cell, meant for the engines: it loads its module on its
    first call in a process. Pickled by its module's path and name, so it travels to
    engines as any argument does."""

    def __init__(self, module, path, name, source=None):
        self.module, self.path, self.name = module, str(path), name
        self.source = source  # the cell's Cython, for checks that read it (nogil_problem)
        self.__name__ = self.__qualname__ = name

    def __repr__(self):
        return f"<compiled {self.name}, from an %%mpi_cython cell, called on the MPI engines>"

    def __call__(self, *args, **kwargs):
        return getattr(_load(self.module, self.path), self.name)(*args, **kwargs)


def functions(source, timeout=COMPILE_TIMEOUT, flags=("-O0",)):
    """Compile ``source`` (with the C compiler's ``flags``) and return name ->
    :class:`EngineFunction` for each function it defines."""
    module, path = compile_cell(source, timeout=timeout, flags=tuple(flags))
    return {n: EngineFunction(module, path, n, source) for n in function_names(source)}


def mpi_cython(line, cell):
    """%%mpi_cython: compile the cell once, here; its functions run on the MPI engines."""
    from IPython import get_ipython

    shell = get_ipython()
    flags = cell_flags(line)
    for name in function_names(cell):  # an edit that does not compile leaves no old function
        shell.user_ns.pop(name, None)
    made = functions(cell, flags=flags)
    if not made:
        raise CythonCellError("the cell defines no function (def or cpdef at its top level)")
    shell.user_ns.update(made)
    print("compiled:", ", ".join(made), "(they run on the MPI engines)")


def load_ipython_extension(ipython):
    ipython.register_magic_function(mpi_cython, magic_kind="cell", magic_name="mpi_cython")
