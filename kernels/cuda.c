/* cuda.c - the CUDA compute backend: the layer kernels of a training step on one GPU.
 *
 * Exports `cuda_backend`, a BackendOps (see backend.h) with all its slots filled. Here: lifetime,
 * memory, fully connected layers (cuBLAS SGEMMs through cuda_plan.c's row-major mapping, plus our
 * bias kernels), convolution and ReLU (cuDNN 9's legacy API, libcudnn_cnn / libcudnn_ops), max
 * pooling, softmax cross-entropy and SGD (our kernels), the phase timer. The model-zoo layers are
 * in cuda_zoo.c and cuda_lstm.c; the state they share is cuda_ctx.h.
 *
 * Streams: everything of a rank runs in order on ONE non-blocking compute stream (cuBLAS and cuDNN
 * are bound to it), so no call here synchronises with the host except download(), synchronize()
 * and timer_elapsed(). Exchange transports run on streams of their own that wait on this one
 * (cuda_backend_stream). Memory: cudaMalloc at model build time, zeroed on the stream; scratch
 * (softmax rows) at init; nothing is allocated in a training step.
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
#include "cuda_ctx.h"       /* defines: struct BackendCtx, ConvPlan */
#include "cuda_kernels.h"   /* defines: dtk_* launchers */
#include "cuda_plan.h"      /* defines: fc_*_gemm, pick_algo */
#include "cuda_precision.h" /* defines: cuda_prec_* (tf32, bf16, fp16) */
#include "cuda_zoo.h"       /* defines: dtz_* launchers, cuda_zoo_* operations */

#include <cublas_v2.h>
#include <cudnn.h>
#include <library_types.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float ONE = 1.0f, ZERO = 0.0f;

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
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    /* the math mode of --precision (fp32: CUBLAS_DEFAULT_MATH, never TF32) */
    cuda_prec_init(ctx, cfg ? cfg->precision : PRECISION_FP32);
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
    *out = ctx;
    return 0;
}

static void plan_destroy(ConvPlan *p) {
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->y);
    cudnnDestroyTensorDescriptor(p->b);
    cudnnDestroyTensorDescriptor(p->y32);
    cudnnDestroyFilterDescriptor(p->w);
    cudnnDestroyConvolutionDescriptor(p->conv);
}

static void cuda_finalize(BackendCtx *ctx) {
    if (!ctx) return;
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    for (int i = 0; i < ctx->nplans; i++)
        plan_destroy(&ctx->plans[i]);
    free(ctx->plans);
    cudnnDestroyTensorDescriptor(ctx->ta);
    cudnnDestroyTensorDescriptor(ctx->tb);
    cudnnDestroyActivationDescriptor(ctx->relu);
    if (ctx->row_loss) cudaFree(ctx->row_loss);
    if (ctx->row_hit) cudaFree(ctx->row_hit);
    cuda_prec_free(ctx);
    for (int i = 0; i < BACKEND_TIMER_SLOTS; i++)
        cudaEventDestroy(ctx->marks[i]);
    cudnnDestroy(ctx->cudnn);
    cublasDestroy(ctx->cublas);
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
             "precision %s",
             ctx->device, d.name, d.pci_bus_id, d.uuid, d.cuda_runtime, d.cuda_driver_api, d.cublas,
             d.cudnn, PRECISION_NAME(ctx->precision));
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

/* ---- fully connected ----------------------------------------------------------------------- */

/* C = op(A) op(B) (+ beta C), column-major, as planned in cuda_plan.c */
static void gemm(BackendCtx *ctx, ColGemm g, const float *a, const float *b, float beta, float *c) {
    cuda_prec_gemm(ctx, g, a, b, beta, c); /* cublasSgemm, or cublasGemmEx on 16-bit copies */
}

/* y[n,out] = x[n,in] W[out,in]^T + b[out] */
static void cuda_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                            const float *b, float *y) {
    const int n = s->batch, in = s->in, out = s->out;
    if (n <= 0 || out <= 0) return;
    if (in <= 0) /* empty product: y = b */
        CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n * out * sizeof(float), ctx->stream));
    else
        gemm(ctx, fc_forward_gemm(s), w, x, 0.0f, y);
    if (b) CUDA_CHECK(dtk_bias_add(ctx->stream, n, out, b, y));
}

