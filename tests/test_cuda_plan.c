/* test_cuda_plan.c - the CUDA backend's GPU-free arithmetic (kernels/cuda_plan.c), run on the CPU.
 *
 * 1. The three column-major GEMMs of a fully connected layer: each ColGemm is executed with
 *    cblas_sgemm(CblasColMajor, ...), which takes the same (trans, m, n, k, lda, ldb, ldc) as
 *    cublasSgemm, on dtbench's row-major buffers, and compared with the naive reference
 *    (tests/ref_kernels.c); tolerance 1e-4 * max(1, |ref|), as for the CPU backend. A wrong
 *    transpose, dimension or leading dimension fails here instead of on a GPU.
 * 2. The choice among cuDNN's ranked algorithms under a workspace limit, and strict fp32's rule
 *    (cuda_plan.h): no FFT or Winograd algorithm in any direction, the direct sums under FMA
 *    math only; the error bound the GPU tests hold admitted algorithms to.
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
    FcShape s = {n, in, out};
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

static void expect_pick(const char *what, ConvDir dir, const AlgoPerf *p, int count, size_t limit,
                        int strict, int want) {
    int got = pick_algo(dir, p, count, limit, strict);
    printf("pick_algo %s %s: %d (expected %d) %s\n", conv_dir_name(dir), what, got, want,
           got == want ? "ok" : "FAIL");
    failures += got != want;
}

/* The workspace limit and the ranking, as before the rule. */
static void test_pick_basics(void) {
    const AlgoPerf ranked[] = {
        {.algo = 1, .ok = 1, .fma_math = 0, .memory = 0},       /* TF32 possible */
        {.algo = 2, .ok = 0, .fma_math = 1, .memory = 0},       /* not supported */
        {.algo = 1, .ok = 1, .fma_math = 1, .memory = 1 << 20}, /* needs 1 MiB */
        {.algo = 0, .ok = 1, .fma_math = 1, .memory = 0},
    };
    expect_pick("strict fp32 that fits", CONV_FWD, ranked, 4, 1 << 20, 1, 2);
    expect_pick("smaller limit skips the 1 MiB one", CONV_FWD, ranked, 4, 1000, 1, 3);
    /* strict fp32 means never TF32: with no admitted algorithm the caller falls back to
     * IMPLICIT_GEMM / ALGO_0 under CUDNN_FMA_MATH, never to a TF32-capable one */
    expect_pick("never a non-FMA algorithm (TF32 may be used)", CONV_FWD, ranked, 2, 0, 1, -1);
    expect_pick("nothing usable", CONV_FWD, ranked + 1, 1, 1 << 30, 1, -1);
    expect_pick("empty list", CONV_FWD, ranked, 0, 1 << 30, 1, -1);
    expect_pick("tf32/bf16/fp16 take the best-ranked one", CONV_FWD, ranked, 4, 0, 0, 0);
}

/* The rule of strict fp32: no FFT or Winograd algorithm in any direction, whatever its rank and
 * math type; every direct-sum algorithm under FMA math. The rankings are of the kind cuDNN 9.19's
 * heuristics returned on an H100 (LeNet conv2, ResNet-50's 3x3 layers: FFT, FFT_TILING and
 * WINOGRAD_NONFUSED first). */
static const int TRANSFORMS[CONV_DIRS][4] = {
    [CONV_FWD] = {4, 5, 6, 7}, [CONV_BWD_DATA] = {2, 3, 4, 5}, [CONV_BWD_FILTER] = {2, 4, 5, 6}};
static const int DIRECT[CONV_DIRS][4] = {
    [CONV_FWD] = {0, 1, 2, 3}, [CONV_BWD_DATA] = {0, 1, -1, -1}, [CONV_BWD_FILTER] = {0, 1, 3, -1}};

