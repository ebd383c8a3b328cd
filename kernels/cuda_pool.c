/* cuda_pool.c - the CUDA backend's pooling (backend.h): max pooling (padding 0 or not),
 * average pooling (padding counted as zeros) and global average pooling, all our own kernels
 * (cuda_pool_kernels.cu). Each queues on the rank's compute stream; nothing here waits.
 *
 * Max pooling records argmax and its backward reads only argmax and dy: cuDNN's pooling backward
 * re-derives the maxima from the forward OUTPUT y, which a ReLU run in place after the pooling
 * overwrites (wrong gradients); ours does not read y, so the model's in-place ReLU is safe. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"

void cuda_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                          int32_t *argmax) {
    CUDA_CHECK(dtk_maxpool_forward(ctx->stream, s, x, y, argmax));
}

void cuda_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                           const float *dy, float *dx) {
    CUDA_CHECK(dtk_maxpool_backward(ctx->stream, s, argmax, dy, dx));
}

void cuda_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y) {
    CUDA_CHECK(dtk_avgpool_forward(ctx->stream, s, x, y));
}

void cuda_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx) {
    CUDA_CHECK(dtk_avgpool_backward(ctx->stream, s, dy, dx));
}

void cuda_global_avgpool_forward(BackendCtx *ctx, size_t planes, size_t plane, const float *x,
                                 float *y) {
    CUDA_CHECK(dtk_global_avgpool_forward(ctx->stream, planes, plane, x, y));
}

void cuda_global_avgpool_backward(BackendCtx *ctx, size_t planes, size_t plane, const float *dy,
                                  float *dx) {
    CUDA_CHECK(dtk_global_avgpool_backward(ctx->stream, planes, plane, dy, dx));
}
