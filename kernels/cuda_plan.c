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

int pick_algo(const AlgoPerf *perf, int count, size_t limit) {
    for (int i = 0; i < count; i++) /* strict fp32 only: CUDNN_DEFAULT_MATH allows TF32 */
        if (perf[i].ok && perf[i].memory <= limit && perf[i].strict_fp32) return i;
    return -1;
}
