/* test_cuda_plan.c - the CUDA backend's GPU-free arithmetic (kernels/cuda/cuda_plan.c), run on
 * the CPU.
 *
 * 1. The three column-major GEMMs of a fully connected layer: each ColGemm is executed with
 *    cblas_sgemm(CblasColMajor, ...), which takes the same (trans, m, n, k, lda, ldb, ldc) as
 *    cublasSgemm, on dtbench's row-major buffers, and compared with the naive reference
 *    (tests/ref_gemm.c); tolerance 1e-4 * max(1, |ref|), as for the CPU backend. A wrong
 *    transpose, dimension or leading dimension fails here instead of on a GPU.
 * 2. The choice among cuDNN's ranked algorithms under a workspace limit, strict fp32's rule
 *    (cuda_plan.h): no FFT or Winograd algorithm in any direction, the direct sums under FMA
 *    math only, and the 16-bit precisions' rule: no FFT, Winograd or atomic algorithm, any math
 *    type; the error bound the GPU tests hold strict fp32's algorithms to.
 * 3. That bound measured the way tests/test_cuda_algos.c measures every cuDNN algorithm
 *    (tests/conv_check.c), here on the CPU backend's convolutions, which must meet it, and on an
 *    fp32 Winograd F(4x4,3x3), which it must flag on graded inputs.
 * One counted check per line (tests/harness.h); exit status 0 when everything passes, 1 otherwise.
 * Runs in every build: no CUDA needed. */
#include "backend.h"
#include "conv_check.h" /* defines: conv_exact, conv_measure */
#include "cuda_plan.h"
#include "harness.h"
#include "ref_kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern const BackendOps cpu_backend;
static float uniform(void) {
    return rand_uniform(-1.0f, 1.0f);
}

static float *filled(size_t n) {
    return rand_floats(n, -1.0f, 1.0f);
}

/* C = op(A) op(B) as cuBLAS would compute it */
static void run(ColGemm g, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasColMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, a, g.lda, b, g.ldb,
                0.0f, c, g.ldc);
}

static void compare(const char *what, const FcShape *s, const float *got, const float *ref,
                    size_t n) {
    check_close(fmt_label("%s n=%d in=%d out=%d", what, s->batch, s->in, s->out), got, ref, n, 1e-4,
                1e-4);
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

static void expect_pick(const char *what, ConvDir dir, const AlgoPerf *p, int count, size_t limit,
                        ConvRule rule, int want) {
    int got = pick_algo(dir, p, count, limit, rule);
    printf("pick_algo %s %s: %d (expected %d) %s\n", conv_dir_name(dir), what, got, want,
           got == want ? "ok" : "FAIL");
    check_count(got == want);
}

/* The workspace limit and the ranking, as before the rule. */
static void test_pick_basics(void) {
    const AlgoPerf ranked[] = {
        {.algo = 1, .ok = 1, .fma_math = 0, .memory = 0, .deterministic = 1}, /* TF32 possible */
        {.algo = 2, .ok = 0, .fma_math = 1, .memory = 0, .deterministic = 1}, /* not supported */
        {.algo = 1, .ok = 1, .fma_math = 1, .memory = 1 << 20, .deterministic = 1}, /* 1 MiB */
        {.algo = 0, .ok = 1, .fma_math = 1, .memory = 0, .deterministic = 1},
    };
    expect_pick("strict fp32 that fits", CONV_FWD, ranked, 4, 1 << 20, CONV_RULE_STRICT_FP32, 2);
    expect_pick("smaller limit skips the 1 MiB one", CONV_FWD, ranked, 4, 1000,
                CONV_RULE_STRICT_FP32, 3);
    /* strict fp32 means never TF32: with no admitted algorithm the caller falls back to
     * IMPLICIT_GEMM / ALGO_0 under CUDNN_FMA_MATH, never to a TF32-capable one */
    expect_pick("never a non-FMA algorithm (TF32 may be used)", CONV_FWD, ranked, 2, 0,
                CONV_RULE_STRICT_FP32, -1);
    expect_pick("nothing usable", CONV_FWD, ranked + 1, 1, 1 << 30, CONV_RULE_STRICT_FP32, -1);
    expect_pick("empty list", CONV_FWD, ranked, 0, 1 << 30, CONV_RULE_STRICT_FP32, -1);
    expect_pick("tf32 takes the best-ranked one", CONV_FWD, ranked, 4, 0, CONV_RULE_ANY, 0);
    expect_pick("bf16/fp16 take the best-ranked one, any math type", CONV_FWD, ranked, 4, 0,
                CONV_RULE_16BIT, 0);
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
        check_count(ok);
    }
    int ok = !conv_algo_strict_fp32(dir, 8, 1) && !conv_algo_strict_fp32(dir, -1, 1) &&
             conv_algo_family(dir, 8) == ALGO_UNKNOWN;
    printf("rule %s: unknown algorithm numbers refused %s\n", conv_dir_name(dir),
           ok ? "ok" : "FAIL");
    check_count(ok);
}

