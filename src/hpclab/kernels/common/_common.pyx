# cython: language_level=3, boundscheck=False, wraparound=False
"""Buffers allocated the way every kernel allocates them, and build facts.

Implementations written in Python take their message buffers from
:class:`Buffer`, so they use the same allocator (``hpclab_alloc``) as the C
and Cython implementations.
"""
import numpy as np

from cpython.buffer cimport PyBUF_WRITABLE
from mpi4py cimport MPI
from mpi4py.libmpi cimport MPI_Finalized, MPI_COMM_NULL
from hpclab_common cimport (HPCLAB_ERRLEN, hpclab_alloc, hpclab_free, hpclab_mpi_build_library,
                            hpclab_compiler, hpclab_topo, hpclab_topo_create, hpclab_topo_free,
                            hpclab_topo_points, hpclab_halo_exchange, hpclab_block_range,
                            hpclab_topo_block_of, hpclab_topo_scatter, hpclab_topo_gather,
                            hpclab_topo_set_halo, hpclab_topo_set_align, hpclab_topo_extent,
                            hpclab_topo_lead, HPCLAB_LINE_DOUBLES)


cdef class Buffer:
    """A page-aligned, zero-filled byte buffer that supports the buffer protocol.

    Parameters
    ----------
    nbytes : int
        Size in bytes (0 is allowed).
    hugepages : bool
        Ask for transparent huge pages (``MADV_HUGEPAGE``); otherwise the
        system's policy applies, as for ``malloc``.
    """
    cdef void *ptr
    cdef Py_ssize_t nbytes
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]
    cdef readonly bint hugepages
    cdef int exports

    def __cinit__(self, Py_ssize_t nbytes, bint hugepages=False):
        if nbytes < 0:
            raise ValueError(f"buffer size must be >= 0, got {nbytes}")
        self.ptr = hpclab_alloc(<size_t>nbytes, hugepages)
        if self.ptr == NULL:
            raise MemoryError(f"cannot allocate {nbytes} bytes")
        self.nbytes = nbytes
        self.hugepages = hugepages
        self.shape[0] = nbytes
        self.strides[0] = 1

    def __dealloc__(self):
        hpclab_free(self.ptr)

    def __len__(self):
        return self.nbytes

    def __getbuffer__(self, Py_buffer *view, int flags):
        view.buf = self.ptr
        view.obj = self
        view.len = self.nbytes
        view.readonly = 0
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL
        self.exports += 1

    def __releasebuffer__(self, Py_buffer *view):
        self.exports -= 1


# the C layer's padded rows (hpclab_topo.h); hpclab.kernels.topology.LINE_DOUBLES must agree
LINE_DOUBLES = HPCLAB_LINE_DOUBLES


def mpi_build_library():
    """The MPI library the kernels were compiled against, e.g. ``"MPICH 5.0.2"``."""
    return hpclab_mpi_build_library().decode()


def compiler():
    """The C compiler the kernels were compiled with."""
    return hpclab_compiler().decode()


def block_range(long n, int parts, int index):
    """(offset, count) of the block of n points that part `index` of `parts` owns (C)."""
    cdef long offset, count
    if parts < 1 or not 0 <= index < parts:
        raise ValueError(f"part {index} of {parts} does not exist")
    hpclab_block_range(n, parts, index, &offset, &count)
    return offset, count


