"""The Python API of a kernel, generated from its declaration.

Every kernel module calls :func:`build` once with its raw implementations (the
Cython wrappers of C, the native Cython loops, the mpi4py functions) and gets
``run_<impl>`` functions that all behave alike:

* the same signature, from the declaration (``run_<impl>(comm, **params)``, or
  ``comm=None`` last for a threaded kernel);
* arguments checked on every rank before any MPI call, with a message that
  says what is allowed;
* the kernel's own error (a wrong answer, a failed allocation) raised as
  :class:`hpclab.kernels.KernelError` naming the kernel, implementation and
  variant;
* a float64 array of shape (metrics, repetitions) whose rows are the
  declaration's metrics;
* a numpydoc docstring.
"""
from __future__ import annotations

import inspect

import numpy as np

from hpclab.kernels import KernelError
from hpclab.kernels.registry import REQUIRED


def check_comm(kernel, comm):
    """A communicator the kernel can run on, or a clear ValueError/TypeError."""
    from mpi4py import MPI

    if not isinstance(comm, MPI.Comm):
        raise TypeError(f"comm must be an mpi4py communicator, got {type(comm).__name__}")
    if comm == MPI.COMM_NULL:
        raise ValueError("comm is MPI.COMM_NULL")
    if isinstance(comm, MPI.Intercomm):
        raise ValueError(f"{kernel.slug} needs an intracommunicator (e.g. MPI.COMM_WORLD)")
    if comm.Get_size() < kernel.min_procs:
        raise ValueError(
            f"{kernel.slug} needs at least {kernel.min_procs} MPI ranks, this communicator has "
            f"{comm.Get_size()}: run it with `mpiexec -n {kernel.min_procs} ...` or on "
            f"`hpclab.launch.cluster(n={kernel.min_procs})`")
    return comm


def _signature(kernel):
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = []
    if kernel.comm == "first":
        params.append(inspect.Parameter("comm", kind))
    for p in kernel.params:
        default = inspect.Parameter.empty if p.default is REQUIRED else p.default
        params.append(inspect.Parameter(p.name, kind, default=default))
    if kernel.comm == "optional":
        params.append(inspect.Parameter("comm", kind, default=None))
    return inspect.Signature(params)


def _docstring(kernel, impl, label):
    lines = [f"{kernel.title}, {label} implementation: {kernel.summary}.", "",
             "Parameters", "----------"]
    comm_doc = ("comm : mpi4py.MPI.Comm\n    An intracommunicator of at least "
                f"{kernel.min_procs} rank(s).")
    if kernel.comm == "first":
        lines.append(comm_doc)
    lines += [p.describe() for p in kernel.params]
    if kernel.comm == "optional":
        lines.append("comm : mpi4py.MPI.Comm, optional\n    Run on every rank of comm together.")
    rows = "; ".join(f"{i}: {m.name} [{m.unit}] ({m.doc})" for i, m in enumerate(kernel.metrics))
    lines += ["", "Returns", "-------", "numpy.ndarray",
              f"    Shape (metrics, repetitions). Rows {rows}.", "",
              "Raises", "------", "ValueError, TypeError",
              "    An argument out of its range, on every rank, before any MPI call.",
              "hpclab.kernels.KernelError",
              "    On every rank, when any rank's answer was wrong or it could not run."]
    return "\n".join(lines)


LABELS = {"c": "C", "cython": "Cython", "python": "mpi4py buffer API",
          "pickle": "mpi4py pickle API"}


def build(kernel, raw, errors, prepare=None, finish=None):
    """``{impl: run_<impl>}`` for every implementation of a declaration.

    Parameters
    ----------
    kernel : hpclab.kernels.registry.Kernel
        The declaration.
    raw : dict
        ``impl -> func(comm, *args)`` (or ``func(*args, comm)`` for ``comm="optional"``).
    errors : tuple of exception types
        What the raw functions raise for a wrong answer; becomes KernelError.
    prepare : callable, optional
        ``prepare(comm, values) -> args``: the kernel's own rules between parameters
        (defaults that depend on others, combinations that are refused) and the
        positional arguments of the raw function. Default: the values in order.
    finish : callable, optional
        ``finish(times, values) -> times`` before the shape is checked.
    """
    missing = set(kernel.implementations) - set(raw)
    if missing:
        raise ValueError(f"{kernel.slug}: no function for implementation(s) {sorted(missing)}")
    signature = _signature(kernel)
    choices = [p.name for p in kernel.params if p.kind == "choice"]
    nmetrics = len(kernel.metrics)

    def make(impl, func):
        def run(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            values = dict(bound.arguments)
            comm = values.pop("comm")
            if kernel.comm == "first" or comm is not None:
                check_comm(kernel, comm)
            for p in kernel.params:
                values[p.name] = p.check(values[p.name], kernel.slug)
            call = prepare(comm, values) if prepare else tuple(values.values())
            try:
                times = func(comm, *call) if kernel.comm == "first" else func(*call, comm)
            except errors as exc:
                what = ", ".join([impl] + [str(values[c]) for c in choices])
                raise KernelError(f"{kernel.slug} ({what}) failed: {exc}") from None
            if finish:
                times = finish(times, values)
            times = np.asarray(times, dtype=np.float64)
            return times.reshape(nmetrics, -1)

        run.__name__ = run.__qualname__ = f"run_{impl}"
        run.__signature__ = signature
        run.__doc__ = _docstring(kernel, impl, LABELS.get(impl, impl))
        run.__module__ = f"hpclab.chapters.{kernel.slug}.kernels"
        return run

    return {impl: make(impl, raw[impl]) for impl in kernel.implementations}


class first_ranks:
    """``with first_ranks(comm, n) as sub:`` a communicator of comm's first n ranks (None on
    the others), freed at the end. Collective on comm (MPI_Comm_split). With ``dims`` (a
    process grid of n ranks), ``sub`` is a non-periodic Cartesian communicator on it
    (MPI_Cart_create, ranks not reordered), freed at the end too."""

    def __init__(self, comm, n, dims=None):
        from mpi4py import MPI

        if not 1 <= n <= comm.Get_size():
            raise ValueError(f"{n} ranks asked for; this communicator has {comm.Get_size()}")
        if dims is not None and int(np.prod(dims)) != n:
            raise ValueError(f"a process grid {list(dims)} of {int(np.prod(dims))} ranks for "
                             f"{n} ranks")
        inside = comm.Get_rank() < n
        self.split = comm.Split(0 if inside else MPI.UNDEFINED, comm.Get_rank())
        self.sub = self.split if inside else None
        if inside and dims is not None:
            try:
                self.sub = self.split.Create_cart([int(d) for d in dims],
                                                  periods=[False] * len(dims))
            except BaseException:
                self.split.Free()
                raise

    def __enter__(self):
        return self.sub

    def __exit__(self, *exc):
        if self.sub is not None:  # on the first n ranks (the others hold MPI_COMM_NULL)
            if self.sub is not self.split:
                self.sub.Free()
            self.split.Free()
        return False
