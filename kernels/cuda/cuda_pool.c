/* cuda_pool.c - the CUDA backend's pooling (backend.h): max pooling (padding 0 or not),
 * average pooling (padding counted as zeros) and global average pooling, all our own kernels
 * (cuda_pool_kernels.cu; on NHWC 16-bit activations cuda_act16_kernels.cu's). Each queues on the
 * rank's compute stream; nothing here waits.
 *
 * Max pooling records argmax and its backward reads only argmax and dy: cuDNN's pooling backward
 * re-derives the maxima from the forward OUTPUT y, which a ReLU run in place after the pooling
 * overwrites (wrong gradients); ours does not read y, so the model's in-place ReLU is safe. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"
#include "cuda_ops16.h" /* defines: cuda16_* (NHWC 16-bit activations) */

void cuda_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                          int32_t *argmax) {
    if (ctx->act16)
        cuda16_maxpool_forward(ctx, s, x, y, argmax);
    else
        CUDA_CHECK(dtk_maxpool_forward(ctx->stream, s, x, y, argmax));
}

void cuda_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                           const float *dy, float *dx) {
    if (ctx->act16)
        cuda16_maxpool_backward(ctx, s, argmax, dy, dx);
    else
        CUDA_CHECK(dtk_maxpool_backward(ctx->stream, s, argmax, dy, dx));
}

void cuda_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y) {
    if (ctx->act16)
        cuda16_avgpool_forward(ctx, s, x, y);
    else
        CUDA_CHECK(dtk_avgpool_forward(ctx->stream, s, x, y));
}

void cuda_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx) {
    if (ctx->act16)
        cuda16_avgpool_backward(ctx, s, dy, dx);
    else
        CUDA_CHECK(dtk_avgpool_backward(ctx->stream, s, dy, dx));
}

void cuda_global_avgpool_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                                 float *y) {
    if (ctx->act16)
        cuda16_gap_forward(ctx, n, c, plane, x, y);
    else
        CUDA_CHECK(dtk_global_avgpool_forward(ctx->stream, n * c, plane, x, y));
}

void cuda_global_avgpool_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane,
                                  const float *dy, float *dx) {
    if (ctx->act16)
        cuda16_gap_backward(ctx, n, c, plane, dy, dx);
    else
        CUDA_CHECK(dtk_global_avgpool_backward(ctx->stream, n * c, plane, dy, dx));
}
