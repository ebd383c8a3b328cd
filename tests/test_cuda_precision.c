/* test_cuda_precision.c - the CUDA backend's tf32, bf16 and fp16 products
 * (kernels/cuda/cuda_precision.c) against the naive fp32 references (tests/ref_kernels.c), and
 * all_finite. Exits 77 (skipped) when no GPU is visible. Inputs in [-1, 1), NCHW fp32 activations
 * (16-bit copies at each product); S_i = the reference on absolute values (sum |a||b| (+ |bias|)).
 *
 * bf16, fp16 (u = 2^-8, 2^-11): every element within prec16_bound (kernels/cuda/cuda_plan.h), the
 * bound of what the 16-bit rule admits: inputs rounded to 16 bits, K products summed in fp32 in
 * any order, a convolution's output (y before its fp32 bias, dx, dW) rounded to 16 bits, GEMM
 * outputs fp32; K = the products of an output, plus one for a bias. No slack: an FFT or Winograd
 * algorithm, whose error follows its tile or plane, fails it (fp16's 1x28^2 k5 dx did on an H200,
 * 5.5 u of S; tests/test_prec16.c shows an fp16 FFT doing so on the CPU).
 * tf32 (u = 2^-11, TF32's 10-bit mantissa; any algorithm, FFT and Winograd included):
 *   |got - ref| <= (2u + u^2 + slack) S_i + u |ref|
 * slack 1e-5 for GEMMs, 1e-3 for convolutions (as test_cuda_kernels allows in fp32).
 * Each precision's cuDNN choices are printed (the conv algorithms lines of /ranks/kernel_choices).
 * Checks counted by tests/harness.h. Exit status: 0 all pass, 1 a failure, 77 no GPU.
 */
#include "backend.h"
#include "cuda.h"
#include "cuda_plan.h" /* defines: prec16_bound */
#include "harness.h"   /* defines: check_count, check_summary */
#include "ref_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *B = &cuda_backend;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float *host(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        p[i] = -1.0f + 2.0f * (float)((rng >> 40) * (1.0 / 16777216.0));
    }
    return p;
}
static float *absv(const float *x, size_t n) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        y[i] = fabsf(x[i]);
    return y;
}
static float *up(BackendCtx *c, const float *h, size_t n) {
    float *d = B->alloc(c, n * sizeof(float));
    B->upload(c, d, h, n * sizeof(float));
    return d;
}
static float *down(BackendCtx *c, const float *d, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    B->download(c, h, d, n * sizeof(float));
    return h;
}

/* One result's tolerance: its precision, the products per element (k, bias included), whether it
 * is rounded to 16 bits in bf16/fp16 (out16), tf32's slack; R: |the part rounded to 16 bits|
 * (the reference less the bias), NULL for |ref| itself */
typedef struct {
    const char *prec;
    double u;
    int is16;
    double k, slack;
    int out16;
    const float *r;
} Tol;

static void check(const Tol *t, const char *what, const float *got, const float *ref,
                  const float *s, size_t n) {
    double worst = 0, worst_tol = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]);
        const double r = fabs((double)(t->r ? t->r[i] : ref[i]));
        const double tol = t->is16 ? prec16_bound(t->u, t->out16 ? t->u : 0.0, t->k, s[i], r)
                                   : (2 * t->u + t->u * t->u + t->slack) * s[i] + t->u * r;
        if (!(e <= tol)) ok = 0;
        if (!(e / (s[i] + 1e-30) <= worst)) worst = e / (s[i] + 1e-30);
        if (tol > 0 && e / tol > worst_tol) worst_tol = e / tol;
    }
    printf("%s %-28s max |err|/S %.3g (u = %.3g), %.3g of the tolerance %s\n", t->prec, what, worst,
           t->u, worst_tol, ok ? "ok" : "FAIL");
    check_count(ok);
}

typedef struct {
    Precision p;
    const char *name;
    double u;
} Prec;