static void test_rule_names(ConvDir dir) {
    for (int i = 0; i < 4; i++) {
        const int t = TRANSFORMS[dir][i], a = DIRECT[dir][i];
        int ok = !conv_algo_strict_fp32(dir, t, 1) && conv_algo_family(dir, t) == ALGO_TRANSFORM;
        if (a >= 0)
            ok = ok && conv_algo_strict_fp32(dir, a, 1) && !conv_algo_strict_fp32(dir, a, 0);
        printf("rule %s: %s refused%s%s %s\n", conv_dir_name(dir), conv_algo_name(dir, t),
               a >= 0 ? "; admitted under FMA math only: " : "",
               a >= 0 ? conv_algo_name(dir, a) : "", ok ? "ok" : "FAIL");
        failures += !ok;
    }
    int ok = !conv_algo_strict_fp32(dir, 8, 1) && !conv_algo_strict_fp32(dir, -1, 1) &&
             conv_algo_family(dir, 8) == ALGO_UNKNOWN;
    printf("rule %s: unknown algorithm numbers refused %s\n", conv_dir_name(dir),
           ok ? "ok" : "FAIL");
    failures += !ok;
}

static void test_rule(void) {
    for (int d = 0; d < CONV_DIRS; d++) {
        const ConvDir dir = (ConvDir)d;
        AlgoPerf ranked[6];
        for (int i = 0; i < 4; i++) /* every transform algorithm ranked first, FMA, no workspace */
            ranked[i] = (AlgoPerf){.algo = TRANSFORMS[d][i], .ok = 1, .fma_math = 1, .memory = 0};
        ranked[4] = (AlgoPerf){.algo = DIRECT[d][1], .ok = 1, .fma_math = 1, .memory = 1 << 20};
        ranked[5] = (AlgoPerf){.algo = 0, .ok = 1, .fma_math = 1, .memory = 0};
        expect_pick("strict: the first direct sum after FFT/Winograd", dir, ranked, 6, 1 << 20, 1,
                    4);
        expect_pick("strict: without workspace, algorithm 0", dir, ranked, 6, 0, 1, 5);
        expect_pick("strict: only FFT/Winograd offered", dir, ranked, 4, 1 << 30, 1, -1);
        expect_pick("tf32/bf16/fp16 may take FFT/Winograd", dir, ranked, 6, 0, 0, 0);
        test_rule_names(dir);
    }
}

/* The bound: gamma(K) * sum|p| with gamma(K) = K u / (1 - K u), u = 2^-24; and it holds for plain
 * fp32 dot products summed in order, on products of mixed signs and sizes. */
static void test_bound(void) {
    const double u = 0x1p-24;
    int ok = fabs(conv_fp32_bound(4096, 1.0) - 4096 * u / (1 - 4096 * u)) < 1e-18 &&
             conv_fp32_bound(0, 5.0) == 0.0 && isinf(conv_fp32_bound(1 / u, 1.0));
    double worst = 0;
    for (int trial = 0; trial < 200; trial++) {
        const int k = 1 + trial * 37;
        float acc = 0.0f;
        double exact = 0, sum_abs = 0;
        for (int i = 0; i < k; i++) {
            float a = ldexpf(uniform(), (int)(10.0f * uniform())), b = uniform();
            acc += a * b;
            exact += (double)a * b, sum_abs += fabs((double)a * b);
        }
        double r = fabs(acc - exact) / conv_fp32_bound(k, sum_abs);
        if (r > worst) worst = r;
    }
    ok = ok && worst <= 1.0;
    printf("conv_fp32_bound: in-order fp32 sums reach %.3g of it %s\n", worst, ok ? "ok" : "FAIL");
    failures += !ok;
}

int main(void) {
    test_fc(3, 7, 5);     /* odd sizes: every leading dimension differs */
    test_fc(1, 33, 17);   /* batch 1 */
    test_fc(16, 5, 64);   /* more outputs than inputs */
    test_fc(64, 500, 10); /* LeNet's last layer at batch 64 */
    test_fc(4, 800, 500); /* LeNet's ip1 */

    test_pick_basics();
    test_rule();
    test_bound();

    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