/* dW = dy^T x, db = column sums of dy, dx = dy W (skipped when dx == NULL); dW, db overwritten */
static void cuda_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, float *db) {
    const int n = s->batch, in = s->in, out = s->out;
    if (out <= 0) {
        if (dx && n > 0 && in > 0) cuda_zero(ctx, dx, (size_t)n * in * sizeof(float));
        return;
    }
    if (n <= 0) { /* no samples: zero gradients */
        if (in > 0) cuda_zero(ctx, dw, (size_t)out * in * sizeof(float));
        if (db) cuda_zero(ctx, db, (size_t)out * sizeof(float));
        return;
    }
    if (in > 0) gemm(ctx, fc_dweight_gemm(s), x, dy, 0.0f, dw);
    if (db) CUDA_CHECK(dtk_bias_grad(ctx->stream, n, out, dy, db)); /* NULL: layer without bias */
    if (dx && in > 0) gemm(ctx, fc_dinput_gemm(s), w, dy, 0.0f, dx);
}

/* ---- convolution (cuDNN) ------------------------------------------------------------------- */

static void set_nchw_t(cudnnTensorDescriptor_t d, cudnnDataType_t t, int n, int c, int h, int w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
}
static void set_nchw(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
    set_nchw_t(d, CUDNN_DATA_FLOAT, n, c, h, w);
}

/* Algorithms the precision accepts: fp32 only CUDNN_FMA_MATH (CUDNN_DEFAULT_MATH allows TF32);
 * tf32, bf16, fp16 any (tensor cores). AlgoPerf.strict_fp32 carries this "accepted". */
static int math_ok(const BackendCtx *ctx, cudnnMathType_t m) {
    return ctx->precision != PRECISION_FP32 || m == CUDNN_FMA_MATH;
}

/* Chooses the forward, backward-data and backward-filter algorithms of plan p from cuDNN's
 * heuristics, each within `limit` bytes of workspace, and records their workspaces. */
static void plan_algorithms(BackendCtx *ctx, ConvPlan *p, size_t limit) {
    AlgoPerf ap[16];
    int got = 0, i;

    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    /* fp32: ask for strict fp32; the others for tensor cores */
    const cudnnMathType_t ask =
        ctx->precision == PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, ask));
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
        ctx->cudnn, p->x, p->w, p->conv, p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
    for (i = 0; i < got; i++)
        ap[i] = (AlgoPerf){fwd[i].algo, fwd[i].status == CUDNN_STATUS_SUCCESS,
                           math_ok(ctx, fwd[i].mathType), fwd[i].memory};
    i = pick_algo(ap, got, limit);
    p->fwd = i >= 0 ? fwd[i].algo : CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM; /* no workspace */
    p->fwd_math = i >= 0 ? fwd[i].mathType : ask;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(ctx->cudnn, p->x, p->w, p->conv, p->y,
                                                        p->fwd, &p->fwd_ws));

    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, ask));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        ctx->cudnn, p->w, p->y, p->conv, p->x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, bd));
    for (i = 0; i < got; i++)
        ap[i] = (AlgoPerf){bd[i].algo, bd[i].status == CUDNN_STATUS_SUCCESS,
                           math_ok(ctx, bd[i].mathType), bd[i].memory};
    i = pick_algo(ap, got, limit);
    p->bwd_data = i >= 0 ? bd[i].algo : CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    p->bwd_data_math = i >= 0 ? bd[i].mathType : ask;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_data_math));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(ctx->cudnn, p->w, p->y, p->conv, p->x,
                                                             p->bwd_data, &p->bwd_data_ws));

    cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, ask));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        ctx->cudnn, p->x, p->y, p->conv, p->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, bf));
    for (i = 0; i < got; i++)
        ap[i] = (AlgoPerf){bf[i].algo, bf[i].status == CUDNN_STATUS_SUCCESS,
                           math_ok(ctx, bf[i].mathType), bf[i].memory};
    i = pick_algo(ap, got, limit);
    p->bwd_filter = i >= 0 ? bf[i].algo : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
    p->bwd_filter_math = i >= 0 ? bf[i].mathType : ask;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        ctx->cudnn, p->x, p->y, p->conv, p->w, p->bwd_filter, &p->bwd_filter_ws));
}

/* The plan of shape s, made on first use. A shape first seen here (not through
 * conv_workspace_bytes, e.g. the smaller last batch of an evaluation) gets algorithms that fit in
 * the largest workspace handed out so far, which the caller's work buffer holds. */
