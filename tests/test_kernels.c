/* test_kernels.c - compares every kernel of the CPU backend with the naive references.
 *
 * For each kernel and several shapes (odd sizes, batch 1, LeNet sizes, conv stride 2 / padding,
 * pointwise conv, overlapping pools, ties, extreme logits; for the model-zoo layers: padded
 * pools as in GoogLeNet and ResNet, AlexNet's LRN, batch norm after conv and fc, inception-like
 * concatenation, dropout masks split across calls, repeated embedding ids, LSTM steps) it fills
 * inputs from a seeded xorshift
 * generator, runs cpu_backend and tests/ref_kernels.c, and prints
 *     kernel shape: max abs diff X (tolerance T) ok|FAIL
 * An element passes when |got - ref| <= rtol * max(floor, |ref|) (floor is 1 unless stated, so the
 * tolerance is relative for large values and absolute for small ones); NaN never passes. Output
 * buffers are pre-filled with NaN so an element the kernel forgets to write fails. Exit status: 0
 * when everything passes, 1 otherwise.
 */
#include "backend.h"
#include "elem_math.h" /* dt_expf, dt_sigmoidf, dt_tanhf: tested directly */
#include "ref_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *B = &cpu_backend;
static BackendCtx *ctx;
static int failures;

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

/* uniform in [lo, hi) */
static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((xorshift64() >> 40) * (1.0 / 16777216.0));
}

static void fill_uniform(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        a[i] = uniform(lo, hi);
}

static void fill_nan(float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
}

static float *falloc(size_t n) { /* backend memory: what the driver will use */
    float *p = B->alloc(ctx, n * sizeof(float));
    if (!p) {
        fprintf(stderr, "alloc failed\n");
        exit(2);
    }
    return p;
}

static float *halloc(size_t n) { /* plain host memory for the references */
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "malloc failed\n");
        exit(2);
    }
    return p;
}

/* Compares got[n] with ref[n]; element i passes when |got-ref| <= rtol * max(floor, |ref|). */
static void check(const char *kernel, const char *shape, const float *got, const float *ref,
                  size_t n, double rtol, double floor) {
    double max_diff = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        double tol = rtol * fmax(floor, fabs((double)ref[i]));
        if (!(d <= tol)) ok = 0; /* also catches NaN */
        if (isnan(d))
            max_diff = INFINITY;
        else if (d > max_diff)
            max_diff = d;
    }
    if (rtol == 0.0)
        printf("%s %s: max abs diff %.3g (tolerance 0, exact) %s\n", kernel, shape, max_diff,
               ok ? "ok" : "FAIL");
    else if (floor == 1.0)
        printf("%s %s: max abs diff %.3g (tolerance %.0e*max(1,|ref|)) %s\n", kernel, shape,
               max_diff, rtol, ok ? "ok" : "FAIL");
    else
        printf("%s %s: max abs diff %.3g (tolerance %.0e*max(%.3g,|ref|)) %s\n", kernel, shape,
               max_diff, rtol, floor, ok ? "ok" : "FAIL");
    if (!ok) failures++;
}

static void check_exact_i32(const char *kernel, const char *shape, const int32_t *got,
                            const int32_t *ref, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += got[i] != ref[i];
    printf("%s %s: %zu of %zu differ (tolerance 0) %s\n", kernel, shape, bad, n,
           bad ? "FAIL" : "ok");
    if (bad) failures++;
}

static void check_true(const char *what, int cond) {
    printf("%s: %s\n", what, cond ? "ok" : "FAIL");
    if (!cond) failures++;
}

/* ---- fully connected ---- */

static void test_fc(int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    char shape[96], name[64];
    snprintf(shape, sizeof shape, "n=%d in=%d out=%d", n, in, out);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;

    float *x = falloc(nx), *w = falloc(nw), *b = falloc(out), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(out);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(out);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -1, 1);
    fill_uniform(b, out, -1, 1);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    B->fc_forward(ctx, &s, x, w, b, y);
    ref_fc_forward(&s, x, w, b, ry);
    check("fc_forward", shape, y, ry, ny, 1e-4, 1.0);

    fill_nan(dx, nx);
    fill_nan(dw, nw);
    fill_nan(db, out);
    B->fc_backward(ctx, &s, x, w, dy, dx, dw, db);
    ref_fc_backward(&s, x, w, dy, rdx, rdw, rdb);
    check("fc_backward dx", shape, dx, rdx, nx, 1e-4, 1.0);
    check("fc_backward dw", shape, dw, rdw, nw, 1e-4, 1.0);
    check("fc_backward db", shape, db, rdb, out, 1e-4, 1.0);

    /* no bias: b == NULL, db == NULL */
    fill_nan(y, ny);
    B->fc_forward(ctx, &s, x, w, NULL, y);
    ref_fc_forward(&s, x, w, NULL, ry);
    check("fc_forward(b=NULL)", shape, y, ry, ny, 1e-4, 1.0);
    fill_nan(dw, nw);
    B->fc_backward(ctx, &s, x, w, dy, dx, dw, NULL);
    check("fc_backward(db=NULL) dw", shape, dw, rdw, nw, 1e-4, 1.0);
    B->fc_forward(ctx, &s, x, w, b, y);
    ref_fc_forward(&s, x, w, b, ry);

    /* first-layer form: dx == NULL; dw, db overwritten (not accumulated onto the previous call) */
    B->fc_backward(ctx, &s, x, w, dy, NULL, dw, db);
    snprintf(name, sizeof name, "fc_backward(dx=NULL) dw");
    check(name, shape, dw, rdw, nw, 1e-4, 1.0);
    snprintf(name, sizeof name, "fc_backward(dx=NULL) db");
    check(name, shape, db, rdb, out, 1e-4, 1.0);

    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- convolution ---- */

