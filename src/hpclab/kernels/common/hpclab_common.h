/*
 * NAME
 *   hpclab_common.h - what every hpclab kernel shares: buffer allocation,
 *   fail-together error reporting, and what the kernels were built with.
 *
 * NOTES
 *   Every implementation of a kernel (C, Cython, mpi4py) gets its buffers from
 *   hpclab_alloc, so that a comparison between them never turns into a
 *   comparison between allocators (numpy asks for transparent huge pages for
 *   arrays of 4 MiB and more, plain malloc does not).
 */
#ifndef HPCLAB_COMMON_H
#define HPCLAB_COMMON_H

#include <stddef.h>
#include <mpi.h>

#define HPCLAB_ERRLEN 512

/* Page-aligned, zero-filled (so every page is touched once) allocation.
 * hugepages != 0 asks the kernel for transparent huge pages (MADV_HUGEPAGE);
 * 0 leaves the system's policy alone, as IMB and the OSU benchmarks do. */
void *hpclab_alloc(size_t nbytes, int hugepages);
void hpclab_free(void *ptr);

/* n zeroed doubles that start `lead` doubles into such an allocation (a padded layout's
 * hpclab_topo_lead, so that its rows start cache lines), or NULL; free them with
 * hpclab_free_doubles and the same lead (NULL is ignored). */
double *hpclab_alloc_doubles(size_t n, size_t lead, int hugepages);
void hpclab_free_doubles(double *v, size_t lead);

/* Fresh pages that nobody has touched yet (mmap), so that the first thread to
 * write a page decides on which NUMA node it lives (first touch). Threaded
 * kernels initialise such arrays in parallel with the schedule of their loops.
 * Free with hpclab_free_untouched and the same size. */
void *hpclab_alloc_untouched(size_t nbytes, int hugepages);
void hpclab_free_untouched(void *ptr, size_t nbytes);

/* Agree on failure: every rank passes its local error flag and message; the
 * return value is the number of ranks that failed, and errmsg then holds the
 * message of the lowest failing rank on every rank. Collective on comm. */
int hpclab_fail_together(MPI_Comm comm, int failed, char *errmsg, size_t errlen);

/* The ranks of comm on this rank's node (those that can share memory with it), at least 1.
 * Collective on comm. */
int hpclab_node_ranks(MPI_Comm comm);

/* Whether a rank whose arrays take `bytes` stores its output past the cache: when they
 * pass its part of `above`, the bytes the node's `caches` last-level caches are counted on
 * to keep together (kernels.streaming_threshold), shared by the node's `node_ranks` ranks
 * (a rank reaches one cache: with fewer ranks than caches, a cache's part); never where
 * `above` is SIZE_MAX or without vector stores (vector_doubles 0). */
int hpclab_streams_past(size_t bytes, int node_ranks, int caches, size_t above,
                        int vector_doubles);

/* The MPI library family and version of the headers this file was compiled
 * against ("MPICH 5.0.2", "Open MPI 5.0.3", ...), and the C compiler. */
const char *hpclab_mpi_build_library(void);
const char *hpclab_compiler(void);

#endif
