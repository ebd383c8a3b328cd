/* cuda_conv.c - the CUDA backend's convolution (backend.h) through cuDNN 9's legacy API
 * (libcudnn_cnn): one plan per convolution shape (descriptors and the forward, backward-data and
 * backward-filter algorithms), made while the model is built (conv_workspace_bytes is called for
 * every layer), so nothing is planned in the timed loop; the bias through cudnnAddTensor and
 * cudnnConvolutionBackwardBias. bf16/fp16 run on 16-bit copies (cuda_precision.c).
 * Strict fp32 (--precision fp32) admits only cuDNN's direct-sum algorithms under CUDNN_FMA_MATH,
 * bf16 and fp16 only its deterministic direct sums (pick_algo's rules, cuda_plan.h: no FFT or
 * Winograd; in 16 bits no atomic adds either).
 * cuda_conv_algorithms() lists every plan's choices for the result file. */
#include <config.h>
#include "cuda.h"       /* defines: cuda_conv_algorithms */
#include "cuda_check.h" /* defines: CUDA_CHECK, CUDNN_CHECK */
#include "cuda_ctx.h"   /* defines: struct BackendCtx, ConvPlan */
#include "cuda_ops.h"
#include "cuda_ops16.h"     /* defines: cuda16_conv_* (NHWC 16-bit activations) */
#include "cuda_plan.h"      /* defines: pick_algo */
#include "cuda_precision.h" /* defines: cuda_prec_* (bf16, fp16) */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float ONE = 1.0f, ZERO = 0.0f;

static void set_nchw_t(cudnnTensorDescriptor_t d, cudnnDataType_t t, int n, int c, int h, int w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
}
/* an activation descriptor in the context's layout (NHWC with 16-bit activations) */
static void set_act_t(const BackendCtx *ctx, cudnnTensorDescriptor_t d, cudnnDataType_t t, int n,
                      int c, int h, int w) {
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, ctx->act16 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, t,
                                           n, c, h, w));
}
static void set_nchw(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
    set_nchw_t(d, CUDNN_DATA_FLOAT, n, c, h, w);
}

/* What the precision admits (cuda_plan.h): strict fp32 the direct sums under FMA math, bf16 and
 * fp16 the deterministic direct sums under any math type, tf32 anything */
static ConvRule rule(const BackendCtx *ctx) {
    return ctx->precision == PRECISION_FP32 ? CONV_RULE_STRICT_FP32
           : cuda_prec_16bit(ctx)           ? CONV_RULE_16BIT
                                            : CONV_RULE_ANY;
}

/* One candidate algorithm of a direction (cuda_plan.h's ConvDir), from cuDNN's heuristic ranking
 * (ms < 0) or its timed ranking (cudnnFind*AlgorithmEx: ms measured). */
enum {
    FWD = CONV_FWD,
    BWD_DATA = CONV_BWD_DATA,
    BWD_FILTER = CONV_BWD_FILTER,
    DIRECTIONS = CONV_DIRS
};
#define CANDIDATES 32 /* more than any direction's algorithm count, tensor-op variants included */
typedef struct {
    int algo;
    cudnnStatus_t status;
    float ms;
    size_t memory;
    cudnnMathType_t math;
    int deterministic; /* cuDNN's determinism field: CUDNN_DETERMINISTIC */
} Cand;
typedef struct {
    Cand c[CANDIDATES];
    int n;
} Cands;

/* r[0..got) of any of cuDNN's three *AlgoPerf_t types (the same fields) into cs, each with
 * cuDNN's own word on its determinism */
#define TAKE(cs, r, got, timed)                                                                    \
    do {                                                                                           \
        (cs)->n = (got);                                                                           \
        for (int i_ = 0; i_ < (got); i_++)                                                         \
            (cs)->c[i_] =                                                                          \
                (Cand){(int)(r)[i_].algo, (r)[i_].status, (timed) ? (r)[i_].time : -1.0f,          \
                       (r)[i_].memory, (r)[i_].mathType,                                           \
                       (r)[i_].determinism == CUDNN_DETERMINISTIC};                                \
    } while (0)