#define GUARD 64 /* floats past the workspace that must stay untouched */

static int guard_intact(const float *g) {
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 12345.0f) return 0;
    return 1;
}

static void test_conv(int n, int c_in, int h_in, int w_in, int c_out, int k, int stride, int pad) {
    ConvShape s = {.batch = n,
                   .c_in = c_in,
                   .h_in = h_in,
                   .w_in = w_in,
                   .c_out = c_out,
                   .k = k,
                   .stride = stride,
                   .pad = pad};
    s.h_out = (h_in + 2 * pad - k) / stride + 1;
    s.w_out = (w_in + 2 * pad - k) / stride + 1;
    char shape[160], what[256];
    snprintf(shape, sizeof shape, "n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in,
             h_in, w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h_in * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * s.h_out * s.w_out;

    size_t ws = B->conv_workspace_bytes(ctx, &s);
    size_t want = (size_t)c_in * k * k * s.h_out * s.w_out * sizeof(float); /* one im2col */
    snprintf(what, sizeof what, "conv_workspace_bytes %s = %zu >= one sample's columns", shape, ws);
    check_true(what, ws >= want);
    float *work = falloc(ws / sizeof(float) + GUARD);
    float *guard = work + ws / sizeof(float);
    for (int i = 0; i < GUARD; i++)
        guard[i] = 12345.0f;

    float *x = falloc(nx), *w = falloc(nw), *b = falloc(c_out), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(c_out);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(c_out);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -1, 1);
    fill_uniform(b, c_out, -1, 1);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    B->conv_forward(ctx, &s, x, w, b, y, work);
    ref_conv_forward(&s, x, w, b, ry);
    check("conv_forward", shape, y, ry, ny, 1e-4, 1.0);

    fill_nan(dx, nx);
    fill_nan(dw, nw);
    fill_nan(db, c_out);
    B->conv_backward(ctx, &s, x, w, dy, dx, dw, db, work);
    ref_conv_backward(&s, x, w, dy, rdx, rdw, rdb);
    check("conv_backward dx", shape, dx, rdx, nx, 1e-4, 1.0);
    check("conv_backward dw", shape, dw, rdw, nw, 1e-4, 1.0);
    check("conv_backward db", shape, db, rdb, c_out, 1e-4, 1.0);

    B->conv_backward(ctx, &s, x, w, dy, NULL, dw, db, work); /* overwrite, dx == NULL */
    check("conv_backward(dx=NULL) dw", shape, dw, rdw, nw, 1e-4, 1.0);
    check("conv_backward(dx=NULL) db", shape, db, rdb, c_out, 1e-4, 1.0);

    /* no bias (ResNet): b == NULL forward, db == NULL backward */
    fill_nan(y, ny);
    B->conv_forward(ctx, &s, x, w, NULL, y, work);
    ref_conv_forward(&s, x, w, NULL, ry);
    check("conv_forward(b=NULL)", shape, y, ry, ny, 1e-4, 1.0);
    fill_nan(dw, nw);
    B->conv_backward(ctx, &s, x, w, dy, dx, dw, NULL, work);
    check("conv_backward(db=NULL) dw", shape, dw, rdw, nw, 1e-4, 1.0);
    check("conv_backward(db=NULL) dx", shape, dx, rdx, nx, 1e-4, 1.0);

    snprintf(what, sizeof what, "conv workspace bounds %s", shape);
    check_true(what, guard_intact(guard));

    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db), B->free(ctx, work);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- ReLU ---- */

static void test_relu(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n), *t = falloc(n);
    float *ry = halloc(n), *rdx = halloc(n);
    fill_uniform(x, n, -1, 1);
    for (size_t i = 0; i < n; i += 7)
        x[i] = (i % 14) ? 0.0f : -0.0f; /* exact zeros */
    fill_uniform(dy, n, -1, 1);

    fill_nan(y, n);
    B->relu_forward(ctx, n, x, y);
    ref_relu_forward(n, x, ry);
    check("relu_forward", shape, y, ry, n, 0.0, 1.0);

    fill_nan(dx, n);
    B->relu_backward(ctx, n, y, dy, dx);
    ref_relu_backward(n, x, dy, rdx);
    check("relu_backward", shape, dx, rdx, n, 0.0, 1.0);

    memcpy(t, x, n * sizeof(float)); /* in place: y == x, then dx == dy */
    B->relu_forward(ctx, n, t, t);
    check("relu_forward (in place)", shape, t, ry, n, 0.0, 1.0);
    memcpy(t, dy, n * sizeof(float));
    B->relu_backward(ctx, n, y, t, t);
    check("relu_backward (in place)", shape, t, rdx, n, 0.0, 1.0);

    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, t);
    free(ry), free(rdx);
}

