/* coll_nccl.c - the NCCL implementation of coll.h (CUDA and NCCL builds only).
 *
 * One NCCL communicator per Coll, made from a unique id that the communicator's rank 0 creates
 * and MPI_Bcast shares; one non-blocking CUDA stream per Coll, on the backend's device. Every
 * operation is queued on that stream between two CUDA events (its interval, for hidden()); the
 * end event is its ticket. Nothing here waits on the host except wait() and hidden().
 *
 * Ordering with the compute stream: after_compute() makes this stream wait for an event recorded
 * on the compute stream (the gradients queued so far); before_compute() makes the compute stream
 * wait for everything queued here (the update reads the averages). The first after_compute() or
 * mark_backward_end() of an iteration also records the time origin of its intervals on the
 * compute stream, so every elapsed time is measured from an earlier event (CUDA does not promise
 * negative elapsed times).
 *
 * Averages: ncclSum for scale 1, ncclAvg for 1/size, otherwise a ncclRedOpCreatePreMulSum
 * operator (destroyed as soon as the call that uses it has returned, as NCCL allows); the choice,
 * the hidden-interval union and the duplicate-GPU check are plain C in coll_nccl_plan.c.
 *
 * --grad-dtype bf16/fp16 (CollSettings.wire): each collective casts its fp32 input into a device wire
 * buffer (grad_cast_cuda.cu), reduces it with ncclSum in ncclBfloat16/ncclFloat16, and casts the
 * result back applying the scale in fp32, all on this Coll's stream (so one wire buffer serves
 * every operation in turn).
 *
 * Failures: before ncclCommInitRank the ranks gather their GPUs' UUIDs; two ranks of one
 * communicator on one GPU (NCCL would abort with "Duplicate GPU") end the job with a usage error
 * naming them. The host never blocks in cudaEventSynchronize on NCCL work: it polls the event and
 * ncclCommGetAsyncError, and on an asynchronous NCCL error (a peer died, a network failure)
 * aborts the communicator and the job with NCCL's message instead of hanging. */
#include <config.h>
#include "mpi_check.h" /* defines: MPI_CHECK, usage_check_all */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "coll.h"
#include "cuda.h"
#include "coll_nccl_plan.h" /* defines: nccl_red_choice, hidden_union, duplicate_gpu */
#include "cuda_check.h"     /* defines: CUDA_CHECK */
#include "grad_cast_cuda.h" /* defines: grad_cast_pack_cuda, grad_cast_unpack_cuda */
#include "nccl_check.h"     /* defines: NCCL_CHECK */

#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    cudaEvent_t start, end;
} OpEvents;

typedef struct {
    Coll pub; /* rank, size, on_device 1, the CUDA backend (coll.h) */
    ncclComm_t nccl;
    cudaStream_t stream, compute;
    OpEvents *ops;
    int nops, cap;          /* this iteration's operations; event pairs kept for reuse */
    cudaEvent_t origin;     /* on the compute stream, before any operation of the iteration */
    cudaEvent_t gate, join; /* after_compute / before_compute */
    cudaEvent_t bwd;        /* end of backward, on the compute stream */
    int have_origin, bwd_marked;
    int wire;       /* GradDtype (CollSettings.wire): 1 bf16, 2 fp16; 0 fp32 */
    uint16_t *wbuf; /* the device wire buffer, wcap values */
    size_t wcap;
} NcclColl;

static NcclColl *N(Coll *c) {
    return (NcclColl *)c;
}

/* Gathers the GPUs' UUIDs over comm and ends the job with a usage error (exit 2, on every rank:
 * all ranks create their communicators at the same point) when two ranks share one. */
static void refuse_shared_gpu(MPI_Comm comm, int size, int device) {
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    unsigned char *all = xcalloc((size_t)size, GPU_UUID_BYTES);
    MPI_CHECK(MPI_Allgather(prop.uuid.bytes, GPU_UUID_BYTES, MPI_BYTE, all, GPU_UUID_BYTES,
                            MPI_BYTE, comm));
    int first = -1, second = duplicate_gpu(all, size, &first);
    char uuid[64] = "";
    if (second >= 0) gpu_uuid_text(all + (size_t)second * GPU_UUID_BYTES, uuid, sizeof uuid);
    free(all);
    usage_check_all(second < 0,
                    "--transport: ranks %d and %d of an NCCL communicator share GPU %s (NCCL needs "
                    "one GPU per rank): run at most one rank per GPU on a node, or use "
                    "--transport mpi",
                    first, second, uuid);
}

