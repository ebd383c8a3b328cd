/* test_bf16.c - the CPU backend's bf16 products (--precision bf16, kernels/cpu/cpu_bf16.c) against
 * naive references.
 *
 * Each product C = op(A) op(B) (every transpose, odd sizes, k across the engine's blocks, alpha,
 * beta, leading dimensions wider than the rows) is compared, element by element, with
 *   1. the naive product of the bf16-ROUNDED inputs accumulated in double: the engine must match
 *      it to fp32 accumulation, |got - ref| <= 2 k 2^-24 S + 1e-30, S = sum |a||b| (+ |beta c|);
 *   2. the fp32 product (cblas_sgemm): |got - ref32| <= (2^-7 + 2^-16 + 2 k 2^-24) S, since bf16
 *      keeps 8 significant bits (unit roundoff u = 2^-8) and a product of two rounded inputs is
 *      within 2u + u^2 of the exact one;
 * and the bf16 result must differ from fp32 somewhere (the rounding happened at all).
 * Every engine runs: oneDNN's (where dtbench was built with it and the CPU has bf16 instructions;
 * its products with k <= CPU_DNNL_SMALL_K take its rounded-fp32 path, the others its matmul),
 * ours (avx512bf16, where the CPU has the instruction) and the openblas-sbgemm feeding, here
 * through a naive cblas_sbgemm this program exports itself (dlsym finds it first).
 * Then, on each engine, the backend's layers with --precision bf16: fc and convolution forward
 * and backward (3x3 shapes where fp32 would take Winograd, 1x1, grouped small images, strided,
 * an input row the windows never reach) and the LSTM against the naive references (tests/ref_*.c),
 * with S from the same references on absolute values; and, on oneDNN's, that a weight's rounded
 * copy is made once per parameter generation: a weight changed without weights_ready leaves the
 * layer's result as it was (the copy was kept, not remade per call), and weights_ready makes it
 * follow. Exit 0: all pass; 1: a failure. It never skips: without AVX512-BF16 the sbgemm feeding
 * and the layers still run through the exported naive cblas_sbgemm (and /proc/cpuinfo listing
 * avx512_bf16 while our engine, or oneDNN's in a build with oneDNN, is not used is a failure).
 */
#include "backend.h"
#include "cpu_bf16.h"
#include "cpu_bf16_onednn.h" /* defines: cpu_dnnl_available */
#include "harness.h"
#include "ref_kernels.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long sbgemm_calls;
static float *randv(size_t n) {
    return rand_floats(n, -1.0f, 1.0f);
}
static float rnd(float x) {
    return gc_bf16_to_float(gc_bf16_from_float(x));
}

/* OpenBLAS's cblas_sbgemm, naive, for the sbgemm engine (row-major, no transposes: the engine
 * packs them away). Exported from the program (-rdynamic), so dlsym(RTLD_DEFAULT) finds it. */
void cblas_sbgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                  const enum CBLAS_TRANSPOSE tb, const blasint m, const blasint n, const blasint k,
                  const float alpha, const bfloat16 *a, const blasint lda, const bfloat16 *b,
                  const blasint ldb, const float beta, float *c, const blasint ldc) {
    sbgemm_calls++;
    if (order != CblasRowMajor || ta != CblasNoTrans || tb != CblasNoTrans) abort();
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int p = 0; p < k; p++)
                acc += gc_bf16_to_float(a[(size_t)i * lda + p]) *
                       gc_bf16_to_float(b[(size_t)p * ldb + j]);
            float *cij = c + (size_t)i * ldc + j;
            *cij = alpha * acc + (beta == 0.0f ? 0.0f : beta * *cij);
        }
}

