/* transport_mpi.c - --transport mpi: each bucket is one allreduce over all ranks, scaled on
 * completion: MPI_Allreduce for the buckets started after backward, MPI_Iallreduce for those
 * started during it (--overlap). On device memory the bucket is downloaded, reduced on the host
 * and uploaded (coll_mpi.c): the portable baseline, correct without a CUDA-aware MPI. */
#include "transport.h"

static BucketEngine *mpi_create(const TransportConfig *cfg) {
    Coll *all = transport_coll(&coll_mpi, cfg->comm, cfg, cfg->be->device_memory);
    return buckets_create(NULL, NULL, &coll_mpi, all, 0, cfg->scale, cfg->blocking);
}

const TransportOps mpi_transport = {
    .name = "mpi",
    .mpi_levels = 1,
    .create = mpi_create,
};
