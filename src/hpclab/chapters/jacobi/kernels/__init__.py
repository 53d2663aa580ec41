"""Jacobi: sweeps of the 7-point stencil for -Laplace(u) = f with a halo exchange.

The kernel of report 001, section 4, in three implementations with one signature
generated from the declaration (:mod:`hpclab.chapters.jacobi.declaration`)::

    run_c(comm, decomposition="cube", nx=64, ny=64, nz=64, overlap=False, sweeps=10,
          repetitions=3)
    run_cython(...)   # Cython loops, halos from the C topology layer
    run_python(...)   # numpy slices and the mpi4py topology layer

Each returns an array of shape (4, repetitions): seconds per sweep (wall clock), the
compute and the halo time per sweep (the slowest rank's) and k, the directions cut. The
field starts at the discrete solution u* = sin(pi x) sin(pi y) sin(pi z) with f = -Laplace_h
u*, a fixed point of the sweep; every rank checks after every batch that it still holds it
and raises :class:`hpclab.kernels.KernelError` on every rank if not. :func:`field` runs the
sweeps from a given global field instead and returns the result, for comparisons with a
serial sweep.
"""
import numpy as np

from hpclab import machine
from hpclab.chapters.jacobi.declaration import DECOMPOSITIONS, KERNEL
from hpclab.kernels import (
    NEVER,
    KernelError,
    check_isa_match,
    check_mpi_match,
    node_ranks,
    streaming_threshold as kernels_streaming_threshold,
)
from hpclab.kernels.api import build, check_comm
from hpclab.kernels.topology import padded_row

check_mpi_match()
check_isa_match("jacobi")

from . import _jacobi
from ._python import manufactured, minus_laplacian, run_python as _run_python, sweep

# Spatial blocking of the C and Cython sweeps: the three planes of u that a sweep reads at
# once may fill this share of one core's part of the last-level cache (the rest holds the
# rows of f and unew passing through, and other data). Planes that fit are reused from the
# cache whole and the sweep runs unblocked; larger ones would come from memory three times
# (as planes i + 1, i and i - 1), and blocks of rows keep them in the cache (see jacobi.h and
# the page's traffic model). Blocking for a core's private L2 instead was no faster where it
# was tried (0.99 and 0.97 of unblocked at L = 128 and 256): the planes it lets go come again
# from the last level, not from memory.
CACHE_SHARE = 0.5


def cache_budget(described=None):
    """The bytes the three planes of u may fill on this machine (or a described one), 0 when
    it does not report its caches (no blocking)."""
    share = machine.last_level_share_bytes(described)
    return int(share * CACHE_SHARE) if share else 0


def _set_cache_budget():
    _jacobi.set_cache(cache_budget())


_set_cache_budget()

# Streaming stores (hpclab_simd.h): where the three fields of the node's ranks take more than
# the node's cores' shares of the last-level cache together (machine.streaming_threshold_bytes:
# at most STREAMING_L2_CAP times the L2 a core), each writes its new values past the cache:
# 24 bytes from memory per update instead of 32.
def streaming_threshold(described=None):
    """The bytes of the three fields of a node's ranks together above which the sweeps
    stream their stores, on this machine (or a described one); NEVER without caches reported
    or vector stores."""
    return kernels_streaming_threshold(_jacobi.VECTOR_DOUBLES, described)


def field_bytes(L):
    """The bytes of a rank's three fields (u, unew, f) at L³ interior points: one halo layer
    all round, rows padded to whole cache lines (the sweeps' layout)."""
    return 3 * (L + 2) * (L + 2) * padded_row(L + 2) * 8


def stores(impl, comm, decomposition, shape):
    """How ``impl``'s sweeps on ``comm`` store their new values on the rank with the largest
    block of a global grid of ``shape``: "streaming" (past the cache) or "plain". Collective
    on comm (the ranks on a node count)."""
    from hpclab.kernels.topology import block_range

    if impl == "python":  # numpy writes with plain stores
        return "plain"
    grid = process_grid(decomposition, comm.Get_size())
    largest = [block_range(n, p, 0)[1] for n, p in zip(shape, grid)]
    points = (largest[0] + 2) * (largest[1] + 2) * padded_row(largest[2] + 2)
    ranks = node_ranks(comm)
    return "streaming" if _jacobi.streamed(points, ranks) else "plain"


