/*
 * NAME
 *   stream.h - STREAM copy, scale, add and triad with OpenMP threads.
 */
#ifndef HPCLAB_STREAM_H
#define HPCLAB_STREAM_H

#include <stddef.h>
#include <mpi.h>

#define HPCLAB_STREAM_NOPS 4     /* copy, scale, add, triad, in this order */
#define HPCLAB_STREAM_MAX_NTIMES 200 /* a[] grows 15-fold per trial: 15^200 < DBL_MAX */
#define HPCLAB_STREAM_SCALAR 3.0
#define HPCLAB_STREAM_EPSILON 1e-13

/*
 * Run the four kernels `ntimes` times on three arrays of n doubles with
 * `nthreads` OpenMP threads (schedule(static), arrays first touched in
 * parallel with the same schedule). times[k * ntimes + t] receives the time
 * of kernel k in trial t, in seconds (trial 0 included; STREAM does not
 * count it). When comm is not MPI_COMM_NULL, the ranks of comm start every
 * kernel together (MPI_Barrier before each), each on its own arrays.
 * The arrays are validated afterwards as STREAM's checkSTREAMresults does.
 * Returns 0, or non-zero with errmsg set (bad arguments, allocation, fewer
 * threads than asked for, failed validation).
 */
int hpclab_stream(MPI_Comm comm, size_t n, int ntimes, int nthreads, int hugepages,
                  double *times, char *errmsg, size_t errlen);

/* The values every element of a, b and c holds after ntimes trials. */
void hpclab_stream_expected(int ntimes, double *aj, double *bj, double *cj);

/* Average relative error of each array against the expected values (STREAM's check). */
void hpclab_stream_errors(const double *a, const double *b, const double *c, size_t n,
                          int ntimes, int nthreads, double err[3]);

/* Test hook: when >= 0, element hpclab_stream_fault_index of a[] is zeroed
 * after the trials, so tests can prove that validation fails. */
extern long hpclab_stream_fault_index;

#endif
