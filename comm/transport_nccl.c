/* transport_nccl.c - --transport nccl: each bucket is one ncclAllReduce with ncclAvg over all
 * ranks, on the GPUs, queued on a stream of its own that waits for backward's gradients and that
 * the update waits for (comm/coll_nccl.c). CUDA and NCCL builds only; needs --device cuda. */
#include <config.h>
#include "mpi_check.h" /* defines: MPI_CHECK, usage_check_all */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "buckets.h"
#include "grad_cast.h"
#include "transport.h"

#include <stdlib.h>

extern const CollOps coll_nccl; /* comm/coll_nccl.c */

struct Transport {
    BucketEngine *pipe;
};

static Transport *nccl_t_create(const TransportConfig *cfg) {
    usage_check_all(cfg->be->device_memory, "--transport nccl: needs --device cuda");
    int nranks;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &nranks));
    Transport *t = xcalloc(1, sizeof *t);
    Coll *all = coll_nccl.create(cfg->comm, cfg->be, cfg->ctx, 1);
    grad_wire_set(&coll_nccl, all, cfg->grad_dtype);
    t->pipe = buckets_create(NULL, NULL, &coll_nccl, all, 0, nranks, 0, 0);
    return t;
}

static void nccl_t_start(Transport *t, float *buf, size_t n) {
    buckets_start(t->pipe, buf, n);
}
static void nccl_t_progress(Transport *t) {
    buckets_progress(t->pipe);
}
static void nccl_t_backward_done(Transport *t) {
    buckets_backward_done(t->pipe);
}
static void nccl_t_finish(Transport *t) {
    buckets_finish(t->pipe);
}
static double nccl_t_hidden(Transport *t) {
    return buckets_hidden(t->pipe);
}

static void nccl_t_destroy(Transport *t) {
    buckets_destroy(t->pipe);
    free(t);
}

const TransportOps nccl_transport = {
    .name = "nccl",
    .device_only = 1,
    .create = nccl_t_create,
    .start = nccl_t_start,
    .progress = nccl_t_progress,
    .backward_done = nccl_t_backward_done,
    .finish = nccl_t_finish,
    .hidden = nccl_t_hidden,
    .destroy = nccl_t_destroy,
};
