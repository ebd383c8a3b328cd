/* test_cuda_plan.c - the CUDA backend's GPU-free arithmetic (kernels/cuda_plan.c), run on the CPU.
 *
 * 1. The three column-major GEMMs of a fully connected layer: each ColGemm is executed with
 *    cblas_sgemm(CblasColMajor, ...), which takes the same (trans, m, n, k, lda, ldb, ldc) as
 *    cublasSgemm, on dtbench's row-major buffers, and compared with the naive reference
 *    (tests/ref_kernels.c); tolerance 1e-4 * max(1, |ref|), as for the CPU backend. A wrong
 *    transpose, dimension or leading dimension fails here instead of on a GPU.
 * 2. The choice among cuDNN's ranked algorithms under a workspace limit.
 * Exit status 0 when everything passes, 1 otherwise. Runs in every build: no CUDA needed. */
#include "backend.h"
#include "cuda_plan.h"
#include "ref_kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int failures;
static uint64_t rng_state = 0x853c49e6748fea9bull;

static float uniform(void) {
    uint64_t x = rng_state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    rng_state = x;
    return (float)((x >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *filled(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = uniform();
    return p;
}

/* C = op(A) op(B) as cuBLAS would compute it */
static void run(ColGemm g, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a, g.lda, b, g.ldb,
                0.0f, c, g.ldc);
}

static void compare(const char *what, const FcShape *s, const float *got, const float *ref,
                    size_t n) {
    double worst = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= 1e-4 * fmax(1.0, fabs(ref[i])))) ok = 0;
        if (d > worst || isnan(d)) worst = d;
    }
    printf("%s n=%d in=%d out=%d: max abs diff %.3g (tolerance 1e-4*max(1,|ref|)) %s\n", what,
           s->batch, s->in, s->out, worst, ok ? "ok" : "FAIL");
    failures += !ok;
}

static void test_fc(int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    float *x = filled(nx), *w = filled(nw), *dy = filled(ny);
    float *y = filled(ny), *dw = filled(nw), *dx = filled(nx); /* overwritten (beta = 0) */
    float *ry = malloc(ny * sizeof(float)), *rdw = malloc(nw * sizeof(float));
    float *rdx = malloc(nx * sizeof(float)), *rdb = malloc((size_t)out * sizeof(float));

    ref_fc_forward(&s, x, w, NULL, ry);
    ref_fc_backward(&s, x, w, dy, rdx, rdw, rdb);
    run(fc_forward_gemm(&s), w, x, y);   /* A = W, B = x, C = y */
    run(fc_dweight_gemm(&s), x, dy, dw); /* A = x, B = dy, C = dW */
    run(fc_dinput_gemm(&s), w, dy, dx);  /* A = W, B = dy, C = dx */
    compare("fc_forward_gemm", &s, y, ry, ny);
    compare("fc_dweight_gemm", &s, dw, rdw, nw);
    compare("fc_dinput_gemm", &s, dx, rdx, nx);
    free(x), free(w), free(dy), free(y), free(dw), free(dx), free(ry), free(rdw), free(rdx);
    free(rdb);
}

static void expect_pick(const char *what, const AlgoPerf *p, int count, size_t limit, int want) {
    int got = pick_algo(p, count, limit);
    printf("pick_algo %s: %d (expected %d) %s\n", what, got, want, got == want ? "ok" : "FAIL");
    failures += got != want;
}

int main(void) {
    test_fc(3, 7, 5);     /* odd sizes: every leading dimension differs */
    test_fc(1, 33, 17);   /* batch 1 */
    test_fc(16, 5, 64);   /* more outputs than inputs */
    test_fc(64, 500, 10); /* LeNet's last layer at batch 64 */
    test_fc(4, 800, 500); /* LeNet's ip1 */

    const AlgoPerf ranked[] = {
        {.algo = 7, .ok = 1, .strict_fp32 = 0, .memory = 0},       /* TF32 */
        {.algo = 6, .ok = 0, .strict_fp32 = 1, .memory = 0},       /* not supported */
        {.algo = 5, .ok = 1, .strict_fp32 = 1, .memory = 1 << 20}, /* needs 1 MiB */
        {.algo = 1, .ok = 1, .strict_fp32 = 1, .memory = 0},
    };
    expect_pick("strict fp32 that fits", ranked, 4, 1 << 20, 2);
    expect_pick("smaller limit skips the 1 MiB one", ranked, 4, 1000, 3);
    /* strict fp32 means never TF32: with no strict-fp32 algorithm the caller falls back to
     * IMPLICIT_GEMM / ALGO_0 under CUDNN_FMA_MATH, never to a TF32-capable one */
    expect_pick("never a non-strict algorithm (TF32 may be used)", ranked, 2, 0, -1);
    expect_pick("nothing usable", ranked + 1, 1, 1 << 30, -1);
    expect_pick("empty list", ranked, 0, 1 << 30, -1);

    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
