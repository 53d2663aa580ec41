/*
 * NAME
 *   stencil.h - finite-difference second derivatives and the Laplacian of order 2 to 16
 *   on a 3D grid decomposed over the ranks, with OpenMP threads inside a rank.
 *
 * AXES
 *   As report 003 (hpcscan) names them: axis 1 is the fastest (contiguous) dimension, axis
 *   3 the slowest. Arrays are C-ordered [i3][i2][i1]; extents and process grids below are
 *   given in that order (n3, n2, n1), and a block is (block3 x block2) points of the two
 *   slower axes with axis 1 whole, as hpcscan blocks.
 */
#ifndef HPCLAB_STENCIL_H
#define HPCLAB_STENCIL_H

#include <stddef.h>
#include <mpi.h>

#include "hpclab_topo.h"

#define HPCLAB_STENCIL_MAX_ORDER 16

/* What one application computes. */
enum hpclab_stencil_operator {
    HPCLAB_STENCIL_D2_AXIS1 = 0,   /* d2/dx1^2, along the contiguous axis */
    HPCLAB_STENCIL_D2_AXIS2 = 1,
    HPCLAB_STENCIL_D2_AXIS3 = 2,   /* along the slowest axis: stride of a plane */
    HPCLAB_STENCIL_LAPLACIAN = 3,
    HPCLAB_STENCIL_NOPERATORS = 4
};

/* What one repetition returns, in the order of the times array. */
enum hpclab_stencil_metric {
    HPCLAB_STENCIL_APPLY = 0,   /* seconds per application, wall clock between barriers */
    HPCLAB_STENCIL_COMPUTE = 1, /* seconds per application computing, the slowest rank's */
    HPCLAB_STENCIL_HALO = 2,    /* seconds per application exchanging halos, the slowest rank's */
    HPCLAB_STENCIL_ERROR = 3,   /* max |w - exact derivative| / max |exact derivative| */
    HPCLAB_STENCIL_NMETRICS = 4
};

/*
 * The centred weights c_0 .. c_r (r = order / 2) of d2/dx2 with accuracy `order` on a unit
 * spacing, by Fornberg's algorithm (the other half is symmetric: c_{-j} = c_j). Returns 0,
 * or 1 when order is odd, below 2 or above HPCLAB_STENCIL_MAX_ORDER.
 */
int hpclab_stencil_weights(int order, double *c);

/*
 * Apply operator `op` of accuracy `order` `applications` times per repetition to
 * u = sin(k1 x1) sin(k2 x2) sin(k3 x3) on a global grid of n3 x n2 x n1 interior points
 * (spacing 1/(n + 1) per axis), writing w. Every application first exchanges the halo of
 * order / 2 layers with the neighbours of the process grid dims[3] (in the order
 * n3, n2, n1; zeros: MPI_Dims_create chooses); at the faces of the domain the halo holds u
 * itself. block3, block2 > 0: cache blocking by blocks of block3 x block2 points of the two
 * slower axes, axis 1 whole; 0 and 0: none (the baseline). threads: OpenMP threads per rank.
 *
 * Every rank checks w after every repetition against the exact discrete derivative of u
 * (a sine is an eigenfunction of the stencil, so this is exact to round-off): a wrong
 * coefficient, stencil or halo fails the run on every rank. The halo the exchange fills is
 * set to NaN before each repetition, so a missing exchange is caught as well.
 *
 * times[metric * repetitions + r]. Collective; 0, or non-zero on every rank with errmsg.
 */
int hpclab_stencil(MPI_Comm comm, int op, int order, const int *dims, long n3, long n2,
                   long n1, long block3, long block2, int threads, int applications,
                   int repetitions, double *times, char *errmsg, size_t errlen);

/*
 * The parts of hpclab_stencil that another implementation of the loops (the Cython one)
 * shares: the decomposition, the arrays and weights, the halo, the check and the record.
 */
typedef struct {
    hpclab_topo t;
    int op, r, threads;
    long l[3];                 /* interior points per dimension (C order: 0 is axis 3) */
    size_t e[3];               /* extents with the halo */
    size_t s[3];               /* strides: s[2] = 1, s[1] = e[2] padded to whole cache lines
                                  (hpclab_topo_set_align), s[0] = e[1] s[1] */
    double a[3][HPCLAB_STENCIL_MAX_ORDER / 2 + 1]; /* weights / h^2 per dimension; 0 where
                                                      the operator does not act */
    double centre;             /* a[0][0] + a[1][0] + a[2][0] */
    double lam, cont, tol;     /* w = lam u exactly; the derivative is cont u; round-off */
    double k2;                 /* wave propagator: (c dt)^2; w = 2 u - w + k2 Laplacian(u) */
    int wave;                  /* 1: the propagator's update instead of w = operator(u) */
    double *sine[3];           /* u's factor along each dimension, halo included */
    double *u, *w;             /* (e[0] x e[1] x s[1]) doubles each, from hpclab_alloc_doubles
                                  with lead doubles before them: every row's first interior
                                  point starts a cache line */
    size_t lead;
    int stream;                /* 1: the operator's output goes past the cache in groups
                                  (hpclab_simd.h; never the wave's step, which reads w) */
} hpclab_stencil_problem;

