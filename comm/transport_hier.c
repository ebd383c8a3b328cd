/* transport_hier.c - --transport hier: the hierarchical allreduce of comm/buckets.h. Inside a
 * node: NCCL when the buckets are on GPUs and NCCL was built (TransportConfig.device_coll), MPI
 * otherwise (the CPU backend, and the tests that form several "nodes" of CPU ranks with
 * --ranks-per-node). Across nodes: MPI between the ranks with the same local rank, on pinned host
 * copies of the shards when NCCL holds them on the device. Every node must have the same number
 * of ranks (shard l of every node meets shard l of the others). The nodes are those of the
 * communicator given (topology_derive): a pipeline stage's replicas are grouped by the nodes they
 * run on, not by the job's node sizes. */
#include "mpi_check.h" /* defines: MPI_CHECK, usage_check_all */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "buckets.h"
#include "grad_cast.h"
#include "transport.h"

#include <stdlib.h>

struct Transport {
    BucketEngine *pipe;
    int L, N; /* ranks per node, nodes */
};

static Transport *hier_create(const TransportConfig *cfg) {
    Topology derived, *topo = &derived;
    topology_derive(&derived, cfg->comm, cfg->topo);
    int sizes[2] = {topo->local_size, -topo->local_size}, nranks;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, cfg->comm));
    usage_check_all(sizes[0] == -sizes[1],
                    "--transport hier: nodes have between %d and %d ranks; the hierarchy needs the "
                    "same number on every node (group them with --ranks-per-node)",
                    -sizes[1], sizes[0]);
    MPI_CHECK(MPI_Comm_size(cfg->comm, &nranks));

    const CollOps *intra_ops = &coll_mpi;
    if (cfg->be->device_memory && cfg->device_coll) intra_ops = cfg->device_coll;
    Coll *intra = intra_ops->create(topo->node_comm, cfg->be, cfg->ctx, cfg->be->device_memory);
    int staged = intra_ops->on_device(intra) && topo->nnodes > 1;
    grad_wire_set(intra_ops, intra, cfg->grad_dtype);
    transport_set_progress(cfg, intra_ops, intra);

    MPI_Comm cross; /* the ranks with this local rank, one per node */
    MPI_CHECK(MPI_Comm_split(cfg->comm, topo->local_rank, topo->rank, &cross));
    Coll *top = coll_mpi.create(cross, cfg->be, cfg->ctx, cfg->be->device_memory && !staged);
    MPI_CHECK(MPI_Comm_free(&cross));
    grad_wire_set(&coll_mpi, top, cfg->grad_dtype);
    transport_set_progress(cfg, &coll_mpi, top);

    Transport *t = xcalloc(1, sizeof *t);
    t->pipe = buckets_create(intra_ops, intra, &coll_mpi, top, staged, nranks, cfg->blocking,
                             cfg->leave_sum);
    t->L = topo->local_size, t->N = topo->nnodes;
    topology_free(&derived);
    return t;
}

static void hier_start(Transport *t, float *buf, size_t n) {
    buckets_start(t->pipe, buf, n);
}
static void hier_progress(Transport *t) {
    buckets_progress(t->pipe);
}
static void hier_backward_done(Transport *t) {
    buckets_backward_done(t->pipe);
}
static void hier_finish(Transport *t) {
    buckets_finish(t->pipe);
}
static double hier_hidden(Transport *t) {
    return buckets_hidden(t->pipe);
}

static void hier_alone(Transport *t, float *buf, size_t n) {
    buckets_alone(t->pipe, buf, n);
}
/* Bytes through each rank's busiest link per byte of bucket: reduce-scatter and all-gather inside
 * the node move (L-1)/L each, the allreduce of a 1/L shard across the N nodes 2(N-1)/N of it.
 * With one node that is 2(L-1)/L, with one rank per node 2(N-1)/N: an allreduce's factor. */
static double hier_busbw_factor(Transport *t) {
    return 2.0 * (t->L - 1) / t->L + 2.0 * (t->N - 1) / t->N / t->L;
}

static double hier_scale_left(Transport *t) {
    return buckets_scale_left(t->pipe);
}

static void hier_destroy(Transport *t) {
    buckets_destroy(t->pipe);
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
    .alone = hier_alone,
    .busbw_factor = hier_busbw_factor,
    .scale_left = hier_scale_left,
};
