/*
 * NAME
 *   hpclab_topo.c - Cartesian decomposition and halo exchange (see hpclab_topo.h).
 */
#include "hpclab_topo.h"

#include <limits.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hpclab_block_range(long n, int parts, int index, long *offset, long *count)
{
    long base = n / parts, extra = n % parts;

    *count = base + (index < extra);
    *offset = index * base + (index < extra ? index : extra);
}

/* The face of dimension d, t->halo layers thick from index `start` (halo included), over
 * the interior of the other dimensions. */
static void face_type(const hpclab_topo *t, int d, long start, MPI_Datatype *type)
{
    int sizes[HPCLAB_TOPO_MAXDIMS], sub[HPCLAB_TOPO_MAXDIMS], starts[HPCLAB_TOPO_MAXDIMS];

    for (int k = 0; k < t->ndims; k++) {
        sizes[k] = (int)hpclab_topo_extent(t, k);
        sub[k] = k == d ? t->halo : (int)t->local[k];
        starts[k] = k == d ? (int)start : t->halo;
    }
    MPI_Type_create_subarray(t->ndims, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, type);
    MPI_Type_commit(type);
}

/* The send and receive faces of every dimension for t->halo layers. */
static void face_types(hpclab_topo *t)
{
    const int w = t->halo;

    for (int d = 0; d < t->ndims; d++) {
        face_type(t, d, w, &t->send_lo[d]);
        face_type(t, d, t->local[d], &t->send_hi[d]);
        face_type(t, d, 0, &t->recv_lo[d]);
        face_type(t, d, t->local[d] + w, &t->recv_hi[d]);
    }
}

int hpclab_topo_create(MPI_Comm comm, int ndims, const long *global, const int *dims,
                       const int *periods, hpclab_topo *t, char *errmsg, size_t errlen)
{
    int size, product = 1;

    memset(t, 0, sizeof *t);
    t->cart = MPI_COMM_NULL;
    t->halo = 1;
    t->align = 1;
    for (int d = 0; d < HPCLAB_TOPO_MAXDIMS; d++)
        t->send_lo[d] = t->send_hi[d] = t->recv_lo[d] = t->recv_hi[d] = MPI_DATATYPE_NULL;
    MPI_Comm_size(comm, &size);
    if (ndims < 1 || ndims > HPCLAB_TOPO_MAXDIMS) {
        snprintf(errmsg, errlen, "a grid has 1 to %d dimensions, got %d", HPCLAB_TOPO_MAXDIMS,
                 ndims);
        return 1;
    }
    t->ndims = ndims;
    for (int d = 0; d < ndims; d++) {
        t->dims[d] = dims ? dims[d] : 0;
        t->periods[d] = periods ? periods[d] != 0 : 0;
        t->global[d] = global[d];
        if (t->dims[d] < 0) {
            snprintf(errmsg, errlen, "ranks per dimension must be >= 0 (0: MPI chooses), "
                     "got %d in dimension %d", t->dims[d], d);
            return 1;
        }
    }
    if (MPI_Dims_create(size, ndims, t->dims) != MPI_SUCCESS) {
        snprintf(errmsg, errlen, "%d ranks do not fit the process grid asked for", size);
        return 1;
    }
    for (int d = 0; d < ndims; d++)
        product *= t->dims[d];
    if (product != size) {
        snprintf(errmsg, errlen, "a process grid of %d ranks does not match the %d ranks of "
                 "the communicator", product, size);
        return 1;
    }
    for (int d = 0; d < ndims; d++) {
        if (t->global[d] < t->dims[d] || t->global[d] > 2147483645L) {
            snprintf(errmsg, errlen, "dimension %d has %ld points for %d ranks: every rank "
                     "needs at least one point (and at most 2^31 - 3)", d, t->global[d],
                     t->dims[d]);
            return 1;
        }
        t->cut += t->dims[d] > 1;
    }
    MPI_Cart_create(comm, ndims, t->dims, t->periods, 0, &t->cart);
    MPI_Comm_rank(t->cart, &t->rank);
    MPI_Comm_size(t->cart, &t->size);
    MPI_Cart_coords(t->cart, t->rank, ndims, t->coords);
    for (int d = 0; d < ndims; d++) {
        hpclab_block_range(t->global[d], t->dims[d], t->coords[d], &t->offset[d],
                           &t->local[d]);
        MPI_Cart_shift(t->cart, d, 1, &t->lo[d], &t->hi[d]);
    }
    face_types(t);
    return 0;
}