/* Streaming stores: where the two arrays of every rank on the node take more than `above`
 * bytes together (hpclab_streams_past), a rank stores the operator's output past the cache
 * (hpclab_simd.h), 16 bytes from memory per point instead of 24 (u read, w written without
 * first reading its line). Default: never. `caches`: the node's last-level caches (a rank
 * reaches one; 0 keeps the count in force, 1 at first). */
void hpclab_stencil_set_streaming(size_t above, int caches);
int hpclab_stencil_streaming_caches(void);
size_t hpclab_stencil_streaming(void);
/* whether a rank of `points` doubles per array (halo and padding included), one of
 * `node_ranks` on its node, streams under the threshold in force (never without vector
 * stores) */
int hpclab_stencil_streamed(size_t points, int node_ranks);

/* Decompose, allocate, fill u (halo included) and w = 0. Collective; 0, or 1 on every rank
 * with errmsg (and nothing to free). */
int hpclab_stencil_setup(MPI_Comm comm, int op, int order, const int *dims, long n3, long n2,
                         long n1, int threads, hpclab_stencil_problem *P, char *errmsg,
                         size_t errlen);
/* NaN into the halo layers that the exchange fills (before a repetition). */
void hpclab_stencil_poison(hpclab_stencil_problem *P);
/* Exchange the halo (and apply the test hook). */
void hpclab_stencil_exchange(hpclab_stencil_problem *P);
/* After a repetition: record its times (wall per application; this rank's compute and halo
 * seconds per application, reduced to the slowest), check w and record the error.
 * Collective; 0, or 1 on every rank with msg. */
int hpclab_stencil_record(hpclab_stencil_problem *P, int rep, int repetitions, double wall,
                          double compute, double halo, double *times, char *msg,
                          size_t msglen);
void hpclab_stencil_free(hpclab_stencil_problem *P);

/* What one repetition of the wave propagator returns. */
enum hpclab_wave_metric {
    HPCLAB_WAVE_STEP = 0,    /* seconds per time step, wall clock, the error's evaluation out */
    HPCLAB_WAVE_COMPUTE = 1, /* seconds per step updating points, the slowest rank's */
    HPCLAB_WAVE_HALO = 2,    /* seconds per step exchanging and mirroring halos, the slowest */
    HPCLAB_WAVE_ERROR = 3,   /* max over steps and points |u - exact| / amplitude */
    HPCLAB_WAVE_STEPS = 4,   /* time steps of the run */
    HPCLAB_WAVE_NMETRICS = 5
};

/* The largest value of the symbol -sum_j c_j cos(j theta) of d2/dx2 with accuracy `order`
 * over theta in [0, pi] (unit spacing): 4 at order 2. -1 for a bad order. */
double hpclab_stencil_symbol_max(int order);

/*
 * The acoustic wave equation u_tt = Laplacian(u) on the unit cube, u = 0 on its faces (odd
 * reflection into the halo), from the standing eigenmode sin(m pi x1) sin(m pi x2)
 * sin(m pi x3) cos(omega t), omega = m pi sqrt(3), on n interior points per axis (spacing
 * 1/(n + 1)), by the leapfrog scheme with the Laplacian of accuracy `order`, for `periods`
 * periods at dt_fraction of the stable step 2 h / sqrt(3 S) (S: hpclab_stencil_symbol_max).
 * Blocks and threads as for hpclab_stencil. times[metric * repetitions + r], metrics
 * hpclab_wave_metric. The error is taken at every step (a phase error hides where the mode
 * is at its crest); beyond the stable step (dt_fraction > 1) a field that overflows gives
 * an infinite error, within it a failure (a wrong kernel). Collective; 0, or non-zero on
 * every rank with errmsg.
 */
int hpclab_stencil_wave(MPI_Comm comm, int order, const int *dims, long n, int mode,
                        double periods, double dt_fraction, long block3, long block2,
                        int threads, int repetitions, double *times, char *errmsg,
                        size_t errlen);

/* Test hook: when non-zero, the last rank adds 1 to one halo point that the operator reads
 * after every exchange, so tests can prove that it is caught. */
extern int hpclab_stencil_fault;

#endif