static float opx(const float *x, int ld, int t, int r, int c) {
    return t ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

/* one product through `engine` against both references */
static void check_gemm(CpuBf16 *g, const char *engine, int ta, int tb, int m, int n, int k,
                       float alpha, float beta) {
    const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
    const int arows = ta ? k : m, brows = tb ? n : k;
    float *a = randv((size_t)arows * lda), *b = randv((size_t)brows * ldb);
    float *c0 = randv((size_t)m * ldc), *c = malloc((size_t)m * ldc * sizeof(float));
    float *c32 = malloc((size_t)m * ldc * sizeof(float));
    memcpy(c, c0, (size_t)m * ldc * sizeof(float)),
        memcpy(c32, c0, (size_t)m * ldc * sizeof(float));
    cpu_bf16_gemm_with(g, engine, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
                k, alpha, a, lda, b, ldb, beta, c32, ldc);
    double worst = 0, worst32 = 0, differs = 0;
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0, s = 0;
            for (int p = 0; p < k; p++) {
                acc += (double)rnd(opx(a, lda, ta, i, p)) * rnd(opx(b, ldb, tb, p, j));
                s += fabs((double)opx(a, lda, ta, i, p) * opx(b, ldb, tb, p, j));
            }
            double cin = c0[(size_t)i * ldc + j];
            double ref = alpha * acc + (beta == 0.0f ? 0.0 : beta * cin);
            s = fabs(alpha) * s * 1.01 + fabs(beta * cin);
            double got = c[(size_t)i * ldc + j], g32 = c32[(size_t)i * ldc + j];
            double e = fabs(got - ref), e32 = fabs(got - g32);
            double tol = 2.0 * k * ldexp(1.0, -24) * s + 1e-30,
                   tol32 = (ldexp(1.0, -7) + ldexp(1.0, -16)) * s + tol;
            if (!(e <= tol) || !(e32 <= tol32)) bad++;
            if (e / (s + 1e-30) > worst) worst = e / (s + 1e-30);
            if (e32 / (s + 1e-30) > worst32) worst32 = e32 / (s + 1e-30);
            if (got != g32) differs = 1;
        }
    /* columns beyond n in each row must be untouched */
    for (int i = 0; i < m; i++)
        for (int j = n; j < ldc; j++)
            if (c[(size_t)i * ldc + j] != c0[(size_t)i * ldc + j]) bad++;
    EXPECT(!bad && (differs || k == 0),
           "%-15s %c%c m=%d n=%d k=%d alpha=%g beta=%g: max |err|/S vs bf16-rounded %.2e, vs "
           "fp32 %.2e (bound 2^-7 = %.2e)",
           engine, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, beta, worst, worst32,
           ldexp(1.0, -7));
    free(a), free(b), free(c0), free(c), free(c32);
}

/* Our engine on 3 threads (columns split in 32-column panels) gives one thread's result bit for
 * bit, every transpose, a shape large enough to be split. */
static void thread_test(void) {
    CpuBf16 *g1 = cpu_bf16_create(1), *g3 = cpu_bf16_create(3);
    const int m = 128, n = 300, k = 256; /* 9.8M multiply-adds: 3 threads */
    float *a = randv((size_t)m * k), *b = randv((size_t)k * n);
    float *c1 = malloc(sizeof(float) * m * n), *c3 = malloc(sizeof(float) * m * n);
    int same = 1;
    for (int t = 0; t < 4; t++) {
        const int ta = t & 1, tb = t >> 1, lda = ta ? m : k, ldb = tb ? k : n;
        cpu_bf16_gemm_with(g1, "avx512bf16", ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c1, n);
        cpu_bf16_gemm_with(g3, "avx512bf16", ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c3, n);
        same &= !memcmp(c1, c3, sizeof(float) * m * n);
    }
    EXPECT(same, "avx512bf16 on 3 threads = on 1 thread, bit for bit (128x300x256, NN/TN/NT/TT)");
    cpu_bf16_free(g1), cpu_bf16_free(g3);
    free(a), free(b), free(c1), free(c3);
}

static void engine_tests(CpuBf16 *g, const char *engine) {
    static const int shapes[][3] = {{1, 1, 1},     {5, 7, 3},      {12, 32, 2},   {13, 33, 257},
                                    {37, 70, 300}, {64, 120, 800}, {200, 50, 31}, {3, 2100, 17}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++)
            check_gemm(g, engine, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2],
                       s % 2 ? 0.5f : 1.0f, s % 3 == 0 ? 0.0f : (s % 3 == 1 ? 1.0f : -0.5f));
}

/* ---- the backend's layers ----------------------------------------------------------------------
 */

