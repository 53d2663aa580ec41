# Declarations of hpclab_common.h for the kernels' Cython modules.
from libc.string cimport strncpy
from mpi4py.libmpi cimport MPI_Comm

cdef extern from "hpclab_common.h" nogil:
    enum: HPCLAB_ERRLEN
    void *hpclab_alloc(size_t nbytes, int hugepages)
    void hpclab_free(void *ptr)
    void *hpclab_alloc_untouched(size_t nbytes, int hugepages)
    void hpclab_free_untouched(void *ptr, size_t nbytes)
    int hpclab_fail_together(MPI_Comm comm, int failed, char *errmsg, size_t errlen)
    const char *hpclab_mpi_build_library()
    const char *hpclab_compiler()


cdef inline void hpclab_set_errmsg(char *dst, str text) noexcept:
    """Copy a Python message into an HPCLAB_ERRLEN buffer for hpclab_fail_together."""
    cdef bytes raw = text.encode()
    strncpy(dst, raw, HPCLAB_ERRLEN - 1)
    dst[HPCLAB_ERRLEN - 1] = 0