/* ---- softmax cross-entropy ---- */

static void test_xent(int n, int c, float scale) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d |logits|<=%g", n, c, scale);
    size_t nz = (size_t)n * c;
    float *z = falloc(nz), *dz = falloc(nz), *rdz = halloc(nz);
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    fill_uniform(z, nz, -scale, scale);
    for (int i = 0; i < n; i++) {
        lab[i] = (int32_t)(xorshift64() % (uint64_t)c);
        if (i % 3 == 0) z[(size_t)i * c + lab[i]] += scale; /* some rows predicted correctly */
    }

    fill_nan(dz, nz);
    int rcorr = -2;
    float *st = falloc(2), *st2 = falloc(2); /* {loss, correct} */
    fill_nan(st, 2), fill_nan(st2, 2);
    B->softmax_xent(ctx, n, c, z, lab, dz, st);
    double rloss = ref_softmax_xent(n, c, z, lab, rdz, &rcorr);
    B->softmax_xent(ctx, n, c, z, lab, NULL, st2);
    float loss = st[0], loss2 = st2[0];
    int corr = (int)st[1], corr2 = (int)st2[1];
    float fl = (float)rloss;
    check("softmax_xent loss", shape, &loss, &fl, 1, 1e-5, 1.0);
    check("softmax_xent loss (dlogits=NULL)", shape, &loss2, &fl, 1, 1e-5, 1.0);
    /* dlogits are O(1/n): relative to max(1/n, |ref|) */
    check("softmax_xent dlogits", shape, dz, rdz, nz, 1e-4, 1.0 / n);
    int32_t cc[2] = {corr, corr2}, rc[2] = {rcorr, rcorr};
    check_exact_i32("softmax_xent correct", shape, cc, rc, 2);

    B->free(ctx, z), B->free(ctx, dz), B->free(ctx, st), B->free(ctx, st2);
    free(rdz), free(lab);
}

/* ---- SGD ---- */

static void test_sgd(size_t n, float lr, float momentum, float wd, int steps) {
    char shape[128];
    snprintf(shape, sizeof shape, "n=%zu lr=%g momentum=%g wd=%g steps=%d", n, lr, momentum, wd,
             steps);
    float *p = falloc(n), *g = falloc(n), *v = momentum != 0.0f ? falloc(n) : NULL;
    float *rp = halloc(n), *rv = halloc(n);
    fill_uniform(p, n, -1, 1);
    memcpy(rp, p, n * sizeof(float));
    if (v) memset(rv, 0, n * sizeof(float)); /* v comes zeroed from alloc() */
    for (int st = 0; st < steps; st++) {
        fill_uniform(g, n, -1, 1);
        B->sgd_update(ctx, n, p, g, v, lr, momentum, wd);
        ref_sgd_update(n, rp, g, v ? rv : NULL, lr, momentum, wd);
    }
    check("sgd_update p", shape, p, rp, n, 1e-5, 1.0);
    if (v) check("sgd_update v", shape, v, rv, n, 1e-5, 1.0);
    B->free(ctx, p), B->free(ctx, g), B->free(ctx, v);
    free(rp), free(rv);
}

/* ---- memory, timer, describe ---- */

static void test_misc(void) {
    int ok = 1;
    size_t sizes[] = {0, 1, 63, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = B->alloc(ctx, sizes[i]);
        if (!p || ((uintptr_t)p & 63)) ok = 0;
        for (size_t j = 0; p && j < sizes[i]; j++)
            if (p[j]) ok = 0;
        B->free(ctx, p);
    }
    check_true("alloc: 64-byte aligned and zeroed", ok);

    float host[100], back[100];
    fill_uniform(host, 100, -1, 1);
    float *dev = falloc(100);
    B->upload(ctx, dev, host, sizeof host);
    B->synchronize(ctx);
    B->download(ctx, back, dev, sizeof back);
    check_true("upload/download round trip", memcmp(host, back, sizeof host) == 0);
    B->zero(ctx, dev, sizeof host);
    B->download(ctx, back, dev, sizeof back);
    ok = 1;
    for (int i = 0; i < 100; i++)
        if (back[i] != 0.0f) ok = 0;
    check_true("zero", ok);
    B->free(ctx, dev);

    B->timer_record(ctx, 0);
    volatile double sink = 0;
    for (int i = 0; i < 1000000; i++)
        sink += i;
    B->timer_record(ctx, BACKEND_TIMER_SLOTS - 1);
    double t = B->timer_elapsed(ctx, 0, BACKEND_TIMER_SLOTS - 1);
    printf("timer: busy loop (sum %.0f) took %.3g s\n", sink, t);
    check_true("timer: elapsed(a,b) > 0 and < 10 s", t > 0 && t < 10);
    check_true("timer: elapsed(b,a) == -elapsed(a,b)",
               B->timer_elapsed(ctx, BACKEND_TIMER_SLOTS - 1, 0) == -t);

    char buf[512] = "";
    B->describe(ctx, buf, sizeof buf);
    printf("describe: %s\n", buf);
    check_true("describe mentions OpenBLAS", strstr(buf, "OpenBLAS") != NULL);
}

