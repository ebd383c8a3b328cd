/* transport_nccl.c - --transport nccl: each bucket is one ncclAllReduce with ncclAvg over all
 * ranks, on the GPUs, queued on a stream of its own that waits for backward's gradients and that
 * the update waits for (comm/coll_nccl.c). CUDA and NCCL builds only; needs --device cuda. */
#include "mpi_check.h" /* defines: usage_check_all */
#include "transport.h"

extern const CollOps coll_nccl; /* comm/coll_nccl.c */

static BucketEngine *nccl_create(const TransportConfig *cfg) {
    usage_check_all(cfg->be->device_memory, "--transport nccl: needs --device cuda");
    Coll *all = transport_coll(&coll_nccl, cfg->comm, cfg, 1);
    return buckets_create(NULL, NULL, &coll_nccl, all, 0, cfg->scale, 0);
}

const TransportOps nccl_transport = {
    .name = "nccl",
    .device_only = 1,
    .averages_free = 1,
    .create = nccl_create,
};