static ConvPlan *conv_plan(BackendCtx *ctx, const ConvShape *s, size_t limit) {
    for (int i = 0; i < ctx->nplans; i++)
        if (!memcmp(&ctx->plans[i].s, s, sizeof *s)) return &ctx->plans[i];
    if (ctx->nplans == ctx->cap_plans) {
        int cap = ctx->cap_plans ? 2 * ctx->cap_plans : 64;
        ConvPlan *grown = realloc(ctx->plans, (size_t)cap * sizeof *grown);
        if (!grown) check_fail(__FILE__, __LINE__, "realloc", "out of memory for cuDNN plans");
        ctx->plans = grown, ctx->cap_plans = cap;
    }
    ConvPlan *p = &ctx->plans[ctx->nplans++];
    memset(p, 0, sizeof *p);
    p->s = *s;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->b));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y32));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    const cudnnDataType_t t = cuda_prec_conv_type(ctx); /* bf16/fp16: 16-bit x, W, y */
    set_nchw_t(p->x, t, s->batch, s->c_in, s->h_in, s->w_in);
    set_nchw_t(p->y, t, s->batch, s->c_out, s->h_out, s->w_out);
    set_nchw(p->y32, s->batch, s->c_out, s->h_out, s->w_out);
    set_nchw(p->b, 1, s->c_out, 1, 1);
    CUDNN_CHECK(
        cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, s->c_out, s->c_in, s->k, s->k));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    int n, c, h, w; /* cuDNN's output shape must be the one the model planned */
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &n, &c, &h, &w));
    if (n != s->batch || c != s->c_out || h != s->h_out || w != s->w_out) {
        char msg[160];
        snprintf(msg, sizeof msg, "cuDNN output [%d,%d,%d,%d], expected [%d,%d,%d,%d]", n, c, h, w,
                 s->batch, s->c_out, s->h_out, s->w_out);
        check_fail(__FILE__, __LINE__, "cudnnGetConvolution2dForwardOutputDim", msg);
    }
    plan_algorithms(ctx, p, limit);
    return p;
}

static size_t conv_ws(const ConvPlan *p) {
    size_t ws = p->fwd_ws;
    if (p->bwd_data_ws > ws) ws = p->bwd_data_ws;
    if (p->bwd_filter_ws > ws) ws = p->bwd_filter_ws;
    return ws;
}

/* The plan of s for a forward or backward call: made here only for a shape not announced at
 * build time (counted in plans_made_late; then planning happens inside a step). */
static ConvPlan *conv_plan_late(BackendCtx *ctx, const ConvShape *s) {
    int before = ctx->nplans;
    /* bf16/fp16: the 16-bit copies follow cuDNN's workspace in the same (largest) buffer */
    size_t extra = cuda_prec_conv_extra(ctx, s), limit = ctx->ws_granted;
    if (extra) limit = ctx->work_granted > extra ? ctx->work_granted - extra : 0;
    ConvPlan *p = conv_plan(ctx, s, limit);
    if (ctx->nplans != before) ctx->plans_made_late++;
    return p;
}

static size_t cuda_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    if (s->batch <= 0 || s->c_out <= 0 || s->c_in <= 0) return 0;
    size_t ws = conv_ws(conv_plan(ctx, s, CONV_WS_LIMIT));
    if (ws > ctx->ws_granted) ctx->ws_granted = ws;
    ws += cuda_prec_conv_extra(ctx, s); /* bf16/fp16: the 16-bit copies after it */
    if (ws > ctx->work_granted) ctx->work_granted = ws;
    return ws;
}

static void cuda_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                              const float *b, float *y, void *work) {
    if (s->batch <= 0 || s->c_out <= 0) return;
    ConvPlan *p = conv_plan_late(ctx, s);
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
    if (cuda_prec_16bit(ctx))
        cuda_prec_conv_forward(ctx, p, x, w, y, work, conv_ws(p));
    else
        CUDNN_CHECK(cudnnConvolutionForward(ctx->cudnn, &ONE, p->x, x, p->w, w, p->conv, p->fwd,
                                            work, p->fwd_ws, &ZERO, p->y, y));
    if (b) CUDNN_CHECK(cudnnAddTensor(ctx->cudnn, &ONE, p->b, b, &ONE, p->y32, y));
}

