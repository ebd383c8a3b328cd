/* cuda_plan.c - GPU-free arithmetic of the CUDA backend (see cuda_plan.h). */
#include "cuda_plan.h"

/* Row-major X[r,c] seen by a column-major library is Xc = X^T, a c-by-r matrix, ld = c. */

/* y[n,out] = x[n,in] W[out,in]^T  <=>  y^T (out x n) = W (out x in) x^T (in x n)
 * W row-major is Wc = W^T (in x out, ld in): op(A) = Wc^T.  x^T is xc (in x n, ld in): op(B) = xc.
 * y^T is yc (out x n, ld out). */
ColGemm fc_forward_gemm(const FcShape *s) {
    return (ColGemm){.trans_a = 1,
                     .trans_b = 0,
                     .m = s->out,
                     .n = s->batch,
                     .k = s->in,
                     .lda = s->in,
                     .ldb = s->in,
                     .ldc = s->out};
}

/* dW[out,in] = dy[n,out]^T x[n,in]  <=>  dW^T (in x out) = x^T (in x n) dy (n x out)
 * dW^T is dWc (ld in); x^T is xc (in x n, ld in): op(A) = xc; dy is dyc^T with dyc = dy^T
 * (out x n, ld out): op(B) = dyc^T. */
ColGemm fc_dweight_gemm(const FcShape *s) {
    return (ColGemm){.trans_a = 0,
                     .trans_b = 1,
                     .m = s->in,
                     .n = s->out,
                     .k = s->batch,
                     .lda = s->in,
                     .ldb = s->out,
                     .ldc = s->in};
}

/* dx[n,in] = dy[n,out] W[out,in]  <=>  dx^T (in x n) = W^T (in x out) dy^T (out x n)
 * W^T is Wc (ld in): op(A) = Wc; dy^T is dyc (ld out): op(B) = dyc; dx^T is dxc (ld in). */
ColGemm fc_dinput_gemm(const FcShape *s) {
    return (ColGemm){.trans_a = 0,
                     .trans_b = 0,
                     .m = s->in,
                     .n = s->batch,
                     .k = s->out,
                     .lda = s->in,
                     .ldb = s->out,
                     .ldc = s->in};
}

ColGemm rowmajor_gemm(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, int ldc) {
    return (ColGemm){.trans_a = trans_b,
                     .trans_b = trans_a,
                     .m = n,
                     .n = m,
                     .k = k,
                     .lda = ldb,
                     .ldb = lda,
                     .ldc = ldc};
}

int bn_grid(const BnShape *s, int aligned16, int sms, int threads, int cap, BnGrid *g) {
    const long long total = (long long)s->batch * s->c * s->spatial;
    if (s->batch <= 0 || s->c <= 0 || s->spatial <= 0 || total >= (1LL << 31) || s->c > cap ||
        s->c > 65535 || threads <= 0)
        return 0;
    g->vec = aligned16 && s->spatial % 4 == 0 ? 4 : 1;
    g->sp = s->spatial / g->vec;
    g->units = s->batch * g->sp;
    const long long target = (long long)(sms > 0 ? sms : 1) * 8; /* blocks that fill the GPU */
    long long splits = (target + s->c - 1) / s->c;
    const long long by_work = ((long long)g->units + 4LL * threads - 1) / (4LL * threads);
    if (splits > by_work) splits = by_work;
    if (splits > cap / s->c) splits = cap / s->c;
    if (splits < 1) splits = 1;
    g->chunk = (int)((g->units + splits - 1) / splits);
    g->splits = (g->units + g->chunk - 1) / g->chunk; /* no block left without units */
    return 1;
}

int pick_algo(const AlgoPerf *perf, int count, size_t limit) {
    for (int i = 0; i < count; i++) /* strict fp32 only: CUDNN_DEFAULT_MATH allows TF32 */
        if (perf[i].ok && perf[i].memory <= limit && perf[i].strict_fp32) return i;
    return -1;
}
