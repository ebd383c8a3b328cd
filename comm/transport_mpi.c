/* transport_mpi.c - --transport mpi: each bucket is one MPI_Iallreduce over all ranks, scaled by
 * 1/P on completion. On device memory the bucket is downloaded, reduced on the host and uploaded
 * (coll_mpi.c): the portable baseline, correct without a CUDA-aware MPI. */
#include "pipeline.h"
#include "transport.h"
#include "util.h"

#include <stdlib.h>

struct Transport {
    Pipeline *pipe;
};

static Transport *mpi_t_create(const TransportConfig *cfg) {
    Transport *t = xcalloc(1, sizeof *t);
    int nranks;
    MPI_Comm_size(cfg->comm, &nranks);
    Coll *all = coll_mpi.create(cfg->comm, cfg->be, cfg->ctx, cfg->be->device_memory);
    t->pipe = pipeline_create(NULL, NULL, &coll_mpi, all, 0, nranks);
    return t;
}

static void mpi_t_start(Transport *t, float *buf, size_t n) {
    pipeline_start(t->pipe, buf, n);
}
static void mpi_t_progress(Transport *t) {
    pipeline_progress(t->pipe);
}
static void mpi_t_backward_done(Transport *t) {
    pipeline_backward_done(t->pipe);
}
static void mpi_t_finish(Transport *t) {
    pipeline_finish(t->pipe);
}
static double mpi_t_hidden(Transport *t) {
    return pipeline_hidden(t->pipe);
}

static void mpi_t_destroy(Transport *t) {
    pipeline_destroy(t->pipe);
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
};