/* cuDNN's heuristic ranking of every direction, under the precision's math type. */
static void heuristic_candidates(BackendCtx *ctx, ConvPlan *p, Cands cs[DIRECTIONS]) {
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t f[CANDIDATES];
    cudnnConvolutionBwdDataAlgoPerf_t d[CANDIDATES];
    cudnnConvolutionBwdFilterAlgoPerf_t w[CANDIDATES];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(ctx->cudnn, p->x, p->w, p->conv, p->y,
                                                       CANDIDATES, &got, f));
    TAKE(&cs[FWD], f, got, 0);
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx->cudnn, p->w, p->y, p->conv, p->x,
                                                            CANDIDATES, &got, d));
    TAKE(&cs[BWD_DATA], d, got, 0);
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx->cudnn, p->x, p->y, p->conv, p->w,
                                                              CANDIDATES, &got, w));
    TAKE(&cs[BWD_FILTER], w, got, 0);
}

/* Bytes per element of the plan's x, W, y (cuda_prec_conv_type). */
static size_t plan_elem_bytes(const BackendCtx *ctx) {
    return cuda_prec_16bit(ctx) ? 2 : 4;
}

/* Elements of x, W and y of shape s. */
static void conv_counts(const ConvShape *s, size_t *nx, size_t *nw, size_t *ny) {
    *nx = (size_t)s->batch * s->c_in * s->h_in * s->w_in;
    *nw = (size_t)s->c_out * s->c_in * s->k * s->k;
    *ny = (size_t)s->batch * s->c_out * s->h_out * s->w_out;
}

/* Device memory Find needs beside its workspace: x, W and y of s in the plan's type. */
static size_t find_buffer_bytes(const BackendCtx *ctx, const ConvShape *s) {
    size_t nx, nw, ny;
    conv_counts(s, &nx, &nw, &ny);
    return (nx + nw + ny) * plan_elem_bytes(ctx);
}

/* Candidate c as the chooser (cuda_plan.h) sees it */
static AlgoPerf algo_perf(const Cand *c) {
    return (AlgoPerf){c->algo, c->status == CUDNN_STATUS_SUCCESS, c->math == CUDNN_FMA_MATH,
                      c->memory, c->deterministic};
}

/* 1 when the precision admits candidate c of direction dir */
static int admitted(const BackendCtx *ctx, ConvDir dir, const Cand *c) {
    const AlgoPerf a = algo_perf(c);
    return conv_algo_admitted(rule(ctx), dir, &a);
}

/* Every direction timed by cudnnFind*AlgorithmEx on x, W, y of the plan's shape filled with
 * values in [-1, 1) (not zeros, which some kernels run faster on), with a workspace as large as
 * the largest accepted heuristic candidate within `limit` (Find does not run an algorithm that
 * needs more). At set-up only: it allocates, synchronises and frees. */
