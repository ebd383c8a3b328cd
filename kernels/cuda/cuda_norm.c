/* cuda_norm.c - the CUDA backend's normalisation layers (backend.h): local response normalisation
 * across channels and batch normalisation (training, inference, backward), our own kernels with
 * the CPU backend's definitions: LRN in cuda_norm_kernels.cu; batch norm at memory speed in
 * cuda_batchnorm_kernels.cu on the grid of bn_grid (cuda_plan.c), with the one-block-per-channel
 * kernels of cuda_norm_kernels.cu for tensors that grid does not take (2^31 elements or more).
 * Each queues on the rank's compute stream; nothing here waits or allocates (the batch-norm
 * scratch is made at init). */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"
#include "cuda_ops16.h" /* defines: cuda16_* (NHWC 16-bit activations) */
#include "cuda_plan.h" /* defines: bn_grid */

#include <stdint.h>

void cuda_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale) {
    if (ctx->act16)
        cuda16_lrn_forward(ctx, s, x, y, scale);
    else
        CUDA_CHECK(dtk_lrn_forward(ctx->stream, s, x, y, scale));
}

void cuda_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                       const float *scale, const float *dy, float *dx) {
    if (ctx->act16)
        cuda16_lrn_backward(ctx, s, x, y, scale, dy, dx);
    else
        CUDA_CHECK(dtk_lrn_backward(ctx->stream, s, x, y, scale, dy, dx));
}

/* 1 when every pointer is 16-byte aligned (NULL counts as aligned): 4 floats per load */
static int aligned16(const void *a, const void *b, const void *c, const void *d, const void *e) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d | (uintptr_t)e) & 15) == 0;
}

/* The fast kernels' grid for s, or 0 (the simple kernels then run). */
static int grid_for(const BackendCtx *ctx, const BnShape *s, int aligned, BnGrid *g) {
    return bn_grid(s, aligned, ctx->sms, BN_BLOCK_THREADS, BN_PARTIALS_CAP, g);
}

void cuda_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, float *y, float *save_mean,
                                  float *save_invstd, float *running_mean, float *running_var) {
    BnGrid g;
    if (ctx->act16)
        cuda16_bn_train(ctx, s, x, gamma, beta, NULL, 0, y, save_mean, save_invstd, running_mean,
                        running_var);
    else if (grid_for(ctx, s, aligned16(x, y, NULL, NULL, NULL), &g))
        CUDA_CHECK(dtk_bn_forward_train(ctx->stream, s, &g, ctx->bn_partials, x, gamma, beta, NULL,
                                        0, y, save_mean, save_invstd, running_mean, running_var));
    else if (s->batch > 0 && s->c > 0 && s->spatial > 0)
        CUDA_CHECK(dtk_bn_forward_train_simple(ctx->stream, s, x, gamma, beta, y, save_mean,
                                               save_invstd, running_mean, running_var));
}

void cuda_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, const float *running_mean,
                                  const float *running_var, float *y) {
    BnGrid g;
    if (ctx->act16)
        cuda16_bn_infer(ctx, s, x, gamma, beta, running_mean, running_var, NULL, 0, y);
    else if (grid_for(ctx, s, aligned16(x, y, NULL, NULL, NULL), &g))
        CUDA_CHECK(dtk_bn_forward_infer(ctx->stream, s, &g, x, gamma, beta, running_mean,
                                        running_var, NULL, 0, y));
    else
        CUDA_CHECK(dtk_bn_forward_infer_simple(ctx->stream, s, x, gamma, beta, running_mean,
                                               running_var, y));
}