static void test_rule(void) {
    for (int d = 0; d < CONV_DIRS; d++) {
        const ConvDir dir = (ConvDir)d;
        AlgoPerf ranked[6];
        for (int i = 0; i < 4; i++) /* every transform algorithm ranked first, FMA, no workspace */
            ranked[i] = (AlgoPerf){.algo = TRANSFORMS[d][i], .ok = 1, .fma_math = 1, .memory = 0};
        ranked[4] = (AlgoPerf){.algo = DIRECT[d][1], .ok = 1, .fma_math = 1, .memory = 1 << 20};
        ranked[5] = (AlgoPerf){.algo = 0, .ok = 1, .fma_math = 1, .memory = 0};
        expect_pick("strict: the first direct sum after FFT/Winograd", dir, ranked, 6, 1 << 20,
                    CONV_RULE_STRICT_FP32, 4);
        expect_pick("strict: without workspace, algorithm 0", dir, ranked, 6, 0,
                    CONV_RULE_STRICT_FP32, 5);
        expect_pick("strict: only FFT/Winograd offered", dir, ranked, 4, 1 << 30,
                    CONV_RULE_STRICT_FP32, -1);
        expect_pick("tf32 may take FFT/Winograd", dir, ranked, 6, 0, CONV_RULE_ANY, 0);
        test_rule_names(dir);
    }
}

/* The 16-bit rule: the direct sums whose cuDNN result says CUDNN_DETERMINISTIC, under any math
 * type; no FFT, Winograd, non-deterministic (cuDNN reports the atomic backward ALGO_0 and
 * backward-filter ALGO_3 so) or unknown algorithm. A ranking like the timed one of fp16's 1x28x28
 * 5x5 input gradient: a transform first, ALGO_0 next. */
static const int ATOMIC[CONV_DIRS][2] = {
    [CONV_FWD] = {-1, -1}, [CONV_BWD_DATA] = {0, -1}, [CONV_BWD_FILTER] = {0, 3}};
static const int DETERMINISTIC[CONV_DIRS][4] = {[CONV_FWD] = {0, 1, 2, 3},
                                                [CONV_BWD_DATA] = {1, -1, -1, -1},
                                                [CONV_BWD_FILTER] = {1, -1, -1, -1}};

/* Whether the 16-bit rule's word is cuDNN's determinism field: a deterministic direct sum that
 * cuDNN reports CUDNN_NON_DETERMINISTIC is refused; an atomic number it reports deterministic is
 * a direct sum and admitted (the field, not a table of numbers, decides). */
static int rule_16bit_by_field(ConvDir dir) {
    int ok = !conv_algo_16bit(dir, 8, 1) && !conv_algo_16bit(dir, -1, 1);
    for (int i = 0; i < 4; i++) {
        const int a = DETERMINISTIC[dir][i];
        ok = ok && !conv_algo_16bit(dir, TRANSFORMS[dir][i], 1) &&
             (a < 0 || (conv_algo_16bit(dir, a, 1) && !conv_algo_16bit(dir, a, 0)));
    }
    for (int i = 0; i < 2; i++)
        ok = ok && (ATOMIC[dir][i] < 0 || (!conv_algo_16bit(dir, ATOMIC[dir][i], 0) &&
                                          conv_algo_16bit(dir, ATOMIC[dir][i], 1)));
    return ok;
}

