/* transport_hier.c - --transport hier: the hierarchical allreduce of comm/pipeline.h. Inside a
 * node: NCCL when the buckets are on GPUs and NCCL was built (registry_coll("nccl")), MPI
 * otherwise (the CPU backend, and the tests that form several "nodes" of CPU ranks with
 * --ranks-per-node). Across nodes: MPI between the ranks with the same local rank, on pinned host
 * copies of the shards when NCCL holds them on the device. Every node must have the same number
 * of ranks (shard l of every node meets shard l of the others). */
#include "check.h"
#include "pipeline.h"
#include "registry.h"
#include "transport.h"
#include "util.h"

#include <stdlib.h>

struct Transport {
    Pipeline *pipe;
};

static Transport *hier_create(const TransportConfig *cfg) {
    const Topology *topo = cfg->topo;
    int sizes[2] = {topo->local_size, -topo->local_size}, nranks;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, cfg->comm));
    usage_check_all(sizes[0] == -sizes[1],
                    "--transport hier: nodes have between %d and %d ranks; the hierarchy needs the "
                    "same number on every node (group them with --ranks-per-node)",
                    -sizes[1], sizes[0]);
    MPI_CHECK(MPI_Comm_size(cfg->comm, &nranks));

    const CollOps *intra_ops = &coll_mpi;
    if (cfg->be->device_memory && registry_coll("nccl")) intra_ops = registry_coll("nccl");
    Coll *intra = intra_ops->create(topo->node_comm, cfg->be, cfg->ctx, cfg->be->device_memory);
    int staged = intra_ops->on_device(intra) && topo->nnodes > 1;

    MPI_Comm cross; /* the ranks with this local rank, one per node */
    MPI_CHECK(MPI_Comm_split(cfg->comm, topo->local_rank, topo->rank, &cross));
    Coll *top = coll_mpi.create(cross, cfg->be, cfg->ctx, cfg->be->device_memory && !staged);
    MPI_CHECK(MPI_Comm_free(&cross));

    Transport *t = xcalloc(1, sizeof *t);
    t->pipe = pipeline_create(intra_ops, intra, &coll_mpi, top, staged, nranks);
    return t;
}

static void hier_start(Transport *t, float *buf, size_t n) {
    pipeline_start(t->pipe, buf, n);
}
static void hier_progress(Transport *t) {
    pipeline_progress(t->pipe);
}
static void hier_backward_done(Transport *t) {
    pipeline_backward_done(t->pipe);
}
static void hier_finish(Transport *t) {
    pipeline_finish(t->pipe);
}
static double hier_hidden(Transport *t) {
    return pipeline_hidden(t->pipe);
}

static void hier_destroy(Transport *t) {
    pipeline_destroy(t->pipe);
    free(t);
}

const TransportOps hier_transport = {
    .name = "hier",
    .create = hier_create,
    .start = hier_start,
    .progress = hier_progress,
    .backward_done = hier_backward_done,
    .finish = hier_finish,
    .hidden = hier_hidden,
    .destroy = hier_destroy,
};