static Coll *nccl_create(MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                         const CollSettings *s) {
    /* always device memory; progressed by its stream */
    NcclColl *c = xcalloc(1, sizeof *c);
    c->wire = s->wire;
    MPI_CHECK(MPI_Comm_rank(comm, &c->pub.rank));
    MPI_CHECK(MPI_Comm_size(comm, &c->pub.size));
    c->pub.on_device = 1, c->pub.be = be, c->pub.ctx = ctx;
    c->compute = cuda_backend_stream(ctx);
    CUDA_CHECK(cudaSetDevice(cuda_backend_device(ctx)));
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreate(&c->origin));
    CUDA_CHECK(cudaEventCreate(&c->bwd));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->gate, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->join, cudaEventDisableTiming));
    /* event pairs for 64 operations an iteration made now, not in the first (timed) step */
    c->cap = 64;
    c->ops = xcalloc((size_t)c->cap, sizeof(OpEvents));
    for (int i = 0; i < c->cap; i++) {
        CUDA_CHECK(cudaEventCreate(&c->ops[i].start));
        CUDA_CHECK(cudaEventCreate(&c->ops[i].end));
    }
    refuse_shared_gpu(comm, c->pub.size, cuda_backend_device(ctx));
    ncclUniqueId id;
    if (c->pub.rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, comm));
    NCCL_CHECK(ncclCommInitRank(&c->nccl, c->pub.size, id, c->pub.rank));
    return &c->pub;
}

static void nccl_destroy(Coll *coll) {
    NcclColl *c = N(coll);
    CUDA_CHECK(cudaStreamSynchronize(c->stream));
    NCCL_CHECK(ncclCommDestroy(c->nccl));
    for (int i = 0; i < c->cap; i++) {
        cudaEventDestroy(c->ops[i].start);
        cudaEventDestroy(c->ops[i].end);
    }
    free(c->ops);
    if (c->wbuf) cudaFree(c->wbuf);
    cudaEventDestroy(c->origin), cudaEventDestroy(c->bwd);
    cudaEventDestroy(c->gate), cudaEventDestroy(c->join);
    cudaStreamDestroy(c->stream);
    free(c);
}

/* Records the start event of a new operation; end_op() records its end and returns its ticket. */
static void begin_op(NcclColl *c) {
    if (c->nops == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        c->ops = realloc(c->ops, (size_t)cap * sizeof(OpEvents));
        ALLOC_CHECK(c->ops);
        for (int i = c->cap; i < cap; i++) {
            CUDA_CHECK(cudaEventCreate(&c->ops[i].start));
            CUDA_CHECK(cudaEventCreate(&c->ops[i].end));
        }
        c->cap = cap;
    }
    CUDA_CHECK(cudaEventRecord(c->ops[c->nops].start, c->stream));
}

static int end_op(NcclColl *c) {
    CUDA_CHECK(cudaEventRecord(c->ops[c->nops].end, c->stream));
    return c->nops++;
}

/* The reduction for "scale times the sum"; *made is set when it must be destroyed after use. */
static ncclRedOp_t reduction(NcclColl *c, float scale, int *made) {
    *made = 0;
    NcclRedChoice choice = nccl_red_choice(scale, c->pub.size);
    if (choice == NCCL_RED_SUM) return ncclSum;
    if (choice == NCCL_RED_AVG) return ncclAvg;
    ncclRedOp_t op;
    NCCL_CHECK(
        ncclRedOpCreatePreMulSum(&op, &scale, ncclFloat32, ncclScalarHostImmediate, c->nccl));
    *made = 1;
    return op;
}

/* --grad-dtype: the wire buffer for n values (grown once the stream's work using it is done). */
static uint16_t *wire_buf(NcclColl *c, size_t n) {
    if (n > c->wcap) {
        CUDA_CHECK(cudaStreamSynchronize(c->stream));
        if (c->wbuf) CUDA_CHECK(cudaFree(c->wbuf));
        CUDA_CHECK(cudaMalloc((void **)&c->wbuf, (n ? n : 1) * sizeof(uint16_t)));
        c->wcap = n;
    }
    return c->wbuf;
}

static ncclDataType_t wire_type(NcclColl *c) {
    return c->wire == 1 ? ncclBfloat16 : ncclFloat16;
}