static void test_rule_16bit(void) {
    for (int d = 0; d < CONV_DIRS; d++) {
        const ConvDir dir = (ConvDir)d;
        const int ok = rule_16bit_by_field(dir);
        printf("16-bit rule %s: FFT, Winograd, unknown numbers and every result cuDNN reports "
               "non-deterministic refused, the deterministic direct sums admitted %s\n",
               conv_dir_name(dir), ok ? "ok" : "FAIL");
        check_count(ok);
        const int det = DETERMINISTIC[d][0];
        AlgoPerf ranked[5] = {
            {.algo = TRANSFORMS[d][1], .ok = 1, .fma_math = 0, .memory = 0, .deterministic = 1},
            {.algo = ATOMIC[d][0] >= 0 ? ATOMIC[d][0] : TRANSFORMS[d][3], .ok = 1, .memory = 0},
            {.algo = det, .ok = 1, .fma_math = 0, .memory = 0, .deterministic = 0},
            {.algo = det, .ok = 1, .fma_math = 0, .memory = 1 << 20, .deterministic = 1},
            {.algo = det, .ok = 1, .fma_math = 1, .memory = 0, .deterministic = 1},
        };
        expect_pick("bf16/fp16: the deterministic direct sum after a transform, an atomic one and "
                    "one cuDNN reports non-deterministic",
                    dir, ranked, 5, 1 << 20, CONV_RULE_16BIT, 3);
        expect_pick("bf16/fp16: under FMA math too when it fits", dir, ranked, 5, 0,
                    CONV_RULE_16BIT, 4);
        expect_pick("bf16/fp16: only a transform, an atomic and a non-deterministic one offered",
                    dir, ranked, 3, 1 << 30, CONV_RULE_16BIT, -1);
        expect_pick("tf32 takes the transform", dir, ranked, 5, 0, CONV_RULE_ANY, 0);
    }
}

/* With nothing admitted: algorithm 0 (no workspace) for fp32, tf32 and every forward direction;
 * for a 16-bit backward direction none (its ALGO_0 adds atomically): the run is refused, never
 * silently run on the non-deterministic algorithm. */
static void test_fallback(void) {
    for (int d = 0; d < CONV_DIRS; d++) {
        const ConvDir dir = (ConvDir)d;
        const int want16 = dir == CONV_FWD ? 0 : -1;
        const int ok = conv_fallback_algo(dir, CONV_RULE_STRICT_FP32) == 0 &&
                       conv_fallback_algo(dir, CONV_RULE_ANY) == 0 &&
                       conv_fallback_algo(dir, CONV_RULE_16BIT) == want16;
        printf("fallback %s: fp32 and tf32 algorithm 0, bf16/fp16 %s %s\n", conv_dir_name(dir),
               want16 < 0 ? "refused" : "algorithm 0", ok ? "ok" : "FAIL");
        check_count(ok);
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
    check_count(ok);
}

/* The measurement the GPU sweep makes of every cuDNN algorithm (tests/conv_check.c), made here of
 * the CPU backend's convolutions (im2col + GEMM, 1x1 GEMMs, Winograd F(2x2,3x3) for 3x3 layers):
 * direct sums, or a transform without leakage, so within the strict fp32 bound on uniform and on
 * graded inputs; and the exact result perturbed by 4 bounds fails it. */
static void test_cpu_conv(BackendCtx *ctx, int n, int c_in, int h, int w_in, int c_out, int k,
                          int stride, int pad) {
    ConvShape s = {n, c_in, h, w_in, c_out, k, stride, pad, 0, 0};
    s.h_out = (s.h_in + 2 * s.pad - s.k) / s.stride + 1;
    s.w_out = (s.w_in + 2 * s.pad - s.k) / s.stride + 1;
    const size_t nx = (size_t)s.batch * s.c_in * s.h_in * s.w_in;
    const size_t nw = (size_t)s.c_out * s.c_in * s.k * s.k, ny = conv_result_count(CONV_FWD, &s);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4);
    float *dx = malloc(nx * 4), *dw = malloc(nw * 4);
    void *work = malloc(cpu_backend.conv_workspace_bytes(ctx, &s) + 64);
    for (int graded = 0; graded < 2; graded++) {
        conv_inputs(&s, graded, 11, x, w, dy);
        cpu_backend.conv_forward(ctx, &s, x, w, NULL, y, work);
        cpu_backend.conv_backward(ctx, &s, x, w, dy, dx, dw, NULL, work);
        float *got[CONV_DIRS] = {y, dx, dw};
        for (int d = 0; d < CONV_DIRS; d++) {
            const size_t n = conv_result_count((ConvDir)d, &s);
            double *exact = malloc(n * 8), *bound = malloc(n * 8);
            conv_exact((ConvDir)d, &s, x, w, dy, exact, bound);
            ConvErr e = conv_measure(got[d], exact, bound, n);
            got[d][n / 2] = (float)(exact[n / 2] + 4 * bound[n / 2] + 1e-30);
            ConvErr bad = conv_measure(got[d], exact, bound, n);
            int ok = e.nonfinite == 0 && e.max_ratio <= 1.0 && bad.max_ratio > 1.0;
            printf("cpu conv %dx%dx%dx%d k%d s%d p%d -> %d %s %s: max err %.3g, %.3g of the bound "
                   "(a result 4 bounds off measures %.3g) %s\n",
                   s.batch, s.c_in, s.h_in, s.w_in, s.k, s.stride, s.pad, s.c_out,
                   graded ? "graded" : "uniform", conv_dir_name((ConvDir)d), e.max_err, e.max_ratio,
                   bad.max_ratio, ok ? "ok" : "FAIL");
            check_count(ok);
            free(exact), free(bound);
        }
    }
    free(x), free(w), free(dy), free(y), free(dx), free(dw), free(work);
}

