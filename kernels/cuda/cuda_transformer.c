/* cuda_transformer.c - the CUDA backend's transformer layers (backend.h's "transformer" group):
 * token and position embedding, layer norm, GELU (our kernels, cuda_transformer_kernels.cu, their
 * per-thread arithmetic in cuda_transformer.h) and causal multi-head self-attention: its products
 * are cuBLAS strided batched GEMMs on strided views of qkv (cuda_transformer_plan.c's att_gemm),
 * its causal softmax and the softmax's backward our kernels.
 *
 * Attention: the forward writes S = scale Q K^T for every head of a sample in one batched GEMM per
 * sample, straight into the reserve (P [batch, heads, T, T], fp32), then the causal softmax in
 * place over all the rows (zeros above the diagonal), then y = P V per sample. The backward, per
 * sample: dP = dY V^T into the workspace (one sample's [heads, T, T]), dS = P (dP - rowsum(dP P))
 * scale in place, then dq = dS K, dk = dS^T Q, dv = P^T dY written into dqkv with beta 0. The
 * products run over the whole T x T (the masked half is zeros): twice the causal products' work,
 * for cuBLAS's full-size GEMMs.
 * Precision: fp32 and tf32 through cublasSgemmStridedBatched under the handle's math mode (fp32:
 * CUBLAS_DEFAULT_MATH, no TF32; tf32: CUBLAS_TF32_TENSOR_OP_MATH), as the fully connected layer's
 * cublasSgemm; bf16 / fp16 through cublasGemmStridedBatchedEx on the fp32 tensors with
 * CUBLAS_COMPUTE_32F_FAST_16BF / _16F (inputs converted to 16 bits inside cuBLAS, fp32
 * accumulation and output: no 16-bit copies to make). Everything else is fp32.
 *
 * Nothing here allocates or waits: layer norm's partial sums go to the batch-norm scratch made at
 * init (ctx->bn_partials, used only within a call, in stream order), the attention's scratch is
 * the caller's workspace. No atomics: every run gives the same bits. */
#include <config.h>
#include "cuda_check.h"   /* defines: CUDA_CHECK, CUBLAS_CHECK */
#include "cuda_ctx.h"     /* defines: struct BackendCtx, BN_PARTIALS_CAP */
#include "cuda_kernels.h" /* defines: dtk_* launchers */
#include "cuda_ops.h"
#include "cuda_precision.h"   /* defines: cuda_prec_16bit */
#include "cuda_transformer.h" /* defines: att_gemm, ln_col_grid */

#include <library_types.h>

/* The kernels read and write fp32 activations; the NHWC 16-bit format (--act-layout nhwc with
 * bf16/fp16) is for convolutional networks, and a model with these layers never asks for it. */
static void fp32_activations(const BackendCtx *ctx, const char *op) {
    if (ctx->act16)
        check_fail(__FILE__, __LINE__, op,
                   "the transformer kernels take fp32 activations, not the NHWC 16-bit format");
}

/* ---- token and position embedding ----------------------------------------------------------- */

void cuda_tokpos_forward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *wte,
                         const float *wpe, float *y) {
    fp32_activations(ctx, "tokpos_forward");
    CUDA_CHECK(dtk_tokpos_forward(ctx->stream, s, ids, wte, wpe, y));
}

/* dwte: each block owns 64 rows of it, zeroes them and scans every id for its own (no atomics, no
 * sort, no scratch); the cost beyond writing dwte is each block reading all batch*seq ids (GPT-2
 * at 8 x 1024: 786 blocks x 32 KiB, from L2) and one dy row read per position. */
void cuda_tokpos_backward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *dy,
                          float *dwte, float *dwpe) {
    fp32_activations(ctx, "tokpos_backward");
    CUDA_CHECK(dtk_tokpos_backward(ctx->stream, s, ids, dy, dwte, dwpe));
}

/* ---- layer norm ------------------------------------------------------------------------------ */

void cuda_layernorm_forward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                            const float *gamma, const float *beta, float *y, float *mean,
                            float *rstd) {
    fp32_activations(ctx, "layernorm_forward");
    CUDA_CHECK(dtk_layernorm_forward(ctx->stream, s, x, gamma, beta, y, mean, rstd));
}

void cuda_layernorm_backward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                             const float *gamma, const float *mean, const float *rstd,
                             const float *dy, float *dx, float *dgamma, float *dbeta) {
    fp32_activations(ctx, "layernorm_backward");
    LnColGrid g = {0, 0, 0};
    if (s->rows > 0 && s->dim > 0 && !ln_col_grid(s->rows, s->dim, ctx->sms, BN_PARTIALS_CAP, &g))
        check_fail(__FILE__, __LINE__, "ln_col_grid",
                   "layer norm over more features than the partial-sum scratch holds (65536)");
    CUDA_CHECK(dtk_layernorm_backward(ctx->stream, s, &g, ctx->bn_partials, x, gamma, mean, rstd,
                                      dy, dx, dgamma, dbeta));
}

