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

    Attributes
    ----------
    dims, periods, coords, global_shape, local, offset, lo, hi : tuple
        The process grid, this rank's place in it, its block (extent and first global
        index) and its neighbours per dimension (``MPI.PROC_NULL`` at a closed boundary).
    cut : int
        Dimensions split over more than one rank (the ``k`` of halo models).
    """

    def __init__(self, comm, global_shape, dims=None, periods=None, impl="python"):
        from mpi4py import MPI

        if impl not in IMPLEMENTATIONS:
            raise ValueError(f"unknown topology implementation {impl!r}: choose one of "
                             f"{', '.join(IMPLEMENTATIONS)}")
        shape, dims, periods = _shape(comm, global_shape, dims, periods)
        self.impl = impl
        self.comm = comm  # ranks keep their numbers in the grid (no reordering)
        self._c = None
        self._types = []
        if impl == "c":
            from hpclab.kernels.common._common import CTopology

            self._c = CTopology(comm, shape, dims, periods)
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
            self._faces = [self._face_types(d) for d in range(len(shape))]
        self.ndims = len(self.global_shape)
        self.cut = sum(p > 1 for p in self.dims)
        self._mpi = MPI

    def _face_types(self, d):
        from mpi4py import MPI

        sizes = [n + 2 for n in self.local]
        sub = [1 if k == d else n for k, n in enumerate(self.local)]

        def face(start):
            starts = [start if k == d else 1 for k in range(len(sizes))]
            t = MPI.DOUBLE.Create_subarray(sizes, sub, starts, order=MPI.ORDER_C).Commit()
            self._types.append(t)
            return t

        n = self.local[d]
        return {"send_lo": face(1), "send_hi": face(n), "recv_lo": face(0), "recv_hi": face(n + 1)}

    @property
    def shape(self):
        """The shape of this rank's array: local + 2 per dimension (one halo layer)."""
        return tuple(n + 2 for n in self.local)

    @property
    def interior(self):
        """The index of the interior of a field (the halo layer cut off)."""
        return tuple(slice(1, n + 1) for n in self.local)

    def field(self, fill=0.0):
        """A new C-contiguous array of doubles of :attr:`shape`."""
        return np.full(self.shape, fill, dtype=np.float64)

    def describe(self):
        """The decomposition as a dict (the same for both implementations)."""
        return {"dims": tuple(self.dims), "periods": tuple(self.periods),
                "coords": tuple(self.coords), "global": tuple(self.global_shape),
                "local": tuple(self.local), "offset": tuple(self.offset),
                "lo": tuple(self.lo), "hi": tuple(self.hi), "rank": self.rank,
                "size": self.size, "cut": self.cut,
                "points": int(np.prod(self.shape))}

    def exchange(self, field):
        """Exchange the halo layer of ``field`` (shape :attr:`shape`, C-contiguous) with
        the neighbours: every receive is posted, then every send, then all are waited for.
        Tags: ``2d`` for what travels down dimension d, ``2d + 1`` for what travels up
        (so that two neighbours that are the same rank are told apart)."""
        if not isinstance(field, np.ndarray) or field.dtype != np.float64 \
                or not field.flags.c_contiguous or field.shape != self.shape:
            raise ValueError(f"the field must be a C-contiguous float64 array of shape "
                             f"{self.shape} (local + 2 per dimension), got "
                             f"{getattr(field, 'shape', type(field).__name__)}")
        if self._c is not None:
            self._c.exchange(field.reshape(-1))
            return field
        MPI = self._mpi
        reqs = []
        for d, f in enumerate(self._faces):
            reqs.append(self.cart.Irecv([field, 1, f["recv_lo"]], self.lo[d], 2 * d + 1))
            reqs.append(self.cart.Irecv([field, 1, f["recv_hi"]], self.hi[d], 2 * d))
        for d, f in enumerate(self._faces):
            reqs.append(self.cart.Isend([field, 1, f["send_lo"]], self.lo[d], 2 * d))
            reqs.append(self.cart.Isend([field, 1, f["send_hi"]], self.hi[d], 2 * d + 1))
        MPI.Request.Waitall(reqs)
        return field

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