static void test_cpu_convs(void) {
    BackendCtx *ctx = NULL;
    BackendConfig cfg = {.threads = 1};
    if (cpu_backend.init(&cfg, &ctx) != 0) {
        printf("cpu backend: init failed FAIL\n");
        check_count(0);
        return;
    }
    /*                        n  c_in h   w  c_out k stride pad */
    test_cpu_conv(ctx, 8, 20, 12, 12, 50, 5, 1, 0); /* LeNet conv2 */
    test_cpu_conv(ctx, 2, 16, 20, 20, 16, 3, 1, 1); /* Winograd F(2x2,3x3) */
    test_cpu_conv(ctx, 2, 3, 23, 23, 8, 7, 2, 3);   /* ResNet's stem, small */
    test_cpu_conv(ctx, 2, 32, 7, 7, 16, 1, 1, 0);   /* 1x1: a plain GEMM */
    test_cpu_conv(ctx, 2, 16, 9, 9, 32, 1, 2, 0);   /* strided 1x1 downsample */
    cpu_backend.finalize(ctx);
}

/* Winograd F(4x4,3x3) in fp32 (Lavin & Gray's matrices, the tile cuDNN notes as
 * CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4): the forward of a 3x3, stride-1, pad-1 convolution,
 * for the test below only. Each 4x4 output tile comes from a 6x6 input tile through
 * Y = A^T [sum over c_in of (G g G^T) .* (B^T d B)] A. */