static void absv(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = fabsf(x[i]);
}
static void roundv(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = rnd(x[i]);
}

/* got vs ref (fp32 inputs) within (2^-7 + 2^-16) S (+ accumulation), vs refr (rounded inputs)
 * within 2 k 2^-24 S; must differ from ref32 (the fp32 backend) somewhere. */
static void compare(const char *what, const float *got, const float *ref, const float *refr,
                    const float *s, const float *ref32, size_t n, int k) {
    double worst = 0, worstr = 0;
    int bad = 0, differs = 0;
    for (size_t i = 0; i < n; i++) {
        double tolr = 2.0 * k * ldexp(1.0, -24) * s[i] * 1.01 + 1e-30;
        double tol = (ldexp(1.0, -7) + ldexp(1.0, -16)) * s[i] * 1.01 + tolr;
        double e = fabs((double)got[i] - ref[i]), er = fabs((double)got[i] - refr[i]);
        if (!(e <= tol) || !(er <= tolr)) bad++;
        if (e / (s[i] + 1e-30) > worst) worst = e / (s[i] + 1e-30);
        if (er / (s[i] + 1e-30) > worstr) worstr = er / (s[i] + 1e-30);
        differs |= got[i] != ref32[i];
    }
    EXPECT(!bad && differs,
           "bf16 backend %-34s max |err|/S vs fp32 ref %.2e, vs bf16-rounded ref %.2e%s", what,
           worst, worstr, !bad && !differs ? " (same as fp32)" : "");
}

typedef struct {
    const BackendOps *be;
    BackendCtx *bf, *f32;
} Ctxs;

/* A new weight buffer may reuse a freed one's address: the engine is told, as the driver tells it
 * after every update (oneDNN's engine keys its rounded copies by address and generation). */
static void new_weights(Ctxs *c) {
    c->be->weights_ready(c->bf, NULL, 0);
}

static void fc_test(Ctxs *c, int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    new_weights(c);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    float *x = randv(nx), *w = randv(nw), *b = randv(out), *dy = randv(ny);
    float *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ab = malloc(out * 4), *ady = malloc(ny * 4);
    float *rx = malloc(nx * 4), *rw = malloc(nw * 4), *rdy = malloc(ny * 4);
    absv(x, ax, nx), absv(w, aw, nw), absv(b, ab, out), absv(dy, ady, ny);
    roundv(x, rx, nx), roundv(w, rw, nw), roundv(dy, rdy, ny);
    float *y = malloc(ny * 4), *y32 = malloc(ny * 4), *yr = malloc(ny * 4), *yref = malloc(ny * 4),
          *ys = malloc(ny * 4);
    c->be->fc_forward(c->bf, &s, x, w, b, y);
    c->be->fc_forward(c->f32, &s, x, w, b, y32);
    ref_fc_forward(&s, x, w, b, yref), ref_fc_forward(&s, rx, rw, b, yr);
    ref_fc_forward(&s, ax, aw, ab, ys);
    char what[64];
    snprintf(what, sizeof what, "fc %dx%d->%d forward", n, in, out);
    compare(what, y, yref, yr, ys, y32, ny, in);
    float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(out * 4);
    float *dx32 = malloc(nx * 4), *dw32 = malloc(nw * 4), *db32 = malloc(out * 4);
    float *dxr = malloc(nx * 4), *dwr = malloc(nw * 4), *dbr = malloc(out * 4);
    float *dxf = malloc(nx * 4), *dwf = malloc(nw * 4), *dbf = malloc(out * 4);
    float *dxs = malloc(nx * 4), *dws = malloc(nw * 4), *dbs = malloc(out * 4);
    c->be->fc_backward(c->bf, &s, x, w, dy, dx, dw, db);
    c->be->fc_backward(c->f32, &s, x, w, dy, dx32, dw32, db32);
    ref_fc_backward(&s, x, w, dy, dxf, dwf, dbf), ref_fc_backward(&s, rx, rw, rdy, dxr, dwr, dbr);
    ref_fc_backward(&s, ax, aw, ady, dxs, dws, dbs);
    snprintf(what, sizeof what, "fc %dx%d->%d dx", n, in, out);
    compare(what, dx, dxf, dxr, dxs, dx32, nx, out);
    snprintf(what, sizeof what, "fc %dx%d->%d dw", n, in, out);
    compare(what, dw, dwf, dwr, dws, dw32, nw, n);
    free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ab), free(ady), free(rx);
    free(rw), free(rdy), free(y), free(y32), free(yr), free(yref), free(ys), free(dx), free(dw);
    free(db), free(dx32), free(dw32), free(db32), free(dxr), free(dwr), free(dbr), free(dxf);
    free(dwf), free(dbf), free(dxs), free(dws), free(dbs);
}

