/*
 * NAME
 *   hpclab_common.c - buffer allocation, fail-together errors, build info.
 */
#define _GNU_SOURCE
#include "hpclab_common.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HPCLAB_STR2(x) #x
#define HPCLAB_STR(x) HPCLAB_STR2(x)

void *hpclab_alloc(size_t nbytes, int hugepages)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t align = hugepages ? (size_t)2 << 20 : page;
    size_t len = nbytes ? nbytes : 1;
    void *ptr = NULL;

    len = (len + page - 1) / page * page;
    if (posix_memalign(&ptr, align, len) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (hugepages)
        (void)madvise(ptr, len, MADV_HUGEPAGE);
#endif
    memset(ptr, 0, len);
    return ptr;
}

void hpclab_free(void *ptr)
{
    free(ptr);
}

double *hpclab_alloc_doubles(size_t n, size_t lead, int hugepages)
{
    double *v = hpclab_alloc((n + lead) * sizeof *v, hugepages);

    return v ? v + lead : NULL;
}

void hpclab_free_doubles(double *v, size_t lead)
{
    if (v)
        hpclab_free(v - lead);
}

void *hpclab_alloc_untouched(size_t nbytes, int hugepages)
{
    size_t len = nbytes ? nbytes : 1;
    void *ptr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (ptr == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    if (hugepages)
        (void)madvise(ptr, len, MADV_HUGEPAGE);
#endif
    return ptr;
}

void hpclab_free_untouched(void *ptr, size_t nbytes)
{
    if (ptr)
        munmap(ptr, nbytes ? nbytes : 1);
}

int hpclab_node_ranks(MPI_Comm comm)
{
    MPI_Comm node;
    int n = 1;

    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node)
        == MPI_SUCCESS) {
        MPI_Comm_size(node, &n);
        MPI_Comm_free(&node);
    }
    return n < 1 ? 1 : n;
}

int hpclab_streams_past(size_t bytes, int node_ranks, int caches, size_t above,
                        int vector_doubles)
{
    const int parts = node_ranks > caches ? node_ranks : caches;

    return vector_doubles > 0 && above != SIZE_MAX
        && bytes > above / (size_t)(parts < 1 ? 1 : parts);
}

int hpclab_fail_together(MPI_Comm comm, int failed, char *errmsg, size_t errlen)
{
    int rank, nfailed = 0, candidate, first;
    char buf[HPCLAB_ERRLEN];

    failed = failed != 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Allreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, comm);
    if (nfailed == 0)
        return 0;
    /* the lowest failing rank tells everybody what went wrong */
    candidate = failed ? rank : INT_MAX;
    MPI_Allreduce(&candidate, &first, 1, MPI_INT, MPI_MIN, comm);
    memset(buf, 0, sizeof buf);
    if (rank == first)
        snprintf(buf, sizeof buf, "rank %d: %s", rank, errmsg);
    MPI_Bcast(buf, HPCLAB_ERRLEN, MPI_CHAR, first, comm);
    snprintf(errmsg, errlen, "%s", buf);
    return nfailed;
}

const char *hpclab_mpi_build_library(void)
{
#if defined(OMPI_MAJOR_VERSION)
    return "Open MPI " HPCLAB_STR(OMPI_MAJOR_VERSION) "." HPCLAB_STR(OMPI_MINOR_VERSION) "."
        HPCLAB_STR(OMPI_RELEASE_VERSION);
#elif defined(MVAPICH2_VERSION)
    return "MVAPICH2 " MVAPICH2_VERSION;
#elif defined(MVAPICH_VERSION)
    return "MVAPICH " MVAPICH_VERSION;
#elif defined(I_MPI_VERSION)
    return "Intel MPI " I_MPI_VERSION;
#elif defined(MPICH_VERSION)
    return "MPICH " MPICH_VERSION;
#else
    return "MPI " HPCLAB_STR(MPI_VERSION) "." HPCLAB_STR(MPI_SUBVERSION);
#endif
}

const char *hpclab_compiler(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#elif defined(__VERSION__)
    return __VERSION__;
#else
    return "unknown";
#endif
}
