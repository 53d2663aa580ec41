/*
 * NAME
 *   hpclab_topo.h - Cartesian decomposition of a 1D/2D/3D grid over the ranks of a
 *   communicator, and the exchange of one halo layer of faces.
 *
 * PURPOSE
 *   The ring, Amdahl, Jacobi and Poisson kernels split a global grid of points into
 *   blocks, one per rank, on a Cartesian process grid (MPI_Dims_create's or a given
 *   one, periodic or not). Each rank stores its block with one halo layer around it:
 *   an array of (local[0] + 2) x ... x (local[ndims-1] + 2) doubles in C order, whose
 *   interior starts at index 1 in every dimension.
 *
 * USAGE
 *   hpclab_topo t;
 *   long global[3] = {64, 64, 64};
 *   if (hpclab_topo_create(comm, 3, global, NULL, NULL, &t, errmsg, sizeof errmsg))
 *       ...;                                      (same answer on every rank)
 *   double *u = calloc(hpclab_topo_points(&t), sizeof *u);
 *   hpclab_halo_exchange(&t, u);                  (or _start, compute, _finish)
 *   hpclab_topo_free(&t);
 *
 * NOTES
 *   Blocks: the first (n mod P) ranks of a dimension get one point more than the
 *   others, so extents that do not divide work. Faces only (no edges or corners):
 *   what 5- and 7-point stencils need. Faces are described by MPI subarray
 *   datatypes, committed once per decomposition: no pack loop and no extra
 *   buffers, and the strided faces of the leading dimensions cost MPI the same
 *   as a hand-written pack would. At a closed (non-periodic) boundary the neighbour
 *   is MPI_PROC_NULL and that halo layer is left untouched (it holds the boundary
 *   condition). A stencil of radius r needs r halo layers: hpclab_topo_set_halo makes
 *   the arrays (local + 2r) points long per dimension, interior from index r, and the
 *   faces r layers thick; hpclab_topo_set_align pads the rows. Not done: other element
 *   types.
 */
#ifndef HPCLAB_TOPO_H
#define HPCLAB_TOPO_H

#include <stddef.h>
#include <mpi.h>

#define HPCLAB_TOPO_MAXDIMS 3
/* doubles in a 64-byte cache line: what the kernels' padded rows are aligned to */
#define HPCLAB_LINE_DOUBLES 8
#define HPCLAB_HALO_REQUESTS (4 * HPCLAB_TOPO_MAXDIMS)

typedef struct {
    MPI_Comm cart;                           /* the Cartesian communicator (owned) */
    int ndims;
    int rank, size;                          /* in cart */
    int dims[HPCLAB_TOPO_MAXDIMS];           /* ranks per dimension */
    int periods[HPCLAB_TOPO_MAXDIMS];
    int coords[HPCLAB_TOPO_MAXDIMS];
    long global[HPCLAB_TOPO_MAXDIMS];        /* global interior points per dimension */
    long local[HPCLAB_TOPO_MAXDIMS];         /* this rank's interior points */
    long offset[HPCLAB_TOPO_MAXDIMS];        /* global index of its first interior point */
    int lo[HPCLAB_TOPO_MAXDIMS];             /* neighbour below (MPI_PROC_NULL: none) */
    int hi[HPCLAB_TOPO_MAXDIMS];             /* neighbour above */
    int cut;                                 /* dimensions split over more than one rank */
    int halo;                                /* halo layers (1 unless set) */
    int align;                               /* rows padded to a multiple of (1 unless set) */
    MPI_Datatype send_lo[HPCLAB_TOPO_MAXDIMS], send_hi[HPCLAB_TOPO_MAXDIMS];
    MPI_Datatype recv_lo[HPCLAB_TOPO_MAXDIMS], recv_hi[HPCLAB_TOPO_MAXDIMS];
} hpclab_topo;

/* The block [offset, offset + count) of n points that part `index` of `parts` owns. */
void hpclab_block_range(long n, int parts, int index, long *offset, long *count);

