# cython: language_level=3, boundscheck=False, wraparound=False
"""Buffers allocated the way every kernel allocates them, and build facts.

Implementations written in Python take their message buffers from
:class:`Buffer`, so they use the same allocator (``hpclab_alloc``) as the C
and Cython implementations.
"""
from cpython.buffer cimport PyBUF_WRITABLE
from hpclab_common cimport (hpclab_alloc, hpclab_free, hpclab_mpi_build_library,
                            hpclab_compiler)


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


def mpi_build_library():
    """The MPI library the kernels were compiled against, e.g. ``"MPICH 5.0.2"``."""
    return hpclab_mpi_build_library().decode()


def compiler():
    """The C compiler the kernels were compiled with."""
    return hpclab_compiler().decode()
