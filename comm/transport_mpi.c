/* transport_mpi.c - --transport mpi: each bucket is one allreduce over all ranks, scaled by 1/P
 * on completion: MPI_Allreduce for the buckets started after backward, MPI_Iallreduce for those
 * started during it (--overlap). On device memory the bucket is downloaded, reduced on the host
 * and uploaded (coll_mpi.c): the portable baseline, correct without a CUDA-aware MPI. */
#include "buckets.h"
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "grad_cast.h"
#include "transport.h"

#include <stdlib.h>

struct Transport {
    BucketEngine *pipe;
    int nranks;
};

static Transport *mpi_t_create(const TransportConfig *cfg) {
    Transport *t = xcalloc(1, sizeof *t);
    MPI_CHECK(MPI_Comm_size(cfg->comm, &t->nranks));
    Coll *all = coll_mpi.create(cfg->comm, cfg->be, cfg->ctx, cfg->be->device_memory);
    grad_wire_set(&coll_mpi, all, cfg->grad_dtype);
    transport_set_progress(cfg, &coll_mpi, all);
    t->pipe =
        buckets_create(NULL, NULL, &coll_mpi, all, 0, t->nranks, cfg->blocking, cfg->leave_sum);
    return t;
}

void transport_set_progress(const TransportConfig *cfg, const CollOps *ops, Coll *c) {
    if (cfg->progress_thread && ops->set_progress) ops->set_progress(c, 1);
}

static void mpi_t_start(Transport *t, float *buf, size_t n) {
    buckets_start(t->pipe, buf, n);
}
static void mpi_t_progress(Transport *t) {
    buckets_progress(t->pipe);
}
static void mpi_t_backward_done(Transport *t) {
    buckets_backward_done(t->pipe);
}
static void mpi_t_finish(Transport *t) {
    buckets_finish(t->pipe);
}
static double mpi_t_hidden(Transport *t) {
    return buckets_hidden(t->pipe);
}
static void mpi_t_alone(Transport *t, float *buf, size_t n) {
    buckets_alone(t->pipe, buf, n);
}
/* An allreduce moves 2(P-1)/P of the buffer through each rank's link (nccl-tests). */
static double mpi_t_busbw_factor(Transport *t) {
    return 2.0 * (t->nranks - 1) / t->nranks;
}

static double mpi_t_scale_left(Transport *t) {
    return buckets_scale_left(t->pipe);
}

static void mpi_t_destroy(Transport *t) {
    buckets_destroy(t->pipe);
    free(t);
}

const TransportOps mpi_transport = {
    .name = "mpi",
    .create = mpi_t_create,
    .start = mpi_t_start,
    .progress = mpi_t_progress,
    .backward_done = mpi_t_backward_done,
    .finish = mpi_t_finish,
    .hidden = mpi_t_hidden,
    .destroy = mpi_t_destroy,
    .alone = mpi_t_alone,
    .busbw_factor = mpi_t_busbw_factor,
    .scale_left = mpi_t_scale_left,
};
