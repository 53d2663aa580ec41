"""Cartesian decomposition of a 1D/2D/3D grid and the exchange of one halo layer.

:class:`Topology` splits a global grid of points over the ranks of a communicator
on a Cartesian process grid (``MPI_Dims_create``'s, or the ``dims`` given; periodic
or not) and exchanges the faces of each rank's block with its neighbours. Two
implementations with one interface:

``impl="c"``       the C layer ``kernels/common/hpclab_topo.c`` that the C and Cython
                   kernels call directly (here through its Cython wrapper);
``impl="python"``  the same in mpi4py, for the kernels written in Python and for
                   reading.

A rank stores its block as an array of ``local + 2`` points per dimension (C order,
one halo layer all round; :meth:`Topology.field`). Blocks differ by at most one point
per dimension when the extent does not divide (the first ``n mod P`` ranks of a
dimension get one more). Faces are described by MPI subarray datatypes, committed
once per decomposition: no pack loop, no extra buffers. At a closed boundary the
neighbour is ``MPI.PROC_NULL`` and that halo layer is left as it is (it holds the
boundary condition). Only faces are exchanged (no edges or corners): what 5- and
7-point stencils need.
"""
from __future__ import annotations

import numbers

import numpy as np

IMPLEMENTATIONS = ("c", "python")
MAX_DIMS = 3
# doubles in a 64-byte cache line: the C kernels of Jacobi, Poisson and the stencils pad every
# row of their fields to a multiple of it (HPCLAB_LINE_DOUBLES in hpclab_topo.h)
LINE_DOUBLES = 8


