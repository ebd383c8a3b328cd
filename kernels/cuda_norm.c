/* cuda_norm.c - the CUDA backend's normalisation layers (backend.h): local response normalisation
 * across channels and batch normalisation (training, inference, backward), our own kernels
 * (cuda_norm_kernels.cu, the CPU backend's definitions). Each queues on the rank's compute stream;
 * nothing here waits. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"

void cuda_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale) {
    CUDA_CHECK(dtk_lrn_forward(ctx->stream, s, x, y, scale));
}

void cuda_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                       const float *scale, const float *dy, float *dx) {
    CUDA_CHECK(dtk_lrn_backward(ctx->stream, s, x, y, scale, dy, dx));
}

void cuda_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, float *y, float *save_mean,
                                  float *save_invstd, float *running_mean, float *running_var) {
    CUDA_CHECK(dtk_bn_forward_train(ctx->stream, s, x, gamma, beta, y, save_mean, save_invstd,
                                    running_mean, running_var));
}

void cuda_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, const float *running_mean,
                                  const float *running_var, float *y) {
    CUDA_CHECK(dtk_bn_forward_infer(ctx->stream, s, x, gamma, beta, running_mean, running_var, y));
}

void cuda_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                             const float *save_mean, const float *save_invstd, const float *dy,
                             float *dx, float *dgamma, float *dbeta) {
    CUDA_CHECK(
        dtk_bn_backward(ctx->stream, s, x, gamma, save_mean, save_invstd, dy, dx, dgamma, dbeta));
}