/* ---- model-zoo layers ---- */

static void test_axpy_scale(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    float *x = falloc(n), *y = falloc(n), *r = halloc(n);
    fill_uniform(x, n, -1, 1);
    fill_uniform(y, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        r[i] = (float)((double)y[i] + 0.37 * x[i]);
    B->axpy(ctx, n, 0.37f, x, y);
    check("axpy", shape, y, r, n, 1e-6, 1.0);
    for (size_t i = 0; i < n; i++)
        r[i] = (float)((double)y[i] * -1.5);
    B->scale(ctx, n, -1.5f, y);
    check("scale", shape, y, r, n, 1e-6, 1.0);
    B->free(ctx, x), B->free(ctx, y);
    free(r);
}

/* dt_expf (softmax, sigmoid, tanh of the LSTM) against libm's exp in double */
static void test_expf(void) {
    double worst = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double rel = fabs(dt_expf(x) - exp((double)x)) / exp((double)x);
        if (rel > worst) worst = rel;
    }
    printf("dt_expf on [-87, 88]: max relative error %.3g (tolerance 3e-7)\n", worst);
    check_true("dt_expf accuracy", worst <= 3e-7);
    check_true("dt_expf saturates (-1000 -> tiny, 1000 -> finite)",
               dt_expf(-1000.0f) < 1e-37f && isfinite(dt_expf(1000.0f)) &&
                   dt_expf(1000.0f) > 1e38f);
    /* a diverged run feeds NaN logits to the softmax: NaN out, and no int overflow (UBSan) */
    check_true("dt_expf(NaN) is NaN", isnan(dt_expf(NAN)));
    double worst_t = 0.0;
    for (int i = 0; i <= 20000; i++) {
        float x = -20.0f + 40.0f * (float)i / 20000.0f;
        worst_t = fmax(worst_t, fabs(dt_tanhf(x) - tanh((double)x)));
        worst_t = fmax(worst_t, fabs(dt_sigmoidf(x) - 1.0 / (1.0 + exp(-(double)x))));
    }
    printf("dt_tanhf, dt_sigmoidf on [-20, 20]: max abs error %.3g (tolerance 3e-7)\n", worst_t);
    check_true("dt_tanhf / dt_sigmoidf accuracy", worst_t <= 3e-7);
}

/* Max and average pooling against the naive references, padding 0 or not. Inputs all negative
 * where there is padding (a padding zero must never win); levels > 0: inputs drawn from `levels`
 * integer values, so windows have ties (the first maximum wins). */
static void test_pool(int n, int c, int h_in, int w_in, int k, int stride, int pad, int levels) {
    PoolShape s = {n, c, h_in, w_in, k, stride, pad, 0, 0};
    s.h_out = (h_in + 2 * pad - k) / stride + 1;
    s.w_out = (w_in + 2 * pad - k) / stride + 1;
    char shape[128];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d k=%d stride=%d pad=%d%s", n, c, h_in, w_in, k,
             stride, pad, levels ? " (ties)" : "");
    size_t nx = (size_t)n * c * h_in * w_in, ny = (size_t)n * c * s.h_out * s.w_out;
    float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
    int32_t *am = B->alloc(ctx, ny * sizeof(int32_t)), *ram = malloc(ny * sizeof(int32_t));
    float *ry = halloc(ny), *rdx = halloc(nx);
    fill_uniform(x, nx, pad ? -2 : -1, pad ? -1 : 1);
    if (levels)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)(int)(uniform(0, (float)levels)) - (pad ? levels : 0);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    for (size_t i = 0; i < ny; i++)
        am[i] = -2;
    B->maxpool_forward(ctx, &s, x, y, am);
    ref_maxpool_forward(&s, x, ry, ram);
    check("maxpool_forward", shape, y, ry, ny, 0.0, 1.0);
    check_exact_i32("maxpool_forward argmax", shape, am, ram, ny);
    fill_nan(dx, nx);
    B->maxpool_backward(ctx, &s, am, dy, dx);
    ref_maxpool_backward(&s, x, dy, rdx);
    check("maxpool_backward", shape, dx, rdx, nx, 1e-6, 1.0);

    fill_nan(y, ny);
    B->avgpool_forward(ctx, &s, x, y);
    ref_avgpool_forward(&s, x, ry);
    check("avgpool_forward", shape, y, ry, ny, 1e-6, 1.0);
    fill_nan(dx, nx);
    B->avgpool_backward(ctx, &s, dy, dx);
    ref_avgpool_backward(&s, dy, rdx);
    check("avgpool_backward", shape, dx, rdx, nx, 1e-6, 1.0);

    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, am);
    free(ram), free(ry), free(rdx);
}