static void free_face_types(hpclab_topo *t)
{
    for (int d = 0; d < HPCLAB_TOPO_MAXDIMS; d++) {
        MPI_Datatype *types[4] = {&t->send_lo[d], &t->send_hi[d], &t->recv_lo[d],
                                  &t->recv_hi[d]};
        for (int k = 0; k < 4; k++)
            if (*types[k] != MPI_DATATYPE_NULL)
                MPI_Type_free(types[k]); /* sets it to MPI_DATATYPE_NULL */
    }
}

int hpclab_topo_set_halo(hpclab_topo *t, int halo, char *errmsg, size_t errlen)
{
    int thin = -1, worst;

    for (int d = 0; d < t->ndims && halo >= 1; d++)
        if ((t->dims[d] > 1 || t->periods[d]) && t->local[d] < halo && thin < 0)
            thin = d;
    /* the same answer on every rank: the thinnest block decides */
    MPI_Allreduce(&thin, &worst, 1, MPI_INT, MPI_MAX, t->cart);
    if (halo < 1) {
        snprintf(errmsg, errlen, "a halo is at least one layer thick, got %d", halo);
        return 1;
    }
    if (worst >= 0) {
        snprintf(errmsg, errlen, "a halo of %d layers needs blocks at least %d points thick, "
                 "but %d ranks cut dimension %d (%ld points) thinner: use fewer ranks along "
                 "it or a larger grid", halo, halo, t->dims[worst], worst, t->global[worst]);
        return 1;
    }
    free_face_types(t);
    t->halo = halo;
    face_types(t);
    return 0;
}

int hpclab_topo_create_aligned(MPI_Comm comm, int ndims, const long *global, const int *dims,
                               const int *periods, int halo, int align, hpclab_topo *t,
                               char *errmsg, size_t errlen)
{
    if (hpclab_topo_create(comm, ndims, global, dims, periods, t, errmsg, errlen))
        return 1;
    if ((halo != 1 && hpclab_topo_set_halo(t, halo, errmsg, errlen))
        || hpclab_topo_set_align(t, align, errmsg, errlen)) {
        hpclab_topo_free(t);
        return 1;
    }
    return 0;
}

long hpclab_round_up(long extent, int align)
{
    return align > 1 ? (extent + align - 1) / align * align : extent;
}

long hpclab_topo_extent(const hpclab_topo *t, int d)
{
    const long extent = t->local[d] + 2 * t->halo;

    return d == t->ndims - 1 ? hpclab_round_up(extent, t->align) : extent;
}

size_t hpclab_row_lead(int halo, int align)
{
    return align > 1 ? (size_t)((align - halo % align) % align) : 0;
}

size_t hpclab_topo_lead(const hpclab_topo *t)
{
    return hpclab_row_lead(t->halo, t->align);
}

int hpclab_topo_set_align(hpclab_topo *t, int align, char *errmsg, size_t errlen)
{
    const int last = t->ndims - 1;
    long mine = 0, longest;

    if (align < 1 || align > 64) { /* the same argument on every rank */
        snprintf(errmsg, errlen, "rows are aligned to 1 to 64 doubles, got %d", align);
        return 1;
    }
    /* the same answer on every rank: the longest padded row decides */
    if (hpclab_round_up(t->local[last] + 2 * t->halo, align) > INT_MAX)
        mine = t->local[last] + 2 * t->halo;
    MPI_Allreduce(&mine, &longest, 1, MPI_LONG, MPI_MAX, t->cart);
    if (longest > 0) {
        snprintf(errmsg, errlen, "a row of %ld points, padded to %d, is too long for an MPI "
                 "datatype: use a smaller grid, or a process grid that splits the last dimension",
                 longest, align);
        return 1;
    }
    free_face_types(t);
    t->align = align;
    face_types(t);
    return 0;
}

void hpclab_topo_free(hpclab_topo *t)
{
    free_face_types(t);
    if (t->cart != MPI_COMM_NULL)
        MPI_Comm_free(&t->cart);
}

size_t hpclab_topo_points(const hpclab_topo *t)
{
    size_t points = 1;

    for (int d = 0; d < t->ndims; d++)
        points *= (size_t)hpclab_topo_extent(t, d);
    return points;
}

/* Tags: 2d for what travels down dimension d (to lo), 2d + 1 for what travels up. A side
 * with no neighbour (MPI_PROC_NULL, a face of the domain) posts nothing: a message to no one
 * still costs a call, and on one rank that was the whole "halo" time. */