static void cuda_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                               const float *dy, float *dx, float *dw, float *db, void *work) {
    if (s->batch <= 0 || s->c_out <= 0) {
        if (s->c_out > 0) { /* no samples: zero gradients */
            if (db) cuda_zero(ctx, db, (size_t)s->c_out * sizeof(float));
            cuda_zero(ctx, dw, (size_t)s->c_out * s->c_in * s->k * s->k * sizeof(float));
        }
        return;
    }
    ConvPlan *p = conv_plan_late(ctx, s);
    if (db) /* NULL: a layer without bias (ResNet's convolutions) */
        CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx->cudnn, &ONE, p->y32, dy, &ZERO, p->b, db));
    if (cuda_prec_16bit(ctx)) {
        cuda_prec_conv_backward(ctx, p, x, w, dy, dx, dw, work, conv_ws(p));
        return;
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math));
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx->cudnn, &ONE, p->x, x, p->y, dy, p->conv,
                                               p->bwd_filter, work, p->bwd_filter_ws, &ZERO, p->w,
                                               dw));
    if (dx) {
        CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_data_math));
        CUDNN_CHECK(cudnnConvolutionBackwardData(ctx->cudnn, &ONE, p->w, w, p->y, dy, p->conv,
                                                 p->bwd_data, work, p->bwd_data_ws, &ZERO, p->x,
                                                 dx));
    }
}

static const char *math_name(cudnnMathType_t m) {
    return m == CUDNN_FMA_MATH ? "FMA" : m == CUDNN_DEFAULT_MATH ? "DEFAULT" : "TENSOR_OP";
}

size_t cuda_conv_algorithms(BackendCtx *ctx, char *buf, size_t len) {
    size_t used = 0;
    char line[256];
    if (buf && len) buf[0] = 0;
    cuda_prec_describe(ctx, line, sizeof line); /* "precision bf16: cuBLAS ...; cuDNN ..." */
    if (buf && used < len) snprintf(buf + used, len - used, "%s", line);
    used += strlen(line);
    for (int i = 0; i <= ctx->nplans; i++) {
        if (i < ctx->nplans) {
            const ConvPlan *p = &ctx->plans[i];
            const ConvShape *s = &p->s;
            snprintf(line, sizeof line,
                     "conv %dx%dx%dx%d k%d s%d p%d -> %d: fwd %d %s, bwd_data %d %s, bwd_filter "
                     "%d %s\n",
                     s->batch, s->c_in, s->h_in, s->w_in, s->k, s->stride, s->pad, s->c_out,
                     (int)p->fwd, math_name(p->fwd_math), (int)p->bwd_data,
                     math_name(p->bwd_data_math), (int)p->bwd_filter,
                     math_name(p->bwd_filter_math));
        } else {
            snprintf(line, sizeof line, "plans made inside a step: %d\n", ctx->plans_made_late);
        }
        if (buf && used < len) snprintf(buf + used, len - used, "%s", line);
        used += strlen(line);
    }
    return used;
}

/* ---- max pooling (own kernels, cuda_zoo_kernels.cu)
 * ------------------------------------------------ */

/* Max pooling records argmax and its backward reads only argmax and dy: cuDNN's pooling backward
 * re-derives the maxima from the forward OUTPUT y, which a ReLU run in place after the pooling
 * overwrites (wrong gradients); ours does not read y, so the model's in-place ReLU is safe. */
static void cuda_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                                 int32_t *argmax) {
    CUDA_CHECK(dtz_maxpool_forward(ctx->stream, s, x, y, argmax));
}

static void cuda_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                                  const float *dy, float *dx) {
    CUDA_CHECK(dtz_maxpool_backward(ctx->stream, s, argmax, dy, dx));
}

/* ---- ReLU (cuDNN) -------------------------------------------------------------------------- */

#define RELU_CHUNK ((size_t)1 << 30) /* elements per cuDNN call (its sizes are int) */

static void cuda_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    for (size_t off = 0; off < n; off += RELU_CHUNK) {
        size_t m = n - off < RELU_CHUNK ? n - off : RELU_CHUNK;
        set_nchw(ctx->ta, 1, 1, 1, (int)m);
        CUDNN_CHECK(cudnnActivationForward(ctx->cudnn, ctx->relu, &ONE, ctx->ta, x + off, &ZERO,
                                           ctx->ta, y + off));
    }
}

/* dx = dy where y > 0. cuDNN's ReLU backward takes the forward input x as well; y stands in for
 * it, since y = max(x, 0) is positive exactly where x is. */