def stores_at(L, ranks=1):
    """How this process's C and Cython sweeps store their new values at L³ points per rank,
    ``ranks`` of them on the node: "streaming" (past the cache, :func:`streaming_threshold`)
    or "plain"."""
    return "streaming" if _jacobi.streamed(field_bytes(L) // 24, ranks) else "plain"


def mib(nbytes):
    """Bytes as MiB in words: whole MiB from 10 on, two significant digits below."""
    x = nbytes / 2**20
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def streaming_words(L, above, ranks=1, caches=1):
    """Whether a rank of L³ points, one of ``ranks`` on the node, streams its stores under
    the threshold ``above`` (of the fields of the node's ranks together, kept by its
    ``caches`` last-level caches: a rank reaches one), in words with the sizes."""
    parts = max(ranks, caches, 1)
    total = field_bytes(L) * parts
    size = (f"its fields, {mib(total)} MiB" if parts == 1
            else f"the fields of its {ranks} ranks, {mib(field_bytes(L) * ranks)} MiB"
            if ranks >= caches
            else f"its fields, {mib(field_bytes(L))} MiB, one of its {caches} last-level caches "
                 f"counted for {mib(above // parts)} MiB, so as {parts} ranks, {mib(total)} MiB")
    if above >= NEVER:
        return "plain stores: this machine does not report its caches" \
            if _jacobi.VECTOR_DOUBLES else "plain stores: this build has no vector stores"
    if total > above:
        return f"{size}, pass the {mib(above)} MiB threshold: streaming stores"
    return f"{size}, are within the {mib(above)} MiB threshold: plain stores"


_jacobi.set_streaming(streaming_threshold(), machine.last_level_caches())

IMPLEMENTATIONS = KERNEL.implementations
GRID_DIMS = {"slab": (0, 1, 1), "pencil": (0, 0, 1), "cube": (0, 0, 0)}
_RAW = {"c": _jacobi.run_c, "cython": _jacobi.run_cython, "python": _run_python}


def process_grid(decomposition, size):
    """The process grid (ranks per dimension) of a decomposition on size ranks."""
    from mpi4py import MPI

    if decomposition not in GRID_DIMS:
        raise ValueError(f"unknown jacobi decomposition {decomposition!r}: choose one of "
                         f"{', '.join(DECOMPOSITIONS)}")
    return tuple(MPI.Compute_dims(size, list(GRID_DIMS[decomposition])))


def _prepare(comm, v):
    from hpclab import machine

    grid = process_grid(v["decomposition"], comm.Get_size())
    shape = (v["nx"], v["ny"], v["nz"])
    for d, (n, p) in enumerate(zip(shape, grid)):
        if n < p:
            raise ValueError(f"the {v['decomposition']} grid {'x'.join(map(str, grid))} cuts "
                             f"dimension {d} ({n} points) into {p} blocks: every rank needs at "
                             "least one point; use a larger grid or fewer ranks")
    block = [n // p + 3 for n, p in zip(shape, grid)]
    points = 3 * 8 * float(np.prod(block[:-1], dtype=float) * padded_row(block[-1]))
    have = machine.memory_bytes()
    if have and points * comm.Get_size() > have / 2:
        raise ValueError(f"the grid {'x'.join(map(str, shape))} needs {points / 2**30:.1f} GiB "
                         f"per rank, more than half of this machine's {have / 2**30:.1f} GiB")
    return (DECOMPOSITIONS.index(v["decomposition"]), v["nx"], v["ny"], v["nz"], v["overlap"],
            v["sweeps"], v["repetitions"])


RUNNERS = build(KERNEL, _RAW, (_jacobi.JacobiError, KernelError), prepare=_prepare,
                finish=lambda result, values: result[0])
run_c, run_cython, run_python = (RUNNERS[i] for i in IMPLEMENTATIONS)


def field(comm, u0, impl="c", decomposition="cube", overlap=False, sweeps=1):
    """The global field after ``sweeps`` sweeps from ``u0`` (the global array, on rank 0;
    ignored elsewhere), on rank 0 (None elsewhere): for a comparison with a serial sweep.
    Collective; the shape comes from rank 0's u0."""
    check_comm(KERNEL, comm)
    if impl not in _RAW:
        raise ValueError(f"unknown jacobi implementation {impl!r}: choose one of "
                         f"{', '.join(IMPLEMENTATIONS)}")
    shape = comm.bcast(np.shape(u0) if comm.Get_rank() == 0 else None, root=0)
    if len(shape) != 3:
        raise ValueError(f"u0 must be a 3D array, got shape {shape}")
    v = {"decomposition": decomposition, "nx": shape[0], "ny": shape[1], "nz": shape[2],
         "overlap": overlap, "sweeps": sweeps, "repetitions": 1}
    args = _prepare(comm, {k: KERNEL.param(k).check(x, KERNEL.slug) for k, x in v.items()})
    try:
        return _RAW[impl](comm, *args, u0=u0 if comm.Get_rank() == 0 else None)[1]
    except _jacobi.JacobiError as exc:
        raise KernelError(f"jacobi ({impl}) failed: {exc}") from None


def serial_problem(shape):
    """The global problem with its halo: (u*, f, w, diag) on arrays of shape + 2, u* and f
    zero on the boundary; what every rank's block is cut from."""
    w = np.array([(n + 1.0) ** 2 for n in shape])
    diag = 2 * w.sum()
    axes = [np.sin(np.pi * (np.arange(n) + 1) / (n + 1)) for n in shape]
    ustar = np.zeros(tuple(n + 2 for n in shape))
    ustar[1:-1, 1:-1, 1:-1] = axes[0][:, None, None] * axes[1][None, :, None] * axes[2]
    return ustar, minus_laplacian(ustar, w, diag), w, diag


def serial_sweeps(u0, sweeps=1):
    """The same sweeps on one process with numpy: the reference for :func:`field`."""
    _, f, w, diag = serial_problem(np.shape(u0))
    c = (slice(1, -1),) * 3
    u = np.zeros_like(f)
    u[c] = u0
    unew = u.copy()
    for _ in range(sweeps):
        sweep(u, f, unew, w, diag)
        u, unew = unew, u
    return u[c].copy()


def check_cases(comm):
    """The correctness matrix of ``python -m hpclab check jacobi``: every decomposition, with
    and without overlap, on a grid that 2, 3 and 4 ranks do not divide evenly."""
    for shape in ((7, 6, 5), (12, 8, 4)):
        for decomposition in DECOMPOSITIONS:
            for overlap in (False, True):
                yield {"decomposition": decomposition, "nx": shape[0], "ny": shape[1],
                       "nz": shape[2], "overlap": overlap, "sweeps": 3, "repetitions": 2}


def inject_fault(comm):
    """Test hook of the correctness runner: the last rank corrupts one halo point."""
    _jacobi._set_fault(1)


__all__ = ["run_c", "run_cython", "run_python", "RUNNERS", "IMPLEMENTATIONS", "DECOMPOSITIONS",
           "KERNEL", "process_grid", "field", "serial_sweeps", "serial_problem", "manufactured",
           "KernelError"]
