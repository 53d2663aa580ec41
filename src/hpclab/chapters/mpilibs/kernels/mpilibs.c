/*
 * NAME
 *   mpilibs.c - one MPI library's point-to-point and collective costs, for the mpilibs chapter.
 *
 * SYNOPSIS
 *   mpiexec -n P mpilibs TEST REPETITIONS WARMUP BYTES:ITERATIONS [BYTES:ITERATIONS ...]
 *   TEST: pingpong (ranks 0 and 1; the others wait), ring (every rank sends to its right and
 *   left neighbours at once, nonblocking, HPCC's naturally ordered ring), randomring (the same
 *   on a ring of the ranks in a random order, HPCC's randomly ordered ring: one order drawn
 *   from a fixed seed, the same on every rank, printed in the header), exchange (IMB's
 *   Exchange: two nonblocking sends, then two blocking receives), allreduce (a sum of
 *   BYTES / 8 doubles).
 *
 * PURPOSE
 *   The same C program, compiled by each library's own mpicc and started by its own mpiexec,
 *   so that the libraries are compared on one code. Its output is JSON, one object a line:
 *   first the library and where each rank runs ({"library": ..., "cpus": [[...], ...]}), then
 *   {"test", "nbytes", "iterations", "rep", "seconds"} per repetition, where seconds is one
 *   operation's time on rank 0: half a round trip for pingpong, one step for the others.
 *
 * NOTES
 *   Every message carries a pattern of its sender, size and iteration. After each timed
 *   batch the operation runs once more, untimed, and the receiver checks what arrived in
 *   full (the allreduce its sum): a
 *   wrong library or build is reported as {"error": ...} with exit status 2, never a time,
 *   and every rank stops (the ranks agree on it after each checked operation).
 *   Each size's batches follow WARMUP untimed operations. HPCLAB_MPILIBS_FAULT=1 makes rank 1
 *   corrupt what it sends in checked operations, to test that the checks catch it.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PINGPONG, RING, EXCHANGE, ALLREDUCE, RANDOMRING, NTESTS };
static const char *NAMES[NTESTS] = {"pingpong", "ring", "exchange", "allreduce", "randomring"};

static int rank, size;
static int test = -1;
static int *ring;           /* the ring's order of the ranks (randomring; else 0, 1, ...) */
static int left, right;     /* this rank's neighbours on it */
static int fault; /* HPCLAB_MPILIBS_FAULT=1: rank 1 corrupts its checked messages (a test hook) */

static char problem[256]; /* the first thing this rank found wrong */

static void fail(const char *what, long nbytes, long it)
{
    if (!problem[0])
        snprintf(problem, sizeof problem, "rank %d: %s at %ld bytes, iteration %ld", rank,
                 what, nbytes, it);
}

/* after a checked operation, on every rank: 1 when some rank found something wrong (the
 * lowest such rank prints it), so that all of them stop together and none waits */
static int failed_together(void)
{
    int first, mine = problem[0] ? rank : size;

    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first < size && rank == first) {
        printf("{\"error\": \"%s\"}\n", problem);
        fflush(stdout);
    }
    return first < size;
}

static unsigned char pattern(int from, long nbytes, long it, long i)
{
    return (unsigned char)(from * 31 + nbytes * 7 + it * 13 + i);
}

static void fill(unsigned char *b, int from, long nbytes, long it)
{
    for (long i = 0; i < nbytes; i++)
        b[i] = pattern(from, nbytes, it, i);
    if (fault && from == 1 && nbytes > 0)
        b[nbytes - 1] ^= 1;
}

static void check(const unsigned char *b, int from, long nbytes, long it)
{
    for (long i = 0; i < nbytes; i++)
        if (b[i] != pattern(from, nbytes, it, i))
            fail("a message arrived with wrong content", nbytes, it);
}

/* the ring of the ranks: in their order, or (randomring) in one drawn from a fixed seed by
 * the same Fisher-Yates shuffle on every rank; left and right are this rank's neighbours */