static void cuda_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy,
                               float *dx) {
    for (size_t off = 0; off < n; off += RELU_CHUNK) {
        size_t m = n - off < RELU_CHUNK ? n - off : RELU_CHUNK;
        set_nchw(ctx->ta, 1, 1, 1, (int)m);
        CUDNN_CHECK(cudnnActivationBackward(ctx->cudnn, ctx->relu, &ONE, ctx->ta, y + off, ctx->ta,
                                            dy + off, ctx->ta, y + off, &ZERO, ctx->ta, dx + off));
    }
}

/* ---- softmax cross-entropy and SGD (our kernels) ------------------------------------------- */

static void cuda_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits,
                              const int32_t *labels, float *dlogits, float *stats) {
    if (n > ctx->xent_cap) { /* more rows than made at init (XENT_ROWS0): grows once */
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        if (ctx->row_loss) CUDA_CHECK(cudaFree(ctx->row_loss));
        if (ctx->row_hit) CUDA_CHECK(cudaFree(ctx->row_hit));
        CUDA_CHECK(cudaMalloc((void **)&ctx->row_loss, (size_t)n * sizeof(double)));
        CUDA_CHECK(cudaMalloc((void **)&ctx->row_hit, (size_t)n * sizeof(int)));
        ctx->xent_cap = n;
    }
    CUDA_CHECK(dtk_softmax_xent(ctx->stream, n, c, logits, labels, dlogits, stats, ctx->row_loss,
                                ctx->row_hit));
}

static void cuda_sgd_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                            float momentum, float weight_decay) {
    CUDA_CHECK(dtk_sgd_update(ctx->stream, n, p, g, v, lr, momentum, weight_decay));
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

const BackendOps cuda_backend = {
    .name = "cuda",
    .reads = "gpus-per-node",
    .device_memory = 1,
    .precision_ok = cuda_precision_ok,
    .init = cuda_init,
    .finalize = cuda_finalize,
    .describe = cuda_describe,
    .describe_kernels = cuda_conv_algorithms,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .synchronize = cuda_synchronize,
    .fc_forward = cuda_fc_forward,
    .fc_backward = cuda_fc_backward,
    .conv_workspace_bytes = cuda_conv_workspace_bytes,
    .conv_forward = cuda_conv_forward,
    .conv_backward = cuda_conv_backward,
    .maxpool_forward = cuda_maxpool_forward,
    .maxpool_backward = cuda_maxpool_backward,
    .relu_forward = cuda_relu_forward,
    .relu_backward = cuda_relu_backward,
    .softmax_xent = cuda_softmax_xent,
    .sgd_update = cuda_sgd_update,
    .timer_record = cuda_timer_record,
    .timer_elapsed = cuda_timer_elapsed,
    /* the model-zoo operations: kernels/cuda_zoo.c and cuda_lstm.c */
    .axpy = cuda_zoo_axpy,
    .scale = cuda_zoo_scale,
    .copy = cuda_zoo_copy,
    .avgpool_forward = cuda_zoo_avgpool_forward,
    .avgpool_backward = cuda_zoo_avgpool_backward,
    .global_avgpool_forward = cuda_zoo_global_avgpool_forward,
    .global_avgpool_backward = cuda_zoo_global_avgpool_backward,
    .lrn_forward = cuda_zoo_lrn_forward,
    .lrn_backward = cuda_zoo_lrn_backward,
    .batchnorm_forward_train = cuda_zoo_batchnorm_forward_train,
    .batchnorm_forward_infer = cuda_zoo_batchnorm_forward_infer,
    .batchnorm_backward = cuda_zoo_batchnorm_backward,
    .concat_forward = cuda_zoo_concat_forward,
    .concat_backward = cuda_zoo_concat_backward,
    .add_forward = cuda_zoo_add_forward,
    .add_backward = cuda_zoo_add_backward,
    .dropout_forward = cuda_zoo_dropout_forward,
    .dropout_backward = cuda_zoo_dropout_backward,
    .embedding_forward = cuda_zoo_embedding_forward,
    .embedding_backward = cuda_zoo_embedding_backward,
    .lstm_reserve_bytes = cuda_lstm_reserve_bytes,
    .lstm_workspace_bytes = cuda_lstm_workspace_bytes,
    .lstm_forward = cuda_lstm_forward,
    .lstm_backward = cuda_lstm_backward,
    .all_finite = cuda_all_finite,
};
