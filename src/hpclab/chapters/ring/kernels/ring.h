/*
 * NAME
 *   ring.h - the two-way ring on a periodic 1D Cartesian communicator.
 */
#ifndef HPCLAB_RING_H
#define HPCLAB_RING_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

/* How one step of the ring exchanges its two messages. */
enum hpclab_ring_variant {
    HPCLAB_RING_SSEND_ORDERED = 0, /* even ranks MPI_Ssend first, odd ranks receive first */
    HPCLAB_RING_SEND = 1,          /* MPI_Send, MPI_Send, MPI_Recv, MPI_Recv: needs eager buffering */
    HPCLAB_RING_ISEND = 2,         /* MPI_Isend x2, MPI_Recv x2, MPI_Waitall */
    HPCLAB_RING_IRECV = 3,         /* MPI_Irecv x2, MPI_Isend x2, MPI_Waitall */
    HPCLAB_RING_SENDRECV = 4,      /* MPI_Sendrecv in each direction */
    HPCLAB_RING_NAIVE = 5,         /* MPI_Ssend x2 first on every rank: deadlocks */
    HPCLAB_RING_NVARIANTS = 6
};

/* Tags of the two directions: a message moving to the right (received from
 * the left neighbour) and one moving to the left. */
#define HPCLAB_RING_TAG_RIGHT 1
#define HPCLAB_RING_TAG_LEFT 2

/*
 * Time `repetitions` batches of `iterations` full rings (P steps each, P the
 * size of comm) after `warmup` untimed rings; messages of `nbytes` bytes
 * (a multiple of 4, at least 4: int32 elements). times[r] receives the time
 * of one full ring in seconds, averaged over batch r, the slowest rank's.
 *
 * Element 0 of a message carries the ring's sum: a rank starts with +rank
 * to its left neighbour and -rank to its right; a rank forwarding a message
 * adds its rank to what came from the left and subtracts it from what came
 * from the right. After P steps the messages that come home hold
 * S - 2*rank (from the left) and 2*rank - S (from the right), S = P(P-1)/2,
 * in 32-bit two's complement. Elements 1.. carry hpclab_ring_pattern of the
 * origin, so a message that came home is known to be the rank's own.
 * Every ring's sums and, after each batch, every element are checked.
 *
 * Collective on comm. Returns 0, or non-zero on every rank with errmsg set
 * when any rank failed (bad arguments, allocation, a wrong message).
 * HPCLAB_RING_NAIVE never returns when P > 0: it exists to be run under a timeout.
 */
int hpclab_ring(MPI_Comm comm, int variant, size_t nbytes, int warmup, int iterations,
                int repetitions, int hugepages, double *times, char *errmsg, size_t errlen);

/* Element i (>= 1) of the message that rank `origin` sends in direction
 * `dir` (0: to the right, 1: to the left). */
int32_t hpclab_ring_pattern(int origin, size_t i, int dir);

/* The sum that comes home to `rank` in a ring of `size` ranks (dir as above). */
int32_t hpclab_ring_expected(int rank, int size, int dir);

/* The answer check every compiled implementation uses: 0 when both messages that came
 * home to `rank` (count int32 elements each) hold the expected sum and the rank's own
 * payload, else 1 with msg saying what is wrong. */
int hpclab_ring_check_home(int rank, int size, int count, const int32_t *home_r,
                           const int32_t *home_l, int rep, char *msg, size_t len);

/* Test hook: when >= 0, rank `hpclab_ring_fault_rank` adds 1 to element
 * `hpclab_ring_fault_element` of every message it receives from the left,
 * so tests can prove that a wrong ring is caught. */
extern long hpclab_ring_fault_element;
extern int hpclab_ring_fault_rank;

#endif
