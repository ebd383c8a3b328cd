/* cuda.c - the CUDA compute backend: its function table `cuda_backend` (see backend.h), its
 * lifetime, memory and phase timer. The operations are in kernels/cuda/cuda_*.c by concern (fully
 * connected, convolution, pooling, normalisation, element-wise, loss and optimizer, recurrent,
 * precision), declared in cuda_ops.h; our kernels are the cuda_*_kernels.cu beside them
 * (launchers in cuda_kernels.h); the state they share is cuda_ctx.h.
 *
 * Streams: everything of a rank runs in order on ONE non-blocking compute stream (cuBLAS and cuDNN
 * are bound to it), so no call here synchronises with the host except download(), synchronize()
 * and timer_elapsed(). Exchange transports run on streams of their own that wait on this one
 * (cuda_backend_stream); prefetched batches are copied on a copy stream of their own, and steps
 * are replayed from CUDA graphs (cuda_stream.c). Memory: cudaMalloc at model build time, zeroed
 * on the stream; scratch (softmax rows) at init; nothing is allocated in a training step.
 * Phase marks: one blocking-sync CUDA event per timer slot, recorded on the compute stream;
 * elapsed() waits (sleeping) for the later event, so the driver reads phases after the iteration.
 * Precision: --precision fp32 is strict fp32 (cuDNN algorithms only under CUDNN_FMA_MATH, cuBLAS's
 * default math mode, which does not use TF32), so results compare with the CPU backend; tf32,
 * bf16 and fp16 are in cuda_precision.c (docs/gpu.md "Precision").
 * GPU choice: the rank's index among the ranks of its host (BackendConfig.local_rank) modulo
 * --gpus-per-node (0: all visible devices), after CUDA_VISIBLE_DEVICES has narrowed them. */
#include <config.h>
#include "cuda.h"
#include "cuda_check.h"     /* defines: CUDA_CHECK, CUBLAS_CHECK, CUDNN_CHECK */
#include "cuda_kernels.h"   /* defines: dtk_image_check */
#include "cuda_ctx.h"       /* defines: struct BackendCtx */
#include "cuda_ops.h"       /* defines: the operations of the table */
#include "cuda_ops16.h"     /* defines: the activation format (cuda_act16.c) */
#include "cuda_precision.h" /* defines: cuda_prec_* (tf32, bf16, fp16) */

#include <cublas_v2.h>
#include <cudnn.h>
#include <library_types.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); /* clear the sticky "no driver" / "no device" error */
        return 0;
    }
    return n;
}

cudaStream_t cuda_backend_stream(BackendCtx *ctx) {
    return ctx->stream;
}

int cuda_backend_device(BackendCtx *ctx) {
    return ctx->device;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

/* Whether dtbench's own kernels have an image for `device` (CUDA_ARCHS at configure time); one line
 * saying how to rebuild when not, rather than a failed launch in the first step. */
static int kernels_run_here(int device) {
    cudaError_t e = dtk_image_check();
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorInvalidDeviceFunction && e != cudaErrorNoKernelImageForDevice)
        CUDA_CHECK(e);
    (void)cudaGetLastError(); /* not sticky: clear it */
    int major = 0, minor = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
#ifdef DTBENCH_CUDA_ARCHS
    const char *built = DTBENCH_CUDA_ARCHS;
#else
    const char *built = "?";
#endif
    fprintf(stderr,
            "dtbench: --device cuda: this GPU is sm_%d%d, and dtbench's CUDA kernels were built for "
            "CUDA_ARCHS=\"%s\" only: rebuild with CUDA_ARCHS=\"%d%d\" ./configure (or "
            "CUDA_ARCHS=\"%d%d\" scripts/setup.sh)\n",
            major, minor, built, major, minor, major, minor);
    return 0;
}

