"""Stencils: second derivatives and the Laplacian of order 2 to 16 on a decomposed 3D grid.

The FD_D2 test case of report 003 (hpcscan) in two implementations with one signature
generated from the declaration (:mod:`hpclab.chapters.stencil.declaration`)::

    run_c(comm, operator="laplacian", order=8, n1=64, n2=64, n3=64, p1=0, p2=0, p3=0,
          block2=0, block3=0, threads=1, applications=5, repetitions=3)
    run_cython(...)   # the loops in Cython (prange); decomposition, halo, check from C

Each returns an array of shape (4, repetitions): seconds per application (wall clock), the
compute and the halo time per application (the slowest rank's) and the error of the result
against the exact derivative of u = sin(2 x1) sin(3 x2) sin(1.5 x3), relative to its
largest value. Every rank checks after every repetition that the result is the stencil's
exact value on u (a sine is an eigenfunction of it) and raises
:class:`hpclab.kernels.KernelError` on every rank if not. Axes are report 003's: axis 1 is
the contiguous one.
"""
import numpy as np

from hpclab import machine
from hpclab.chapters.stencil.declaration import KERNEL, OPERATORS
from hpclab.kernels import (
    NEVER,
    KernelError,
    check_isa_match,
    check_mpi_match,
    node_ranks,
    streaming_threshold as kernels_streaming_threshold,
)
from hpclab.kernels.api import build
from hpclab.kernels.topology import block_range, padded_row

check_mpi_match()
check_isa_match("stencil")

from . import _stencil  # type: ignore[attr-defined]

IMPLEMENTATIONS = KERNEL.implementations
_RAW = {"c": _stencil.run_c, "cython": _stencil.run_cython}
weights = _stencil.weights


def streaming_threshold(described=None):
    """The bytes of the two arrays of a node's ranks together above which the C kernel
    stores the operator's output past the cache, on this machine (or a described one); NEVER
    without caches reported or vector stores. The wave's step reads w, so it never
    streams."""
    return kernels_streaming_threshold(_stencil.VECTOR_DOUBLES, described)


_stencil.set_streaming(streaming_threshold(), machine.last_level_caches())


def stores(impl, nprocs, n, order, kind="derivative", on_node=None):
    """How ``impl`` stores the operator's output on the rank with the largest block of an n³
    grid on ``nprocs`` ranks, ``on_node`` of them on its node (None: all of them, as on
    one machine): "streaming" (past the cache) or "plain". Only the C kernel streams, and
    never in the propagator, whose step reads w."""
    if impl != "c" or kind == "propagator":
        return "plain"
    r = order // 2
    l1, l2, l3 = (block_range(n, p, 0)[1] for p in process_grid(nprocs))
    points = (l3 + 2 * r) * (l2 + 2 * r) * padded_row(l1 + 2 * r)
    return "streaming" if _stencil.streamed(points, on_node or nprocs) else "plain"


def process_grid(size, p1=0, p2=0, p3=0):
    """The process grid (p1, p2, p3) along axes 1, 2, 3 on size ranks: the given counts,
    the zeros filled by MPI_Dims_create. A ValueError when it cannot be made."""
    from mpi4py import MPI

    given = [p3, p2, p1]  # C order: axis 3 first
    fixed = int(np.prod([p for p in given if p]))
    if fixed == 0 or size % fixed or (all(given) and fixed != size):
        raise ValueError(f"a process grid {p1 or '?'}x{p2 or '?'}x{p3 or '?'} (axes 1, 2, 3) "
                         f"does not fit {size} ranks: give counts whose product is {size}, "
                         "or 0 to let MPI choose")
    dims = MPI.Compute_dims(size, given)
    return dims[2], dims[1], dims[0]