static void test_global_avgpool(size_t planes, size_t plane) {
    char shape[64];
    snprintf(shape, sizeof shape, "planes=%zu plane=%zu", planes, plane);
    float *x = falloc(planes * plane), *y = falloc(planes), *dx = falloc(planes * plane);
    float *ry = halloc(planes), *rdx = halloc(planes * plane), *dy = falloc(planes);
    fill_uniform(x, planes * plane, -1, 1);
    fill_uniform(dy, planes, -1, 1);
    fill_nan(y, planes);
    B->global_avgpool_forward(ctx, planes, plane, x, y);
    ref_global_avgpool_forward(planes, plane, x, ry);
    check("global_avgpool_forward", shape, y, ry, planes, 1e-5, 1.0);
    fill_nan(dx, planes * plane);
    B->global_avgpool_backward(ctx, planes, plane, dy, dx);
    ref_global_avgpool_backward(planes, plane, dy, rdx);
    check("global_avgpool_backward", shape, dx, rdx, planes * plane, 1e-6, 1.0);
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dx), B->free(ctx, dy);
    free(ry), free(rdx);
}

static void test_lrn(int n, int c, int h, int w, int size, float alpha, float beta, float bias,
                     float range) {
    LrnShape s = {n, c, h, w, size, alpha, beta, bias};
    char shape[160];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d size=%d alpha=%g beta=%g bias=%g |x|<=%g", n, c,
             h, w, size, alpha, beta, bias, range);
    size_t nx = (size_t)n * c * h * w;
    float *x = falloc(nx), *y = falloc(nx), *sc = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *ry = halloc(nx), *rdx = halloc(nx);
    fill_uniform(x, nx, -range, range);
    fill_uniform(dy, nx, -1, 1);
    fill_nan(y, nx);
    B->lrn_forward(ctx, &s, x, y, sc);
    ref_lrn_forward(&s, x, ry);
    check("lrn_forward", shape, y, ry, nx, 1e-5, 1.0);
    fill_nan(dx, nx);
    B->lrn_backward(ctx, &s, x, y, sc, dy, dx);
    ref_lrn_backward(&s, x, dy, rdx);
    check("lrn_backward", shape, dx, rdx, nx, 1e-5, 1.0);
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, sc), B->free(ctx, dy), B->free(ctx, dx);
    free(ry), free(rdx);
}

static void test_batchnorm(int n, int c, int spatial, float offset) {
    BnShape s = {n, c, spatial, 1e-5f, 0.1f};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d spatial=%d mean~%g", n, c, spatial, offset);
    size_t nx = (size_t)n * c * spatial;
    float *x = falloc(nx), *y = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *g = falloc(c), *b = falloc(c), *mean = falloc(c), *invstd = falloc(c);
    float *rm = falloc(c), *rv = falloc(c), *dg = falloc(c), *dbeta = falloc(c);
    float *ry = halloc(nx), *rdx = halloc(nx), *rmean = halloc(c), *rinv = halloc(c);
    float *rrm = halloc(c), *rrv = halloc(c), *rdg = halloc(c), *rdb = halloc(c);
    fill_uniform(x, nx, offset - 1, offset + 1);
    fill_uniform(dy, nx, -1, 1);
    fill_uniform(g, c, 0.5f, 1.5f);
    fill_uniform(b, c, -1, 1);
    fill_uniform(rm, c, -1, 1);
    fill_uniform(rv, c, 0.5f, 2);
    memcpy(rrm, rm, c * sizeof(float));
    memcpy(rrv, rv, c * sizeof(float));

    fill_nan(y, nx);
    B->batchnorm_forward_train(ctx, &s, x, g, b, y, mean, invstd, rm, rv);
    ref_batchnorm_forward_train(&s, x, g, b, ry, rmean, rinv, rrm, rrv);
    check("batchnorm_forward_train y", shape, y, ry, nx, 1e-4, 1.0);
    check("batchnorm_forward_train mean", shape, mean, rmean, c, 1e-5, 1.0);
    check("batchnorm_forward_train invstd", shape, invstd, rinv, c, 1e-5, 1.0);
    check("batchnorm_forward_train running_mean", shape, rm, rrm, c, 1e-5, 1.0);
    check("batchnorm_forward_train running_var", shape, rv, rrv, c, 1e-5, 1.0);
    fill_nan(dx, nx);
    fill_nan(dg, c);
    fill_nan(dbeta, c);
    B->batchnorm_backward(ctx, &s, x, g, mean, invstd, dy, dx, dg, dbeta);
    ref_batchnorm_backward(&s, x, g, dy, rdx, rdg, rdb);
    check("batchnorm_backward dx", shape, dx, rdx, nx, 1e-4, 1.0);
    check("batchnorm_backward dgamma", shape, dg, rdg, c, 1e-4, 1.0);
    check("batchnorm_backward dbeta", shape, dbeta, rdb, c, 1e-4, 1.0);
    fill_nan(y, nx);
    B->batchnorm_forward_infer(ctx, &s, x, g, b, rm, rv, y);
    ref_batchnorm_forward_infer(&s, x, g, b, rrm, rrv, ry);
    check("batchnorm_forward_infer", shape, y, ry, nx, 1e-4, 1.0);

    float *bufs[] = {x, y, dy, dx, g, b, mean, invstd, rm, rv, dg, dbeta};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        B->free(ctx, bufs[i]);
    free(ry), free(rdx), free(rmean), free(rinv), free(rrm), free(rrv), free(rdg), free(rdb);
}

