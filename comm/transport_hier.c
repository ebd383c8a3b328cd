/* transport_hier.c - --transport hier: the hierarchical allreduce of comm/buckets.h. Inside a
 * node: NCCL when the buckets are on GPUs and NCCL was built (TransportConfig.device_coll), MPI
 * otherwise (the CPU backend, and the tests that form several "nodes" of CPU ranks with
 * --ranks-per-node). Across nodes: MPI between the ranks with the same local rank, on pinned host
 * copies of the shards when NCCL holds them on the device. Every node must have the same number
 * of ranks (shard l of every node meets shard l of the others). The nodes are those of the
 * communicator given (topology_derive): a pipeline stage's replicas are grouped by the nodes they
 * run on, not by the job's node sizes. */
#include "mpi_check.h" /* defines: MPI_CHECK, usage_check_all */
#include "transport.h"

static BucketEngine *hier_create(const TransportConfig *cfg) {
    Topology derived, *topo = &derived;
    topology_derive(&derived, cfg->comm, cfg->topo);
    int sizes[2] = {topo->local_size, -topo->local_size};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, cfg->comm));
    usage_check_all(sizes[0] == -sizes[1],
                    "--transport hier: nodes have between %d and %d ranks; the hierarchy needs the "
                    "same number on every node (group them with --ranks-per-node)",
                    -sizes[1], sizes[0]);

    const CollOps *intra_ops = &coll_mpi;
    if (cfg->be->device_memory && cfg->device_coll) intra_ops = cfg->device_coll;
    Coll *intra = transport_coll(intra_ops, topo->node_comm, cfg, cfg->be->device_memory);
    int staged = intra->on_device && topo->nnodes > 1;

    MPI_Comm cross; /* the ranks with this local rank, one per node */
    MPI_CHECK(MPI_Comm_split(cfg->comm, topo->local_rank, topo->rank, &cross));
    Coll *top = transport_coll(&coll_mpi, cross, cfg, cfg->be->device_memory && !staged);
    MPI_CHECK(MPI_Comm_free(&cross));
    BucketEngine *e =
        buckets_create(intra_ops, intra, &coll_mpi, top, staged, cfg->scale, cfg->blocking);
    topology_free(&derived);
    return e;
}

const TransportOps hier_transport = {
    .name = "hier",
    .mpi_levels = 1,
    .create = hier_create,
};