static void conv_test(Ctxs *c, int n, int ci, int h, int co, int k, int stride, int pad) {
    ConvShape s = {n, ci, h, h, co, k, stride, pad, (h + 2 * pad - k) / stride + 1, 0};
    new_weights(c);
    s.w_out = s.h_out;
    size_t nx = (size_t)n * ci * h * h, nw = (size_t)co * ci * k * k;
    size_t ny = (size_t)n * co * s.h_out * s.w_out;
    size_t wb = c->be->conv_workspace_bytes(c->bf, &s),
           wb32 = c->be->conv_workspace_bytes(c->f32, &s);
    void *work = malloc(wb > wb32 ? wb : wb32);
    float *x = randv(nx), *w = randv(nw), *b = randv(co), *dy = randv(ny);
    float *ax = malloc(nx * 4), *aw = malloc(nw * 4), *ab = malloc(co * 4), *ady = malloc(ny * 4);
    float *rx = malloc(nx * 4), *rw = malloc(nw * 4), *rdy = malloc(ny * 4);
    absv(x, ax, nx), absv(w, aw, nw), absv(b, ab, co), absv(dy, ady, ny);
    roundv(x, rx, nx), roundv(w, rw, nw), roundv(dy, rdy, ny);
    float *y = malloc(ny * 4), *y32 = malloc(ny * 4), *yr = malloc(ny * 4), *yf = malloc(ny * 4),
          *ys = malloc(ny * 4);
    c->be->conv_forward(c->bf, &s, x, w, b, y, work);
    c->be->conv_forward(c->f32, &s, x, w, b, y32, work);
    ref_conv_forward(&s, x, w, b, yf), ref_conv_forward(&s, rx, rw, b, yr);
    ref_conv_forward(&s, ax, aw, ab, ys);
    char what[80];
    snprintf(what, sizeof what, "conv n%d %dx%d^2 k%d s%d p%d -> %d fwd", n, ci, h, k, stride, pad,
             co);
    compare(what, y, yf, yr, ys, y32, ny, ci * k * k);
    float *dx = malloc(nx * 4), *dw = malloc(nw * 4), *db = malloc(co * 4);
    float *dx32 = malloc(nx * 4), *dw32 = malloc(nw * 4), *db32 = malloc(co * 4);
    float *dxr = malloc(nx * 4), *dwr = malloc(nw * 4), *dbr = malloc(co * 4);
    float *dxf = malloc(nx * 4), *dwf = malloc(nw * 4), *dbf = malloc(co * 4);
    float *dxs = malloc(nx * 4), *dws = malloc(nw * 4), *dbs = malloc(co * 4);
    c->be->conv_backward(c->bf, &s, x, w, dy, dx, dw, db, work);
    c->be->conv_backward(c->f32, &s, x, w, dy, dx32, dw32, db32, work);
    ref_conv_backward(&s, x, w, dy, dxf, dwf, dbf),
        ref_conv_backward(&s, rx, rw, rdy, dxr, dwr, dbr);
    ref_conv_backward(&s, ax, aw, ady, dxs, dws, dbs);
    snprintf(what, sizeof what, "conv n%d %dx%d^2 k%d -> %d dx", n, ci, h, k, co);
    compare(what, dx, dxf, dxr, dxs, dx32, nx, co * k * k);
    snprintf(what, sizeof what, "conv n%d %dx%d^2 k%d -> %d dw", n, ci, h, k, co);
    compare(what, dw, dwf, dwr, dws, dw32, nw, n * s.h_out * s.w_out);
    free(work), free(x), free(w), free(b), free(dy), free(ax), free(aw), free(ab), free(ady);
    free(rx), free(rw), free(rdy), free(y), free(y32), free(yr), free(yf), free(ys), free(dx);
    free(dw), free(db), free(dx32), free(dw32), free(db32), free(dxr), free(dwr), free(dbr);
    free(dxf), free(dwf), free(dbf), free(dxs), free(dws), free(dbs);
}