static void timed_candidates(BackendCtx *ctx, ConvPlan *p, size_t limit, Cands cs[DIRECTIONS]) {
    size_t ws = 0, nx, nw, ny;
    for (int d = 0; d < DIRECTIONS; d++)
        for (int i = 0; i < cs[d].n; i++) {
            const Cand *c = &cs[d].c[i];
            if (c->status == CUDNN_STATUS_SUCCESS && admitted(ctx, (ConvDir)d, c) &&
                c->memory <= limit && c->memory > ws)
                ws = c->memory;
        }
    conv_counts(&p->s, &nx, &nw, &ny);
    const size_t eb = plan_elem_bytes(ctx);
    const int half = ctx->precision == PRECISION_FP16;
    void *x = NULL, *w = NULL, *y = NULL, *work = NULL;
    CUDA_CHECK(cudaMalloc(&x, nx * eb));
    CUDA_CHECK(cudaMalloc(&w, nw * eb));
    CUDA_CHECK(cudaMalloc(&y, ny * eb));
    if (ws) CUDA_CHECK(cudaMalloc(&work, ws));
    CUDA_CHECK(dtp_fill(ctx->stream, (int)eb, half, nx, 0x5eed0001u, x));
    CUDA_CHECK(dtp_fill(ctx->stream, (int)eb, half, nw, 0x5eed0002u, w));
    CUDA_CHECK(dtp_fill(ctx->stream, (int)eb, half, ny, 0x5eed0003u, y));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    int got = 0;
    cudnnConvolutionFwdAlgoPerf_t f[CANDIDATES];
    cudnnConvolutionBwdDataAlgoPerf_t d[CANDIDATES];
    cudnnConvolutionBwdFilterAlgoPerf_t fl[CANDIDATES];
    CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(ctx->cudnn, p->x, x, p->w, w, p->conv, p->y,
                                                       y, CANDIDATES, &got, f, work, ws));
    TAKE(&cs[FWD], f, got, 1);
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        ctx->cudnn, p->w, w, p->y, y, p->conv, p->x, x, CANDIDATES, &got, d, work, ws));
    TAKE(&cs[BWD_DATA], d, got, 1);
    CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        ctx->cudnn, p->x, x, p->y, y, p->conv, p->w, w, CANDIDATES, &got, fl, work, ws));
    TAKE(&cs[BWD_FILTER], fl, got, 1);
    CUDA_CHECK(cudaFree(x)); /* cudaFree waits for the device */
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(y));
    if (work) CUDA_CHECK(cudaFree(work));
}

/* The candidate of direction dir to use: pick_algo's rule (cuda_plan.c: the first usable one, in
 * cuDNN's order (fastest first when timed), that fits in `limit` and that the precision admits);
 * -1 when none does. */
static int choose(const BackendCtx *ctx, ConvDir dir, const Cands *cs, size_t limit) {
    AlgoPerf ap[CANDIDATES];
    for (int i = 0; i < cs->n; i++) ap[i] = algo_perf(&cs->c[i]);
    return pick_algo(dir, ap, cs->n, limit, rule(ctx));
}

/* The algorithm of direction dir when no candidate qualifies (conv_fallback_algo): the one that
 * needs no workspace; under bf16 and fp16 in a backward direction none (its ALGO_0 adds
 * atomically, and the replay check wants the same bits): the run is refused in one line. */
static int fallback(const BackendCtx *ctx, const ConvPlan *p, ConvDir dir, size_t limit) {
    const int algo = conv_fallback_algo(dir, rule(ctx));
    if (algo >= 0) return algo;
    const ConvShape *s = &p->s;
    char msg[320];
    snprintf(msg, sizeof msg,
             "%s: cuDNN offers no deterministic direct-sum %s algorithm for the convolution "
             "%dx%dx%dx%d, %dx%d -> %d, stride %d, pad %d, within %zu bytes of workspace (ALGO_0 "
             "adds atomically); use --precision tf32 or fp32",
             ctx->precision == PRECISION_FP16 ? "fp16" : "bf16",
             conv_dir_name(dir), s->batch, s->c_in, s->h_in, s->w_in, s->k, s->k, s->c_out,
             s->stride, s->pad, limit);
    check_fail(__FILE__, __LINE__, "plan_algorithms", msg);
}

/* Chooses the forward, backward-data and backward-filter algorithms of plan p, each within `limit`
 * bytes of workspace: timed (--conv-algo find, `timed`) or by cuDNN's heuristics; and records
 * their math types, workspaces and measured times. When no candidate qualifies: fallback's. */
