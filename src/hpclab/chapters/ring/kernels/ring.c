/*
 * NAME
 *   ring.c - two messages travel around a periodic ring of P ranks.
 *
 * PURPOSE
 *   Every rank sends one message to each neighbour of a periodic 1D Cartesian
 *   communicator and forwards what it receives, P steps, until its own two
 *   messages come home. One step moves two messages per rank, so one ring
 *   costs about P times the time of one step: T = lambda * P (report 001,
 *   section 1), and with larger messages a step reads as lambda + n / B.
 *
 * USAGE
 *   hpclab_ring(comm, HPCLAB_RING_IRECV, nbytes, warmup, iterations,
 *               repetitions, hugepages, times, errmsg, sizeof errmsg)
 *   from C, or hpclab.chapters.ring.kernels.run_c(comm, "irecv", ...) from Python.
 *
 * VARIANTS
 *   ssend_ordered  even ranks MPI_Ssend then receive, odd ranks the other way
 *                  round, one direction after the other: no deadlock, but
 *                  only half of the links carry a message at any time.
 *   send           MPI_Send both, then MPI_Recv both. Correct only while MPI
 *                  buffers the messages (eager protocol); above that size
 *                  every rank waits in MPI_Send for a receive nobody posts.
 *   isend          MPI_Isend both, MPI_Recv both, MPI_Waitall.
 *   irecv          MPI_Irecv both, MPI_Isend both, MPI_Waitall.
 *   sendrecv       MPI_Sendrecv to the right, then to the left.
 *   naive          MPI_Ssend both, then receive: every rank waits for a
 *                  receive that is never posted. Deadlocks by design.
 *
 * NOTES
 *   In a ring of one the rank is its own neighbour. A synchronous send to
 *   oneself cannot complete before the matching receive is posted, so the
 *   blocking variants ssend_ordered and send exchange with themselves through
 *   MPI_Sendrecv there; the naive one does not, and deadlocks.
 *   Timing: MPI_Wtime between a barrier and the end of a batch, slowest rank.
 */
#include "ring.h"
#include "hpclab_common.h"
#include "hpclab_topo.h"

#include <stdio.h>
#include <string.h>

#define RIGHT 0 /* a message moving to the right: sent to the right, received from the left */
#define LEFT 1

long hpclab_ring_fault_element = -1;
int hpclab_ring_fault_rank = 0;

/* 32-bit two's complement arithmetic without signed overflow */
static int32_t wrap_add(int32_t a, int64_t b)
{
    return (int32_t)(uint32_t)((uint32_t)a + (uint32_t)(uint64_t)b);
}

int32_t hpclab_ring_pattern(int origin, size_t i, int dir)
{
    uint32_t x = (uint32_t)origin * 2654435761u + (uint32_t)i * 40503u + (uint32_t)dir * 97u;
    return (int32_t)(x >> 1);
}

int32_t hpclab_ring_expected(int rank, int size, int dir)
{
    int64_t s = (int64_t)size * (size - 1) / 2;
    int64_t v = dir == RIGHT ? s - 2 * (int64_t)rank : 2 * (int64_t)rank - s;
    return wrap_add(0, v);
}

typedef struct {
    MPI_Comm cart;
    int rank, size, left, right, count;
    int32_t *origin[2]; /* what this rank sends in the first step */
    int32_t *buf[2][2]; /* received messages, alternating between steps */
} ring_t;

