"""Compiled MPI kernels and their Python APIs.

Each kernel ``k`` lives in ``hpclab.kernels.k`` and offers one function per
implementation with the same signature, ``run_<impl>(comm, **params)``,
returning a numpy array of raw times (one per repetition). Every kernel checks
its own answer and raises :class:`KernelError` on every rank when it is wrong.
"""
import json
from importlib import import_module
from pathlib import Path

KERNELS = ("pingpong", "ring", "stream")


class KernelError(RuntimeError):
    """A kernel produced a wrong answer or could not run; raised on every rank."""


def agree(comm, message, error=None):
    """Fail together (the mpi4py kernels' hpclab_fail_together): every rank passes its
    problem or None, and every rank raises ``error`` when any rank has one, naming the
    lowest such rank. Collective on comm."""
    for rank, text in enumerate(comm.allgather(message)):
        if text:
            raise (error or KernelError)(f"rank {rank}: {text}")


class BuildMismatchError(ImportError):
    """The kernels were compiled against another MPI than the one mpi4py loaded."""


def _load_common():
    try:
        return import_module("hpclab.kernels.common._common")
    except ImportError as exc:
        raise ImportError(
            "hpclab's compiled kernels are missing or do not load "
            f"({exc}). Build them with `make setup` (or `pip install --no-build-isolation -e .` "
            "with mpicc on PATH or MPICC set).") from exc


def build_info():
    """How the kernels were built: MPI library of the headers, compiler, wrapper, flags."""
    common = _load_common()
    info = {"mpi_library": common.mpi_build_library(), "compiler": common.compiler()}
    path = Path(__file__).with_name("build_info.json")
    if path.exists():
        info.update(json.loads(path.read_text()))
    return info


def _family(library_version):
    text = library_version.lower()
    for family in ("open mpi", "mvapich", "intel", "mpich"):
        if family in text:
            return family
    return text.split()[0] if text else "unknown"


def check_mpi_match():
    """Raise BuildMismatchError unless mpi4py runs the MPI the kernels were built with.

    An extension compiled against MPICH headers crashes or computes garbage when
    mpi4py loads Open MPI (their handles differ), so this is checked on import
    of every kernel.
    """
    from mpi4py import MPI

    built = build_info()["mpi_library"]
    running = MPI.Get_library_version()
    if _family(built) != _family(running):
        raise BuildMismatchError(
            f"the kernels were compiled against {built}, but mpi4py loaded "
            f"{running.splitlines()[0].strip()}. Rebuild with the matching wrapper "
            "(`make setup`, or MPICC=/path/to/mpicc pip install --no-build-isolation -e .), "
            "or make mpi4py load the same library (MPI4PY_LIBMPI).")
    return built, running.splitlines()[0].strip()