static void plan_algorithms(BackendCtx *ctx, ConvPlan *p, size_t limit, int timed) {
    /* fp32: ask for strict fp32; the others for tensor cores */
    const cudnnMathType_t ask =
        ctx->precision == PRECISION_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    Cands cs[DIRECTIONS];
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, ask));
    heuristic_candidates(ctx, p, cs);
    if (timed) timed_candidates(ctx, p, limit, cs);
    Cand none[DIRECTIONS];
    const Cand *c[DIRECTIONS];
    for (int d = 0; d < DIRECTIONS; d++) {
        const int k = choose(ctx, (ConvDir)d, &cs[d], limit);
        if (k < 0) /* no workspace, the precision's math type, no measured time */
            none[d] = (Cand){fallback(ctx, p, (ConvDir)d, limit), CUDNN_STATUS_SUCCESS, -1.0f, 0,
                             ask, 1};
        c[d] = k >= 0 ? &cs[d].c[k] : &none[d];
    }
    p->fwd = (cudnnConvolutionFwdAlgo_t)c[FWD]->algo;
    p->bwd_data = (cudnnConvolutionBwdDataAlgo_t)c[BWD_DATA]->algo;
    p->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)c[BWD_FILTER]->algo;
    p->fwd_math = c[FWD]->math, p->fwd_ms = c[FWD]->ms;
    p->bwd_data_math = c[BWD_DATA]->math, p->bwd_data_ms = c[BWD_DATA]->ms;
    p->bwd_filter_math = c[BWD_FILTER]->math, p->bwd_filter_ms = c[BWD_FILTER]->ms;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
    CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(ctx->cudnn, p->x, p->w, p->conv, p->y,
                                                        p->fwd, &p->fwd_ws));
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_data_math));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(ctx->cudnn, p->w, p->y, p->conv, p->x,
                                                             p->bwd_data, &p->bwd_data_ws));
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        ctx->cudnn, p->x, p->y, p->conv, p->w, p->bwd_filter, &p->bwd_filter_ws));
}

/* The plan of shape s, NULL if none was made yet. */
static ConvPlan *planned(BackendCtx *ctx, const ConvShape *s) {
    for (int i = 0; i < ctx->nplans; i++)
        if (!memcmp(&ctx->plans[i].s, s, sizeof *s)) return &ctx->plans[i];
    return NULL;
}

/* The plan of shape s, made on first use with algorithms within `limit` bytes of workspace, timed
 * when `timed`. */
static ConvPlan *conv_plan(BackendCtx *ctx, const ConvShape *s, size_t limit, int timed) {
    ConvPlan *p = planned(ctx, s);
    if (p) return p;
    if (ctx->nplans == ctx->cap_plans) {
        int cap = ctx->cap_plans ? 2 * ctx->cap_plans : 64;
        ConvPlan *grown = realloc(ctx->plans, (size_t)cap * sizeof *grown);
        if (!grown) check_fail(__FILE__, __LINE__, "realloc", "out of memory for cuDNN plans");
        ctx->plans = grown, ctx->cap_plans = cap;
    }
    p = &ctx->plans[ctx->nplans++];
    memset(p, 0, sizeof *p);
    p->s = *s;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->b));
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y32));
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    /* bf16/fp16: 16-bit x, W, y (and with NHWC activations, NHWC x, y and a KRSC filter, as
     * tensor cores take them, and the fused call's 16-bit bias) */
    const cudnnDataType_t t = cuda_prec_conv_type(ctx);
    set_act_t(ctx, p->x, t, s->batch, s->c_in, s->h_in, s->w_in);
    set_act_t(ctx, p->y, t, s->batch, s->c_out, s->h_out, s->w_out);
    set_nchw(p->y32, s->batch, s->c_out, s->h_out, s->w_out);
    set_nchw_t(p->b, ctx->act16 ? t : CUDNN_DATA_FLOAT, 1, s->c_out, 1, 1);
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, t,
                                           ctx->act16 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                           s->c_out, s->c_in, s->k, s->k));
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
    plan_algorithms(ctx, p, limit, timed);
    return p;
}

static size_t conv_ws(const ConvPlan *p) {
    size_t ws = p->fwd_ws;
    if (p->bwd_data_ws > ws) ws = p->bwd_data_ws;
    if (p->bwd_filter_ws > ws) ws = p->bwd_filter_ws;
    return ws;
}

/* The plan of s for a forward or backward call: made here only for a shape not announced at
 * build time (e.g. the smaller last batch of an evaluation; counted in plans_made_late, since
 * then planning happens inside a step): cuDNN's heuristics, nothing timed or allocated, within
 * the largest workspace handed out so far, which the caller's work buffer holds. */
