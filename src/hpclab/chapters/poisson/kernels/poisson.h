/*
 * NAME
 *   poisson.h - matrix-free conjugate gradient for the 2D Poisson problem of report 000,
 *   rows distributed in blocks over the ranks.
 */
#ifndef HPCLAB_POISSON_H
#define HPCLAB_POISSON_H

#include <stddef.h>
#include <mpi.h>

#include "hpclab_topo.h"

/* What one repetition (one solve) returns, in the order of the times array. */
enum hpclab_poisson_metric {
    HPCLAB_POISSON_ITERATION = 0, /* seconds per iteration, wall clock between barriers */
    HPCLAB_POISSON_MATVEC = 1,    /* seconds per iteration in q = A p, halo included (slowest rank) */
    HPCLAB_POISSON_HALO = 2,      /* of which starting and waiting for the halo (slowest rank) */
    HPCLAB_POISSON_REDUCE = 3,    /* seconds per iteration in the two MPI_Allreduce (slowest rank) */
    HPCLAB_POISSON_UPDATE = 4,    /* seconds per iteration in the vector updates (slowest rank) */
    HPCLAB_POISSON_ITERATIONS = 5,
    HPCLAB_POISSON_RESIDUAL = 6,  /* ||r_k|| / ||r_0|| when it stopped */
    HPCLAB_POISSON_ERROR = 7,     /* max |u - u_h| over the mesh points */
    HPCLAB_POISSON_RSS = 8,       /* VmRSS summed over the ranks, with the vectors, bytes */
    HPCLAB_POISSON_RSS_BASE = 9,  /* VmRSS summed over the ranks before allocating them */
    HPCLAB_POISSON_NMETRICS = 10
};

#define HPCLAB_POISSON_TOL 1e-6

/* rows of the mesh the product q = A p computes together (poisson.c, _poisson.pyx) */
#define HPCLAB_POISSON_PRODUCT_ROWS 4

/*
 * Solve A u = h^2 f on an n x n interior mesh (h = 1/(n+1), the 5-point stencil, u = 0 on
 * the boundary, f of report 000 eq. 3.1) by unpreconditioned CG from x0 = 0, `repetitions`
 * times. Rows are split in blocks over the ranks of comm (uneven counts allowed).
 * iterations == 0: stop when ||r|| <= 1e-6 ||r0|| (failing after 10 n + 100 iterations);
 * iterations > 0: stop there or at convergence, whichever is first (for timing).
 * interleave: 1 updates the rows that need no halo while the halo is in flight.
 * After every solve each rank takes part in checking that the true residual ||b - A x||
 * agrees with the recurrence's (a wrong stencil, halo or update breaks it); the run fails
 * on every rank if not.
 * uout: on rank 0, the n x n solution of the last solve (may be NULL).
 * times[metric * repetitions + r]. Collective; 0, or non-zero on every rank with errmsg.
 */
int hpclab_poisson(MPI_Comm comm, long n, int interleave, long iterations, int repetitions,
                   double *uout, double *times, char *errmsg, size_t errlen);

/* The solver's layout: rows split in blocks over the ranks of comm (n x n interior points,
 * one halo layer), every row padded to HPCLAB_LINE_DOUBLES doubles (its stride is
 * hpclab_topo_extent(t, 1), not n + 2) so that each row's first interior point starts a
 * cache line in a vector from hpclab_alloc_doubles(points, hpclab_topo_lead(t), 0). 0, or 1
 * with errmsg on every rank. Collective. */
int hpclab_poisson_topo(MPI_Comm comm, long n, hpclab_topo *t, char *errmsg, size_t errlen);

/* q = A p on one rank's block (local[0] + 2 padded rows) with p's halo
 * rows exchanged on the way: with interleave, the rows that need no halo while it travels.
 * The solver's own product, for timing it alone. Returns the rank's part of p.q; stamps
 * (may be NULL): the times the halo was started, the inner rows were done and the halo
 * had arrived. Collective on t->cart. */
double hpclab_poisson_product(const hpclab_topo *t, double *p, double *q, int interleave,
                              double *stamps);

/* f of report 000 eq. (3.1) and its exact solution u = sin^2(pi x) sin^2(pi y). */
double hpclab_poisson_f(double x, double y);
double hpclab_poisson_exact(double x, double y);

/* The shared answer check, on one rank's block of the solver's layout:
 * b = h^2 f at the block's points (halo zero); max |u - x| over the block; the local
 * ||b - A x||^2 (x's halo rows are exchanged first, collective; q is scratch). */
void hpclab_poisson_rhs(const hpclab_topo *t, double *b);
double hpclab_poisson_error(const hpclab_topo *t, const double *x);
double hpclab_poisson_true_residual(const hpclab_topo *t, double *x, double *q);

/* After a solve of k iterations: the metrics of repetition rep into times (loc: this rank's
 * matvec, halo, reduce, update and wall seconds summed over the iterations; base: its
 * VmRSS before the vectors) and the answer check. Collective; non-zero on every rank, with
 * msg, when the solve did not converge (iterations == 0) or the true residual disagrees. */
int hpclab_poisson_record(const hpclab_topo *t, double *x, double *q, long k, long iterations,
                          double rr, double rr0, const double *loc, double base, int rep,
                          int repetitions, double *times, char *msg, size_t msglen);

/* VmRSS of this process in bytes from /proc/self/status (0 where there is none). */
double hpclab_vmrss(void);

/*
 * The bench's bound: on one rank's block of `rows` x n points (vectors of rows + 2 rows,
 * padded and aligned as a solve's), `iterations` passes of an iteration's vector traffic without the
 * stencil: q = 4 p with p.q (read p, write q, as q = A p with its neighbours in cache), then
 * the solver's own x += a p, r -= a q with r.r and p = r + b p; with a communicator (not
 * MPI_COMM_NULL: collective on it), the two sums p.q and r.r summed over its ranks as CG's
 * two global inner products are, where every rank waits for the slowest. A solver that
 * makes these three passes and two reductions moves and waits no less (no stencil, no
 * halo). Returns the best seconds per iteration over `repetitions`, or -1 when the result
 * is wrong or the vectors cannot be allocated.
 */
double hpclab_poisson_streams(MPI_Comm comm, long rows, long n, int iterations, int repetitions);

/* Test hook: when non-zero, the last rank adds 1 to its halo point (0, 1) of p after every
 * exchange inside the iteration, so tests can prove it is caught. */
extern int hpclab_poisson_fault;

#endif
