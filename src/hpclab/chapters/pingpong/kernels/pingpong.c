/*
 * NAME
 *   pingpong.c - MPI ping-pong: latency and bandwidth between two ranks.
 *
 * PURPOSE
 *   Rank 0 sends nbytes to rank 1, which answers with nbytes of its own. One
 *   repetition times a whole batch of round trips with MPI_Wtime between a
 *   barrier and one untimed round trip (which lines the ranks up) and the last
 *   receive, so reading the clock costs nothing; the one-way time is half the
 *   round trip (osu_latency's methodology).
 *
 * USAGE
 *   hpclab_pingpong(comm, nbytes, warmup, iterations, repetitions, hugepages,
 *                   times, errmsg, sizeof errmsg)
 *   from C, or hpclab.chapters.pingpong.kernels.run_c(comm, nbytes, ...) from Python.
 *
 * MODEL
 *   Hockney: T(n) = lambda + n / B, usually in two segments (eager and
 *   rendezvous protocols); see hpclab.models.
 *
 * NOTES
 *   As in osu_latency and IMB, each rank sends from its own send buffer and
 *   receives into its own receive buffer (echoing the buffer just received
 *   was up to twice as slow for 16-64 KiB messages with MPICH's shared
 *   memory on a 2-core test machine). Both send buffers hold the same pattern, new each repetition;
 *   both ranks check every received byte after each repetition, outside the
 *   timed loop. It does not measure bidirectional or multi-pair bandwidth.
 */
#include "pingpong.h"
#include "hpclab_common.h"

#include <stdio.h>
#include <string.h>

#define TAG 17

long hpclab_pingpong_fault_byte = -1;

unsigned char hpclab_pingpong_pattern(size_t i, int seed)
{
    return (unsigned char)((i * 131u + (size_t)seed * 17u + 1u) & 0xffu);
}

static void fill(unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = hpclab_pingpong_pattern(i, seed);
}

size_t hpclab_pingpong_first_wrong(const unsigned char *buf, size_t n, int seed)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != hpclab_pingpong_pattern(i, seed))
            return i;
    return n;
}

static size_t first_wrong(unsigned char *buf, size_t n, int seed, int rank)
{
    /* the test hook: corrupt what rank 1 received, to prove the check works */
    if (rank == 1 && hpclab_pingpong_fault_byte >= 0 && (size_t)hpclab_pingpong_fault_byte < n)
        buf[hpclab_pingpong_fault_byte] ^= 0xffu;
    return hpclab_pingpong_first_wrong(buf, n, seed);
}

static void round_trips(MPI_Comm comm, int rank, unsigned char *sbuf,
                        unsigned char *rbuf, int count, int n)
{
    if (rank == 0) {
        for (int i = 0; i < n; i++) {
            MPI_Send(sbuf, count, MPI_BYTE, 1, TAG, comm);
            MPI_Recv(rbuf, count, MPI_BYTE, 1, TAG, comm, MPI_STATUS_IGNORE);
        }
    } else if (rank == 1) {
        for (int i = 0; i < n; i++) {
            MPI_Recv(rbuf, count, MPI_BYTE, 0, TAG, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, count, MPI_BYTE, 0, TAG, comm);
        }
    }
}

int hpclab_pingpong(MPI_Comm comm, size_t nbytes, int warmup, int iterations,
                    int repetitions, int hugepages, double *times,
                    char *errmsg, size_t errlen)
{
    int rank, size, failed = 0;
    const int count = (int)nbytes;
    unsigned char *sbuf = NULL, *rbuf = NULL;
    char msg[HPCLAB_ERRLEN] = "";

    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size < 2) {
        snprintf(errmsg, errlen, "pingpong needs at least 2 ranks, the communicator has %d", size);
        return 1;
    }
    if (nbytes > HPCLAB_PINGPONG_MAX_BYTES || warmup < 0 || iterations < 1 || repetitions < 1) {
        snprintf(msg, sizeof msg, "bad arguments: nbytes=%zu warmup=%d iterations=%d repetitions=%d",
                 nbytes, warmup, iterations, repetitions);
        failed = 1;
    } else if (rank < 2) {
        sbuf = hpclab_alloc(nbytes, hugepages);
        rbuf = hpclab_alloc(nbytes, hugepages);
        if (!sbuf || !rbuf) {
            snprintf(msg, sizeof msg, "cannot allocate two buffers of %zu bytes", nbytes);
            failed = 1;
        }
    }
    if (hpclab_fail_together(comm, failed, msg, sizeof msg))
        goto done;

    if (rank < 2)
        fill(sbuf, nbytes, 0);
    round_trips(comm, rank, sbuf, rbuf, count, warmup);

    for (int r = 0; r < repetitions && !failed; r++) {
        int seed = r + 1;
        double t0, elapsed = 0.0, slowest;

        if (rank < 2) {
            fill(sbuf, nbytes, seed);
            memset(rbuf, 0, nbytes);
        }
        MPI_Barrier(comm);
        /* The barrier lets rank 0 go about one latency before rank 1; a first timed
         * message would then wait for rank 1 to reach its receive, and the batch would
         * carry one extra latency (2 iterations: +25%). One untimed round trip lines the
         * two ranks up: after it, rank 1 is always waiting when rank 0 sends. */
        round_trips(comm, rank, sbuf, rbuf, count, 1);
        t0 = MPI_Wtime();
        round_trips(comm, rank, sbuf, rbuf, count, iterations);
        if (rank < 2)
            elapsed = (MPI_Wtime() - t0) / (2.0 * iterations);
        MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, comm);
        times[r] = slowest;

        if (rank < 2) {
            size_t bad = first_wrong(rbuf, nbytes, seed, rank);
            if (bad < nbytes) {
                snprintf(msg, sizeof msg,
                         "repetition %d of a %zu-byte message: byte %zu is %u, expected %u",
                         r, nbytes, bad, rbuf[bad], hpclab_pingpong_pattern(bad, seed));
                failed = 1;
            }
        }
        if (hpclab_fail_together(comm, failed, msg, sizeof msg))
            failed = 1;
    }

done:
    hpclab_free(sbuf);
    hpclab_free(rbuf);
    if (failed || msg[0]) {
        snprintf(errmsg, errlen, "%s", msg);
        return 1;
    }
    return 0;
}
