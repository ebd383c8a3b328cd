/* cuda_recurrent.c - the CUDA backend's language-model layers (backend.h): the embedding lookup
 * (our kernels) and the LSTM layer (LstmShape) in dtbench's own fused layout:
 * the CPU backend's algorithm step for step (kernels/cpu/cpu_recurrent.c), its GEMMs as cuBLAS
 * SGEMMs (row-major products mapped by cuda_plan.c's rowmajor_gemm, which tests/test_device_arith.c
 * checks against cblas) and its cell as the pointwise kernels of cuda_recurrent_kernels.cu. cuDNN's
 * RNN API is not used: its weight layout, separate input and recurrent biases and gate order would
 * need repacking every step, and these products are what it would run anyway. Its buffers have
 * the CPU backend's layout (lstm_layout.h). */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK, CUBLAS_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"
#include "cuda_plan.h"      /* defines: rowmajor_gemm */
#include "cuda_precision.h" /* defines: cuda_prec_gemm (--precision) */
#include "lstm_layout.h"    /* defines: lstm_reserve, lstm_work */

/* ---- embedding ------------------------------------------------------------------------------ */

void cuda_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *w, float *y) {
    CUDA_CHECK(dtk_embedding_forward(ctx->stream, s, ids, w, y));
}

void cuda_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                             const float *dy, float *dw) {
    CUDA_CHECK(dtk_embedding_backward(ctx->stream, s, ids, dy, dw));
}

/* ---- LSTM ------------------------------------------------------------------------------------ */

/* cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc) on the GPU */
static void rm_gemm(BackendCtx *ctx, int ta, int tb, int m, int n, int k, const float *a, int lda,
                    const float *b, int ldb, float beta, float *c, int ldc) {
    ColGemm g = rowmajor_gemm(ta, tb, m, n, k, lda, ldb, ldc);
    cuda_prec_gemm(ctx, g, b, a, beta, c); /* B first: see rowmajor_gemm */
}

size_t cuda_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    return lstm_reserve_bytes(s);
}

size_t cuda_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    return lstm_work_bytes(s);
}

void cuda_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *b, float *y, void *reserve, void *work) {
    (void)work;
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    const LstmReserve r = lstm_reserve(s, reserve);
    float *gates = r.gates, *cell = r.cell;
    if (B <= 0 || T <= 0 || H <= 0) return;
    /* gates = b + x W[:, :D]^T: the input part of every step in one GEMM */
    CUDA_CHECK(dtk_lstm_rows_set(ctx->stream, bt, G, b, gates));
    if (D > 0) rm_gemm(ctx, 0, 1, (int)bt, G, D, x, D, w, ldw, 1.0f, gates, G);
    for (int t = 0; t < T; t++) {
        if (t > 0) /* += h_{t-1}[B, H] W[:, D:]^T, both strided over the sequence */
            rm_gemm(ctx, 0, 1, B, G, H, y + (size_t)(t - 1) * H, T * H, w + D, ldw, 1.0f,
                    gates + (size_t)t * G, T * G);
        CUDA_CHECK(dtk_lstm_cell_forward(ctx->stream, s, t, gates, cell, y));
    }
}

void cuda_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                        const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                        float *db, void *work) {
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    const LstmReserve r = lstm_reserve(s, reserve);
    const LstmWork k = lstm_work(s, work);
    const float *gates = r.gates, *cell = r.cell;
    float *dgates = k.dgates, *hprev = k.hprev, *dh_rec = k.dh_rec, *dcell = k.dcell;
    if (B <= 0 || T <= 0 || H <= 0) {
        CUDA_CHECK(cudaMemsetAsync(dw, 0, (size_t)G * ldw * sizeof(float), ctx->stream));
        CUDA_CHECK(cudaMemsetAsync(db, 0, (size_t)G * sizeof(float), ctx->stream));
        if (dx && B > 0 && T > 0)
            CUDA_CHECK(cudaMemsetAsync(dx, 0, bt * D * sizeof(float), ctx->stream));
        return;
    }
    CUDA_CHECK(cudaMemsetAsync(dcell, 0, (size_t)B * H * sizeof(float), ctx->stream));
    for (int t = T - 1; t >= 0; t--) {
        CUDA_CHECK(
            dtk_lstm_cell_backward(ctx->stream, s, t, gates, cell, dy, dh_rec, dcell, dgates));
        if (t > 0) /* dh_rec[B, H] = dgates_t[B, 4H] W[:, D:] */
            rm_gemm(ctx, 0, 0, B, H, G, dgates + (size_t)t * G, T * G, w + D, ldw, 0.0f, dh_rec, H);
    }
    /* hprev: h_{t-1} of every row (zero at t = 0): y shifted by one step within each sample */
    CUDA_CHECK(cudaMemset2DAsync(hprev, (size_t)T * H * sizeof(float), 0, (size_t)H * sizeof(float),
                                 (size_t)B, ctx->stream));
    if (T > 1)
        CUDA_CHECK(cudaMemcpy2DAsync(
            hprev + H, (size_t)T * H * sizeof(float), y, (size_t)T * H * sizeof(float),
            (size_t)(T - 1) * H * sizeof(float), (size_t)B, cudaMemcpyDeviceToDevice, ctx->stream));
    /* dW[:, :D] = dgates^T x, dW[:, D:] = dgates^T hprev (overwritten), db = column sums */
    if (D > 0) rm_gemm(ctx, 1, 0, G, D, (int)bt, dgates, G, x, D, 0.0f, dw, ldw);
    rm_gemm(ctx, 1, 0, G, H, (int)bt, dgates, G, hprev, H, 0.0f, dw + D, ldw);
    CUDA_CHECK(dtk_bias_grad(ctx->stream, (int)bt, G, dgates, db));
    if (dx && D > 0) rm_gemm(ctx, 0, 0, (int)bt, D, G, dgates, G, w, ldw, 0.0f, dx, D);
}