def padded_row(extent):
    """The doubles a C kernel stores for a row of ``extent`` points (halo included)."""
    return -(-int(extent) // LINE_DOUBLES) * LINE_DOUBLES


def block_range(n, parts, index):
    """(offset, count) of the block of n points that part ``index`` of ``parts`` owns."""
    base, extra = divmod(int(n), int(parts))
    return index * base + min(index, extra), base + (index < extra)


def _shape(comm, global_shape, dims, periods):
    from mpi4py import MPI

    if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
        raise TypeError(f"comm must be an mpi4py intracommunicator, got {comm!r}")
    try:
        shape = tuple(global_shape)
    except TypeError:
        shape = (global_shape,)
    if not 1 <= len(shape) <= MAX_DIMS:
        raise ValueError(f"a grid has 1 to {MAX_DIMS} dimensions, got {len(shape)}")
    for n in shape:
        if not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1:
            raise ValueError(f"grid extents must be positive integers, got {shape}")
    nd = len(shape)
    dims = [0] * nd if dims is None else [int(d) for d in dims]
    periods = [False] * nd if periods is None else [bool(p) for p in periods]
    if len(dims) != nd or len(periods) != nd:
        raise ValueError(f"dims and periods need {nd} entries, like the grid {shape}")
    if any(d < 0 for d in dims):
        raise ValueError(f"ranks per dimension must be >= 0 (0: MPI chooses), got {dims}")
    size = comm.Get_size()
    fixed = int(np.prod([d for d in dims if d > 0])) if any(dims) else 1
    if size % fixed:
        raise ValueError(f"the process grid {dims} does not fit the {size} ranks of the "
                         "communicator")
    dims = list(MPI.Compute_dims(size, dims))
    if int(np.prod(dims)) != size:
        raise ValueError(f"a process grid {dims} of {int(np.prod(dims))} ranks does not match "
                         f"the {size} ranks of the communicator")
    for d, (n, p) in enumerate(zip(shape, dims)):
        if n < p:
            raise ValueError(f"dimension {d} has {n} points for {p} ranks: every rank needs at "
                             "least one point")
    return tuple(int(n) for n in shape), dims, periods


class Topology:
    """A Cartesian decomposition of ``global_shape`` over the ranks of ``comm``.

    Parameters
    ----------
    comm : mpi4py.MPI.Intracomm
        The ranks to decompose over (collective).
    global_shape : tuple of int
        Interior points per dimension (1 to 3 dimensions).
    dims : sequence of int, optional
        Ranks per dimension; 0 (or None for all) lets ``MPI_Dims_create`` choose.
    periods : sequence of bool, optional
        Periodic dimensions (default: none).
    impl : {"c", "python"}
        The C layer or its mpi4py twin.
    halo : int
        Halo layers around the block (1: what 5- and 7-point stencils read; r for a stencil
        of radius r). A cut (or periodic) dimension whose blocks are thinner than the halo is
        refused with the same message on every rank.

    Attributes
    ----------
    dims, periods, coords, global_shape, local, offset, lo, hi : tuple
        The process grid, this rank's place in it, its block (extent and first global
        index) and its neighbours per dimension (``MPI.PROC_NULL`` at a closed boundary).
    cut : int
        Dimensions split over more than one rank (the ``k`` of halo models).
    """

    def __init__(self, comm, global_shape, dims=None, periods=None, impl="python", halo=1):
        from mpi4py import MPI

        if impl not in IMPLEMENTATIONS:
            raise ValueError(f"unknown topology implementation {impl!r}: choose one of "
                             f"{', '.join(IMPLEMENTATIONS)}")
        if isinstance(halo, bool) or not isinstance(halo, (int, np.integer)) or halo < 1:
            raise ValueError(f"halo must be an integer >= 1 (layers), got {halo!r}")
        shape, dims, periods = _shape(comm, global_shape, dims, periods)
        self.halo = int(halo)
        self._mpi = MPI
        self.impl = impl
        self.comm = comm  # ranks keep their numbers in the grid (no reordering)
        self._c = None
        self._types = []
        if impl == "c":
            from hpclab.kernels.common._common import CTopology

            self._c = CTopology(comm, shape, dims, periods, self.halo)
            d = self._c.describe()
            self.cart = None
            self.rank, self.size = d["rank"], d["size"]
            for name in ("dims", "periods", "coords", "local", "offset", "lo", "hi"):
                setattr(self, name, d[name])
            self.global_shape = d["global"]
        else:
            self.cart = comm.Create_cart(dims, periods=periods, reorder=False)
            self.rank, self.size = self.cart.Get_rank(), self.cart.Get_size()
            self.dims, self.periods = tuple(dims), tuple(periods)
            self.coords = tuple(self.cart.Get_coords(self.rank))
            self.global_shape = shape
            blocks = [block_range(n, p, c) for n, p, c in zip(shape, dims, self.coords)]
            self.offset = tuple(o for o, _ in blocks)
            self.local = tuple(c for _, c in blocks)
            shifts = [self.cart.Shift(d, 1) for d in range(len(shape))]
            self.lo = tuple(lo for lo, _ in shifts)
            self.hi = tuple(hi for _, hi in shifts)
            self._refuse_thin_blocks()
            self._faces = [self._face_types(d) for d in range(len(shape))]
        self.ndims = len(self.global_shape)
        self.cut = sum(p > 1 for p in self.dims)
        self._mpi = MPI

    def _refuse_thin_blocks(self):
        """A block of a cut (or periodic) dimension thinner than the halo would need points
        of a farther rank: refused on every rank, with the C layer's words."""
        w = self.halo
        thin = [d for d, (n, p, per) in enumerate(zip(self.local, self.dims, self.periods))
                if (p > 1 or per) and n < w]
        worst = self.cart.allreduce(thin[0] if thin else -1, op=self._mpi.MAX)
        if worst >= 0:
            self.cart.Free()
            raise ValueError(f"a halo of {w} layers needs blocks at least {w} points thick, "
                             f"but {self.dims[worst]} ranks cut dimension {worst} "
                             f"({self.global_shape[worst]} points) thinner: use fewer ranks "
                             "along it or a larger grid")

    def _face_types(self, d):
        from mpi4py import MPI

        w = self.halo
        sizes = [n + 2 * w for n in self.local]
        sub = [w if k == d else n for k, n in enumerate(self.local)]

        def face(start):
            starts = [start if k == d else w for k in range(len(sizes))]
            t = MPI.DOUBLE.Create_subarray(sizes, sub, starts, order=MPI.ORDER_C).Commit()
            self._types.append(t)
            return t

        n = self.local[d]
        return {"send_lo": face(w), "send_hi": face(n), "recv_lo": face(0),
                "recv_hi": face(n + w)}

    @property
    def shape(self):
        """The shape of this rank's array: local + 2 halo per dimension."""
        return tuple(n + 2 * self.halo for n in self.local)

    @property
    def interior(self):
        """The index of the interior of a field (the halo cut off)."""
        return tuple(slice(self.halo, n + self.halo) for n in self.local)

    def field(self, fill=0.0):
        """A new C-contiguous array of doubles of :attr:`shape`."""
        return np.full(self.shape, fill, dtype=np.float64)

    def describe(self):
        """The decomposition as a dict (the same for both implementations)."""
        return {"dims": tuple(self.dims), "periods": tuple(self.periods),
                "coords": tuple(self.coords), "global": tuple(self.global_shape),
                "local": tuple(self.local), "offset": tuple(self.offset),
                "lo": tuple(self.lo), "hi": tuple(self.hi), "rank": self.rank,
                "size": self.size, "cut": self.cut, "halo": self.halo,
                "points": int(np.prod(self.shape))}

    def exchange(self, field):
        """Exchange the halo layer of ``field`` (shape :attr:`shape`, C-contiguous) with
        the neighbours: every receive is posted, then every send, then all are waited for.
        Tags: ``2d`` for what travels down dimension d, ``2d + 1`` for what travels up
        (so that two neighbours that are the same rank are told apart)."""
        if not isinstance(field, np.ndarray) or field.dtype != np.float64 \
                or not field.flags.c_contiguous or field.shape != self.shape:
            raise ValueError(f"the field must be a C-contiguous float64 array of shape "
                             f"{self.shape} (local + 2 halo per dimension), got "
                             f"{getattr(field, 'shape', type(field).__name__)}")
        if self._c is not None:
            self._c.exchange(field.reshape(-1))
            return field
        self._mpi.Request.Waitall(self.start_exchange(field))
        return field

    def start_exchange(self, field):
        """Start the halo exchange of ``field`` and return its requests (wait for them with
        ``MPI.Request.Waitall``), so that work can overlap the messages; the mpi4py
        implementation only (the C kernels call ``hpclab_halo_start``/``_finish``)."""
        if self._c is not None:
            raise TypeError("start_exchange belongs to the mpi4py topology (impl='python'); "
                            "C code calls hpclab_halo_start and hpclab_halo_finish")
        if getattr(field, "shape", None) != self.shape:
            raise ValueError(f"the field must have shape {self.shape} (local + 2 halo per "
                             "dimension)")
        reqs = []
        for d, f in enumerate(self._faces):
            reqs.append(self.cart.Irecv([field, 1, f["recv_lo"]], self.lo[d], 2 * d + 1))
            reqs.append(self.cart.Irecv([field, 1, f["recv_hi"]], self.hi[d], 2 * d))
        for d, f in enumerate(self._faces):
            reqs.append(self.cart.Isend([field, 1, f["send_lo"]], self.lo[d], 2 * d))
            reqs.append(self.cart.Isend([field, 1, f["send_hi"]], self.hi[d], 2 * d + 1))
        return reqs

    def gather(self, field, root=0):
        """The global interior on ``root`` (None elsewhere), from every rank's field."""
        comm = self.comm
        blocks = comm.gather((self.offset, np.ascontiguousarray(field[self.interior])), root)
        if comm.Get_rank() != root:
            return None
        out = np.full(self.global_shape, np.nan)
        for offset, block in blocks:
            out[tuple(slice(o, o + n) for o, n in zip(offset, block.shape))] = block
        return out

    def block_of(self, rank):
        """(offset, count) per dimension of the block that ``rank`` owns (no halo)."""
        if not 0 <= rank < self.size:
            raise ValueError(f"rank {rank} is not in a grid of {self.size} ranks")
        if self._c is not None:
            return self._c.block_of(rank)
        coords = np.unravel_index(rank, self.dims)  # Cartesian ranks are row-major
        blocks = [block_range(n, p, int(c)) for n, p, c in zip(self.global_shape, self.dims,
                                                                coords)]
        return tuple(o for o, _ in blocks), tuple(c for _, c in blocks)

    def _check_global(self, array, root):
        """Root checks the global array and every rank learns the verdict (one broadcast),
        so a wrong array is refused on every rank instead of leaving the others waiting."""
        problem = None
        if self.rank == root and (not isinstance(array, np.ndarray)
                                  or array.dtype != np.float64
                                  or not array.flags.c_contiguous
                                  or array.shape != tuple(self.global_shape)):
            problem = (f"the global array on rank {root} must be a C-contiguous float64 "
                       f"array of shape {tuple(self.global_shape)}")
        problem = self.comm.bcast(problem, root=root)
        if problem:
            raise ValueError(problem)

    def _blocks(self, root, global_array, local, out):
        MPI = self._mpi
        if self._c is not None:
            g = global_array.reshape(-1) if self.rank == root else None
            self._c.blocks(root, g, local.reshape(-1), out)
            return
        mine = self.cart.Irecv(local, root, 77) if out else None  # posted before any send
        reqs = []
        if self.rank == root:
            for r in range(self.size):
                offset, count = self.block_of(r)
                t = MPI.DOUBLE.Create_subarray(self.global_shape, count, offset).Commit()
                call = self.cart.Isend if out else self.cart.Irecv
                reqs.append(call([global_array, 1, t], r, 77))
                t.Free()  # MPI frees it when the message is done
        if not out:
            mine = self.cart.Isend(local, root, 77)
        MPI.Request.Waitall(reqs + [mine])

    def scatter(self, global_array, root=0, out=None):
        """Every rank's block (C-contiguous, shape :attr:`local`; ``out`` or a new array)
        of the global array held by ``root`` (ignored elsewhere). Root sends each block as
        one subarray datatype of the global array; collective."""
        self._check_global(global_array, root)
        local = np.empty(self.local, dtype=np.float64) if out is None else out
        if not (isinstance(local, np.ndarray) and local.dtype == np.float64
                and local.flags.c_contiguous and local.shape == tuple(self.local)):
            raise ValueError(f"out must be a C-contiguous float64 array of shape "
                             f"{tuple(self.local)}")
        self._blocks(root, global_array, local, True)
        return local

    def collect(self, local, root=0, out=None):
        """The global array on ``root`` (None elsewhere) from every rank's block
        (shape :attr:`local`, no halo): the reverse of :meth:`scatter`."""
        local = np.ascontiguousarray(local, dtype=np.float64)
        problem = (f"rank {self.rank}'s block must have shape {tuple(self.local)}, got "
                   f"{local.shape}") if local.shape != tuple(self.local) else None
        problem = next((p for p in self.comm.allgather(problem) if p), None)
        if problem:  # on every rank, so that nobody waits for a block that never comes
            raise ValueError(problem)
        if self.rank == root and out is None:
            out = np.empty(self.global_shape, dtype=np.float64)
        self._check_global(out, root)
        self._blocks(root, out, local, False)
        return out if self.rank == root else None

    def free(self):
        """Free the Cartesian communicator and the datatypes (collective); safe twice."""
        if self._c is not None:
            self._c.free()
        for t in self._types:
            t.Free()
        self._types = []
        if self.cart is not None:
            self.cart.Free()
            self.cart = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()
        return False