static void test_concat_add(int n) {
    enum { NIN = 4 };
    size_t sizes[NIN] = {64 * 9, 128 * 9, 32 * 9, 1};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d sizes=%zu,%zu,%zu,%zu", n, sizes[0], sizes[1], sizes[2],
             sizes[3]);
    size_t total = 0;
    float *xs[NIN], *dxs[NIN], *rdxs[NIN];
    for (int i = 0; i < NIN; i++) {
        total += sizes[i];
        xs[i] = falloc(n * sizes[i]), dxs[i] = falloc(n * sizes[i]), rdxs[i] = halloc(n * sizes[i]);
        fill_uniform(xs[i], n * sizes[i], -1, 1);
        fill_nan(dxs[i], n * sizes[i]);
    }
    float *y = falloc(n * total), *dy = falloc(n * total), *ry = halloc(n * total);
    fill_uniform(dy, n * total, -1, 1);
    fill_nan(y, n * total);
    B->concat_forward(ctx, n, NIN, (const float *const *)xs, sizes, y);
    ref_concat_forward(n, NIN, (const float *const *)xs, sizes, ry);
    check("concat_forward", shape, y, ry, n * total, 0.0, 1.0);
    float *skip = dxs[2];
    dxs[2] = NULL; /* a branch that needs no gradient */
    B->concat_backward(ctx, n, NIN, sizes, dy, dxs);
    ref_concat_backward(n, NIN, sizes, dy, rdxs);
    for (int i = 0; i < NIN; i++)
        if (dxs[i]) check("concat_backward", shape, dxs[i], rdxs[i], n * sizes[i], 0.0, 1.0);
    check_true("concat_backward skips a NULL input", isnan(skip[0]));
    dxs[2] = skip;

    size_t m = (size_t)n * 1003;
    float *a = falloc(m), *b = falloc(m), *s = falloc(m), *rs = halloc(m), *da = falloc(m);
    fill_uniform(a, m, -1, 1);
    fill_uniform(b, m, -1, 1);
    fill_nan(s, m);
    B->add_forward(ctx, m, a, b, s);
    ref_add_forward(m, a, b, rs);
    check("add_forward", "n*1003", s, rs, m, 0.0, 1.0);
    B->add_forward(ctx, m, a, b, a); /* in place */
    check("add_forward (in place)", "n*1003", a, rs, m, 0.0, 1.0);
    fill_nan(da, m);
    B->add_backward(ctx, m, s, da, NULL);
    check("add_backward", "n*1003", da, s, m, 0.0, 1.0);

    for (int i = 0; i < NIN; i++)
        B->free(ctx, xs[i]), B->free(ctx, dxs[i]), free(rdxs[i]);
    B->free(ctx, y), B->free(ctx, dy), B->free(ctx, a), B->free(ctx, b), B->free(ctx, s);
    B->free(ctx, da);
    free(ry), free(rs);
}

static void test_dropout(int n, size_t size, float rate) {
    DropoutShape s = {n, size, rate, 0xfeedULL, 1000};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d size=%zu rate=%g", n, size, rate);
    size_t nx = (size_t)n * size;
    float *x = falloc(nx), *y = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *ry = halloc(nx), *rdx = halloc(nx);
    uint8_t *mask = B->alloc(ctx, nx), *rmask = malloc(nx);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(dy, nx, -1, 1);
    fill_nan(y, nx);
    B->dropout_forward(ctx, &s, x, y, mask);
    ref_dropout_forward(&s, x, ry, rmask);
    check("dropout_forward", shape, y, ry, nx, 1e-6, 1.0);
    size_t same = 0, kept = 0;
    for (size_t i = 0; i < nx; i++)
        same += mask[i] == rmask[i], kept += mask[i];
    printf("dropout_forward mask %s: %zu of %zu as the reference, %.4f kept (expected %.4f)\n",
           shape, same, nx, (double)kept / nx, 1.0 - rate);
    check_true("dropout mask equals the reference", same == nx);
    check_true("dropout keeps 1-rate within 3 sigma",
               fabs((double)kept / nx - (1.0 - rate)) <= 3 * sqrt(rate * (1 - rate) / nx) + 1e-9);
    fill_nan(dx, nx);
    B->dropout_backward(ctx, &s, mask, dy, dx);
    ref_dropout_backward(&s, rmask, dy, rdx);
    check("dropout_backward", shape, dx, rdx, nx, 1e-6, 1.0);
    /* the same samples in a later call (a micro-batch, another rank's slice): the same mask */
    if (n >= 3) {
        DropoutShape part = s;
        part.batch = n - 2, part.first_sample = s.first_sample + 2;
        float *y2 = falloc(nx);
        uint8_t *m2 = B->alloc(ctx, nx);
        B->dropout_forward(ctx, &part, x + 2 * size, y2, m2);
        check("dropout_forward, samples 2.. in their own call", shape, y2, y + 2 * size,
              (size_t)(n - 2) * size, 0.0, 1.0);
        B->free(ctx, y2), B->free(ctx, m2);
    }
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, mask);
    free(ry), free(rdx), free(rmask);
}

