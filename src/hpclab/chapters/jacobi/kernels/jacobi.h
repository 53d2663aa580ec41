/*
 * NAME
 *   jacobi.h - Jacobi sweeps of the 7-point stencil for -Laplace(u) = f on a 3D grid
 *   decomposed over the ranks, with a halo exchange of the six faces per sweep.
 */
#ifndef HPCLAB_JACOBI_H
#define HPCLAB_JACOBI_H

#include <stddef.h>
#include <mpi.h>

#include "hpclab_topo.h"

/* The process grid: slabs (P x 1 x 1), pencils (px x py x 1), cubes (px x py x pz). */
enum hpclab_jacobi_decomposition {
    HPCLAB_JACOBI_SLAB = 0,
    HPCLAB_JACOBI_PENCIL = 1,
    HPCLAB_JACOBI_CUBE = 2,
    HPCLAB_JACOBI_NDECOMPOSITIONS = 3
};

/* What one repetition returns, in the order of the times array. */
enum hpclab_jacobi_metric {
    HPCLAB_JACOBI_SWEEP = 0,   /* seconds per sweep, wall clock between barriers */
    HPCLAB_JACOBI_COMPUTE = 1, /* seconds per sweep updating points, the slowest rank's */
    HPCLAB_JACOBI_HALO = 2,    /* seconds per sweep in the halo exchange, the slowest rank's */
    HPCLAB_JACOBI_CUT = 3,     /* k: directions cut into more than one block */
    HPCLAB_JACOBI_NMETRICS = 4
};

/*
 * Run `repetitions` batches of `sweeps` Jacobi sweeps on a global grid of nx x ny x nz
 * interior points (u = 0 on the boundary, spacing 1/(n+1) per dimension).
 * overlap: 0 exchanges the halo, then updates every point; 1 starts the exchange,
 * updates the points that need no halo, finishes the exchange, updates the rest.
 *
 * u0 == NULL: the field starts at the discrete solution u* = sin(pi x) sin(pi y) sin(pi z)
 * with f = -Laplace_h(u*), a fixed point of the sweep; after every batch each rank checks
 * that it still holds u* (a wrong halo or stencil moves it), and the run fails on every
 * rank if not. u0 != NULL (on root 0 only, the global array, C order): the field starts
 * there and uout (root only, may be NULL) receives it after the last sweep; no check.
 *
 * times[metric * repetitions + r]. Collective; 0, or non-zero on every rank with errmsg.
 */
int hpclab_jacobi(MPI_Comm comm, int decomposition, long nx, long ny, long nz, int overlap,
                  int sweeps, int repetitions, const double *u0, double *uout, double *times,
                  char *errmsg, size_t errlen);

/* The process grid constraint of a decomposition: dims[3] for hpclab_topo_create. */
void hpclab_jacobi_dims(int decomposition, int *dims);

/* The sweeps' layout: the grid `global` on the process grid `dims`, one halo layer, every
 * row padded to HPCLAB_LINE_DOUBLES doubles so that each row's first interior point starts
 * a cache line in fields from hpclab_alloc_doubles(points, hpclab_topo_lead(t), 1) (the
 * sweep's loads and stores then line up with the lines: 15-25% more updates a second at
 * L = 256 and 384 in a standalone test on one machine). 0, or 1 with errmsg on every rank.
 * Collective. */
int hpclab_jacobi_topo(MPI_Comm comm, const int *dims, const long *global, hpclab_topo *t,
                       char *errmsg, size_t errlen);

/* The factors of u* = s_0 s_1 s_2 at this rank's points, one table per dimension, halo
 * included (malloc'ed: free() them; NULL when they cannot be allocated). */
double *hpclab_jacobi_factors(const hpclab_topo *t);

/* Fill this rank's u (with halo, zero) with u* and f with -Laplace_h(u*) (same layout). */
void hpclab_jacobi_manufactured(const hpclab_topo *t, const double *factors, double *u,
                                double *f);

/* The largest |u - u*| over this rank's interior points (the shared answer check); NaN when
 * u holds one. */
double hpclab_jacobi_error(const hpclab_topo *t, const double *factors, const double *u);

/* The stencil's coefficients: w[d] = 1/h_d^2 and diag = 2 (w0 + w1 + w2). */
void hpclab_jacobi_weights(const hpclab_topo *t, double *w, double *diag);

/*
 * The bench's yardstick for the sweep's memory traffic: on one rank's block of l^3 points
 * (halo and padding included, as a sweep's arrays), `sweeps` passes of unew = u(next plane) + f, which
 * read and write what a sweep reads and writes from memory (u's newest plane, f, unew)
 * without the stencil's cached neighbours and arithmetic. Returns the best seconds per pass
 * over `repetitions`, or -1 when the result is wrong or the arrays cannot be allocated.
 * `node_ranks`: the ranks on the node running it at once (the streaming rule).
 */
double hpclab_jacobi_streams(long l, int sweeps, int repetitions, int node_ranks);

/*
 * Spatial blocking: the bytes of cache that the three planes of u a sweep reads at once
 * (i - 1, i, i + 1) may fill (the Python package gives a share of one core's part of the
 * last-level cache). A sweep walks the j rows in blocks of
 * hpclab_jacobi_block_rows(budget, ny, nz) rows, every plane i for one block before the next,
 * so that a plane read as i + 1 is still cached when it is read as i and i - 1. 0 (the
 * default): no blocking. Set once per process (the Python package sets it at import).
 */
void hpclab_jacobi_set_cache(size_t budget);
size_t hpclab_jacobi_cache(void);

/* Rows per block for a block of ny x nz points per plane (halo excluded): the most whose
 * three planes of u, with their halo rows, fit the budget (at least 1), or ny when all fit
 * or the budget is 0. */
long hpclab_jacobi_block_rows(size_t budget, long ny, long nz);

/*
 * Streaming stores: where the three fields (u, unew, f with halo and padding) of every rank
 * on the node together take more than `above` bytes (hpclab_streams_past), a rank writes its
 * new values past the cache (hpclab_simd.h), 24 bytes from memory per update instead of 32
 * (no line read before it is written); fields that fit stay in the cache for the next sweep.
 * SIZE_MAX (the default): never. `caches`: the node's last-level caches (a rank reaches one;
 * 0 keeps the count in force, 1 at first).
 * The streams pass (hpclab_jacobi_streams) follows the same rule on its arrays. Set once per
 * process (the Python package sets it at import, from the caches:
 * kernels.streaming_threshold).
 */
void hpclab_jacobi_set_streaming(size_t above, int caches);
int hpclab_jacobi_streaming_caches(void);
size_t hpclab_jacobi_streaming(void);

/* 1 when a rank whose fields hold `points` points each, one of `node_ranks` on its node,
 * streams its stores (the rule above, and a build with vector stores: HPCLAB_VW > 0). */
int hpclab_jacobi_streamed(size_t points, int node_ranks);

/* Test hook: when non-zero, the last rank adds 1 to its halo point (0, 1, 1) after every
 * exchange (a neighbour's value, or the boundary), so tests can prove it is caught. */
extern int hpclab_jacobi_fault;

#endif