static int cpuinfo_has(const char *flag) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        if (!strncmp(line, "flags", 5)) {
            for (char *t = strtok(line, " \t\n"); t && !found; t = strtok(NULL, " \t\n"))
                found = !strcmp(t, flag);
        }
    if (f) fclose(f);
    return found;
}

/* The LSTM's products (input, recurrent, weight gradient) also go through the bf16 GEMM; its
 * nonlinear cell has no simple bound, so: forward output h in (-1, 1) within 2e-2 of the fp32
 * backend's (8 steps; each step's rounding is ~2^-8 relative), and not equal to it. */
static void lstm_test(Ctxs *c) {
    LstmShape s = {4, 8, 24, 32};
    new_weights(c);
    size_t nx = (size_t)s.batch * s.seq * s.in, nw = (size_t)4 * s.hidden * (s.in + s.hidden);
    size_t ny = (size_t)s.batch * s.seq * s.hidden;
    float *x = randv(nx), *w = randv(nw), *b = randv(4 * (size_t)s.hidden);
    for (size_t i = 0; i < nw; i++)
        w[i] *= 0.3f;
    float *y = malloc(ny * 4), *y32 = malloc(ny * 4);
    size_t rb = c->be->lstm_reserve_bytes(c->bf, &s), wb = c->be->lstm_workspace_bytes(c->bf, &s);
    void *res = malloc(rb), *work = malloc(wb);
    c->be->lstm_forward(c->bf, &s, x, w, b, y, res, work);
    c->be->lstm_forward(c->f32, &s, x, w, b, y32, res, work);
    double worst = 0;
    int differs = 0;
    for (size_t i = 0; i < ny; i++) {
        double e = fabs((double)y[i] - y32[i]);
        if (!(e <= worst)) worst = e;
        differs |= y[i] != y32[i];
    }
    EXPECT(worst <= 2e-2 && differs,
           "bf16 backend lstm 4x8x24->32 forward           max |bf16 - fp32| %.2e (bound 2e-2)",
           worst);
    free(x), free(w), free(b), free(y), free(y32), free(res), free(work);
}

/* oneDNN's engine keeps each weight's rounded copy for the parameter generation: a weight changed
 * behind its back leaves the products as they were until weights_ready. */
static void generation_test(Ctxs *c) {
    FcShape s = {.batch = 8, .in = 200, .out = 300};
    ConvShape cs = {2, 8, 10, 10, 6, 3, 1, 1, 10, 10};
    size_t nx = (size_t)8 * 200, nw = (size_t)300 * 200, cx = (size_t)2 * 8 * 100, cw = 6 * 8 * 9;
    float *x = randv(nx), *w = randv(nw), *y0 = malloc(8 * 300 * 4), *y1 = malloc(8 * 300 * 4);
    float *xc = randv(cx), *wc = randv(cw), *z0 = malloc(2 * 6 * 100 * 4),
          *z1 = malloc(2 * 6 * 100 * 4);
    void *work = malloc(c->be->conv_workspace_bytes(c->bf, &cs));
    new_weights(c);
    c->be->fc_forward(c->bf, &s, x, w, NULL, y0);
    c->be->conv_forward(c->bf, &cs, xc, wc, NULL, z0, work);
    for (size_t i = 0; i < nw; i++)
        w[i] = -w[i];
    for (size_t i = 0; i < cw; i++)
        wc[i] = -wc[i];
    c->be->fc_forward(c->bf, &s, x, w, NULL, y1);
    c->be->conv_forward(c->bf, &cs, xc, wc, NULL, z1, work);
    int kept = !memcmp(y0, y1, 8 * 300 * 4) && !memcmp(z0, z1, 2 * 6 * 100 * 4);
    c->be->weights_ready(c->bf, NULL, 0);
    c->be->fc_forward(c->bf, &s, x, w, NULL, y1);
    c->be->conv_forward(c->bf, &cs, xc, wc, NULL, z1, work);
    int follows = 1;
    for (size_t i = 0; i < 8 * 300; i++)
        follows &= y1[i] == -y0[i];
    for (size_t i = 0; i < 2 * 6 * 100; i++)
        follows &= z1[i] == -z0[i];
    EXPECT(kept, "onednn weights rounded once per generation: kept until weights_ready");
    EXPECT(follows, "onednn weights rounded once per generation: remade after weights_ready");
    free(x), free(w), free(y0), free(y1), free(xc), free(wc), free(z0), free(z1), free(work);
}

