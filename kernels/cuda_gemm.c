/* cuda_gemm.c - the CUDA backend's fully connected layer (backend.h): cuBLAS GEMMs through
 * cuda_plan.c's mapping of dtbench's row-major tensors onto column-major calls, in the precision
 * of --precision (cuda_precision.c), plus our bias broadcast and bias gradient kernels
 * (cuda_gemm_kernels.cu). Each queues on the rank's compute stream; nothing here waits. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_bias_add, dtk_bias_grad */
#include "cuda_ops.h"
#include "cuda_plan.h"      /* defines: fc_*_gemm */
#include "cuda_precision.h" /* defines: cuda_prec_gemm */

/* y[n,out] = x[n,in] W[out,in]^T + b[out] */
void cuda_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                     const float *b, float *y) {
    const int n = s->batch, in = s->in, out = s->out;
    if (n <= 0 || out <= 0) return;
    if (in <= 0) /* empty product: y = b */
        CUDA_CHECK(cudaMemsetAsync(y, 0, (size_t)n * out * sizeof(float), ctx->stream));
    else /* cublasSgemm, or cublasGemmEx on 16-bit copies */
        cuda_prec_gemm(ctx, fc_forward_gemm(s), w, x, 0.0f, y);
    if (b) CUDA_CHECK(dtk_bias_add(ctx->stream, n, out, b, y));
}

/* dW = dy^T x, db = column sums of dy, dx = dy W (skipped when dx == NULL); dW, db overwritten */
void cuda_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                      const float *dy, float *dx, float *dw, float *db) {
    const int n = s->batch, in = s->in, out = s->out;
    if (out <= 0) {
        if (dx && n > 0 && in > 0)
            CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)n * in * sizeof(float), ctx->stream));
        return;
    }
    if (n <= 0) { /* no samples: zero gradients */
        if (in > 0)
            CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)out * in * sizeof(float), ctx->stream));
        if (db) CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)out * sizeof(float), ctx->stream));
        return;
    }
    if (in > 0) cuda_prec_gemm(ctx, fc_dweight_gemm(s), x, dy, 0.0f, dw);
    if (db) CUDA_CHECK(dtk_bias_grad(ctx->stream, n, out, dy, db)); /* NULL: layer without bias */
    if (dx && in > 0) cuda_prec_gemm(ctx, fc_dinput_gemm(s), w, dy, 0.0f, dx);
}
