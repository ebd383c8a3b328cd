/* cuda_plan.c - GPU-free arithmetic of the CUDA backend (see cuda_plan.h). */
#include "cuda_plan.h"

#include <math.h>

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

int nhwc_grid(long long rows, int c, int vec, int threads, int sms, int blocks_per_sm, int cap,
              NhwcGrid *g) {
    if (rows <= 0 || c <= 0 || threads <= 0 || rows >= (1LL << 30) || c > cap) return 0;
    g->vec = vec >= 8 && c % 8 == 0 ? 8 : vec >= 4 && c % 4 == 0 ? 4 : 1;
    g->units = c / g->vec;
    const int tile = 64 / g->vec; /* 64 channels: one 128-byte line of a row */
    g->width = g->units < tile ? g->units : tile;
    if (g->width > threads) g->width = threads;
    g->lanes = threads / g->width;
    const long long tiles = (g->units + g->width - 1) / g->width;
    if (tiles > 65535) return 0;
    const long long target = (long long)(sms > 0 ? sms : 1) * (blocks_per_sm > 0 ? blocks_per_sm : 1);
    long long splits = (target + tiles - 1) / tiles;
    const long long by_work = (rows + 4LL * g->lanes - 1) / (4LL * g->lanes);
    if (splits > by_work) splits = by_work;
    if (splits > cap / c) splits = cap / c;
    if (splits < 1) splits = 1;
    g->rows = (int)rows, g->c = c, g->tiles = (int)tiles;
    g->chunk = (int)((rows + splits - 1) / splits);
    g->splits = (int)((rows + g->chunk - 1) / g->chunk); /* no block left without rows */
    return 1;
}

/* cuDNN 9's legacy algorithm numbers (cudnn_ops.h), per direction. Whether a result is
 * deterministic is cuDNN's own word, the determinism field of each of its results (AlgoPerf), not
 * this table's. */
static const struct {
    const char *name;
    AlgoFamily family;
} ALGOS[CONV_DIRS][8] = {
    [CONV_FWD] = {{"IMPLICIT_GEMM", ALGO_DIRECT_SUM},
                  {"IMPLICIT_PRECOMP_GEMM", ALGO_DIRECT_SUM},
                  {"GEMM", ALGO_DIRECT_SUM},
                  {"DIRECT", ALGO_DIRECT_SUM},
                  {"FFT", ALGO_TRANSFORM},
                  {"FFT_TILING", ALGO_TRANSFORM},
                  {"WINOGRAD", ALGO_TRANSFORM},
                  {"WINOGRAD_NONFUSED", ALGO_TRANSFORM}},
    [CONV_BWD_DATA] = {{"ALGO_0", ALGO_DIRECT_SUM},
                       {"ALGO_1", ALGO_DIRECT_SUM},
                       {"FFT", ALGO_TRANSFORM},
                       {"FFT_TILING", ALGO_TRANSFORM},
                       {"WINOGRAD", ALGO_TRANSFORM},
                       {"WINOGRAD_NONFUSED", ALGO_TRANSFORM}},
    [CONV_BWD_FILTER] = {{"ALGO_0", ALGO_DIRECT_SUM},
                         {"ALGO_1", ALGO_DIRECT_SUM},
                         {"FFT", ALGO_TRANSFORM},
                         {"ALGO_3", ALGO_DIRECT_SUM},
                         {"WINOGRAD", ALGO_TRANSFORM},
                         {"WINOGRAD_NONFUSED", ALGO_TRANSFORM},
                         {"FFT_TILING", ALGO_TRANSFORM}},
};

static int known(ConvDir dir, int algo) {
    return (unsigned)dir < CONV_DIRS && algo >= 0 && algo < 8 && ALGOS[dir][algo].name;
}

AlgoFamily conv_algo_family(ConvDir dir, int algo) {
    return known(dir, algo) ? ALGOS[dir][algo].family : ALGO_UNKNOWN;
}

const char *conv_algo_name(ConvDir dir, int algo) {
    return known(dir, algo) ? ALGOS[dir][algo].name : "unknown";
}

const char *conv_dir_name(ConvDir dir) {
    return dir == CONV_FWD ? "fwd" : dir == CONV_BWD_DATA ? "bwd_data" : "bwd_filter";
}

int conv_algo_strict_fp32(ConvDir dir, int algo, int fma_math) {
    return fma_math && conv_algo_family(dir, algo) == ALGO_DIRECT_SUM;
}

int conv_algo_16bit(ConvDir dir, int algo, int deterministic) {
    return conv_algo_family(dir, algo) == ALGO_DIRECT_SUM && deterministic;
}

int conv_algo_admitted(ConvRule rule, ConvDir dir, const AlgoPerf *a) {
    return rule == CONV_RULE_STRICT_FP32 ? conv_algo_strict_fp32(dir, a->algo, a->fma_math)
           : rule == CONV_RULE_16BIT     ? conv_algo_16bit(dir, a->algo, a->deterministic)
                                         : 1;
}

int conv_fallback_algo(ConvDir dir, ConvRule rule) {
    /* forward IMPLICIT_GEMM is a deterministic direct sum; backward ALGO_0 adds atomically */
    return rule == CONV_RULE_16BIT && dir != CONV_FWD ? -1 : 0;
}

double conv_fp32_bound(double k, double sum_abs) {
    const double ku = k * 0x1p-24;
    return ku < 1.0 ? ku / (1.0 - ku) * sum_abs : INFINITY;
}

double prec16_bound(double u, double u_out, double k, double sum_abs, double out_abs) {
    const double kt = k * 0x1p-23, kr = k * 0x1p-24; /* tensor cores' sums; the reference's */
    if (kt >= 1.0) return INFINITY;
    const double e =
        (2.0 * u + u * u) * sum_abs + kt / (1.0 - kt) * (1.0 + u) * (1.0 + u) * sum_abs;
    const double ref = kr / (1.0 - kr) * sum_abs;
    return (1.0 + u_out) * e + u_out * (out_abs + ref) + ref;
}

int pick_algo(ConvDir dir, const AlgoPerf *perf, int count, size_t limit, ConvRule rule) {
    for (int i = 0; i < count; i++)
        if (perf[i].ok && perf[i].memory <= limit &&
            conv_algo_admitted(rule, dir, &perf[i]))
            return i;
    return -1;
}
