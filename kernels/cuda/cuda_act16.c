/* cuda_act16.c - the CUDA backend's activation format (backend.h's ActFormat, docs/gpu.md
 * "Activation format") and its layers on NHWC 16-bit activations (cuda_ops16.h).
 *
 * --act-layout nhwc (auto's choice under --precision bf16/fp16 where the model runs it) stores
 * every activation and activation gradient NHWC in the precision's 16-bit type, as PyTorch's
 * autocast with channels_last does: cuDNN's tensor-core convolutions read and write them directly
 * (cuda_conv16.c), the fc multiplies them through cublasGemmEx (cuda_gemm.c), and the layers here
 * run our kernels on them (cuda_act16_kernels.cu, cuda_bn16_kernels.cu: fp32 arithmetic, one
 * rounding per output). Parameters, their gradients, batch-norm statistics, the logits and the
 * loss stay fp32. Anything else (--act-layout nchw, fp32, tf32) keeps NCHW fp32 and the
 * operations of cuda_ops.h. Each queues on the rank's compute stream; nothing here waits or
 * allocates, but init and weights_layout (when the model is built). */
#include <config.h>
#include "cuda_check.h"     /* defines: CUDA_CHECK */
#include "cuda_bn16.h"      /* defines: DT16_THREADS, DT16_PER_SM */
#include "cuda_kernels.h"   /* defines: dtk_axpy */
#include "cuda_kernels16.h" /* defines: dth_* launchers */
#include "cuda_ops16.h"
#include "cuda_plan.h" /* defines: nhwc_grid */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the format ------------------------------------------------------------------------------ */

int cuda_act_format_for(Precision p, ActLayout layout, ActFormat *f, char *why, size_t len) {
    *f = (ActFormat){ACT_NCHW, ACT_FP32};
    if (layout == ACT_NCHW) return 1;
    if (p != PRECISION_BF16 && p != PRECISION_FP16) {
        snprintf(why, len,
                 "NHWC storage is 16-bit, for --precision bf16 or fp16 (%s stores fp32 NCHW)",
                 PRECISION_NAME(p));
        return 0;
    }
    *f = (ActFormat){ACT_NHWC, p == PRECISION_FP16 ? ACT_FP16 : ACT_BF16};
    return 1;
}

void cuda_act_init(BackendCtx *ctx, Precision p, ActLayout layout) {
    char why[160];
    if (!cuda_act_format_for(p, layout, &ctx->act, why, sizeof why))
        check_fail(__FILE__, __LINE__, "cuda_act_init", why); /* the resolver refuses it first */
    ctx->act16 = ctx->act.type != ACT_FP32;
    CUDA_CHECK(cudaMalloc((void **)&ctx->bn_coef, 4 * (size_t)BN_PARTIALS_CAP * sizeof(float)));
}

static void free_weights(BackendCtx *ctx) {
    if (ctx->convw_dev) CUDA_CHECK(cudaFree(ctx->convw_dev));
    if (ctx->wkrsc) CUDA_CHECK(cudaFree(ctx->wkrsc));
    free(ctx->convw);
    ctx->convw = ctx->convw_dev = NULL, ctx->wkrsc = NULL;
    ctx->nconvw = 0, ctx->wkrsc_n = 0, ctx->convw_largest = 0;
}

void cuda_act_free(BackendCtx *ctx) {
    free_weights(ctx);
    if (ctx->bn_coef) cudaFree(ctx->bn_coef);
}

void cuda_activation_format(BackendCtx *ctx, ActFormat *f) {
    *f = ctx->act;
}

static int half_of(const BackendCtx *ctx) {
    return ctx->act.type == ACT_FP16;
}

void cuda_input_to_act(BackendCtx *ctx, int n, int c, int h, int w, const float *x, float *x_act) {
    if (!ctx->act16) { /* NCHW fp32: the model never asks (x is read itself) */
        CUDA_CHECK(cudaMemcpyAsync(x_act, x, (size_t)n * c * h * w * sizeof(float),
                                   cudaMemcpyDeviceToDevice, ctx->stream));
        return;
    }
    CUDA_CHECK(dth_input(ctx->stream, half_of(ctx), (size_t)n, (size_t)c, (size_t)h * w, x, x_act));
}

/* fp32: the launcher of cuda_axpy itself, so that this file stands below cuda_elementwise.c
 * (whose operations hand 16-bit activations to the ones here) and calls nothing of it. */
