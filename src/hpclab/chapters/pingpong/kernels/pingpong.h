/*
 * NAME
 *   pingpong.h - one-way message time between ranks 0 and 1 of a communicator.
 */
#ifndef HPCLAB_PINGPONG_H
#define HPCLAB_PINGPONG_H

#include <stddef.h>
#include <mpi.h>

/* Largest message the kernel accepts: MPI counts are int. */
#define HPCLAB_PINGPONG_MAX_BYTES 2147483647UL

/*
 * Time `repetitions` batches of `iterations` round trips of an `nbytes`
 * message between ranks 0 and 1, after `warmup` untimed round trips.
 * times[r] receives the one-way time of batch r in seconds (round trip / 2,
 * averaged over the batch, slowest rank). Ranks 2.. only join the barriers.
 * Collective on comm. Returns 0, or non-zero on every rank with errmsg set
 * when any rank failed (bad arguments, allocation, wrong bytes received).
 */
int hpclab_pingpong(MPI_Comm comm, size_t nbytes, int warmup, int iterations,
                    int repetitions, int hugepages, double *times,
                    char *errmsg, size_t errlen);

/* Test hook: when >= 0, rank 1 flips this byte of what it received after
 * the timed loop, so tests can prove that a wrong answer is caught. */
extern long hpclab_pingpong_fault_byte;

/* The byte pattern repetition `seed` sends: every implementation uses it. */
unsigned char hpclab_pingpong_pattern(size_t i, int seed);

/* The answer check every compiled implementation uses: the index of the first byte of
 * buf that differs from repetition `seed`'s pattern, or n when all n are right. */
size_t hpclab_pingpong_first_wrong(const unsigned char *buf, size_t n, int seed);

#endif
