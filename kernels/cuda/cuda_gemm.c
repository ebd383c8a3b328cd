/* cuda_gemm.c - the CUDA backend's fully connected layer (backend.h): cuBLAS GEMMs through
 * cuda_plan.c's mapping of dtbench's row-major tensors onto column-major calls, in the precision
 * of --precision (cuda_precision.c), plus our bias broadcast and bias gradient kernels
 * (cuda_gemm_kernels.cu). With NHWC 16-bit activations (ctx->act16) the products take the 16-bit
 * activations and the step's 16-bit weights as they are (cublasGemmEx, fp32 accumulation), a
 * flattened NHWC input transposed to NCHW order first (so the weights keep theirs), the output
 * rounded once after the bias (the logits stay fp32). Each queues on the rank's compute stream;
 * nothing here waits, but the 16-bit scratch's growth in the first step (cuda_prec_scratch). */
#include <config.h>
#include "cuda_check.h"     /* defines: CUDA_CHECK, CUBLAS_CHECK */
#include "cuda_ctx.h"       /* defines: struct BackendCtx */
#include "cuda_kernels.h"   /* defines: dtk_bias_add, dtk_bias_grad */
#include "cuda_kernels16.h" /* defines: dth_to_nchw, dth_to_nhwc, dth_round_bias */
#include "cuda_ops.h"
#include "cuda_ops16.h"     /* defines: cuda16_colsum */
#include "cuda_plan.h"      /* defines: fc_*_gemm */
#include "cuda_precision.h" /* defines: cuda_prec_gemm, cuda_prec_scratch, cuda_prec_weights16 */

#include <library_types.h>

static const float ONE = 1.0f, ZERO = 0.0f;

/* ---- NHWC 16-bit activations --------------------------------------------------------------- */

static size_t align256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

/* C = op(A) op(B) on 16-bit A and B, C of type ct, fp32 accumulation */
static void gemm16(BackendCtx *ctx, ColGemm g, const void *a, const void *b, void *c,
                   cudaDataType_t ct) {
    const cudaDataType_t t16 = ctx->act.type == ACT_FP16 ? CUDA_R_16F : CUDA_R_16BF;
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                              g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &ONE, a, t16,
                              g.lda, b, t16, g.ldb, &ZERO, c, ct, g.ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

/* the step's 16-bit copy of the fc's weights (they are parameters: weights_ready made it) */
static const void *fc_weights16(BackendCtx *ctx, const FcShape *s, const float *w) {
    const void *w16 = cuda_prec_weights16(ctx, w, (size_t)s->out * s->in);
    if (!w16)
        check_fail(__FILE__, __LINE__, "cuda_prec_weights16",
                   "fc weights outside the model's parameters");
    return w16;
}

static int flattened(const FcShape *s) {
    return s->flat_c > 0 && s->flat_hw > 1;
}

static void fc16_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                         const float *b, float *y) {
    const int n = s->batch, in = s->in, out = s->out, half = ctx->act.type == ACT_FP16;
    const size_t xb = flattened(s) ? align256((size_t)n * in * 2) : 0;
    const size_t accb = s->logits ? 0 : (size_t)n * out * sizeof(float);
    char *scr = cuda_prec_scratch(ctx, xb + accb + 1);
    float *acc = s->logits ? y : (float *)(scr + xb);
    const void *x16 = x;
    if (flattened(s)) {
        CUDA_CHECK(
            dth_to_nchw(ctx->stream, (size_t)n, (size_t)s->flat_c, (size_t)s->flat_hw, x, scr));
        x16 = scr;
    }
    if (in > 0)
        gemm16(ctx, fc_forward_gemm(s), fc_weights16(ctx, s, w), x16, acc, CUDA_R_32F);
    else
        CUDA_CHECK(cudaMemsetAsync(acc, 0, (size_t)n * out * sizeof(float), ctx->stream));
    if (s->logits) {
        if (b) CUDA_CHECK(dtk_bias_add(ctx->stream, n, out, b, y));
    } else {
        CUDA_CHECK(dth_round_bias(ctx->stream, half, (size_t)n, out, acc, b, y));
    }
}

static void fc16_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db) {
    const int n = s->batch, in = s->in, out = s->out, half = ctx->act.type == ACT_FP16;
    const size_t xb = flattened(s) ? align256((size_t)n * in * 2) : 0;
    const size_t dyb = s->logits ? align256((size_t)n * out * 2) : 0;
    const size_t dxb = flattened(s) && dx ? (size_t)n * in * 2 : 0;
    char *scr = cuda_prec_scratch(ctx, xb + dyb + dxb + 1);
    const void *x16 = x, *dy16 = dy;
    if (flattened(s)) {
        CUDA_CHECK(
            dth_to_nchw(ctx->stream, (size_t)n, (size_t)s->flat_c, (size_t)s->flat_hw, x, scr));
        x16 = scr;
    }
    if (s->logits) { /* fp32 logits' gradient: rounded for the products */
        CUDA_CHECK(dtp_to_16(ctx->stream, half, (size_t)n * out, dy, scr + xb));
        dy16 = scr + xb;
    }
    if (in > 0) gemm16(ctx, fc_dweight_gemm(s), x16, dy16, dw, CUDA_R_32F);
    if (db && s->logits)
        CUDA_CHECK(dtk_bias_grad(ctx->stream, n, out, dy, db));
    else if (db)
        cuda16_colsum(ctx, (size_t)n, out, dy, db);
    if (!dx || in <= 0) return;
    void *dst = flattened(s) ? (void *)(scr + xb + dyb) : (void *)dx;
    gemm16(ctx, fc_dinput_gemm(s), fc_weights16(ctx, s, w), dy16, dst,
           half ? CUDA_R_16F : CUDA_R_16BF);
    if (flattened(s))
        CUDA_CHECK(
            dth_to_nhwc(ctx->stream, (size_t)n, (size_t)s->flat_c, (size_t)s->flat_hw, dst, dx));
}

/* ---- the layer ----------------------------------------------------------------------------- */

/* y[n,out] = x[n,in] W[out,in]^T + b[out] */
void cuda_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                     const float *b, float *y) {
    const int n = s->batch, in = s->in, out = s->out;
    if (n <= 0 || out <= 0) return;
    if (ctx->act16) {
        fc16_forward(ctx, s, x, w, b, y);
        return;
    }
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
    const size_t eb = ctx->act16 ? 2 : sizeof(float); /* bytes of an activation's value */
    if (out <= 0) {
        if (dx && n > 0 && in > 0)
            CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)n * in * eb, ctx->stream));
        return;
    }
    if (n <= 0) { /* no samples: zero gradients */
        if (in > 0)
            CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)out * in * sizeof(float), ctx->stream));
        if (db) CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)out * sizeof(float), ctx->stream));
        return;
    }
    if (ctx->act16) {
        fc16_backward(ctx, s, x, w, dy, dx, dw, db);
        return;
    }
    if (in > 0) cuda_prec_gemm(ctx, fc_dweight_gemm(s), x, dy, 0.0f, dw);
    if (db) CUDA_CHECK(dtk_bias_grad(ctx->stream, n, out, dy, db)); /* NULL: layer without bias */
    if (dx && in > 0) cuda_prec_gemm(ctx, fc_dinput_gemm(s), w, dy, 0.0f, dx);
}