/* The backend's layers with --precision bf16 on `engine` (forced for the contexts made here). */
static void layer_tests(const char *engine) {
    setenv("DTBENCH_BF16_ENGINE", engine, 1);
    Ctxs c = {&cpu_backend, NULL, NULL};
    BackendConfig cb = {.threads = 1, .precision = PRECISION_BF16}, cf = {.threads = 1};
    if (c.be->init(&cb, &c.bf) != 0 || c.be->init(&cf, &c.f32) != 0) {
        EXPECT(0, "a bf16 context on engine %s", engine);
        return;
    }
    char info[512];
    c.be->describe(c.bf, info, sizeof info);
    int on = strstr(info, engine) != NULL;
    EXPECT(on, "== layers on %s (not another engine)", engine);
    fc_test(&c, 64, 800, 500);
    fc_test(&c, 7, 33, 10);
    conv_test(&c, 3, 16, 24, 20, 3, 1, 1);   /* fp32 would run Winograd */
    conv_test(&c, 4, 1, 28, 20, 5, 1, 0);    /* LeNet's conv1 */
    conv_test(&c, 5, 24, 7, 32, 1, 1, 0);    /* pointwise, grouped small images */
    conv_test(&c, 2, 8, 13, 12, 3, 2, 1);    /* stride 2 */
    conv_test(&c, 2, 3, 9, 4, 2, 2, 0);      /* the last input row is in no window */
    conv_test(&c, 2, 144, 12, 136, 1, 1, 0); /* pointwise, k > 128 every way (oneDNN's matmul) */
    lstm_test(&c);
    if (!strcmp(engine, "onednn")) generation_test(&c);
    c.be->finalize(c.bf), c.be->finalize(c.f32);
}

int main(void) {
    setenv("DTBENCH_BF16_ENGINE", "avx512bf16", 1);
    CpuBf16 *g = cpu_bf16_create(1);
    if (!g) return 1;
    const char *own = cpu_bf16_engine(NULL, 0);
    int own_ok = own && !strcmp(own, "avx512bf16");
    if (own_ok)
        engine_tests(g, "avx512bf16"), thread_test();
    else if (cpuinfo_has("avx512_bf16"))
        EXPECT(0, "/proc/cpuinfo lists avx512_bf16: the avx512bf16 engine is used");
    else
        printf("avx512bf16 engine not tested: this CPU has no AVX512-BF16\n");
    engine_tests(g, "openblas-sbgemm");
    EXPECT(sbgemm_calls > 0, "the sbgemm engine called cblas_sbgemm (%ld calls)", sbgemm_calls);
    char why[300];
    const char *isa = NULL;
    int dnnl = cpu_dnnl_available(why, sizeof why, &isa);
    if (dnnl) {
        printf("onednn engine on %s\n", isa);
        engine_tests(g, "onednn");
    } else if (cpuinfo_has("avx512_bf16") && !strstr(why, "built without")) {
        EXPECT(0, "/proc/cpuinfo lists avx512_bf16: oneDNN's engine is used (%s)", why);
    } else {
        printf("onednn engine not tested: %s\n", why);
    }
    cpu_bf16_free(g);

    if (dnnl) layer_tests("onednn");
    if (own_ok) layer_tests("avx512bf16");
    layer_tests("openblas-sbgemm");
    return check_summary();
}