static ConvPlan *conv_plan_late(BackendCtx *ctx, const ConvShape *s) {
    int before = ctx->nplans;
    /* bf16/fp16: the 16-bit copies follow cuDNN's workspace in the same (largest) buffer */
    size_t extra = cuda_prec_conv_extra(ctx, s), limit = ctx->ws_granted;
    if (extra) limit = ctx->work_granted > extra ? ctx->work_granted - extra : 0;
    ConvPlan *p = conv_plan(ctx, s, limit, 0);
    if (ctx->nplans != before) ctx->plans_made_late++;
    return p;
}

/* The workspace budget of a plan made when the model is built (the model asks once every other
 * buffer of it exists): the free device memory less CONV_WS_MARGIN, less the 16-bit copies that
 * share the work buffer (bf16/fp16) and, when timing, Find's own buffers. Recorded for
 * cuda_conv_algorithms. */
static size_t ws_budget(BackendCtx *ctx, const ConvShape *s, int timed) {
    size_t free_bytes = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    ctx->ws_margin = CONV_WS_MARGIN(total);
    size_t need = ctx->ws_margin + cuda_prec_conv_extra(ctx, s);
    if (timed) need += find_buffer_bytes(ctx, s);
    const size_t budget = free_bytes > need ? free_bytes - need : 0;
    if (!ctx->ws_budgeted || budget < ctx->ws_budget) ctx->ws_budget = budget;
    ctx->ws_budgeted = 1;
    return budget;
}

size_t cuda_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    if (s->batch <= 0 || s->c_out <= 0 || s->c_in <= 0) return 0;
    ConvPlan *p = planned(ctx, s); /* a shape already planned keeps its plan */
    if (!p) {
        const int timed = ctx->conv_algo == CONV_ALGO_FIND;
        p = conv_plan(ctx, s, ws_budget(ctx, s, timed), timed);
    }
    size_t ws = conv_ws(p);
    if (ws > ctx->ws_granted) ctx->ws_granted = ws;
    ws += cuda_prec_conv_extra(ctx, s); /* bf16/fp16: the 16-bit copies after it */
    if (ws > ctx->work_granted) ctx->work_granted = ws;
    return ws;
}

void cuda_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                       const float *b, float *y, void *work) {
    if (s->batch <= 0 || s->c_out <= 0) return;
    ConvPlan *p = conv_plan_late(ctx, s);
    if (ctx->act16) { /* NHWC 16-bit activations */
        cuda16_conv_forward(ctx, p, x, w, b, 0, y, work, conv_ws(p));
        return;
    }
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
    if (cuda_prec_16bit(ctx))
        cuda_prec_conv_forward(ctx, p, x, w, y, work, conv_ws(p));
    else
        CUDNN_CHECK(cudnnConvolutionForward(ctx->cudnn, &ONE, p->x, x, p->w, w, p->conv, p->fwd,
                                            work, p->fwd_ws, &ZERO, p->y, y));
    if (b) CUDNN_CHECK(cudnnAddTensor(ctx->cudnn, &ONE, p->b, b, &ONE, p->y32, y));
}

/* relu(conv(x) + b): in tf32, cudnnConvolutionBiasActivationForward where cuDNN takes it for the
 * plan (tried at the first call, recorded in p->fused), else the unfused calls; with NHWC 16-bit
 * activations cuda16_conv_forward's; on NCHW 16-bit copies the unfused calls. Strict fp32 keeps
 * the unfused calls, the same bits as the rows unfused: the fused kernel is another
 * implementation, whose sums cuDNN does not promise in the plain forward's order. */