static Tol tol_of(const Prec *P, double k, double slack, int out16, const float *r) {
    const int is16 = P->p == PRECISION_BF16 || P->p == PRECISION_FP16;
    return (Tol){P->name, P->u, is16, k, slack, out16, r};
}

/* fc forward and both gradients of one shape in precision P (GEMM outputs stay fp32) */
static void fc(BackendCtx *c, const Prec *P, int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    float *x = host(nx), *w = host(nw), *b = host(out), *dy = host(ny);
    float *ax = absv(x, nx), *aw = absv(w, nw), *ab = absv(b, out), *ady = absv(dy, ny);
    float *dx_ = up(c, x, nx), *dw_ = up(c, w, nw), *db_ = up(c, b, out), *ddy = up(c, dy, ny);
    float *dyo = B->alloc(c, ny * 4), *dgx = B->alloc(c, nx * 4), *dgw = B->alloc(c, nw * 4),
          *dgb = B->alloc(c, out * 4);
    float *ref = malloc(ny * 4), *sy = malloc(ny * 4), *rdx = malloc(nx * 4), *rdw = malloc(nw * 4),
          *rdb = malloc(out * 4), *sdx = malloc(nx * 4), *sdw = malloc(nw * 4),
          *sdb = malloc(out * 4);
    B->fc_forward(c, &s, dx_, dw_, db_, dyo);
    B->fc_backward(c, &s, dx_, dw_, ddy, dgx, dgw, dgb);
    ref_fc_forward(&s, x, w, b, ref), ref_fc_forward(&s, ax, aw, ab, sy);
    ref_fc_backward(&s, x, w, dy, rdx, rdw, rdb), ref_fc_backward(&s, ax, aw, ady, sdx, sdw, sdb);
    char what[64];
    float *g = down(c, dyo, ny);
    Tol t = tol_of(P, in + 1, 1e-5, 0, NULL);
    snprintf(what, sizeof what, "fc %dx%d->%d forward", n, in, out);
    check(&t, what, g, ref, sy, ny), free(g);
    g = down(c, dgx, nx), t = tol_of(P, out, 1e-5, 0, NULL);
    snprintf(what, sizeof what, "fc %dx%d->%d dx", n, in, out);
    check(&t, what, g, rdx, sdx, nx), free(g);
    g = down(c, dgw, nw), t = tol_of(P, n, 1e-5, 0, NULL);
    snprintf(what, sizeof what, "fc %dx%d->%d dw", n, in, out);
    check(&t, what, g, rdw, sdw, nw), free(g);
    free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ab), free(ady), free(ref);
    free(sy), free(rdx), free(rdw), free(rdb), free(sdx), free(sdw), free(sdb);
    float *d[] = {dx_, dw_, db_, ddy, dyo, dgx, dgw, dgb};
    for (int i = 0; i < 8; i++)
        B->free(c, d[i]);
}