static int cuda_init(const BackendConfig *cfg, BackendCtx **out) {
    if (!out) return -1;
    *out = NULL;
    int count = cuda_device_count(), local = cfg ? cfg->local_rank : 0;
    if (count == 0) {
        fprintf(stderr, "dtbench: --device cuda: no CUDA device is visible to this process "
                        "(no GPU, no driver, or CUDA_VISIBLE_DEVICES is empty)\n");
        return -1;
    }
    int per_node = cfg && cfg->gpus_per_node > 0 ? cfg->gpus_per_node : count;
    if (per_node > count) {
        fprintf(stderr, "dtbench: --gpus-per-node %d: only %d CUDA device(s) are visible\n",
                per_node, count);
        return -1;
    }
    if (local == per_node) /* the first rank that shares a GPU says so, once per node */
        fprintf(stderr,
                "dtbench: warning: more ranks on this node than GPUs (%d): local rank %d "
                "shares GPU %d with local rank 0\n",
                per_node, local, local % per_node);

    BackendCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return -1;
    ctx->device = local % per_node;
    CUDA_CHECK(cudaSetDevice(ctx->device));
    if (!kernels_run_here(ctx->device)) {
        free(ctx);
        return -1;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    /* the math mode of --precision (fp32: CUBLAS_DEFAULT_MATH, never TF32) */
    cuda_prec_init(ctx, cfg ? cfg->precision : PRECISION_FP32);
    /* --act-layout: NHWC 16-bit activations in bf16/fp16, else NCHW fp32 (cuda_act16.c) */
    cuda_act_init(ctx, ctx->precision, cfg ? cfg->act_layout : ACT_NCHW);
    ctx->conv_algo = cfg ? cfg->conv_algo : CONV_ALGO_FIND;
    CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    CUDNN_CHECK(cudnnSetStream(ctx->cudnn, ctx->stream));
    /* The host waits on these (timer_elapsed): blocking sync, so it sleeps instead of spinning
     * on a core that the exchange's progress thread or MPI may need. */
    for (int i = 0; i < BACKEND_TIMER_SLOTS; i++)
        CUDA_CHECK(cudaEventCreateWithFlags(&ctx->marks[i], cudaEventBlockingSync));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&ctx->ta));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&ctx->tb));
    CUDNN_CHECK(cudnnCreateActivationDescriptor(&ctx->relu));
    CUDNN_CHECK(cudnnSetActivationDescriptor(ctx->relu, CUDNN_ACTIVATION_RELU,
                                             CUDNN_NOT_PROPAGATE_NAN, 0.0));
    /* softmax scratch for up to XENT_ROWS0 rows per rank, made here rather than in a step */
    CUDA_CHECK(cudaMalloc((void **)&ctx->row_loss, XENT_ROWS0 * sizeof(double)));
    CUDA_CHECK(cudaMalloc((void **)&ctx->row_hit, XENT_ROWS0 * sizeof(int)));
    ctx->xent_cap = XENT_ROWS0;
    CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sms, cudaDevAttrMultiProcessorCount, ctx->device));
    CUDA_CHECK(cudaMalloc((void **)&ctx->bn_partials, 2 * BN_PARTIALS_CAP * sizeof(double)));
    cuda_stream_init(ctx); /* the copy stream, its events, cuBLAS's workspace */
    *out = ctx;
    return 0;
}

static void cuda_finalize(BackendCtx *ctx) {
    if (!ctx) return;
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    cuda_conv_plans_free(ctx);
    cudnnDestroyTensorDescriptor(ctx->ta);
    cudnnDestroyTensorDescriptor(ctx->tb);
    cudnnDestroyActivationDescriptor(ctx->relu);
    if (ctx->row_loss) cudaFree(ctx->row_loss);
    if (ctx->row_hit) cudaFree(ctx->row_hit);
    if (ctx->bn_partials) cudaFree(ctx->bn_partials);
    cuda_prec_free(ctx);
    cuda_act_free(ctx);
    for (int i = 0; i < BACKEND_TIMER_SLOTS; i++)
        cudaEventDestroy(ctx->marks[i]);
    cudnnDestroy(ctx->cudnn);
    cublasDestroy(ctx->cublas);
    cuda_stream_free(ctx); /* after the handle that uses its workspace */
    cudaStreamDestroy(ctx->stream);
    free(ctx);
}