static void make_ring(void)
{
    unsigned long long x = 2014;
    int at = 0;

    ring = malloc((size_t)size * sizeof *ring);
    for (int p = 0; p < size; p++)
        ring[p] = p;
    for (int p = size - 1; test == RANDOMRING && p > 0; p--) {
        int j, t;

        x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* Knuth's MMIX LCG */
        j = (int)((x >> 33) % (unsigned long long)(p + 1));
        t = ring[p];
        ring[p] = ring[j];
        ring[j] = t;
    }
    for (int p = 0; p < size; p++)
        if (ring[p] == rank)
            at = p;
    right = ring[(at + 1) % size];
    left = ring[(at + size - 1) % size];
}

/* one operation of a test, iteration it; check: verify what arrived */
static void step(long nbytes, long it, unsigned char *s, unsigned char *r1, unsigned char *r2,
                 double *x, double *y, int check_it)
{
    MPI_Request q[4];

    switch (test) {
    case PINGPONG:
        if (rank == 0) {
            if (check_it)
                fill(s, 0, nbytes, it);
            MPI_Send(s, (int)nbytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(r1, (int)nbytes, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (check_it)
                check(r1, 1, nbytes, it);
        } else if (rank == 1) {
            MPI_Recv(r1, (int)nbytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (check_it) {
                check(r1, 0, nbytes, it);
                fill(s, 1, nbytes, it);
            }
            MPI_Send(s, (int)nbytes, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        break;
    case RING: /* HPCC's ring: both receives posted, a send to each side, all at once */
    case RANDOMRING:
        if (check_it)
            fill(s, rank, nbytes, it);
        MPI_Irecv(r1, (int)nbytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, &q[0]);
        MPI_Irecv(r2, (int)nbytes, MPI_BYTE, right, 2, MPI_COMM_WORLD, &q[1]);
        MPI_Isend(s, (int)nbytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &q[2]);
        MPI_Isend(s, (int)nbytes, MPI_BYTE, left, 2, MPI_COMM_WORLD, &q[3]);
        MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
        if (check_it) {
            check(r1, left, nbytes, it);
            check(r2, right, nbytes, it);
        }
        break;
    case EXCHANGE: /* IMB's Exchange: both sends started, then the two blocking receives */
        if (check_it)
            fill(s, rank, nbytes, it);
        MPI_Isend(s, (int)nbytes, MPI_BYTE, left, 2, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(s, (int)nbytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &q[1]);
        MPI_Recv(r1, (int)nbytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(r2, (int)nbytes, MPI_BYTE, right, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        if (check_it) {
            check(r1, left, nbytes, it);
            check(r2, right, nbytes, it);
        }
        break;
    case ALLREDUCE: { /* x holds its values from before the batch (set_x), y the sum */
        const long n = nbytes / 8;

        MPI_Allreduce(x, y, (int)n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (check_it) {
            const double ranks = (double)size * (size + 1) / 2;

            for (long i = 0; i < n; i++)
                if (y[i] != ranks * (double)(i % 7 + 1))
                    fail("the allreduce's sum is wrong", nbytes, it);
        }
        break;
    }
    }
}

/* the values every rank contributes to the allreduce, set before the operations (not in
 * the timed loop); the fault hook changes rank 1's */
static void set_x(double *x, long nbytes)
{
    for (long i = 0; i < nbytes / 8; i++)
        x[i] = (double)(rank + 1) * (double)(i % 7 + 1) + (fault && rank == 1);
}

static void placement(void)
{
    cpu_set_t set;
    char mine[1024] = "", *all = NULL;
    int at = 0;

    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE && at < (int)sizeof mine - 16; c++)
            if (CPU_ISSET(c, &set))
                at += snprintf(mine + at, sizeof mine - (size_t)at, "%s%d", at ? ", " : "", c);
    if (rank == 0)
        all = malloc((size_t)size * sizeof mine);
    MPI_Gather(mine, sizeof mine, MPI_CHAR, all, sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len, major, minor;

        MPI_Get_library_version(version, &len);
        MPI_Get_version(&major, &minor);
        for (int i = 0; i < len; i++) /* one line of it, JSON-safe */
            if (version[i] == '\n' || version[i] == '"' || version[i] == '\\' || version[i] == '\t')
                version[i] = version[i] == '\n' ? ';' : ' ';
        printf("{\"library\": \"%s\", \"mpi_version\": \"%d.%d\", \"ranks\": %d, \"cpus\": [",
               version, major, minor, size);
        for (int p = 0; p < size; p++)
            printf("%s[%s]", p ? ", " : "", all + (size_t)p * sizeof mine);
        printf("], \"ring\": [");
        for (int p = 0; p < size; p++)
            printf("%s%d", p ? ", " : "", ring[p]);
        printf("]}\n");
        fflush(stdout);
        free(all);
    }
}

int main(int argc, char **argv)
{
    int reps, warmup;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fault = getenv("HPCLAB_MPILIBS_FAULT") && atoi(getenv("HPCLAB_MPILIBS_FAULT"));
    for (int t = 0; argc > 1 && t < NTESTS; t++)
        if (strcmp(argv[1], NAMES[t]) == 0)
            test = t;
    reps = argc > 2 ? atoi(argv[2]) : 0;
    warmup = argc > 3 ? atoi(argv[3]) : -1;
    if (test < 0 || reps < 1 || warmup < 0 || argc < 5 || (test == PINGPONG && size < 2)) {
        if (rank == 0)
            printf("{\"error\": \"usage: mpiexec -n P mpilibs pingpong|ring|exchange|allreduce|"
                   "randomring "
                   "REPETITIONS WARMUP BYTES:ITERATIONS ... (pingpong: P >= 2)\"}\n");
        MPI_Finalize();
        return 1;
    }
    for (int a = 4; a < argc; a++) {
        long nbytes = -1, iters = -1;

        if (sscanf(argv[a], "%ld:%ld", &nbytes, &iters) != 2 || nbytes < 0 || iters < 1
            || nbytes > 1L << 30 || (test == ALLREDUCE && nbytes % 8)) {
            if (rank == 0)
                printf("{\"error\": \"%s: give BYTES:ITERATIONS, bytes 0 to 2^30 (a multiple of "
                       "8 for allreduce), iterations >= 1\"}\n", argv[a]);
            MPI_Finalize();
            return 1;
        }
    }
    make_ring();
    placement();
    for (int a = 4; a < argc; a++) {
        long nbytes, iters;
        unsigned char *s, *r1, *r2;
        double *x, *y;

        sscanf(argv[a], "%ld:%ld", &nbytes, &iters);
        s = malloc((size_t)nbytes + 1);
        r1 = malloc((size_t)nbytes + 1);
        r2 = malloc((size_t)nbytes + 1);
        x = malloc((size_t)nbytes + 8);
        y = malloc((size_t)nbytes + 8);
        if (!s || !r1 || !r2 || !x || !y) {
            printf("{\"error\": \"rank %d cannot allocate five buffers of %ld bytes: give "
                   "smaller sizes\"}\n", rank, nbytes);
            fflush(stdout);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        memset(s, 0, (size_t)nbytes + 1);
        set_x(x, nbytes);
        for (long it = 0; it < warmup; it++)
            step(nbytes, it, s, r1, r2, x, y, it == warmup - 1);
        if (warmup && failed_together()) {
            MPI_Finalize();
            return 2;
        }
        for (int rep = 0; rep < reps; rep++) {
            double t0;

            MPI_Barrier(MPI_COMM_WORLD);
            t0 = MPI_Wtime();
            for (long it = 0; it < iters; it++)
                step(nbytes, it, s, r1, r2, x, y, 0);
            t0 = MPI_Wtime() - t0;
            /* the batch's last operation again, checked (not timed) */
            step(nbytes, iters, s, r1, r2, x, y, 1);
            if (failed_together()) {
                MPI_Finalize();
                return 2;
            }
            if (rank == 0)
                printf("{\"test\": \"%s\", \"nbytes\": %ld, \"iterations\": %ld, \"rep\": %d, "
                       "\"seconds\": %.9e}\n", NAMES[test], nbytes, iters, rep,
                       t0 / (double)iters / (test == PINGPONG ? 2 : 1));
        }
        fflush(stdout);
        free(s);
        free(r1);
        free(r2);
        free(x);
        free(y);
    }
    free(ring);
    MPI_Finalize();
    return 0;
}
