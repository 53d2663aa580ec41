# Declarations of hpclab_common.h for the kernels' Cython modules.
from libc.string cimport strncpy
from mpi4py.libmpi cimport MPI_Comm, MPI_Request

cdef extern from "hpclab_common.h" nogil:
    enum: HPCLAB_ERRLEN
    void *hpclab_alloc(size_t nbytes, int hugepages)
    void hpclab_free(void *ptr)
    double *hpclab_alloc_doubles(size_t n, size_t lead, int hugepages)
    void hpclab_free_doubles(double *v, size_t lead)
    void *hpclab_alloc_untouched(size_t nbytes, int hugepages)
    void hpclab_free_untouched(void *ptr, size_t nbytes)
    int hpclab_fail_together(MPI_Comm comm, int failed, char *errmsg, size_t errlen)
    int hpclab_node_ranks(MPI_Comm comm)
    int hpclab_streams_past(size_t bytes, int node_ranks, int caches, size_t above,
                            int vector_doubles)
    const char *hpclab_mpi_build_library()
    const char *hpclab_compiler()


cdef inline void hpclab_set_errmsg(char *dst, str text) noexcept:
    """Copy a Python message into an HPCLAB_ERRLEN buffer for hpclab_fail_together."""
    cdef bytes raw = text.encode()
    strncpy(dst, raw, HPCLAB_ERRLEN - 1)
    dst[HPCLAB_ERRLEN - 1] = 0


cdef extern from "hpclab_topo.h" nogil:
    enum: HPCLAB_TOPO_MAXDIMS
    enum: HPCLAB_HALO_REQUESTS
    enum: HPCLAB_LINE_DOUBLES
    ctypedef struct hpclab_topo:
        MPI_Comm cart
        int ndims
        int rank
        int size
        int dims[3]
        int periods[3]
        int coords[3]
        long glob "global"[3]
        long local[3]
        long offset[3]
        int lo[3]
        int hi[3]
        int cut
        int halo
        int align
    void hpclab_block_range(long n, int parts, int index, long *offset, long *count)
    int hpclab_topo_create(MPI_Comm comm, int ndims, const long *glob, const int *dims,
                           const int *periods, hpclab_topo *t, char *errmsg, size_t errlen)
    void hpclab_topo_free(hpclab_topo *t)
    int hpclab_topo_set_halo(hpclab_topo *t, int halo, char *errmsg, size_t errlen)
    size_t hpclab_topo_points(const hpclab_topo *t)
    int hpclab_topo_set_align(hpclab_topo *t, int align, char *errmsg, size_t errlen)
    long hpclab_topo_extent(const hpclab_topo *t, int d)
    size_t hpclab_topo_lead(const hpclab_topo *t)
    long hpclab_round_up(long extent, int align)
    void hpclab_topo_block_of(const hpclab_topo *t, int rank, long *offset, long *count)
    int hpclab_topo_scatter(const hpclab_topo *t, int root, const double *glob, double *local)
    int hpclab_topo_gather(const hpclab_topo *t, int root, const double *local, double *glob)
    void hpclab_halo_start(const hpclab_topo *t, double *field, MPI_Request *req)
    void hpclab_halo_finish(MPI_Request *req)
    void hpclab_halo_exchange(const hpclab_topo *t, double *field)
