/* test_kernels.c - compares every kernel of the CPU backend with the naive references.
 *
 * For each kernel and several shapes (odd sizes, batch 1, LeNet sizes, conv stride 2 / padding,
 * pointwise conv, overlapping pools, ties, extreme logits) it fills inputs from a seeded xorshift
 * generator, runs cpu_backend and tests/ref_kernels.c, and prints
 *     kernel shape: max abs diff X (tolerance T) ok|FAIL
 * An element passes when |got - ref| <= rtol * max(floor, |ref|) (floor is 1 unless stated, so the
 * tolerance is relative for large values and absolute for small ones); NaN never passes. Output
 * buffers are pre-filled with NaN so an element the kernel forgets to write fails. Exit status: 0
 * when everything passes, 1 otherwise.
 */
#include "backend.h"
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
    char shape[160], what[200];
    snprintf(shape, sizeof shape, "n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in,
             h_in, w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h_in * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * s.h_out * s.w_out;

    size_t ws = B->conv_workspace_bytes(ctx, &s);
    size_t want = (size_t)c_in * k * k * s.h_out * s.w_out * sizeof(float);
    snprintf(what, sizeof what, "conv_workspace_bytes %s = %zu", shape, ws);
    check_true(what, ws == want);
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

    snprintf(what, sizeof what, "conv workspace bounds %s", shape);
    check_true(what, guard_intact(guard));

    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db), B->free(ctx, work);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- max pooling ---- */

/* levels > 0: inputs drawn from `levels` integer values, so windows have ties */
static void test_maxpool(int n, int c, int h_in, int w_in, int k, int stride, int levels) {
    PoolShape s = {.batch = n, .c = c, .h_in = h_in, .w_in = w_in, .k = k, .stride = stride};
    s.h_out = (h_in - k) / stride + 1;
    s.w_out = (w_in - k) / stride + 1;
    char shape[128];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d k=%d stride=%d%s", n, c, h_in, w_in, k, stride,
             levels ? " (ties)" : "");
    size_t nx = (size_t)n * c * h_in * w_in, ny = (size_t)n * c * s.h_out * s.w_out;

    float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
    int32_t *am = B->alloc(ctx, ny * sizeof(int32_t));
    float *ry = halloc(ny), *rdx = halloc(nx);
    int32_t *ram = malloc(ny * sizeof(int32_t));
    fill_uniform(x, nx, -1, 1);
    if (levels)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)(int)(uniform(0, (float)levels));
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    for (size_t i = 0; i < ny; i++)
        am[i] = -1;
    B->maxpool_forward(ctx, &s, x, y, am);
    ref_maxpool_forward(&s, x, ry, ram);
    check("maxpool_forward", shape, y, ry, ny, 0.0, 1.0);
    check_exact_i32("maxpool_forward argmax", shape, am, ram, ny);

    fill_nan(dx, nx);
    B->maxpool_backward(ctx, &s, x, y, am, dy, dx);
    ref_maxpool_backward(&s, x, dy, rdx);
    check("maxpool_backward", shape, dx, rdx, nx, 1e-6, 1.0);

    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, am);
    free(ry), free(rdx), free(ram);
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

    /*           n  c  h_in w_in k stride ties */
    test_maxpool(3, 20, 24, 24, 2, 2, 0); /* LeNet pool1 */
    test_maxpool(2, 50, 8, 8, 2, 2, 0);   /* LeNet pool2 */
    test_maxpool(1, 3, 7, 9, 2, 2, 0);    /* odd sizes: last row/column dropped */
    test_maxpool(2, 2, 7, 7, 3, 2, 0);    /* overlapping windows */
    test_maxpool(1, 2, 5, 6, 3, 1, 0);    /* stride 1 */
    test_maxpool(2, 3, 9, 9, 3, 3, 0);
    test_maxpool(2, 4, 8, 8, 2, 2, 3); /* ties: first maximum wins */
    test_maxpool(2, 4, 9, 9, 3, 2, 3); /* ties, overlapping */

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

    B->finalize(ctx);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