/* ---- GELU ------------------------------------------------------------------------------------ */

void cuda_gelu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    fp32_activations(ctx, "gelu_forward");
    CUDA_CHECK(dtk_gelu_forward(ctx->stream, n, x, y));
}

void cuda_gelu_backward(BackendCtx *ctx, size_t n, const float *x, const float *dy, float *dx) {
    fp32_activations(ctx, "gelu_backward");
    CUDA_CHECK(dtk_gelu_backward(ctx->stream, n, x, dy, dx));
}

/* ---- attention ------------------------------------------------------------------------------- */

size_t cuda_attention_reserve_bytes(BackendCtx *ctx, const AttentionShape *s) {
    (void)ctx;
    return att_reserve_floats(s) * sizeof(float);
}

size_t cuda_attention_workspace_bytes(BackendCtx *ctx, const AttentionShape *s) {
    (void)ctx;
    return att_work_floats(s) * sizeof(float);
}

static int att_empty(const AttentionShape *s) {
    return s->batch <= 0 || s->seq <= 0 || s->heads <= 0 || s->head_dim <= 0;
}

/* Product p of sample b (att_gemm) on the buffers base[AttBuf], in --precision's arithmetic. */
static void att_run(BackendCtx *ctx, const AttentionShape *s, AttProduct p, int b,
                    float *const base[ATT_BUFS]) {
    static const float zero = 0.0f;
    const AttGemm a = att_gemm(s, p, b);
    const ColGemm g = a.g;
    const float *A = base[a.a.buf] + a.a.off, *B = base[a.b.buf] + a.b.off;
    float *C = base[a.c.buf] + a.c.off;
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!cuda_prec_16bit(ctx)) {
        CUBLAS_CHECK(cublasSgemmStridedBatched(ctx->cublas, ta, tb, g.m, g.n, g.k, &a.alpha, A,
                                               g.lda, a.a.stride, B, g.ldb, a.b.stride, &zero, C,
                                               g.ldc, a.c.stride, a.count));
        return;
    }
    const cublasComputeType_t ct = ctx->precision == PRECISION_FP16 ? CUBLAS_COMPUTE_32F_FAST_16F
                                                                    : CUBLAS_COMPUTE_32F_FAST_16BF;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx->cublas, ta, tb, g.m, g.n, g.k, &a.alpha, A,
                                            CUDA_R_32F, g.lda, a.a.stride, B, CUDA_R_32F, g.ldb,
                                            a.b.stride, &zero, C, CUDA_R_32F, g.ldc, a.c.stride,
                                            a.count, ct, CUBLAS_GEMM_DEFAULT));
}

void cuda_attention_forward(BackendCtx *ctx, const AttentionShape *s, const float *qkv, float *y,
                            void *reserve, void *work) {
    (void)work;
    fp32_activations(ctx, "attention_forward");
    if (att_empty(s)) return;
    float *const base[ATT_BUFS] = {[ATT_QKV] = (float *)qkv, [ATT_P] = reserve, [ATT_OUT] = y};
    for (int b = 0; b < s->batch; b++)
        att_run(ctx, s, ATT_S, b, base);
    CUDA_CHECK(dtk_att_softmax(ctx->stream, (size_t)s->batch * s->heads * s->seq, s->seq,
                               (float *)reserve));
    for (int b = 0; b < s->batch; b++)
        att_run(ctx, s, ATT_Y, b, base);
}

void cuda_attention_backward(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                             const float *y, const void *reserve, const float *dy, float *dqkv,
                             void *work) {
    (void)y;
    fp32_activations(ctx, "attention_backward");
    if (att_empty(s)) return;
    float *const base[ATT_BUFS] = {[ATT_QKV] = (float *)qkv,
                                   [ATT_P] = (float *)reserve,
                                   [ATT_OUT] = (float *)dy,
                                   [ATT_WORK] = work,
                                   [ATT_DQKV] = dqkv};
    const size_t rows = (size_t)s->heads * s->seq, per_sample = att_work_floats(s);
    for (int b = 0; b < s->batch; b++) {
        att_run(ctx, s, ATT_DP, b, base);
        CUDA_CHECK(dtk_att_softmax_back(ctx->stream, rows, s->seq,
                                        (const float *)reserve + (size_t)b * per_sample,
                                        (float *)work, att_scale(s)));
        att_run(ctx, s, ATT_DQ, b, base);
        att_run(ctx, s, ATT_DK, b, base);
        att_run(ctx, s, ATT_DV, b, base);
    }
}