void cuda_act_add(BackendCtx *ctx, size_t n, const float *x, float *y) {
    if (ctx->act16)
        CUDA_CHECK(dth_add(ctx->stream, half_of(ctx), n, y, x, y));
    else
        CUDA_CHECK(dtk_axpy(ctx->stream, n, 1.0f, x, y));
}

/* ---- the convolutions' 16-bit KRSC copies ---------------------------------------------------- */

static size_t align128(size_t v) { /* 256 bytes of 16-bit values */
    return (v + 127) & ~(size_t)127;
}

/* The table of the model's convolutions; with NHWC 16-bit storage, the buffer their KRSC copies
 * go to (weights_ready fills it) and the table on the device for its kernel. At build time:
 * allocates and copies synchronously. */
void cuda_weights_layout(BackendCtx *ctx, const ConvWeights *cw, int n) {
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    free_weights(ctx);
    if (!ctx->act16 || n <= 0) return;
    ctx->convw = calloc((size_t)n, sizeof *ctx->convw);
    if (!ctx->convw) check_fail(__FILE__, __LINE__, "calloc", "out of memory for the filters");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        const size_t count = (size_t)cw[i].k * cw[i].c * cw[i].khw;
        ConvW16 *t = &ctx->convw[i];
        *t = (ConvW16){cw[i].w_off, at, cw[i].b_off, SIZE_MAX, cw[i].k, cw[i].c, cw[i].khw};
        at = align128(at + count);
        if (cw[i].b_off != SIZE_MAX) t->b_dst = at, at = align128(at + (size_t)cw[i].k);
        if (count > ctx->convw_largest) ctx->convw_largest = count;
    }
    ctx->nconvw = n, ctx->wkrsc_n = at;
    CUDA_CHECK(cudaMalloc(&ctx->wkrsc, at * 2));
    CUDA_CHECK(cudaMalloc((void **)&ctx->convw_dev, (size_t)n * sizeof *ctx->convw_dev));
    CUDA_CHECK(cudaMemcpy(ctx->convw_dev, ctx->convw, (size_t)n * sizeof *ctx->convw_dev,
                          cudaMemcpyHostToDevice));
}

void cuda16_conv_weights(BackendCtx *ctx, const ConvShape *s, const float *w, const void **w16,
                         const void **b16) {
    const uintptr_t lo = (uintptr_t)ctx->w16_src, p = (uintptr_t)w;
    const size_t off = (p - lo) / sizeof(float);
    for (int i = 0; ctx->w16_src && p >= lo && i < ctx->nconvw; i++) {
        const ConvW16 *t = &ctx->convw[i];
        if (t->w_src != off || t->k != s->c_out || t->c != s->c_in || t->khw != s->k * s->k)
            continue;
        *w16 = (const uint16_t *)ctx->wkrsc + t->w_dst;
        *b16 = t->b_src == SIZE_MAX ? NULL : (const uint16_t *)ctx->wkrsc + t->b_dst;
        return;
    }
    char msg[160];
    snprintf(msg, sizeof msg,
             "a %dx%dx%d filter that weights_layout did not declare (NHWC 16-bit convolutions run "
             "on the 16-bit KRSC copies it makes)",
             s->c_out, s->c_in, s->k * s->k);
    check_fail(__FILE__, __LINE__, "cuda16_conv_weights", msg);
}

/* The most 16-bit values per access that every buffer given (NULL: none) is aligned for: 8, 4
 * or 1. */
static int vec_of(const void *a, const void *b, const void *c, const void *d, const void *e) {
    const uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e;
    return (any & 15) == 0 ? 8 : (any & 7) == 0 ? 4 : 1;
}

/* The NHWC reduction grid of rows x c; a tensor it does not take is reported. */
static NhwcGrid grid_of(const BackendCtx *ctx, size_t rows, int c, int vec) {
    NhwcGrid g;
    if (!nhwc_grid((long long)rows, c, vec, DT16_THREADS, ctx->sms, DT16_PER_SM,
                   BN_PARTIALS_CAP, &g)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%zu rows of %d channels: more than the NHWC kernels take", rows,
                 c);
        check_fail(__FILE__, __LINE__, "nhwc_grid", msg);
    }
    return g;
}

void cuda16_colsum(BackendCtx *ctx, size_t rows, int c, const void *dy, float *out) {
    if (c <= 0) return;
    if (rows == 0) {
        CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)c * sizeof(float), ctx->stream));
        return;
    }
    const NhwcGrid g = grid_of(ctx, rows, c, vec_of(dy, NULL, NULL, NULL, NULL));
    CUDA_CHECK(dth_colsum(ctx->stream, half_of(ctx), &g, ctx->bn_partials, dy, out));
}