void hpclab_halo_start(const hpclab_topo *t, double *field, MPI_Request *req)
{
    int n = 0;

    for (int d = 0; d < t->ndims; d++) {
        if (t->lo[d] != MPI_PROC_NULL)
            MPI_Irecv(field, 1, t->recv_lo[d], t->lo[d], 2 * d + 1, t->cart, &req[n++]);
        if (t->hi[d] != MPI_PROC_NULL)
            MPI_Irecv(field, 1, t->recv_hi[d], t->hi[d], 2 * d, t->cart, &req[n++]);
    }
    for (int d = 0; d < t->ndims; d++) {
        if (t->lo[d] != MPI_PROC_NULL)
            MPI_Isend(field, 1, t->send_lo[d], t->lo[d], 2 * d, t->cart, &req[n++]);
        if (t->hi[d] != MPI_PROC_NULL)
            MPI_Isend(field, 1, t->send_hi[d], t->hi[d], 2 * d + 1, t->cart, &req[n++]);
    }
    while (n < HPCLAB_HALO_REQUESTS)
        req[n++] = MPI_REQUEST_NULL;
}

void hpclab_halo_finish(MPI_Request *req)
{
    MPI_Waitall(HPCLAB_HALO_REQUESTS, req, MPI_STATUSES_IGNORE);
}

void hpclab_halo_exchange(const hpclab_topo *t, double *field)
{
    MPI_Request req[HPCLAB_HALO_REQUESTS];

    hpclab_halo_start(t, field, req);
    hpclab_halo_finish(req);
}

void hpclab_topo_block_of(const hpclab_topo *t, int rank, long *offset, long *count)
{
    int coords[HPCLAB_TOPO_MAXDIMS];

    MPI_Cart_coords(t->cart, rank, t->ndims, coords);
    for (int d = 0; d < t->ndims; d++)
        hpclab_block_range(t->global[d], t->dims[d], coords[d], &offset[d], &count[d]);
}

/* The subarray datatype of rank r's block inside the global array (committed). */
static void block_type(const hpclab_topo *t, int r, MPI_Datatype *type)
{
    long offset[HPCLAB_TOPO_MAXDIMS], count[HPCLAB_TOPO_MAXDIMS];
    int sizes[HPCLAB_TOPO_MAXDIMS], sub[HPCLAB_TOPO_MAXDIMS], starts[HPCLAB_TOPO_MAXDIMS];

    hpclab_topo_block_of(t, r, offset, count);
    for (int d = 0; d < t->ndims; d++) {
        sizes[d] = (int)t->global[d];
        sub[d] = (int)count[d];
        starts[d] = (int)offset[d];
    }
    MPI_Type_create_subarray(t->ndims, sizes, sub, starts, MPI_ORDER_C, MPI_DOUBLE, type);
    MPI_Type_commit(type);
}

static int local_count(const hpclab_topo *t)
{
    long n = 1;

    for (int d = 0; d < t->ndims; d++)
        n *= t->local[d];
    return (int)n;
}

#define HPCLAB_TAG_BLOCK 77

static int blocks(const hpclab_topo *t, int root, double *global, double *local, int out)
{
    MPI_Request mine, *req = NULL;
    int n = local_count(t), failed = 0;

    if (t->rank == root) {
        req = malloc((size_t)t->size * sizeof *req);
        failed = req == NULL;
    }
    MPI_Bcast(&failed, 1, MPI_INT, root, t->cart);
    if (failed)
        return 1;
    if (out)
        MPI_Irecv(local, n, MPI_DOUBLE, root, HPCLAB_TAG_BLOCK, t->cart, &mine);
    if (t->rank == root) {
        for (int r = 0; r < t->size; r++) {
            MPI_Datatype type;

            block_type(t, r, &type);
            if (out)
                MPI_Isend(global, 1, type, r, HPCLAB_TAG_BLOCK, t->cart, &req[r]);
            else
                MPI_Irecv(global, 1, type, r, HPCLAB_TAG_BLOCK, t->cart, &req[r]);
            MPI_Type_free(&type); /* freed when the message is done */
        }
    }
    if (!out)
        MPI_Isend(local, n, MPI_DOUBLE, root, HPCLAB_TAG_BLOCK, t->cart, &mine);
    if (t->rank == root) {
        MPI_Waitall(t->size, req, MPI_STATUSES_IGNORE);
        free(req);
    }
    MPI_Wait(&mine, MPI_STATUS_IGNORE);
    return 0;
}

int hpclab_topo_scatter(const hpclab_topo *t, int root, const double *global, double *local)
{
    return blocks(t, root, (double *)global, local, 1);
}

int hpclab_topo_gather(const hpclab_topo *t, int root, const double *local, double *global)
{
    return blocks(t, root, global, (double *)local, 0);
}
