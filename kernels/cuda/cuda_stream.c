/* cuda_stream.c - the CUDA backend's second stream and its graphs (backend.h's "batch prefetch"
 * and "step replay" groups).
 *
 * Batch prefetch: batches are copied from page-locked host memory (cudaHostAlloc) on a copy
 * stream of their own, ordered with the compute stream by events only: per slot, `copied` is
 * recorded after the slot's copies (the compute stream waits on it before it reads the batch;
 * prefetch_fence waits on it on the host before the host buffer is refilled) and `released`
 * after the compute work that last reads the slot (the next copies into the slot wait on it). An
 * event never recorded is complete, so the first copy into a slot waits for nothing. From
 * page-locked memory the copy engine runs while the compute stream computes; from pageable memory
 * (upload()) the driver copies through a staging buffer, synchronously with the host.
 *
 * Step replay: work(arg) is captured from the compute stream in thread-local mode (an allocation,
 * a synchronisation or a copy from pageable memory by this thread fails there, and CUDA_CHECK ends
 * the job naming the call: nothing of the kind may sit in a step), instantiated once and
 * launched as one graph. cuBLAS gets its workspace once at init (cublasSetWorkspace): without it,
 * cuBLAS allocates a new one for each captured graph. cuDNN's calls take their workspace from the
 * model's work buffer. */
#include <config.h>
#include "cuda_check.h" /* defines: CUDA_CHECK, CUBLAS_CHECK */
#include "cuda_ctx.h"   /* defines: struct BackendCtx */
#include "cuda_ops.h"

#include <string.h>

void cuda_stream_init(BackendCtx *ctx) {
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->copy_stream, cudaStreamNonBlocking));
    for (int i = 0; i < BACKEND_PREFETCH_SLOTS; i++) {
        /* copied: the host may wait on it (prefetch_fence): sleep, do not spin */
        CUDA_CHECK(cudaEventCreateWithFlags(&ctx->copied[i],
                                            cudaEventDisableTiming | cudaEventBlockingSync));
        CUDA_CHECK(cudaEventCreateWithFlags(&ctx->released[i], cudaEventDisableTiming));
    }
    /* after cublasSetStream, which resets the handle to cuBLAS's own workspace pool */
    CUDA_CHECK(cudaMalloc(&ctx->cublas_ws, CUBLAS_WS_BYTES));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, CUBLAS_WS_BYTES));
}

void cuda_stream_free(BackendCtx *ctx) {
    if (ctx->copy_stream) CUDA_CHECK(cudaStreamSynchronize(ctx->copy_stream));
    for (int i = 0; i < BACKEND_PREFETCH_SLOTS; i++) {
        if (ctx->copied[i]) cudaEventDestroy(ctx->copied[i]);
        if (ctx->released[i]) cudaEventDestroy(ctx->released[i]);
    }
    if (ctx->copy_stream) cudaStreamDestroy(ctx->copy_stream);
    if (ctx->cublas_ws) cudaFree(ctx->cublas_ws); /* after the handle: cuda_finalize's order */
    ctx->copy_stream = NULL, ctx->cublas_ws = NULL;
}

/* ---- batch prefetch ------------------------------------------------------------------------ */

void *cuda_host_alloc(BackendCtx *ctx, size_t bytes) {
    (void)ctx;
    void *p = NULL;
    if (bytes == 0) bytes = 64;
    CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
    memset(p, 0, bytes);
    return p;
}

void cuda_host_free(BackendCtx *ctx, void *p) {
    (void)ctx;
    if (p) CUDA_CHECK(cudaFreeHost(p));
}

/* A slot outside [0, BACKEND_PREFETCH_SLOTS) is the caller's mistake: end the job. */
static int slot_ok(int slot) {
    if (slot >= 0 && slot < BACKEND_PREFETCH_SLOTS) return slot;
    check_fail(__FILE__, __LINE__, "prefetch slot", "out of range");
    return 0;
}

void cuda_prefetch_upload(BackendCtx *ctx, int slot, void *dst_dev, const void *src_host,
                          size_t bytes) {
    slot = slot_ok(slot);
    CUDA_CHECK(cudaStreamWaitEvent(ctx->copy_stream, ctx->released[slot], 0));
    if (bytes)
        CUDA_CHECK(
            cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, ctx->copy_stream));
    CUDA_CHECK(cudaEventRecord(ctx->copied[slot], ctx->copy_stream));
}

void cuda_prefetch_wait(BackendCtx *ctx, int slot) {
    slot = slot_ok(slot);
    CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, ctx->copied[slot], 0));
}

void cuda_prefetch_release(BackendCtx *ctx, int slot) {
    slot = slot_ok(slot);
    CUDA_CHECK(cudaEventRecord(ctx->released[slot], ctx->stream));
}

void cuda_prefetch_fence(BackendCtx *ctx, int slot) {
    slot = slot_ok(slot);
    CUDA_CHECK(cudaEventSynchronize(ctx->copied[slot]));
}

/* ---- step replay --------------------------------------------------------------------------- */

void *cuda_graph_capture(BackendCtx *ctx, void (*work)(void *arg), void *arg) {
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal));
    work(arg);
    CUDA_CHECK(cudaStreamEndCapture(ctx->stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return (void *)exec;
}

void cuda_graph_launch(BackendCtx *ctx, void *graph) {
    CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph, ctx->stream));
}

void cuda_graph_free(BackendCtx *ctx, void *graph) {
    (void)ctx;
    if (graph) CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph));
}