static void test_embedding(int rows, int vocab, int dim) {
    EmbeddingShape s = {rows, vocab, dim};
    char shape[96];
    snprintf(shape, sizeof shape, "rows=%d vocab=%d dim=%d", rows, vocab, dim);
    float *ids = falloc(rows), *w = falloc((size_t)vocab * dim), *y = falloc((size_t)rows * dim);
    float *dy = falloc((size_t)rows * dim), *dw = falloc((size_t)vocab * dim);
    float *ry = halloc((size_t)rows * dim), *rdw = halloc((size_t)vocab * dim);
    for (int r = 0; r < rows; r++) /* few distinct ids: repeats accumulate */
        ids[r] =
            (float)(xorshift64() % (uint64_t)(vocab < 5 ? vocab : 5) * (vocab / 5 + 1) % vocab);
    fill_uniform(w, (size_t)vocab * dim, -1, 1);
    fill_uniform(dy, (size_t)rows * dim, -1, 1);
    fill_nan(y, (size_t)rows * dim);
    B->embedding_forward(ctx, &s, ids, w, y);
    ref_embedding_forward(&s, ids, w, ry);
    check("embedding_forward", shape, y, ry, (size_t)rows * dim, 0.0, 1.0);
    fill_nan(dw, (size_t)vocab * dim);
    B->embedding_backward(ctx, &s, ids, dy, dw);
    ref_embedding_backward(&s, ids, dy, rdw);
    check("embedding_backward", shape, dw, rdw, (size_t)vocab * dim, 1e-6, 1.0);
    B->free(ctx, ids), B->free(ctx, w), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dw);
    free(ry), free(rdw);
}

static void test_lstm(int batch, int seq, int in, int hidden) {
    LstmShape s = {batch, seq, in, hidden};
    char shape[96];
    snprintf(shape, sizeof shape, "batch=%d seq=%d in=%d hidden=%d", batch, seq, in, hidden);
    size_t nx = (size_t)batch * seq * in, ny = (size_t)batch * seq * hidden;
    size_t nw = (size_t)4 * hidden * (in + hidden), nb = (size_t)4 * hidden;
    float *x = falloc(nx), *w = falloc(nw), *b = falloc(nb), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(nb);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(nb);
    void *reserve = B->alloc(ctx, B->lstm_reserve_bytes(ctx, &s));
    void *work = B->alloc(ctx, B->lstm_workspace_bytes(ctx, &s));
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -0.5f, 0.5f);
    fill_uniform(b, nb, -0.5f, 0.5f);
    fill_uniform(dy, ny, -1, 1);
    fill_nan(y, ny);
    B->lstm_forward(ctx, &s, x, w, b, y, reserve, work);
    ref_lstm_forward(&s, x, w, b, ry);
    check("lstm_forward", shape, y, ry, ny, 1e-5, 1.0);
    fill_nan(dx, nx), fill_nan(dw, nw), fill_nan(db, nb);
    B->lstm_backward(ctx, &s, x, w, y, reserve, dy, dx, dw, db, work);
    ref_lstm_backward(&s, x, w, b, dy, rdx, rdw, rdb);
    check("lstm_backward dx", shape, dx, rdx, nx, 1e-4, 1.0);
    check("lstm_backward dw", shape, dw, rdw, nw, 1e-4, 1.0);
    check("lstm_backward db", shape, db, rdb, nb, 1e-4, 1.0);
    B->lstm_backward(ctx, &s, x, w, y, reserve, dy, NULL, dw, db, work); /* overwrite, no dx */
    check("lstm_backward(dx=NULL) dw", shape, dw, rdw, nw, 1e-4, 1.0);
    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db), B->free(ctx, reserve), B->free(ctx, work);
    free(ry), free(rdx), free(rdw), free(rdb);
}