/* The three collectives in the wire type: cast in, reduce or gather, cast out with the scale. */
static int wire_allreduce(NcclColl *c, float *buf, size_t n, float scale) {
    uint16_t *w = wire_buf(c, n);
    begin_op(c);
    CUDA_CHECK(grad_cast_pack_cuda(c->stream, c->wire, w, buf, n));
    NCCL_CHECK(ncclAllReduce(w, w, n, wire_type(c), ncclSum, c->nccl, c->stream));
    CUDA_CHECK(grad_cast_unpack_cuda(c->stream, c->wire, buf, w, n, scale));
    return end_op(c);
}

static int wire_reduce_scatter(NcclColl *c, float *buf, size_t shard, float scale) {
    size_t at = (size_t)c->pub.rank * shard;
    uint16_t *w = wire_buf(c, shard * (size_t)c->pub.size);
    begin_op(c);
    CUDA_CHECK(grad_cast_pack_cuda(c->stream, c->wire, w, buf, shard * (size_t)c->pub.size));
    NCCL_CHECK(ncclReduceScatter(w, w + at, shard, wire_type(c), ncclSum, c->nccl, c->stream));
    CUDA_CHECK(grad_cast_unpack_cuda(c->stream, c->wire, buf + at, w + at, shard, scale));
    return end_op(c);
}

static int wire_allgather(NcclColl *c, float *buf, size_t shard) {
    size_t at = (size_t)c->pub.rank * shard, all = shard * (size_t)c->pub.size;
    uint16_t *w = wire_buf(c, all);
    begin_op(c);
    CUDA_CHECK(grad_cast_pack_cuda(c->stream, c->wire, w + at, buf + at, shard));
    NCCL_CHECK(ncclAllGather(w + at, w, shard, wire_type(c), c->nccl, c->stream));
    CUDA_CHECK(grad_cast_unpack_cuda(c->stream, c->wire, buf, w, all, 1.0f)); /* own block too */
    return end_op(c);
}

static int nccl_allreduce(Coll *coll, float *buf, size_t n, float scale) {
    NcclColl *c = N(coll);
    if (c->wire) return wire_allreduce(c, buf, n, scale);
    int made;
    ncclRedOp_t op = reduction(c, scale, &made);
    begin_op(c);
    NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, op, c->nccl, c->stream));
    if (made) NCCL_CHECK(ncclRedOpDestroy(op, c->nccl));
    return end_op(c);
}

/* In place as NCCL defines it: the result lands at buf + rank*shard. */
static int nccl_reduce_scatter(Coll *coll, float *buf, size_t shard, float scale) {
    NcclColl *c = N(coll);
    if (c->wire) return wire_reduce_scatter(c, buf, shard, scale);
    int made;
    ncclRedOp_t op = reduction(c, scale, &made);
    begin_op(c);
    NCCL_CHECK(ncclReduceScatter(buf, buf + (size_t)c->pub.rank * shard, shard, ncclFloat32, op,
                                 c->nccl, c->stream));
    if (made) NCCL_CHECK(ncclRedOpDestroy(op, c->nccl));
    return end_op(c);
}

static int nccl_allgather(Coll *coll, float *buf, size_t shard) {
    NcclColl *c = N(coll);
    if (c->wire) return wire_allgather(c, buf, shard);
    begin_op(c);
    NCCL_CHECK(ncclAllGather(buf + (size_t)c->pub.rank * shard, buf, shard, ncclFloat32, c->nccl,
                             c->stream));
    return end_op(c);
}

static int nccl_copy(Coll *coll, float *dst, const float *src, size_t n, CollCopy kind) {
    NcclColl *c = N(coll);
    begin_op(c);
    if (n)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float),
                                   kind == COLL_TO_HOST     ? cudaMemcpyDeviceToHost
                                   : kind == COLL_FROM_HOST ? cudaMemcpyHostToDevice
                                                            : cudaMemcpyDeviceToDevice,
                                   c->stream));
    return end_op(c);
}

static int nccl_done(Coll *coll, int ticket) {
    NcclColl *c = N(coll);
    if (ticket < 0 || ticket >= c->nops) return 1;
    cudaError_t e = cudaEventQuery(c->ops[ticket].end);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not an error: clear it */
        return 0;
    }
    CUDA_CHECK(e);
    return 1;
}

