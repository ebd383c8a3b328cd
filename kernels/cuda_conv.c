/* cuda_conv.c - the CUDA backend's convolution (backend.h) through cuDNN 9's legacy API
 * (libcudnn_cnn): one plan per convolution shape (descriptors and the forward, backward-data and
 * backward-filter algorithms), made while the model is built (conv_workspace_bytes is called for
 * every layer), so nothing is planned in the timed loop; the bias through cudnnAddTensor and
 * cudnnConvolutionBackwardBias. bf16/fp16 run on 16-bit copies (cuda_precision.c).
 * Strict fp32 (--precision fp32) admits only cuDNN's direct-sum algorithms under CUDNN_FMA_MATH
 * (pick_algo, cuda_plan.c: no FFT or Winograd).
 * cuda_conv_algorithms() lists every plan's choices for the result file. */
#include <config.h>
#include "cuda.h"       /* defines: cuda_conv_algorithms */
#include "cuda_check.h" /* defines: CUDA_CHECK, CUDNN_CHECK */
#include "cuda_ctx.h"   /* defines: struct BackendCtx, ConvPlan */
#include "cuda_ops.h"
#include "cuda_plan.h"      /* defines: pick_algo */
#include "cuda_precision.h" /* defines: cuda_prec_* (bf16, fp16) */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float ONE = 1.0f, ZERO = 0.0f;

static void set_nchw_t(cudnnTensorDescriptor_t d, cudnnDataType_t t, int n, int c, int h, int w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
}
static void set_nchw(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
    set_nchw_t(d, CUDNN_DATA_FLOAT, n, c, h, w);
}

/* strict fp32 (--precision fp32): only the algorithms cuda_plan.c's rule admits; tf32, bf16,
 * fp16: any (tensor cores) */
static int strict(const BackendCtx *ctx) {
    return ctx->precision == PRECISION_FP32;
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
                           fwd[i].mathType == CUDNN_FMA_MATH, fwd[i].memory};
    i = pick_algo(CONV_FWD, ap, got, limit, strict(ctx));
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
                           bd[i].mathType == CUDNN_FMA_MATH, bd[i].memory};
    i = pick_algo(CONV_BWD_DATA, ap, got, limit, strict(ctx));
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
                           bf[i].mathType == CUDNN_FMA_MATH, bf[i].memory};
    i = pick_algo(CONV_BWD_FILTER, ap, got, limit, strict(ctx));
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

size_t cuda_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    if (s->batch <= 0 || s->c_out <= 0 || s->c_in <= 0) return 0;
    size_t ws = conv_ws(conv_plan(ctx, s, CONV_WS_LIMIT));
    if (ws > ctx->ws_granted) ctx->ws_granted = ws;
    ws += cuda_prec_conv_extra(ctx, s); /* bf16/fp16: the 16-bit copies after it */
    if (ws > ctx->work_granted) ctx->work_granted = ws;
    return ws;
}

void cuda_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
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

void cuda_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db, void *work) {
    if (s->batch <= 0 || s->c_out <= 0) {
        if (s->c_out > 0) { /* no samples: zero gradients */
            if (db)
                CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)s->c_out * sizeof(float), ctx->stream));
            CUDA_CHECK(cudaMemsetAsync(
                dw, 0, (size_t)s->c_out * s->c_in * s->k * s->k * sizeof(float), ctx->stream));
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
                     "conv %dx%dx%dx%d k%d s%d p%d -> %d: fwd %d %s %s, bwd_data %d %s %s, "
                     "bwd_filter %d %s %s\n",
                     s->batch, s->c_in, s->h_in, s->w_in, s->k, s->stride, s->pad, s->c_out,
                     (int)p->fwd, conv_algo_name(CONV_FWD, p->fwd), math_name(p->fwd_math),
                     (int)p->bwd_data, conv_algo_name(CONV_BWD_DATA, p->bwd_data),
                     math_name(p->bwd_data_math), (int)p->bwd_filter,
                     conv_algo_name(CONV_BWD_FILTER, p->bwd_filter), math_name(p->bwd_filter_math));
        } else {
            snprintf(line, sizeof line, "plans made inside a step: %d\n", ctx->plans_made_late);
        }
        if (buf && used < len) snprintf(buf + used, len - used, "%s", line);
        used += strlen(line);
    }
    return used;
}

static void plan_destroy(ConvPlan *p) {
    cudnnDestroyTensorDescriptor(p->x);
    cudnnDestroyTensorDescriptor(p->y);
    cudnnDestroyTensorDescriptor(p->b);
    cudnnDestroyTensorDescriptor(p->y32);
    cudnnDestroyFilterDescriptor(p->w);
    cudnnDestroyConvolutionDescriptor(p->conv);
}

void cuda_conv_plans_free(BackendCtx *ctx) {
    for (int i = 0; i < ctx->nplans; i++)
        plan_destroy(&ctx->plans[i]);
    free(ctx->plans);
    ctx->plans = NULL, ctx->nplans = ctx->cap_plans = 0;
}