int main(void) {
    BackendConfig cfg = {.threads = 1, .local_rank = 0, .gpus_per_node = 0};
    if (B->init(&cfg, &ctx) != 0) {
        fprintf(stderr, "cpu_backend init failed\n");
        return 1;
    }
    check_true("backend name is \"cpu\"", strcmp(B->name, "cpu") == 0);
    test_misc();

    test_fc(64, 800, 500); /* LeNet fc1 */
    test_fc(64, 500, 10);  /* LeNet fc2 */
    test_fc(1, 7, 3);
    test_fc(5, 37, 19);
    test_fc(3, 1, 1);
    test_fc(2, 2675, 129);

    /*        n  c_in h_in w_in c_out k stride pad */
    test_conv(3, 1, 28, 28, 20, 5, 1, 0);  /* LeNet conv1 */
    test_conv(2, 20, 12, 12, 50, 5, 1, 0); /* LeNet conv2 */
    test_conv(2, 3, 9, 7, 4, 3, 2, 1);     /* stride 2, pad 1, odd sizes */
    test_conv(1, 5, 6, 6, 3, 3, 1, 1);     /* "same" padding, batch 1 */
    test_conv(2, 6, 5, 7, 4, 1, 1, 0);     /* pointwise (no im2col) */
    test_conv(2, 3, 7, 7, 2, 1, 2, 0);     /* 1x1 with stride 2 */
    test_conv(1, 2, 11, 8, 3, 4, 3, 2);    /* stride 3, pad 2, even kernel */
    test_conv(1, 2, 5, 5, 3, 2, 1, 2);     /* pad >= k: outputs that see only padding */
    test_conv(2, 2, 8, 8, 3, 3, 2, 0);     /* last input row/column not covered */
    test_conv(1, 3, 5, 5, 2, 5, 1, 0);     /* kernel as large as the input: 1x1 output */
    test_conv(4, 8, 16, 16, 16, 3, 2, 1);  /* ResNet-like downsampling */
    /* the CPU backend's GEMM grouping (several small images per GEMM, a last partial group) and
     * row blocking (a column matrix over 8 MB, in blocks of output rows) */
    test_conv(5, 16, 14, 14, 8, 3, 1, 1);   /* 196 pixels: groups of 3 and 2 samples */
    test_conv(3, 32, 7, 7, 16, 1, 1, 0);    /* pointwise, grouped */
    test_conv(1, 64, 64, 64, 8, 3, 1, 1);   /* blocked: 576 x 4096 columns */
    test_conv(1, 64, 130, 130, 4, 3, 2, 1); /* blocked, stride 2 */
    /* 3x3, stride 1, pad 1, >= 16 channels, >= 400 pixels: the CPU backend's Winograd F(2x2, 3x3)
     * for the forward and the input gradient (weights: GEMM below 256 channels, Winograd above) */
    test_conv(2, 16, 20, 21, 24, 3, 1, 1);   /* odd width: a half tile */
    test_conv(1, 32, 21, 23, 16, 3, 1, 1);   /* odd height and width */
    test_conv(3, 16, 28, 28, 64, 3, 1, 1);   /* several blocks of tile rows */
    test_conv(1, 256, 20, 21, 256, 3, 1, 1); /* the weight gradient by Winograd too */

    /*           n  c  h_in w_in k stride ties */
    test_pool(3, 20, 24, 24, 2, 2, 0, 0); /* LeNet pool1 */
    test_pool(2, 50, 8, 8, 2, 2, 0, 0);   /* LeNet pool2 */
    test_pool(1, 3, 7, 9, 2, 2, 0, 0);    /* odd sizes: last row/column dropped */
    test_pool(2, 2, 7, 7, 3, 2, 0, 0);    /* overlapping windows */
    test_pool(1, 2, 5, 6, 3, 1, 0, 0);    /* stride 1 */
    test_pool(2, 3, 9, 9, 3, 3, 0, 0);
    test_pool(2, 4, 8, 8, 2, 2, 0, 3); /* ties: first maximum wins */
    test_pool(2, 4, 9, 9, 3, 2, 0, 3); /* ties, overlapping */

    test_relu(1);
    test_relu(17);
    test_relu(1003);
    test_relu(64 * 500);

    test_xent(64, 10, 5.0f);
    test_xent(1, 1, 1.0f);
    test_xent(1, 10, 3.0f);
    test_xent(7, 5, 500.0f); /* exp() would overflow without subtracting the max */
    test_xent(3, 26752, 5.0f);

    test_sgd(1003, 0.1f, 0.9f, 5e-4f, 3);
    test_sgd(1003, 0.05f, 0.0f, 1e-4f, 2); /* no momentum: v == NULL */
    test_sgd(17, 0.01f, 0.9f, 0.0f, 4);

    test_axpy_scale(1003);
    test_expf();
    /*            n  c  h   w  k stride pad ties */
    test_pool(2, 3, 12, 12, 3, 2, 1, 0); /* ResNet / GoogLeNet stem pool */
    test_pool(2, 4, 7, 7, 3, 1, 1, 0);   /* inception pool branch: same size */
    test_pool(1, 2, 9, 8, 3, 2, 1, 3);   /* odd sizes, ties */
    test_pool(1, 3, 6, 6, 5, 3, 2, 0);   /* large window */
    test_global_avgpool(2 * 16, 49);
    test_global_avgpool(3, 1);
    /*       n  c  h  w  size alpha  beta  bias |x| */
    test_lrn(2, 8, 5, 7, 5, 1e-4f, 0.75f, 2.0f, 1.0f); /* AlexNet */
    test_lrn(1, 6, 4, 4, 5, 0.5f, 0.75f, 1.0f, 3.0f);  /* strong normalisation */
    test_lrn(2, 5, 3, 3, 4, 0.3f, 0.6f, 1.5f, 2.0f);   /* even size, other beta (powf path) */
    test_lrn(1, 3, 2, 9, 1, 1.0f, 0.75f, 1.0f, 1.0f);  /* window of one channel */
    test_batchnorm(4, 6, 25, 0.0f);                    /* after a conv */
    test_batchnorm(8, 10, 1, 3.0f);                    /* after an fc, shifted mean */
    test_batchnorm(2, 3, 1003, -2.0f);
    test_concat_add(3);
    test_dropout(5, 1003, 0.5f);
    test_dropout(64, 4096, 0.4f);
    test_dropout(3, 17, 0.0f);
    test_embedding(64, 50, 16);
    test_embedding(7, 3, 5);
    /*        batch seq in hidden */
    test_lstm(3, 5, 4, 6);
    test_lstm(1, 1, 3, 2);
    test_lstm(2, 7, 16, 9);

    B->finalize(ctx);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