/* Decompose `global` (ndims extents) over the ranks of comm. dims: ranks per dimension
 * (NULL or zeros: MPI_Dims_create chooses), periods: NULL for none. Returns 0, or 1 with
 * errmsg set, the same on every rank (a wrong shape is refused before any MPI call that
 * could hang). Collective on comm. */
int hpclab_topo_create(MPI_Comm comm, int ndims, const long *global, const int *dims,
                       const int *periods, hpclab_topo *t, char *errmsg, size_t errlen);
void hpclab_topo_free(hpclab_topo *t);

/* The block of rank `rank` of t->cart: its first global index and extent per dimension. */
void hpclab_topo_block_of(const hpclab_topo *t, int rank, long *offset, long *count);

/* Distribute a global array of t->global extents (C order, no halo) held by `root`:
 * every rank receives its block, contiguous, in `local` (the product of t->local
 * doubles). On root each block is described by an MPI subarray datatype of the global
 * array, so the decomposition decides what each rank receives, with no pack loop;
 * point-to-point messages, every receive posted before any send. gather is the
 * reverse. Returns 0, or 1 when root cannot allocate its requests. Collective. */
int hpclab_topo_scatter(const hpclab_topo *t, int root, const double *global, double *local);
int hpclab_topo_gather(const hpclab_topo *t, int root, const double *local, double *global);

/* Make the halo `halo` layers thick (1 after hpclab_topo_create): hpclab_topo_points and
 * the exchange follow. Returns 0, or 1 with errmsg, the same on every rank, when a block
 * of a cut (or periodic) dimension is thinner than the halo (its faces would need points
 * of a farther rank) or halo < 1; t is unchanged then. Collective. */
int hpclab_topo_set_halo(hpclab_topo *t, int halo, char *errmsg, size_t errlen);

/* Pad every row (the last dimension's stored extent) to a multiple of `align` doubles:
 * with hpclab_topo_lead, the first interior point of every row can start a cache line
 * (align 8 for 64 bytes), so a stencil's vector loads and stores line up with the lines
 * (a 5-point product ran about a third faster so on one machine). The padding is never
 * interior: a kernel leaves it zero. hpclab_topo_points, the extents and the exchange
 * follow. Returns 0, or 1 with errmsg for an align outside 1..64 or a padded row too long
 * for an MPI count. Local. */
int hpclab_topo_set_align(hpclab_topo *t, int align, char *errmsg, size_t errlen);

/* hpclab_topo_create, hpclab_topo_set_halo(t, halo) and hpclab_topo_set_align(t, align):
 * 0, or 1 with errmsg, the same on every rank (t freed). Collective. */
int hpclab_topo_create_aligned(MPI_Comm comm, int ndims, const long *global, const int *dims,
                               const int *periods, int halo, int align, hpclab_topo *t,
                               char *errmsg, size_t errlen);

/* The stored extent of dimension d (its points, halo and padding included). */
long hpclab_topo_extent(const hpclab_topo *t, int d);

/* Doubles to skip at the start of an allocation aligned to align doubles (hpclab_alloc's
 * pages) so that every row's first interior point is aligned:
 * hpclab_alloc_doubles(hpclab_topo_points(t), hpclab_topo_lead(t), ...). */
size_t hpclab_topo_lead(const hpclab_topo *t);

/* The same lead for any array whose rows start with `halo` points before the interior and
 * are padded to `align` doubles (a kernel's own buffers outside a decomposition). */
size_t hpclab_row_lead(int halo, int align);

/* extent rounded up to a multiple of align (unchanged for align <= 1) */
long hpclab_round_up(long extent, int align);

/* Doubles in this rank's array, halo included. */
size_t hpclab_topo_points(const hpclab_topo *t);

/* Exchange the halo layer of `field`: start (posts every receive, then every send),
 * finish (waits), or both. req holds HPCLAB_HALO_REQUESTS requests. */
void hpclab_halo_start(const hpclab_topo *t, double *field, MPI_Request *req);
void hpclab_halo_finish(MPI_Request *req);
void hpclab_halo_exchange(const hpclab_topo *t, double *field);

#endif