/* "major.minor.patch" of a library version number major*10000 + minor*100 + patch. */
static void version_text(char *buf, size_t len, long v) {
    snprintf(buf, len, "%ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
}

void cuda_device_info(BackendCtx *ctx, DeviceInfo *info) {
    memset(info, 0, sizeof *info);
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, ctx->device));
    snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, prop.name);
    const unsigned char *u = (const unsigned char *)prop.uuid.bytes;
    snprintf(info->uuid, sizeof info->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    CUDA_CHECK(cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, ctx->device));
    int v = 0;
    CUDA_CHECK(cudaRuntimeGetVersion(&v));
    snprintf(info->cuda_runtime, sizeof info->cuda_runtime, "%d.%d", v / 1000, v % 1000 / 10);
    CUDA_CHECK(cudaDriverGetVersion(&v));
    snprintf(info->cuda_driver_api, sizeof info->cuda_driver_api, "%d.%d", v / 1000, v % 1000 / 10);
    version_text(info->cudnn, sizeof info->cudnn, (long)cudnnGetVersion());
    int major = 0, minor = 0, patch = 0;
    CUBLAS_CHECK(cublasGetProperty(MAJOR_VERSION, &major));
    CUBLAS_CHECK(cublasGetProperty(MINOR_VERSION, &minor));
    CUBLAS_CHECK(cublasGetProperty(PATCH_LEVEL, &patch));
    snprintf(info->cublas, sizeof info->cublas, "%d.%d.%d", major, minor, patch);
}

static void cuda_describe(BackendCtx *ctx, char *buf, size_t len) {
    if (!buf || len == 0) return;
    DeviceInfo d;
    cuda_device_info(ctx, &d);
    snprintf(buf, len,
             "GPU %d: %s (%s, %s); CUDA runtime %s, driver API %s; cuBLAS %s; cuDNN %s; "
             "precision %s; activations %s %s",
             ctx->device, d.name, d.pci_bus_id, d.uuid, d.cuda_runtime, d.cuda_driver_api, d.cublas,
             d.cudnn, PRECISION_NAME(ctx->precision), ACT_LAYOUT_NAME(ctx->act.layout),
             ACT_TYPE_NAME(ctx->act.type));
}

/* ---- memory -------------------------------------------------------------------------------- */

static void *cuda_alloc(BackendCtx *ctx, size_t bytes) {
    void *p = NULL;
    if (bytes == 0) bytes = 256;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx->stream)); /* ordered before any use */
    return p;
}

static void cuda_free(BackendCtx *ctx, void *p) {
    (void)ctx;
    if (p) CUDA_CHECK(cudaFree(p)); /* cudaFree waits for the device */
}

/* Host to device, on the compute stream: ordered after queued kernels that read dst. From pageable
 * memory the call returns once the source is staged, so the caller may reuse it at once. */
static void cuda_upload(BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes) {
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst_dev, src_host, bytes, cudaMemcpyHostToDevice, ctx->stream));
}