void cuda_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                             const float *save_mean, const float *save_invstd, const float *dy,
                             float *dx, float *dgamma, float *dbeta) {
    BnGrid g;
    if (ctx->act16)
        cuda16_bn_backward(ctx, s, x, gamma, save_mean, save_invstd, NULL, dy, dx, NULL, dgamma,
                           dbeta);
    else if (grid_for(ctx, s, aligned16(x, dy, dx, NULL, NULL), &g))
        CUDA_CHECK(dtk_bn_backward(ctx->stream, s, &g, ctx->bn_partials, x, gamma, save_mean,
                                   save_invstd, NULL, dy, dx, NULL, dgamma, dbeta));
    else
        CUDA_CHECK(dtk_bn_backward_simple(ctx->stream, s, x, gamma, save_mean, save_invstd, dy, dx,
                                          dgamma, dbeta));
}

/* ---- batch norm fused with a ReLU, and a residual add before it (backend.h's bn_act_*) ------ */

void cuda_bn_act_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                               const float *gamma, const float *beta, const float *z, float *y,
                               float *save_mean, float *save_invstd, float *running_mean,
                               float *running_var) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    BnGrid g;
    if (ctx->act16) {
        cuda16_bn_train(ctx, s, x, gamma, beta, z, 1, y, save_mean, save_invstd, running_mean,
                        running_var);
    } else if (grid_for(ctx, s, aligned16(x, y, z, NULL, NULL), &g)) {
        CUDA_CHECK(dtk_bn_forward_train(ctx->stream, s, &g, ctx->bn_partials, x, gamma, beta, z, 1,
                                        y, save_mean, save_invstd, running_mean, running_var));
    } else if (n > 0) { /* the unfused rows */
        CUDA_CHECK(dtk_bn_forward_train_simple(ctx->stream, s, x, gamma, beta, y, save_mean,
                                               save_invstd, running_mean, running_var));
        if (z) CUDA_CHECK(dtk_add(ctx->stream, n, y, z, y));
        cuda_relu_forward(ctx, n, y, y);
    }
}

void cuda_bn_act_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, const float *z, float *y) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    BnGrid g;
    if (ctx->act16) {
        cuda16_bn_infer(ctx, s, x, gamma, beta, running_mean, running_var, z, 1, y);
    } else if (grid_for(ctx, s, aligned16(x, y, z, NULL, NULL), &g)) {
        CUDA_CHECK(dtk_bn_forward_infer(ctx->stream, s, &g, x, gamma, beta, running_mean,
                                        running_var, z, 1, y));
    } else if (n > 0) {
        CUDA_CHECK(dtk_bn_forward_infer_simple(ctx->stream, s, x, gamma, beta, running_mean,
                                               running_var, y));
        if (z) CUDA_CHECK(dtk_add(ctx->stream, n, y, z, y));
        cuda_relu_forward(ctx, n, y, y);
    }
}

/* Unfused, dy itself receives the ReLU's gradient (the model runs that ReLU in place). */
void cuda_bn_act_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                          const float *save_mean, const float *save_invstd, const float *y,
                          float *dy, float *dx, float *dz, float *dgamma, float *dbeta) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    BnGrid g;
    if (ctx->act16) {
        cuda16_bn_backward(ctx, s, x, gamma, save_mean, save_invstd, y, dy, dx, dz, dgamma, dbeta);
    } else if (grid_for(ctx, s, aligned16(x, y, dy, dx, dz), &g)) {
        CUDA_CHECK(dtk_bn_backward(ctx->stream, s, &g, ctx->bn_partials, x, gamma, save_mean,
                                   save_invstd, y, dy, dx, dz, dgamma, dbeta));
    } else if (n > 0) {
        cuda_relu_backward(ctx, n, y, dy, dy); /* in place, as the unfused ReLU */
        if (dz && dz != dy)
            CUDA_CHECK(
                cudaMemcpyAsync(dz, dy, n * sizeof(float), cudaMemcpyDeviceToDevice, ctx->stream));
        CUDA_CHECK(dtk_bn_backward_simple(ctx->stream, s, x, gamma, save_mean, save_invstd, dy, dx,
                                          dgamma, dbeta));
    }
}