void cuda_conv_relu_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                            const float *b, float *y, void *work) {
    if (s->batch <= 0 || s->c_out <= 0) return;
    ConvPlan *p = conv_plan_late(ctx, s);
    if (ctx->act16) {
        cuda16_conv_forward(ctx, p, x, w, b, 1, y, work, conv_ws(p));
        return;
    }
    if (b && ctx->precision == PRECISION_TF32 && p->fused >= 0) {
        CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
        const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
            ctx->cudnn, &ONE, p->x, x, p->w, w, p->conv, p->fwd, work, p->fwd_ws, &ZERO, p->y, y,
            p->b, b, ctx->relu, p->y, y);
        if (st == CUDNN_STATUS_SUCCESS) {
            p->fused = 1;
            return;
        }
        if (p->fused != 0) CUDNN_CHECK(st); /* it ran before: an error */
        p->fused = -(int)st;                /* refused at the first call: unfused from now on */
    }
    cuda_conv_forward(ctx, s, x, w, b, y, work);
    cuda_relu_forward(ctx, (size_t)s->batch * s->c_out * s->h_out * s->w_out, y, y);
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
    if (ctx->act16) {
        cuda16_conv_backward(ctx, p, x, w, dy, dx, dw, db, work, conv_ws(p));
        return;
    }
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

/* " 1.234 ms" for a measured time, "" for none */
static const char *ms_text(char *buf, size_t len, float ms) {
    if (ms < 0.0f)
        buf[0] = 0;
    else
        snprintf(buf, len, " %.3f ms", (double)ms);
    return buf;
}

/* Line i of the text: the method, one line per plan, then the count of late plans. */
static void algorithms_line(const BackendCtx *ctx, int i, char *line, size_t len) {
    const double mib = 1.0 / 1048576.0;
    if (i < 0) {
        snprintf(line, len,
                 "conv algorithms: %s, workspace budget %.0f MiB (free device memory less %.0f "
                 "MiB), largest chosen %.1f MiB\n",
                 ctx->conv_algo == CONV_ALGO_FIND
                     ? "timed once per shape by cudnnFind*AlgorithmEx (--conv-algo find)"
                     : "cuDNN's heuristic ranking (--conv-algo heuristic)",
                 (double)ctx->ws_budget * mib, (double)ctx->ws_margin * mib,
                 (double)ctx->ws_granted * mib);
    } else if (i < ctx->nplans) {
        const ConvPlan *p = &ctx->plans[i];
        const ConvShape *s = &p->s;
        char t[3][32];
        char fused[64] = "";
        if (p->fused > 0) snprintf(fused, sizeof fused, "; conv+bias+ReLU fused");
        if (p->fused < 0)
            snprintf(fused, sizeof fused, "; conv+bias+ReLU unfused (cuDNN status %d)", -p->fused);
        snprintf(line, len,
                 "conv %dx%dx%dx%d k%d s%d p%d -> %d: fwd %d %s %s%s, bwd_data %d %s %s%s, "
                 "bwd_filter %d %s %s%s%s\n",
                 s->batch, s->c_in, s->h_in, s->w_in, s->k, s->stride, s->pad, s->c_out,
                 (int)p->fwd, conv_algo_name(CONV_FWD, p->fwd), math_name(p->fwd_math),
                 ms_text(t[0], sizeof t[0], p->fwd_ms), (int)p->bwd_data,
                 conv_algo_name(CONV_BWD_DATA, p->bwd_data), math_name(p->bwd_data_math),
                 ms_text(t[1], sizeof t[1], p->bwd_data_ms), (int)p->bwd_filter,
                 conv_algo_name(CONV_BWD_FILTER, p->bwd_filter), math_name(p->bwd_filter_math),
                 ms_text(t[2], sizeof t[2], p->bwd_filter_ms), fused);
    } else {
        snprintf(line, len, "plans made inside a step: %d\n", ctx->plans_made_late);
    }
}

size_t cuda_conv_algorithms(BackendCtx *ctx, char *buf, size_t len) {
    size_t used = 0;
    char line[400];
    if (buf && len) buf[0] = 0;
    for (int i = -2; i <= ctx->nplans; i++) {
        if (i == -2)
            cuda_prec_describe(ctx, line,
                               sizeof line); /* "precision bf16: cuBLAS ...; cuDNN ..." */
        else
            algorithms_line(ctx, i, line, sizeof line);
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