static const float WB[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                               {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
static const float WG[6][3] = {{0.25f, 0, 0},
                               {-1 / 6.f, -1 / 6.f, -1 / 6.f},
                               {-1 / 6.f, 1 / 6.f, -1 / 6.f},
                               {1 / 24.f, 1 / 12.f, 1 / 6.f},
                               {1 / 24.f, -1 / 12.f, 1 / 6.f},
                               {0, 0, 1}};
static const float WA[4][6] = {
    {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};

/* out[r][c] = sum over i, j of L[r][i] in[i][j] R[c][j] (L: lr x li, in: li x lj, R: lc x lj) */
static void sandwich(int lr, int li, int lj, int lc, const float *L, const float *in,
                     const float *R, float *out) {
    float t[6][6];
    for (int r = 0; r < lr; r++)
        for (int j = 0; j < lj; j++) {
            float acc = 0;
            for (int i = 0; i < li; i++)
                acc += L[r * li + i] * in[i * lj + j];
            t[r][j] = acc;
        }
    for (int r = 0; r < lr; r++)
        for (int c = 0; c < lc; c++) {
            float acc = 0;
            for (int j = 0; j < lj; j++)
                acc += t[r][j] * R[c * lj + j];
            out[r * lc + c] = acc;
        }
}

static void wino43_forward(const ConvShape *s, const float *x, const float *w, float *y) {
    for (int n = 0; n < s->batch; n++)
        for (int co = 0; co < s->c_out; co++)
            for (int th = 0; th < s->h_out; th += 4)
                for (int tw = 0; tw < s->w_out; tw += 4) {
                    float m[36] = {0}, d[36], v[36], u[36], yt[16];
                    for (int ci = 0; ci < s->c_in; ci++) {
                        const float *xp = x + ((size_t)n * s->c_in + ci) * s->h_in * s->w_in;
                        for (int i = 0; i < 36; i++) {
                            const int ih = th - 1 + i / 6, iw = tw - 1 + i % 6;
                            d[i] = ih < 0 || iw < 0 || ih >= s->h_in || iw >= s->w_in
                                       ? 0.0f
                                       : xp[(size_t)ih * s->w_in + iw];
                        }
                        sandwich(6, 6, 6, 6, &WB[0][0], d, &WB[0][0], v);
                        sandwich(6, 3, 3, 6, &WG[0][0], w + ((size_t)co * s->c_in + ci) * 9,
                                 &WG[0][0], u);
                        for (int i = 0; i < 36; i++)
                            m[i] += u[i] * v[i];
                    }
                    sandwich(4, 6, 6, 4, &WA[0][0], m, &WA[0][0], yt);
                    for (int i = 0; i < 16; i++)
                        if (th + i / 4 < s->h_out && tw + i % 4 < s->w_out)
                            y[(((size_t)n * s->c_out + co) * s->h_out + th + i / 4) * s->w_out +
                              tw + i % 4] = yt[i];
                }
}

/* The measurement flags a transform that spreads rounding over its tile: F(4x4,3x3) meets the
 * bound on uniform inputs but not on graded ones, where a direct sum does (test_cpu_conv). */
static void test_transform_flagged(void) {
    ConvShape s = {2, 16, 20, 20, 8, 3, 1, 1, 20, 20};
    const size_t nx = (size_t)s.batch * s.c_in * s.h_in * s.w_in;
    const size_t nw = (size_t)s.c_out * s.c_in * 9, ny = conv_result_count(CONV_FWD, &s);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4);
    double *exact = malloc(ny * 8), *bound = malloc(ny * 8);
    double ratio[2];
    for (int graded = 0; graded < 2; graded++) {
        conv_inputs(&s, graded, 5, x, w, dy);
        wino43_forward(&s, x, w, y);
        conv_exact(CONV_FWD, &s, x, w, dy, exact, bound);
        ConvErr e = conv_measure(y, exact, bound, ny);
        ratio[graded] = e.nonfinite ? INFINITY : e.max_ratio;
    }
    int ok = ratio[0] <= 1.0 && ratio[1] > 10.0;
    printf("fp32 Winograd F(4x4,3x3) forward %dx%dx%dx%d -> %d: %.3g of the bound on uniform "
           "inputs, %.3g on graded ones (a transform's leak, flagged) %s\n",
           s.batch, s.c_in, s.h_in, s.w_in, s.c_out, ratio[0], ratio[1], ok ? "ok" : "FAIL");
    check_count(ok);
    free(x), free(w), free(dy), free(y), free(exact), free(bound);
}

int main(void) {
    test_fc(3, 7, 5);     /* odd sizes: every leading dimension differs */
    test_fc(1, 33, 17);   /* batch 1 */
    test_fc(16, 5, 64);   /* more outputs than inputs */
    test_fc(64, 500, 10); /* LeNet's last layer at batch 64 */
    test_fc(4, 800, 500); /* LeNet's ip1 */

    test_pick_basics();
    test_rule();
    test_rule_16bit();
    test_fallback();
    test_bound();
    test_cpu_convs();
    test_transform_flagged();

    return check_summary();
}
