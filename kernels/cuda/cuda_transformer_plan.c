/* cuda_transformer_plan.c - the plain-C plans of the CUDA backend's transformer kernels
 * (declared in cuda_transformer.h), kept apart from CUDA so that tests/test_device_transformer.c
 * checks them on the CPU: the grid of layer norm's parameter gradients, and the attention's
 * strided batched GEMMs, which the test runs through cblas_sgemm(CblasColMajor), the arguments
 * cuBLAS takes, against a float64 attention. */
#include "cuda_transformer.h"

#include <math.h>

int ln_col_grid(int rows, int dim, int sms, long long cap, LnColGrid *g) {
    if (rows <= 0 || dim <= 0 || (long long)dim > cap) return 0;
    g->colblocks = (dim + LN_COLS - 1) / LN_COLS;
    const long long target = 4LL * (sms > 0 ? sms : 1); /* blocks that fill the GPU */
    long long splits = (target + g->colblocks - 1) / g->colblocks;
    const long long by_rows = (rows + 4LL * LN_LANES - 1) / (4LL * LN_LANES); /* >= 4 rows a lane */
    if (splits > by_rows) splits = by_rows;
    if (splits > cap / dim) splits = cap / dim;
    if (splits > 65535) splits = 65535;
    if (splits < 1) splits = 1;
    g->chunk = (int)((rows + splits - 1) / splits);
    g->splits = (rows + g->chunk - 1) / g->chunk; /* no split without rows */
    return 1;
}

size_t att_reserve_floats(const AttentionShape *s) {
    return (size_t)s->batch * s->heads * s->seq * s->seq;
}

size_t att_work_floats(const AttentionShape *s) {
    return (size_t)s->heads * s->seq * s->seq;
}

float att_scale(const AttentionShape *s) {
    return 1.0f / sqrtf((float)s->head_dim);
}

static AttOperand operand(AttBuf buf, size_t off, long long stride) {
    return (AttOperand){.buf = buf, .off = off, .stride = stride};
}

/* Row-major C[m,n] = alpha op(A) op(B) as one column-major call: rowmajor_gemm swaps the operands,
 * so the call's first operand (.a) is the row-major B and its second (.b) the row-major A. */
static AttGemm product(int ta, int tb, int m, int n, int k, float alpha, AttOperand A, int lda,
                       AttOperand B, int ldb, AttOperand C, int ldc, int count) {
    return (AttGemm){.g = rowmajor_gemm(ta, tb, m, n, k, lda, ldb, ldc),
                     .alpha = alpha,
                     .a = B,
                     .b = A,
                     .c = C,
                     .count = count};
}

AttGemm att_gemm(const AttentionShape *s, AttProduct p, int sample) {
    const int T = s->seq, D = s->head_dim, H = s->heads, C = H * D, L = 3 * C;
    const size_t b = (size_t)sample, TT = (size_t)T * T;
    const AttOperand q = operand(ATT_QKV, b * T * L, D), k = operand(ATT_QKV, b * T * L + C, D),
                     v = operand(ATT_QKV, b * T * L + 2 * (size_t)C, D);
    const AttOperand P = operand(ATT_P, b * H * TT, (long long)TT);
    const AttOperand out = operand(ATT_OUT, b * T * C, D); /* y, dy */
    const AttOperand dS = operand(ATT_WORK, 0, (long long)TT);
    const AttOperand dq = operand(ATT_DQKV, b * T * L, D), dk = operand(ATT_DQKV, b * T * L + C, D),
                     dv = operand(ATT_DQKV, b * T * L + 2 * (size_t)C, D);
    switch (p) {
    case ATT_S: /* P = scale Q K^T */
        return product(0, 1, T, T, D, att_scale(s), q, L, k, L, P, T, H);
    case ATT_Y: /* y = P V */
        return product(0, 0, T, D, T, 1.0f, P, T, v, L, out, C, H);
    case ATT_DP: /* dP = dY V^T */
        return product(0, 1, T, T, D, 1.0f, out, C, v, L, dS, T, H);
    case ATT_DQ: /* dq = dS K */
        return product(0, 0, T, D, T, 1.0f, dS, T, k, L, dq, L, H);
    case ATT_DK: /* dk = dS^T Q */
        return product(1, 0, T, D, T, 1.0f, dS, T, q, L, dk, L, H);
    case ATT_DV: /* dv = P^T dY */
    default:
        return product(1, 0, T, D, T, 1.0f, P, T, out, C, dv, L, H);
    }
}