/* Device to host: waits for the queued work that produces src, then for the copy. */
static void cuda_download(BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes) {
    if (bytes)
        CUDA_CHECK(cudaMemcpyAsync(dst_host, src_dev, bytes, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

static void cuda_zero(BackendCtx *ctx, void *p, size_t bytes) {
    if (bytes) CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, ctx->stream));
}

static void cuda_synchronize(BackendCtx *ctx) {
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

/* ---- phase timer (CUDA events on the compute stream) --------------------------------------- */

static void cuda_timer_record(BackendCtx *ctx, int slot) {
    if (slot < 0 || slot >= BACKEND_TIMER_SLOTS) return;
    CUDA_CHECK(cudaEventRecord(ctx->marks[slot], ctx->stream));
}

/* Seconds from mark a to mark b (recorded before b on the same stream); waits for b. */
static double cuda_timer_elapsed(BackendCtx *ctx, int slot_a, int slot_b) {
    if (slot_a < 0 || slot_a >= BACKEND_TIMER_SLOTS || slot_b < 0 || slot_b >= BACKEND_TIMER_SLOTS)
        return NAN;
    float ms = 0.0f;
    CUDA_CHECK(cudaEventSynchronize(ctx->marks[slot_b]));
    CUDA_CHECK(cudaEventElapsedTime(&ms, ctx->marks[slot_a], ctx->marks[slot_b]));
    return 1e-3 * (double)ms;
}

/* 1 when mark slot has happened on the device; never waits (a query, for the host's work
 * between the step's launches and its wait: src/run/prefetch.c). */
static int cuda_timer_done(BackendCtx *ctx, int slot) {
    if (slot < 0 || slot >= BACKEND_TIMER_SLOTS) return 1;
    cudaError_t e = cudaEventQuery(ctx->marks[slot]);
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not ready is not an error: clear it */
        return 0;
    }
    CUDA_CHECK(e);
    return 1;
}

/* Grouped as in backend.h. */
const BackendOps cuda_backend = {
    .name = "cuda",
    .reads = "gpus-per-node,conv-algo,act-layout",
    .device_memory = 1,
    .precision_ok = cuda_precision_ok,
    .act_format_for = cuda_act_format_for,
    .activation_format = cuda_activation_format,
    .input_to_act = cuda_input_to_act,
    /* lifetime */
    .init = cuda_init,
    .finalize = cuda_finalize,
    .describe = cuda_describe,
    .describe_kernels = cuda_conv_algorithms,
    /* memory */
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .copy = cuda_copy,
    .weights_ready = cuda_weights_ready,
    .weights_layout = cuda_weights_layout,
    .synchronize = cuda_synchronize,
    /* batch prefetch and step replay (cuda_stream.c) */
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .prefetch_upload = cuda_prefetch_upload,
    .prefetch_wait = cuda_prefetch_wait,
    .prefetch_release = cuda_prefetch_release,
    .prefetch_fence = cuda_prefetch_fence,
    .graph_capture = cuda_graph_capture,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    /* phase timer */
    .timer_record = cuda_timer_record,
    .timer_elapsed = cuda_timer_elapsed,
    .timer_done = cuda_timer_done,
    /* fully connected and convolution (cuda_gemm.c, cuda_conv.c) */
    .fc_forward = cuda_fc_forward,
    .fc_backward = cuda_fc_backward,
    .conv_workspace_bytes = cuda_conv_workspace_bytes,
    .conv_forward = cuda_conv_forward,
    .conv_backward = cuda_conv_backward,
    .conv_relu_forward = cuda_conv_relu_forward,
    /* pooling (cuda_pool.c) */
    .maxpool_forward = cuda_maxpool_forward,
    .maxpool_backward = cuda_maxpool_backward,
    .avgpool_forward = cuda_avgpool_forward,
    .avgpool_backward = cuda_avgpool_backward,
    .global_avgpool_forward = cuda_global_avgpool_forward,
    .global_avgpool_backward = cuda_global_avgpool_backward,
    /* normalisation (cuda_norm.c) */
    .lrn_forward = cuda_lrn_forward,
    .lrn_backward = cuda_lrn_backward,
    .batchnorm_forward_train = cuda_batchnorm_forward_train,
    .batchnorm_forward_infer = cuda_batchnorm_forward_infer,
    .batchnorm_backward = cuda_batchnorm_backward,
    .bn_act_forward_train = cuda_bn_act_forward_train,
    .bn_act_forward_infer = cuda_bn_act_forward_infer,
    .bn_act_backward = cuda_bn_act_backward,
    /* element-wise and joins (cuda_elementwise.c) */
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .dropout_forward = cuda_dropout_forward,
    .dropout_backward = cuda_dropout_backward,
    .concat_forward = cuda_concat_forward,
    .concat_backward = cuda_concat_backward,
    .add_forward = cuda_add_forward,
    .add_backward = cuda_add_backward,
    .axpy = cuda_axpy,
    .scale = cuda_scale,
    .scale_by = cuda_scale_by,
    .act_add = cuda_act_add,
    /* recurrent (cuda_recurrent.c) */
    .embedding_forward = cuda_embedding_forward,
    .embedding_backward = cuda_embedding_backward,
    .lstm_reserve_bytes = cuda_lstm_reserve_bytes,
    .lstm_workspace_bytes = cuda_lstm_workspace_bytes,
    .lstm_forward = cuda_lstm_forward,
    .lstm_backward = cuda_lstm_backward,
    /* transformer (cuda_transformer.c) */
    .tokpos_forward = cuda_tokpos_forward,
    .tokpos_backward = cuda_tokpos_backward,
    .layernorm_forward = cuda_layernorm_forward,
    .layernorm_backward = cuda_layernorm_backward,
    .gelu_forward = cuda_gelu_forward,
    .gelu_backward = cuda_gelu_backward,
    .attention_reserve_bytes = cuda_attention_reserve_bytes,
    .attention_workspace_bytes = cuda_attention_workspace_bytes,
    .attention_forward = cuda_attention_forward,
    .attention_backward = cuda_attention_backward,
    /* loss and optimizer (cuda_optim.c, cuda_precision.c) */
    .softmax_xent = cuda_softmax_xent,
    .sgd_update = cuda_sgd_update,
    .adamw_update = cuda_adamw_update,
    .all_finite = cuda_all_finite,
};