cdef class CTopology:
    """The C topology layer (hpclab_topo.c) on an mpi4py communicator.

    Use :class:`hpclab.kernels.topology.Topology`, which validates arguments and
    offers the same interface in mpi4py; this class is its ``impl="c"``.
    """
    cdef hpclab_topo t
    cdef bint alive

    def __cinit__(self, MPI.Comm comm not None, global_shape, dims, periods, int halo=1,
                  int align=1):
        cdef long g[3]
        cdef int d_[3]
        cdef int p_[3]
        cdef int nd = len(global_shape), k, rc
        cdef char errmsg[HPCLAB_ERRLEN]
        self.alive = False
        if not 1 <= nd <= 3 or len(dims) != nd or len(periods) != nd:
            raise ValueError("global_shape, dims and periods need 1 to 3 entries each")
        for k in range(nd):
            g[k] = global_shape[k]
            d_[k] = dims[k]
            p_[k] = 1 if periods[k] else 0
        errmsg[0] = 0
        with nogil:
            rc = hpclab_topo_create(comm.ob_mpi, nd, g, d_, p_, &self.t, errmsg, HPCLAB_ERRLEN)
        if rc:
            raise ValueError(errmsg.decode(errors="replace"))
        self.alive = True
        if halo != 1:
            with nogil:
                rc = hpclab_topo_set_halo(&self.t, halo, errmsg, HPCLAB_ERRLEN)
            if rc:
                self.free()
                raise ValueError(errmsg.decode(errors="replace"))
        if align != 1:
            rc = hpclab_topo_set_align(&self.t, align, errmsg, HPCLAB_ERRLEN)
            if rc:
                self.free()
                raise ValueError(errmsg.decode(errors="replace"))

    def _tuple(self, name):
        cdef int k
        vals = []
        for k in range(self.t.ndims):
            vals.append({"dims": self.t.dims[k], "periods": bool(self.t.periods[k]),
                         "coords": self.t.coords[k], "global": self.t.glob[k],
                         "local": self.t.local[k], "offset": self.t.offset[k],
                         "lo": self.t.lo[k], "hi": self.t.hi[k]}[name])
        return tuple(vals)

    def describe(self):
        """The decomposition as a dict (the same keys as the mpi4py Topology's)."""
        if not self.alive:
            raise ValueError("this topology was freed")
        out = {name: self._tuple(name) for name in ("dims", "periods", "coords", "global",
                                                    "local", "offset", "lo", "hi")}
        out.update(rank=self.t.rank, size=self.t.size, cut=self.t.cut, halo=self.t.halo,
                   points=hpclab_topo_points(&self.t))
        if self.t.align != 1:  # the C layer's padded rows (the Topology class has none)
            out.update(align=self.t.align, lead=hpclab_topo_lead(&self.t),
                       extents=tuple(hpclab_topo_extent(&self.t, k)
                                     for k in range(self.t.ndims)))
        return out

    def exchange(self, double[::1] field not None):
        """Exchange the halo of a C-contiguous field of local + 2 halo points per dimension
        (the last one padded when aligned)."""
        if not self.alive:
            raise ValueError("this topology was freed")
        if <size_t>field.shape[0] != hpclab_topo_points(&self.t):
            raise ValueError(f"the field has {field.shape[0]} doubles, the decomposition "
                             f"needs {hpclab_topo_points(&self.t)} (local + 2 halo per "
                             "dimension, the last one padded when aligned)")
        with nogil:
            hpclab_halo_exchange(&self.t, &field[0])

    def block_of(self, int rank):
        """(offset, count) per dimension of the block of ``rank``."""
        cdef long offset[3]
        cdef long count[3]
        cdef int k
        if not self.alive:
            raise ValueError("this topology was freed")
        if not 0 <= rank < self.t.size:
            raise ValueError(f"rank {rank} is not in a grid of {self.t.size} ranks")
        hpclab_topo_block_of(&self.t, rank, offset, count)
        return (tuple(offset[k] for k in range(self.t.ndims)),
                tuple(count[k] for k in range(self.t.ndims)))

    def blocks(self, int root, double[::1] glob, double[::1] local not None, bint out):
        """hpclab_topo_scatter (out) or hpclab_topo_gather; glob is used on root only."""
        cdef double *g = NULL
        cdef double dummy = 0
        cdef double *l = &dummy
        cdef int rc
        if not self.alive:
            raise ValueError("this topology was freed")
        if glob is not None and glob.shape[0]:
            g = &glob[0]
        if local.shape[0]:
            l = &local[0]
        with nogil:
            if out:
                rc = hpclab_topo_scatter(&self.t, root, g, l)
            else:
                rc = hpclab_topo_gather(&self.t, root, l, g)
        if rc:
            raise MemoryError("the root rank cannot allocate its requests")

    def free(self):
        """Free the Cartesian communicator and the face datatypes (collective)."""
        if self.alive:
            hpclab_topo_free(&self.t)
            self.alive = False

    def __dealloc__(self):
        cdef int finalized = 0
        if self.alive:
            MPI_Finalized(&finalized)
            if not finalized:
                hpclab_topo_free(&self.t)