/* Waits for event e by polling it and the communicator's asynchronous error state: a failed
 * NCCL operation never completes its event, and cudaEventSynchronize would wait forever. */
static void wait_event(NcclColl *c, cudaEvent_t e) {
    const struct timespec pause = {0, 20000}; /* 20 us between polls */
    for (;;) {
        cudaError_t q = cudaEventQuery(e);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) CUDA_CHECK(q);
        (void)cudaGetLastError(); /* not ready is not an error: clear it */
        ncclResult_t async = ncclSuccess;
        NCCL_CHECK(ncclCommGetAsyncError(c->nccl, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            char msg[768];
            const char *last = ncclGetLastError(c->nccl);
            snprintf(msg, sizeof msg, "NCCL: asynchronous error %d: %s%s%s; communicator aborted",
                     (int)async, ncclGetErrorString(async), last && *last ? ": " : "",
                     last ? last : "");
            ncclCommAbort(c->nccl); /* frees NCCL's resources; its queued work will not finish */
            check_fail(__FILE__, __LINE__, "ncclCommGetAsyncError", msg);
        }
        nanosleep(&pause, NULL);
    }
}

static void nccl_wait(Coll *coll, int ticket) {
    NcclColl *c = N(coll);
    if (ticket >= c->nops) ticket = c->nops - 1;
    if (ticket >= 0) wait_event(c, c->ops[ticket].end);
}

/* The iteration's time origin, recorded on the compute stream before anything it measures. */
static void need_origin(NcclColl *c) {
    if (!c->have_origin) {
        CUDA_CHECK(cudaEventRecord(c->origin, c->compute));
        c->have_origin = 1;
    }
}

static void nccl_after_compute(Coll *coll) {
    NcclColl *c = N(coll);
    need_origin(c);
    CUDA_CHECK(cudaEventRecord(c->gate, c->compute));
    CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->gate, 0));
}

static void nccl_before_compute(Coll *coll) {
    NcclColl *c = N(coll);
    CUDA_CHECK(cudaEventRecord(c->join, c->stream));
    CUDA_CHECK(cudaStreamWaitEvent(c->compute, c->join, 0));
}

static void nccl_mark_backward_end(Coll *coll) {
    NcclColl *c = N(coll);
    need_origin(c);
    CUDA_CHECK(cudaEventRecord(c->bwd, c->compute));
    c->bwd_marked = 1;
}

/* Seconds from the iteration's origin to event e (which comes after it). */
static double since_origin(NcclColl *c, cudaEvent_t e) {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, c->origin, e));
    return 1e-3 * (double)ms;
}

/* Operations run one after another on this stream: the union of their intervals before the end
 * of backward is the sum of each one's part before it. */
static double nccl_hidden(Coll *coll) {
    NcclColl *c = N(coll);
    double sum = 0.0;
    if (c->nops && c->have_origin && c->bwd_marked) {
        wait_event(c, c->ops[c->nops - 1].end);
        wait_event(c, c->bwd);
        double *se = xcalloc(2 * (size_t)c->nops, sizeof *se);
        for (int i = 0; i < c->nops; i++) {
            se[i] = since_origin(c, c->ops[i].start);
            se[c->nops + i] = since_origin(c, c->ops[i].end);
        }
        sum = hidden_union(se, se + c->nops, c->nops, since_origin(c, c->bwd));
        free(se);
    }
    c->nops = 0;
    c->have_origin = c->bwd_marked = 0;
    return sum;
}

/* ncclGetVersion's code (major*10000 + minor*100 + patch since NCCL 2.9) as text. */
static void nccl_version(char *buf, size_t len) {
    int v = 0;
    if (len == 0) return;
    buf[0] = '\0';
    if (ncclGetVersion(&v) == ncclSuccess)
        snprintf(buf, len, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

const CollOps coll_nccl = {
    .name = "nccl",
    .wire_types = 1,
    .version = nccl_version,
    .create = nccl_create,
    .destroy = nccl_destroy,
    .allreduce = nccl_allreduce,
    .reduce_scatter = nccl_reduce_scatter,
    .allgather = nccl_allgather,
    .copy = nccl_copy,
    .done = nccl_done,
    .wait = nccl_wait,
    .after_compute = nccl_after_compute,
    .before_compute = nccl_before_compute,
    .mark_backward_end = nccl_mark_backward_end,
    .hidden = nccl_hidden,
};