/* ---- element-wise ---------------------------------------------------------------------------- */

void cuda16_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    CUDA_CHECK(dth_relu(ctx->stream, half_of(ctx), n, x, y));
}
void cuda16_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx) {
    CUDA_CHECK(dth_relu_back(ctx->stream, half_of(ctx), n, y, dy, dx));
}
void cuda16_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y) {
    CUDA_CHECK(dth_add(ctx->stream, half_of(ctx), n, a, b, y));
}
void cuda16_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                            uint8_t *mask) {
    CUDA_CHECK(dth_dropout(ctx->stream, half_of(ctx), s, x, y, mask));
}
void cuda16_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                             const float *dy, float *dx) {
    CUDA_CHECK(dth_dropout_back(ctx->stream, half_of(ctx), s, mask, dy, dx));
}

/* ---- pooling, LRN ---------------------------------------------------------------------------- */

void cuda16_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                            int32_t *argmax) {
    CUDA_CHECK(dth_maxpool(ctx->stream, half_of(ctx), s, x, y, argmax));
}
void cuda16_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                             const float *dy, float *dx) {
    CUDA_CHECK(dth_maxpool_back(ctx->stream, half_of(ctx), s, argmax, dy, dx));
}
void cuda16_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y) {
    CUDA_CHECK(dth_avgpool(ctx->stream, half_of(ctx), s, x, y));
}
void cuda16_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx) {
    CUDA_CHECK(dth_avgpool_back(ctx->stream, half_of(ctx), s, dy, dx));
}
void cuda16_gap_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                        float *y) {
    CUDA_CHECK(dth_gap(ctx->stream, half_of(ctx), n, c, plane, x, y));
}
void cuda16_gap_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *dy,
                         float *dx) {
    CUDA_CHECK(dth_gap_back(ctx->stream, half_of(ctx), n, c, plane, dy, dx));
}
void cuda16_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y,
                        float *scale) {
    CUDA_CHECK(dth_lrn(ctx->stream, half_of(ctx), s, x, y, scale));
}
void cuda16_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                         const float *scale, const float *dy, float *dx) {
    CUDA_CHECK(dth_lrn_back(ctx->stream, half_of(ctx), s, x, y, scale, dy, dx));
}

/* ---- batch norm ------------------------------------------------------------------------------ */

static size_t bn_rows(const BnShape *s) {
    return (size_t)s->batch * (size_t)s->spatial;
}

void cuda16_bn_train(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                     const float *beta, const float *z, int relu, float *y, float *save_mean,
                     float *save_invstd, float *running_mean, float *running_var) {
    if (bn_rows(s) == 0 || s->c <= 0) return;
    const NhwcGrid g = grid_of(ctx, bn_rows(s), s->c, vec_of(x, z, y, NULL, NULL));
    CUDA_CHECK(dth_bn_train(ctx->stream, half_of(ctx), s, &g, ctx->bn_partials, ctx->bn_coef, x,
                            gamma, beta, z, relu, y, save_mean, save_invstd, running_mean,
                            running_var));
}

void cuda16_bn_infer(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                     const float *beta, const float *running_mean, const float *running_var,
                     const float *z, int relu, float *y) {
    if (bn_rows(s) == 0 || s->c <= 0) return;
    const NhwcGrid g = grid_of(ctx, bn_rows(s), s->c, vec_of(x, z, y, NULL, NULL));
    CUDA_CHECK(dth_bn_infer(ctx->stream, half_of(ctx), s, &g, ctx->bn_coef, x, gamma, beta,
                            running_mean, running_var, z, relu, y));
}

void cuda16_bn_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                        const float *save_mean, const float *save_invstd, const float *act_y,
                        const float *dy, float *dx, float *dz, float *dgamma, float *dbeta) {
    if (bn_rows(s) == 0 || s->c <= 0) return;
    /* 4 channels a thread: its kernels read up to three tensors (cuda_elem16.h) */
    const int vec = vec_of(x, act_y, dy, dx, dz);
    const NhwcGrid g = grid_of(ctx, bn_rows(s), s->c, vec < 4 ? vec : 4);
    CUDA_CHECK(dth_bn_back(ctx->stream, half_of(ctx), s, &g, ctx->bn_partials, ctx->bn_coef, x,
                           gamma, save_mean, save_invstd, act_y, dy, dx, dz, dgamma, dbeta));
}
