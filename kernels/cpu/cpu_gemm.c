/* cpu_gemm.c - the CPU backend's fully connected layer: one single-precision GEMM (OpenBLAS) each
 * way, the bias added or summed in vectorised loops. Semantics: backend.h. */
#include "cpu_bf16.h" /* defines: CPU_BF16_WEIGHT_B */
#include "cpu_kernels.h"
#include "cpu_vec.h"

#include <string.h>

/* ---- fully connected ----------------------------------------------------------------------- */

/* y[n,out] = x[n,in] * W[out,in]^T + b[out] */
void cpu_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                    const float *b, float *y) {
    (void)ctx;
    const int n = s->batch, in = s->in, out = s->out;
    if (n <= 0 || out <= 0) return;
    if (in <= 0) { /* empty product: y = b */
        for (int i = 0; i < n; i++) {
            if (b)
                memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
            else
                memset(y + (size_t)i * out, 0, (size_t)out * sizeof(float));
        }
        return;
    }
    float beta = 0.0f;
    if (b) { /* broadcast the bias into y, then accumulate the product onto it */
        for (int i = 0; i < n; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 1, n, out, in, 1.0f, x, in, w, in, beta, y, out);
}

/* dy[n,out] -> dW[out,in] = dy^T x, db[out] = sum_n dy, dx[n,in] = dy W (skipped if dx == NULL) */
void cpu_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, float *db) {
    (void)ctx;
    const int n = s->batch, in = s->in, out = s->out;
    if (out <= 0) {
        if (dx && n > 0 && in > 0) memset(dx, 0, (size_t)n * in * sizeof(float));
        return;
    }
    if (n <= 0) { /* no samples: zero gradients */
        if (in > 0) memset(dw, 0, (size_t)out * in * sizeof(float));
        if (db) memset(db, 0, (size_t)out * sizeof(float));
        return;
    }
    if (in > 0)
        cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 1, 0, out, in, n, 1.0f, dy, out, x, in, 0.0f, dw, in);

    /* db[out]: column sums of dy[n,out], row by row so the inner loop is contiguous */
    if (db) {
        memcpy(db, dy, (size_t)out * sizeof(float));
        for (int i = 1; i < n; i++)
            cpu_vaxpy(db, dy + (size_t)i * out, (size_t)out, 1.0f);
    }

    if (dx && in > 0)
        cpu_gemm(ctx, CPU_BF16_WEIGHT_B, 0, 0, n, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}
