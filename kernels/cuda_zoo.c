/* cuda_zoo.c - the CUDA backend's model-zoo operations (backend.h), entered into cuda_backend's
 * table by kernels/cuda.c: each checks its launch (CUDA_CHECK) and queues on the rank's compute
 * stream; nothing here waits or allocates. Kernels: cuda_zoo_kernels.cu, cuda_norm.cu; the LSTM is
 * in cuda_lstm.c. Concatenation and copies are strided cudaMemcpy2DAsync / cudaMemcpyAsync. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_scale */
#include "cuda_zoo.h"     /* defines: dtz_* launchers */

void cuda_zoo_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y) {
    CUDA_CHECK(dtz_axpy(ctx->stream, n, alpha, x, y));
}

void cuda_zoo_scale(BackendCtx *ctx, size_t n, float alpha, float *x) {
    CUDA_CHECK(dtk_scale(ctx->stream, n, x, alpha));
}

void cuda_zoo_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
}

void cuda_zoo_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y) {
    CUDA_CHECK(dtz_avgpool_forward(ctx->stream, s, x, y));
}

void cuda_zoo_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx) {
    CUDA_CHECK(dtz_avgpool_backward(ctx->stream, s, dy, dx));
}

void cuda_zoo_global_avgpool_forward(BackendCtx *ctx, size_t planes, size_t plane, const float *x,
                                     float *y) {
    CUDA_CHECK(dtz_global_avgpool_forward(ctx->stream, planes, plane, x, y));
}

void cuda_zoo_global_avgpool_backward(BackendCtx *ctx, size_t planes, size_t plane, const float *dy,
                                      float *dx) {
    CUDA_CHECK(dtz_global_avgpool_backward(ctx->stream, planes, plane, dy, dx));
}

void cuda_zoo_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y,
                          float *scale) {
    CUDA_CHECK(dtz_lrn_forward(ctx->stream, s, x, y, scale));
}

void cuda_zoo_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                           const float *scale, const float *dy, float *dx) {
    CUDA_CHECK(dtz_lrn_backward(ctx->stream, s, x, y, scale, dy, dx));
}

void cuda_zoo_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                      const float *gamma, const float *beta, float *y,
                                      float *save_mean, float *save_invstd, float *running_mean,
                                      float *running_var) {
    CUDA_CHECK(dtz_bn_forward_train(ctx->stream, s, x, gamma, beta, y, save_mean, save_invstd,
                                    running_mean, running_var));
}

void cuda_zoo_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                      const float *gamma, const float *beta,
                                      const float *running_mean, const float *running_var,
                                      float *y) {
    CUDA_CHECK(dtz_bn_forward_infer(ctx->stream, s, x, gamma, beta, running_mean, running_var, y));
}

void cuda_zoo_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy, float *dx,
                                 float *dgamma, float *dbeta) {
    CUDA_CHECK(
        dtz_bn_backward(ctx->stream, s, x, gamma, save_mean, save_invstd, dy, dx, dgamma, dbeta));
}

/* Input i is a [batch, sizes[i]] block of rows landing at column offset off of y[batch, total]:
 * one strided 2-D copy per input. */
void cuda_zoo_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                             const size_t *sizes, float *y) {
    size_t total = 0, off = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    if (batch <= 0) return;
    for (int i = 0; i < ninputs; i++) {
        if (sizes[i])
            CUDA_CHECK(cudaMemcpy2DAsync(y + off, total * sizeof(float), xs[i],
                                         sizes[i] * sizeof(float), sizes[i] * sizeof(float),
                                         (size_t)batch, cudaMemcpyDeviceToDevice, ctx->stream));
        off += sizes[i];
    }
}

void cuda_zoo_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                              const float *dy, float *const *dxs) {
    size_t total = 0, off = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    if (batch <= 0) return;
    for (int i = 0; i < ninputs; i++) {
        if (dxs[i] && sizes[i])
            CUDA_CHECK(cudaMemcpy2DAsync(dxs[i], sizes[i] * sizeof(float), dy + off,
                                         total * sizeof(float), sizes[i] * sizeof(float),
                                         (size_t)batch, cudaMemcpyDeviceToDevice, ctx->stream));
        off += sizes[i];
    }
}

void cuda_zoo_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y) {
    CUDA_CHECK(dtz_add(ctx->stream, n, a, b, y));
}

void cuda_zoo_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db) {
    if (da) cuda_zoo_copy(ctx, da, dy, n * sizeof(float));
    if (db) cuda_zoo_copy(ctx, db, dy, n * sizeof(float));
}

void cuda_zoo_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                              uint8_t *mask) {
    CUDA_CHECK(dtz_dropout_forward(ctx->stream, s, x, y, mask));
}

void cuda_zoo_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                               const float *dy, float *dx) {
    CUDA_CHECK(dtz_dropout_backward(ctx->stream, s, mask, dy, dx));
}

void cuda_zoo_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                                const float *w, float *y) {
    CUDA_CHECK(dtz_embedding_forward(ctx->stream, s, ids, w, y));
}

void cuda_zoo_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                                 const float *dy, float *dw) {
    CUDA_CHECK(dtz_embedding_backward(ctx->stream, s, ids, dy, dw));
}