/* a convolution's three results in precision P: 16-bit outputs (y before the bias, dx, dW) */
static void conv(BackendCtx *c, const Prec *P, int n, int ci, int h, int co, int k, int stride,
                 int pad) {
    ConvShape s = {n, ci, h, h, co, k, stride, pad, (h + 2 * pad - k) / stride + 1, 0};
    s.w_out = s.h_out;
    size_t nx = (size_t)n * ci * h * h, nw = (size_t)co * ci * k * k;
    size_t ny = (size_t)n * co * s.h_out * s.w_out;
    float *x = host(nx), *w = host(nw), *b = host(co), *dy = host(ny);
    float *ax = absv(x, nx), *aw = absv(w, nw), *ab = absv(b, co), *ady = absv(dy, ny);
    size_t wsb = B->conv_workspace_bytes(c, &s);
    void *work = B->alloc(c, wsb ? wsb : 1);
    float *dx_ = up(c, x, nx), *dw_ = up(c, w, nw), *db_ = up(c, b, co), *ddy = up(c, dy, ny);
    float *dyo = B->alloc(c, ny * 4), *dgx = B->alloc(c, nx * 4), *dgw = B->alloc(c, nw * 4),
          *dgb = B->alloc(c, co * 4);
    float *ref = malloc(ny * 4), *sy = malloc(ny * 4), *rdx = malloc(nx * 4), *rdw = malloc(nw * 4),
          *rdb = malloc(co * 4), *sdx = malloc(nx * 4), *sdw = malloc(nw * 4),
          *sdb = malloc(co * 4);
    B->conv_forward(c, &s, dx_, dw_, db_, dyo, work);
    B->conv_backward(c, &s, dx_, dw_, ddy, dgx, dgw, dgb, work);
    ref_conv_forward(&s, x, w, b, ref), ref_conv_forward(&s, ax, aw, ab, sy);
    float *nob = malloc(ny * 4); /* y before the bias: what is rounded to 16 bits */
    ref_conv_forward(&s, x, w, NULL, nob);
    ref_conv_backward(&s, x, w, dy, rdx, rdw, rdb),
        ref_conv_backward(&s, ax, aw, ady, sdx, sdw, sdb);
    char what[64];
    float *g = down(c, dyo, ny);
    Tol t = tol_of(P, ci * k * k + 1, 1e-3, 1, nob);
    snprintf(what, sizeof what, "conv %dx%d^2 k%d s%d -> %d fwd", ci, h, k, stride, co);
    check(&t, what, g, ref, sy, ny), free(g);
    g = down(c, dgx, nx), t = tol_of(P, co * k * k, 1e-3, 1, NULL);
    snprintf(what, sizeof what, "conv %dx%d^2 k%d s%d -> %d dx", ci, h, k, stride, co);
    check(&t, what, g, rdx, sdx, nx), free(g);
    g = down(c, dgw, nw), t = tol_of(P, (double)n * s.h_out * s.w_out, 1e-3, 1, NULL);
    snprintf(what, sizeof what, "conv %dx%d^2 k%d s%d -> %d dw", ci, h, k, stride, co);
    check(&t, what, g, rdw, sdw, nw), free(g);
    free(nob);
    free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ab), free(ady), free(ref);
    free(sy), free(rdx), free(rdw), free(rdb), free(sdx), free(sdw), free(sdb);
    float *d[] = {dx_, dw_, db_, ddy, dyo, dgx, dgw, dgb};
    for (int i = 0; i < 8; i++)
        B->free(c, d[i]);
    B->free(c, work);
}

int main(void) {
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    static const Prec P[] = {{PRECISION_TF32, "tf32", 0x1p-11},
                             {PRECISION_BF16, "bf16", 0x1p-8},
                             {PRECISION_FP16, "fp16", 0x1p-11}};
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
        BackendConfig cfg = {.threads = 1, .verbose = 1, .precision = P[i].p};
        BackendCtx *c;
        if (B->init(&cfg, &c) != 0) return 1;
        fc(c, &P[i], 64, 800, 500);
        fc(c, &P[i], 7, 33, 10);
        conv(c, &P[i], 4, 1, 28, 20, 5, 1, 0);
        conv(c, &P[i], 3, 16, 24, 20, 3, 1, 1);
        conv(c, &P[i], 2, 8, 13, 12, 3, 2, 1);
        char choices[4096];
        cuda_conv_algorithms(c, choices, sizeof choices);
        printf("%s", choices);
        /* all_finite: a clean buffer, then one inf */
        float h[1000];
        for (int j = 0; j < 1000; j++)
            h[j] = (float)j;
        float *d = up(c, h, 1000);
        int clean = B->all_finite(c, 1000, d);
        h[777] = INFINITY;
        B->upload(c, d, h, sizeof h);
        int dirty = B->all_finite(c, 1000, d);
        printf("%s all_finite: clean %d, with an inf %d %s\n", P[i].name, clean, dirty,
               clean && !dirty ? "ok" : "FAIL");
        check_count(clean && !dirty);
        B->free(c, d);
        B->finalize(c);
    }
    return check_summary();
}
