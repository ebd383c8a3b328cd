/* coll_nccl_plan.h - the pure logic of the NCCL collective (comm/coll_nccl.c), in plain C with no
 * CUDA, NCCL or MPI, so the CPU-only test tests/test_device_arith.c checks it in CI:
 *   - which NCCL reduction computes "scale times the sum";
 *   - the part of a run of operations hidden behind backward (the union of their intervals
 *     before backward's end);
 *   - two ranks of one communicator on the same GPU (NCCL refuses: "Duplicate GPU"). */
#ifndef DTBENCH_COLL_NCCL_PLAN_H
#define DTBENCH_COLL_NCCL_PLAN_H

#define GPU_UUID_BYTES 16

typedef enum {
    NCCL_RED_SUM,    /* scale == 1: ncclSum */
    NCCL_RED_AVG,    /* scale == 1/size exactly as the caller computes it: ncclAvg */
    NCCL_RED_PREMUL, /* anything else: ncclRedOpCreatePreMulSum(scale) */
} NcclRedChoice;

NcclRedChoice nccl_red_choice(float scale, int size);

/* Seconds of the union of the intervals [start[i], end[i]) that lie before bwd_end (all measured
 * from one origin). Intervals may overlap or come in any order. */
double hidden_union(const double *start, const double *end, int n, double bwd_end);

/* The first pair of ranks i < j whose device UUIDs (uuids[rank * GPU_UUID_BYTES ...]) are equal:
 * returns j and sets *first = i; -1 when every rank has a GPU of its own. */
int duplicate_gpu(const unsigned char *uuids, int n, int *first);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (nvidia-smi -L's form) of a 16-byte UUID into
 * buf[len >= 41]. */
void gpu_uuid_text(const unsigned char *uuid, char *buf, unsigned long len);

#endif