def _prepare(comm, v):
    from hpclab import machine

    size = comm.Get_size()
    grid = process_grid(size, v["p1"], v["p2"], v["p3"])
    r = v["order"] // 2
    for axis, (n, p) in enumerate(zip((v["n1"], v["n2"], v["n3"]), grid), start=1):
        if n // p < r and p > 1:
            raise ValueError(f"{p} ranks along axis {axis} ({n} points) make blocks thinner "
                             f"than the halo of order {v['order']} ({r} points): use fewer "
                             "ranks along it or a larger grid")
    if (v["block2"] > 0) != (v["block3"] > 0):
        raise ValueError(f"blocks of {v['block3']} x {v['block2']} points (axes 3 x 2): give "
                         "both block sizes, or neither for no blocking")
    block = [n // p + 1 + 2 * r for n, p in zip((v["n1"], v["n2"], v["n3"]), grid)]
    need = 2 * 8 * float(np.prod(block[1:], dtype=float) * padded_row(block[0]))  # axis 1 rows
    have = machine.memory_bytes()
    if have and need * size > have / 2:
        raise ValueError(f"the grid {v['n1']}x{v['n2']}x{v['n3']} needs {need / 2**30:.1f} GiB "
                         f"per rank, more than half of this machine's {have / 2**30:.1f} GiB")
    dims = (grid[2], grid[1], grid[0])  # C order
    return (OPERATORS.index(v["operator"]), v["order"], dims, v["n3"], v["n2"], v["n1"],
            v["block3"], v["block2"], v["threads"], v["applications"], v["repetitions"])


RUNNERS = build(KERNEL, _RAW, (_stencil.StencilError, KernelError), prepare=_prepare)
run_c, run_cython = (RUNNERS[i] for i in IMPLEMENTATIONS)


WAVE_METRICS = _stencil.WAVE_METRICS


def propagate(comm, order=8, n=32, mode=2, periods=1.0, dt_fraction=0.5, block3=0, block2=0,
              threads=1, repetitions=1):
    """The wave propagator of report 003's Propa test (C): the standing mode m of the unit
    cube on n interior points per axis, ``periods`` periods at ``dt_fraction`` of the
    stable step, order ``order`` in space. Returns an array (5, repetitions): seconds per
    step, compute and halo seconds per step (the slowest rank's), the error (max over steps
    and points of |u - exact| over the amplitude) and the steps. Collective."""
    from hpclab.kernels.api import check_comm

    check_comm(KERNEL, comm)
    order = KERNEL.param("order").check(order, KERNEL.slug)
    for name, value, low in (("n", n, 1), ("mode", mode, 1), ("threads", threads, 1),
                             ("repetitions", repetitions, 1), ("block3", block3, 0),
                             ("block2", block2, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if mode > n:
        raise ValueError(f"mode {mode} needs at least {mode} points per axis, got n = {n}")
    if not (periods > 0 and dt_fraction > 0):
        raise ValueError(f"periods ({periods}) and dt_fraction ({dt_fraction}) must be > 0")
    values = {"operator": "laplacian", "order": order, "n1": n, "n2": n, "n3": n, "p1": 0,
              "p2": 0, "p3": 0, "block2": block2, "block3": block3, "threads": threads,
              "applications": 1, "repetitions": repetitions}
    args = _prepare(comm, values)
    try:
        return _stencil.wave_c(comm, order, args[2], n, mode, float(periods),
                               float(dt_fraction), block3, block2, threads, repetitions)
    except _stencil.StencilError as exc:
        raise KernelError(f"stencil (wave propagator) failed: {exc}") from None


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check stencil``: every operator at orders
    2, 8 and 16, baseline and blocked (blocks that do not divide the grid), on a grid that 2,
    3 and 4 ranks do not divide evenly."""
    for operator in OPERATORS:
        for order in (2, 8, 16):
            for blocks in ((0, 0), (3, 5)):
                yield {"operator": operator, "order": order, "n1": 23, "n2": 21, "n3": 27,
                       "block3": blocks[0], "block2": blocks[1], "threads": 2,
                       "applications": 2, "repetitions": 2}


def inject_fault(comm):
    """Test hook of the correctness runner: the last rank corrupts one halo point."""
    _stencil._set_fault(1)


__all__ = ["run_c", "run_cython", "RUNNERS", "IMPLEMENTATIONS", "OPERATORS", "KERNEL",
           "process_grid", "weights", "propagate", "WAVE_METRICS", "KernelError", "NEVER",
           "streaming_threshold", "stores", "node_ranks"]
