/* cuda_elementwise.c - the CUDA backend's element-wise operations (backend.h): ReLU (cuDNN's
 * activation), axpy / scale / copy (gradient accumulation, loss scaling), concatenation along the
 * per-sample axis (strided cudaMemcpy2DAsync per input), residual add and dropout (our kernels,
 * cuda_elementwise_kernels.cu). Each queues on the rank's compute stream; nothing here waits or
 * allocates. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK, CUDNN_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"
#include "cuda_ops16.h" /* defines: cuda16_* (NHWC 16-bit activations) */

static const float ONE = 1.0f, ZERO = 0.0f;

/* ---- ReLU (cuDNN) -------------------------------------------------------------------------- */

#define RELU_CHUNK ((size_t)1 << 30) /* elements per cuDNN call (its sizes are int) */

static void set_vector(cudnnTensorDescriptor_t d, size_t m) {
    CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 1, 1, (int)m));
}

void cuda_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    if (ctx->act16) {
        cuda16_relu_forward(ctx, n, x, y);
        return;
    }
    for (size_t off = 0; off < n; off += RELU_CHUNK) {
        size_t m = n - off < RELU_CHUNK ? n - off : RELU_CHUNK;
        set_vector(ctx->ta, m);
        CUDNN_CHECK(cudnnActivationForward(ctx->cudnn, ctx->relu, &ONE, ctx->ta, x + off, &ZERO,
                                           ctx->ta, y + off));
    }
}

/* dx = dy where y > 0. cuDNN's ReLU backward takes the forward input x as well; y stands in for
 * it, since y = max(x, 0) is positive exactly where x is. */
void cuda_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx) {
    if (ctx->act16) {
        cuda16_relu_backward(ctx, n, y, dy, dx);
        return;
    }
    for (size_t off = 0; off < n; off += RELU_CHUNK) {
        size_t m = n - off < RELU_CHUNK ? n - off : RELU_CHUNK;
        set_vector(ctx->ta, m);
        CUDNN_CHECK(cudnnActivationBackward(ctx->cudnn, ctx->relu, &ONE, ctx->ta, y + off, ctx->ta,
                                            dy + off, ctx->ta, y + off, &ZERO, ctx->ta, dx + off));
    }
}

/* ---- gradient accumulation, scaling, copies ------------------------------------------------ */

void cuda_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y) {
    CUDA_CHECK(dtk_axpy(ctx->stream, n, alpha, x, y));
}

void cuda_scale(BackendCtx *ctx, size_t n, float alpha, float *x) {
    CUDA_CHECK(dtk_scale(ctx->stream, n, x, alpha));
}

void cuda_scale_by(BackendCtx *ctx, size_t n, float alpha, const float *factor, float *x) {
    CUDA_CHECK(dtk_scale_by(ctx->stream, n, x, alpha, factor));
}

void cuda_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src)
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
}

/* ---- concatenation, residual add, dropout ------------------------------------------------- */

/* bytes of one activation value */
static size_t act_bytes(const BackendCtx *ctx) {
    return ctx->act16 ? 2 : sizeof(float);
}

/* Input i is a [batch, sizes[i]] block of rows landing at column offset off of y[batch, total]
 * (NHWC: rows of pixels, sizes in channels; backend.h). NHWC 16-bit: one kernel for all inputs
 * (cuda_elem.h's DtConcat: its rows of 128-768 bytes are far too short for copies); NCHW rows
 * are whole samples: one strided 2-D copy per input. */
static int concat_kernel(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes, void *y,
                         void *const *parts, int backward) {
    DtConcat c;
    size_t unit;
    if (!ctx->act16 ||
        !dt_concat_plan(&c, ninputs, sizes, act_bytes(ctx), (size_t)batch, y, parts, &unit))
        return 0;
    CUDA_CHECK(dtk_concat(ctx->stream, &c, unit, (size_t)batch * c.units, y, backward));
    return 1;
}

void cuda_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                         const size_t *sizes, float *y) {
    const size_t eb = act_bytes(ctx);
    size_t total = 0, off = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    if (batch <= 0) return;
    void *parts[DT_CONCAT_MAX] = {NULL};
    for (int i = 0; i < ninputs && i < DT_CONCAT_MAX; i++)
        parts[i] = (void *)xs[i]; /* read only */
    if (concat_kernel(ctx, batch, ninputs, sizes, y, parts, 0)) return;
    for (int i = 0; i < ninputs; i++) {
        if (sizes[i])
            CUDA_CHECK(cudaMemcpy2DAsync((char *)y + off * eb, total * eb, xs[i], sizes[i] * eb,
                                         sizes[i] * eb, (size_t)batch, cudaMemcpyDeviceToDevice,
                                         ctx->stream));
        off += sizes[i];
    }
}

void cuda_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                          const float *dy, float *const *dxs) {
    const size_t eb = act_bytes(ctx);
    size_t total = 0, off = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    if (batch <= 0) return;
    if (concat_kernel(ctx, batch, ninputs, sizes, (void *)dy, (void *const *)dxs, 1)) return;
    for (int i = 0; i < ninputs; i++) {
        if (dxs[i] && sizes[i])
            CUDA_CHECK(cudaMemcpy2DAsync(dxs[i], sizes[i] * eb, (const char *)dy + off * eb,
                                         total * eb, sizes[i] * eb, (size_t)batch,
                                         cudaMemcpyDeviceToDevice, ctx->stream));
        off += sizes[i];
    }
}

void cuda_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y) {
    if (ctx->act16)
        cuda16_add_forward(ctx, n, a, b, y);
    else
        CUDA_CHECK(dtk_add(ctx->stream, n, a, b, y));
}

void cuda_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db) {
    if (da) cuda_copy(ctx, da, dy, n * act_bytes(ctx));
    if (db) cuda_copy(ctx, db, dy, n * act_bytes(ctx));
}

void cuda_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                          uint8_t *mask) {
    if (ctx->act16)
        cuda16_dropout_forward(ctx, s, x, y, mask);
    else
        CUDA_CHECK(dtk_dropout_forward(ctx->stream, s, x, y, mask));
}

void cuda_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                           const float *dy, float *dx) {
    if (ctx->act16)
        cuda16_dropout_backward(ctx, s, mask, dy, dx);
    else
        CUDA_CHECK(dtk_dropout_backward(ctx->stream, s, mask, dy, dx));
}