static void exchange(const ring_t *g, int variant, int32_t *sr, int32_t *sl,
                     int32_t *rr, int32_t *rl)
{
    MPI_Comm c = g->cart;
    const int n = g->count;
    MPI_Request req[4];

    if (g->size == 1 && (variant == HPCLAB_RING_SSEND_ORDERED || variant == HPCLAB_RING_SEND))
        variant = HPCLAB_RING_SENDRECV; /* see NOTES */

    switch (variant) {
    case HPCLAB_RING_SSEND_ORDERED:
        if (g->rank % 2 == 0) {
            MPI_Ssend(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c);
            MPI_Recv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
            MPI_Ssend(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c);
            MPI_Recv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
            MPI_Ssend(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c);
            MPI_Recv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
            MPI_Ssend(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c);
        }
        break;
    case HPCLAB_RING_SEND:
        MPI_Send(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c);
        MPI_Send(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c);
        MPI_Recv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
        MPI_Recv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
        break;
    case HPCLAB_RING_ISEND:
        MPI_Isend(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c, &req[0]);
        MPI_Isend(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c, &req[1]);
        MPI_Recv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
        MPI_Recv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        break;
    case HPCLAB_RING_IRECV:
        MPI_Irecv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, &req[0]);
        MPI_Irecv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, &req[1]);
        MPI_Isend(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c, &req[2]);
        MPI_Isend(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        break;
    case HPCLAB_RING_SENDRECV:
        MPI_Sendrecv(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT,
                     rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
        MPI_Sendrecv(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT,
                     rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
        break;
    default: /* HPCLAB_RING_NAIVE */
        MPI_Ssend(sr, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_RIGHT, c);
        MPI_Ssend(sl, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_LEFT, c);
        MPI_Recv(rr, n, MPI_INT32_T, g->left, HPCLAB_RING_TAG_RIGHT, c, MPI_STATUS_IGNORE);
        MPI_Recv(rl, n, MPI_INT32_T, g->right, HPCLAB_RING_TAG_LEFT, c, MPI_STATUS_IGNORE);
        break;
    }
}

/* One full ring. Returns the number of home sums that were wrong (0, 1 or 2);
 * *home_r and *home_l point at the messages that came home. */
static int one_ring(const ring_t *g, int variant, int32_t **home_r, int32_t **home_l)
{
    int32_t *sr = g->origin[RIGHT], *sl = g->origin[LEFT], *rr = sr, *rl = sl;

    for (int step = 0; step < g->size; step++) {
        rr = g->buf[RIGHT][step & 1];
        rl = g->buf[LEFT][step & 1];
        exchange(g, variant, sr, sl, rr, rl);
        if (hpclab_ring_fault_element >= 0 && g->rank == hpclab_ring_fault_rank
            && hpclab_ring_fault_element < g->count)
            rr[hpclab_ring_fault_element] = wrap_add(rr[hpclab_ring_fault_element], 1);
        if (step < g->size - 1) {
            rr[0] = wrap_add(rr[0], g->rank);
            rl[0] = wrap_add(rl[0], -(int64_t)g->rank);
        }
        sr = rr;
        sl = rl;
    }
    *home_r = rr;
    *home_l = rl;
    return (rr[0] != hpclab_ring_expected(g->rank, g->size, RIGHT))
         + (rl[0] != hpclab_ring_expected(g->rank, g->size, LEFT));
}

/* "" when both messages that came home are right, else what is wrong */
int hpclab_ring_check_home(int rank, int size, int count, const int32_t *home_r,
                           const int32_t *home_l, int rep, char *msg, size_t len)
{
    const int32_t *home[2] = {home_r, home_l};
    static const char *name[2] = {"from the left", "from the right"};

    for (int d = 0; d < 2; d++) {
        int32_t want = hpclab_ring_expected(rank, size, d);
        if (home[d][0] != want) {
            snprintf(msg, len, "repetition %d, ring of %d ranks: the sum that came home %s is "
                     "%d, expected %d", rep, size, name[d], (int)home[d][0], (int)want);
            return 1;
        }
        for (int i = 1; i < count; i++) {
            if (home[d][i] != hpclab_ring_pattern(rank, (size_t)i, d)) {
                snprintf(msg, len, "repetition %d, ring of %d ranks: the message that came home %s "
                         "is not this rank's own (element %d is %d, expected %d)", rep,
                         size, name[d], i, (int)home[d][i],
                         (int)hpclab_ring_pattern(rank, (size_t)i, d));
                return 1;
            }
        }
    }
    return 0;
}

int hpclab_ring(MPI_Comm comm, int variant, size_t nbytes, int warmup, int iterations,
                int repetitions, int hugepages, double *times, char *errmsg, size_t errlen)
{
    ring_t g = {.cart = MPI_COMM_NULL};
    hpclab_topo ring;
    long points[1];
    int failed = 0, dims[1], periods[1] = {1};
    char msg[HPCLAB_ERRLEN] = "";
    int32_t *home_r = NULL, *home_l = NULL;

    MPI_Comm_size(comm, &g.size);
    dims[0] = g.size;
    if (variant < 0 || variant >= HPCLAB_RING_NVARIANTS || nbytes < 4 || nbytes % 4
        || nbytes / 4 > 2147483647UL || warmup < 0 || iterations < 1 || repetitions < 1) {
        snprintf(errmsg, errlen, "bad arguments: variant=%d nbytes=%zu (a multiple of 4, at least 4)"
                 " warmup=%d iterations=%d repetitions=%d", variant, nbytes, warmup, iterations,
                 repetitions);
        return 1;
    }
    g.count = (int)(nbytes / 4);
    /* the ring is the periodic 1D grid of the topology layer, one point per rank */
    points[0] = g.size;
    if (hpclab_topo_create(comm, 1, points, dims, periods, &ring, errmsg, errlen))
        return 1;
    g.cart = ring.cart;
    g.rank = ring.rank;
    g.left = ring.lo[0];
    g.right = ring.hi[0];

    for (int d = 0; d < 2 && !failed; d++) {
        g.origin[d] = hpclab_alloc(nbytes, hugepages);
        g.buf[d][0] = hpclab_alloc(nbytes, hugepages);
        g.buf[d][1] = hpclab_alloc(nbytes, hugepages);
        if (!g.origin[d] || !g.buf[d][0] || !g.buf[d][1]) {
            snprintf(msg, sizeof msg, "cannot allocate six buffers of %zu bytes", nbytes);
            failed = 1;
            break;
        }
        g.origin[d][0] = d == RIGHT ? -g.rank : g.rank;
        for (int i = 1; i < g.count; i++)
            g.origin[d][i] = hpclab_ring_pattern(g.rank, (size_t)i, d);
    }
    if (hpclab_fail_together(g.cart, failed, msg, sizeof msg))
        goto done;

    for (int w = 0; w < warmup; w++)
        one_ring(&g, variant, &home_r, &home_l);

    for (int r = 0; r < repetitions && !failed; r++) {
        long wrong = 0;
        double t0, elapsed, slowest;

        for (int d = 0; d < 2; d++) {
            memset(g.buf[d][0], 0, nbytes);
            memset(g.buf[d][1], 0, nbytes);
        }
        MPI_Barrier(g.cart);
        t0 = MPI_Wtime();
        for (int it = 0; it < iterations; it++)
            wrong += one_ring(&g, variant, &home_r, &home_l);
        elapsed = (MPI_Wtime() - t0) / iterations;
        MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, g.cart);
        times[r] = slowest;

        hpclab_ring_check_home(g.rank, g.size, g.count, home_r, home_l, r, msg, sizeof msg);
        if (!msg[0] && wrong)
            snprintf(msg, sizeof msg, "repetition %d, ring of %d ranks: %ld of %d sums that came "
                     "home were wrong", r, g.size, wrong, 2 * iterations);
        if (hpclab_fail_together(g.cart, msg[0] != 0, msg, sizeof msg))
            failed = 1;
    }

done:
    for (int d = 0; d < 2; d++) {
        hpclab_free(g.origin[d]);
        hpclab_free(g.buf[d][0]);
        hpclab_free(g.buf[d][1]);
    }
    hpclab_topo_free(&ring);
    if (failed || msg[0]) {
        snprintf(errmsg, errlen, "%s", msg);
        return 1;
    }
    return 0;
}
