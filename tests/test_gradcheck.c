/* test_gradcheck.c - finite-difference checks of every backward kernel of the CPU backend.
 *
 * Each layer is wrapped in a scalar loss: L = sum(y .* r) for a fixed random r (so dL/dy = r), or
 * the mean cross-entropy itself for softmax_xent. The analytic gradient comes from the backend's
 * backward with dy = r; the numerical one from central differences of the backend's own float
 * forward, (L(p+h) - L(p-h)) / (2h), accumulated in double, with h the perturbation actually
 * representable in float. A sample of entries of every gradient (dx, dw, db) is compared with
 *     rel = |fd - analytic| / max(|fd|, |analytic|, floor)
 * (floor keeps near-zero gradients from being judged relatively). Inputs of ReLU and max pooling
 * are placed away from their kinks (|x| >= 0.05 for ReLU, window values at least 0.05 apart for the
 * pool, eps = 1e-2), and an entry whose perturbation still changes the pooling argmax is skipped.
 * Prints the max relative error per layer and gradient; exit status 0 when all pass, 1 otherwise.
 */
#include "backend.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *B = &cpu_backend;
static BackendCtx *ctx;
static int failures;

#define SAMPLES 40 /* entries checked per gradient (all of them when fewer) */
#define RTOL    1e-2

/* ---- helpers ---- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t xorshift64(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static float uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((xorshift64() >> 40) * (1.0 / 16777216.0));
}

static float *falloc(size_t n) {
    float *p = B->alloc(ctx, n * sizeof(float));
    if (!p) {
        fprintf(stderr, "alloc failed\n");
        exit(2);
    }
    return p;
}

static void fill_uniform(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        a[i] = uniform(lo, hi);
}

static double dot(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

/* A layer under test: loss() runs the forward on the current inputs and returns L;
 * same_branch(), when set, says whether the last two forwards (the one after mark() and the
 * latest) took the same branch, i.e. no kink was crossed. */
typedef struct Probe {
    double (*loss)(struct Probe *);
    int (*same_branch)(struct Probe *); /* may be NULL */
    void (*mark)(struct Probe *);       /* remember the branch of the current forward */
    void *layer;
} Probe;

/* Checks grad[n] (analytic) against central differences of probe->loss in param[n]. */
static void fd_check(const char *layer, const char *what, Probe *pr, float *param,
                     const float *grad, size_t n, float eps, double floor) {
    size_t count = n < SAMPLES ? n : SAMPLES, skipped = 0;
    double max_rel = 0.0;
    for (size_t s = 0; s < count; s++) {
        size_t j = n <= SAMPLES ? s : (size_t)(xorshift64() % n);
        const float p0 = param[j];
        param[j] = p0 + eps;
        const double h_plus = (double)param[j] - p0;
        const double l_plus = pr->loss(pr);
        if (pr->mark) pr->mark(pr);
        param[j] = p0 - eps;
        const double h_minus = (double)param[j] - p0;
        const double l_minus = pr->loss(pr);
        int straddles = pr->same_branch && !pr->same_branch(pr);
        param[j] = p0;
        if (straddles) {
            skipped++;
            continue;
        }
        const double fd = (l_plus - l_minus) / (h_plus - h_minus);
        const double an = grad[j];
        const double rel = fabs(fd - an) / fmax(floor, fmax(fabs(fd), fabs(an)));
        if (!(rel <= max_rel)) max_rel = isnan(rel) ? INFINITY : fmax(rel, max_rel);
    }
    int ok = max_rel <= RTOL && skipped < count;
    printf("gradcheck %s %s: %zu entries (%zu skipped at kinks), max rel err %.2e (tolerance "
           "%.0e) %s\n",
           layer, what, count, skipped, max_rel, RTOL, ok ? "ok" : "FAIL");
    if (!ok) failures++;
}

/* ---- fully connected ---- */

typedef struct {
    FcShape s;
    float *x, *w, *b, *y, *r;
} FcLayer;

static double fc_loss(Probe *pr) {
    FcLayer *l = pr->layer;
    B->fc_forward(ctx, &l->s, l->x, l->w, l->b, l->y);
    return dot(l->y, l->r, (size_t)l->s.batch * l->s.out);
}

static void check_fc(int n, int in, int out) {
    FcLayer l = {.s = {.batch = n, .in = in, .out = out}};
    char name[96];
    snprintf(name, sizeof name, "fc n=%d in=%d out=%d", n, in, out);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    l.x = falloc(nx), l.w = falloc(nw), l.b = falloc(out), l.y = falloc(ny), l.r = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(out);
    fill_uniform(l.x, nx, -1, 1);
    fill_uniform(l.w, nw, -1, 1);
    fill_uniform(l.b, out, -1, 1);
    fill_uniform(l.r, ny, -1, 1);

    B->fc_forward(ctx, &l.s, l.x, l.w, l.b, l.y);
    B->fc_backward(ctx, &l.s, l.x, l.w, l.r, dx, dw, db);
    Probe pr = {.loss = fc_loss, .layer = &l};
    fd_check(name, "dx", &pr, l.x, dx, nx, 1e-2f, 1e-2);
    fd_check(name, "dw", &pr, l.w, dw, nw, 1e-2f, 1e-2);
    fd_check(name, "db", &pr, l.b, db, out, 1e-2f, 1e-2);

    B->free(ctx, l.x), B->free(ctx, l.w), B->free(ctx, l.b), B->free(ctx, l.y), B->free(ctx, l.r);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
}

/* ---- convolution ---- */

typedef struct {
    ConvShape s;
    float *x, *w, *b, *y, *r;
    void *work;
} ConvLayer;

static double conv_loss(Probe *pr) {
    ConvLayer *l = pr->layer;
    B->conv_forward(ctx, &l->s, l->x, l->w, l->b, l->y, l->work);
    return dot(l->y, l->r, (size_t)l->s.batch * l->s.c_out * l->s.h_out * l->s.w_out);
}

static void check_conv(int n, int c_in, int h_in, int w_in, int c_out, int k, int stride, int pad) {
    ConvLayer l = {.s = {.batch = n,
                         .c_in = c_in,
                         .h_in = h_in,
                         .w_in = w_in,
                         .c_out = c_out,
                         .k = k,
                         .stride = stride,
                         .pad = pad}};
    l.s.h_out = (h_in + 2 * pad - k) / stride + 1;
    l.s.w_out = (w_in + 2 * pad - k) / stride + 1;
    char name[160];
    snprintf(name, sizeof name, "conv n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in,
             h_in, w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h_in * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * l.s.h_out * l.s.w_out;
    l.x = falloc(nx), l.w = falloc(nw), l.b = falloc(c_out), l.y = falloc(ny), l.r = falloc(ny);
    l.work = B->alloc(ctx, B->conv_workspace_bytes(ctx, &l.s));
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(c_out);
    fill_uniform(l.x, nx, -1, 1);
    fill_uniform(l.w, nw, -1, 1);
    fill_uniform(l.b, c_out, -1, 1);
    fill_uniform(l.r, ny, -1, 1);

    B->conv_forward(ctx, &l.s, l.x, l.w, l.b, l.y, l.work);
    B->conv_backward(ctx, &l.s, l.x, l.w, l.r, dx, dw, db, l.work);
    Probe pr = {.loss = conv_loss, .layer = &l};
    fd_check(name, "dx", &pr, l.x, dx, nx, 1e-2f, 1e-2);
    fd_check(name, "dw", &pr, l.w, dw, nw, 1e-2f, 1e-2);
    fd_check(name, "db", &pr, l.b, db, c_out, 1e-2f, 1e-2);

    B->free(ctx, l.x), B->free(ctx, l.w), B->free(ctx, l.b), B->free(ctx, l.y), B->free(ctx, l.r);
    B->free(ctx, l.work), B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
}

/* ---- max pooling ---- */

typedef struct {
    PoolShape s;
    float *x, *y, *r;
    int32_t *argmax, *argmax_mark;
} PoolLayer;

static size_t pool_out(const PoolShape *s) {
    return (size_t)s->batch * s->c * s->h_out * s->w_out;
}

static double pool_loss(Probe *pr) {
    PoolLayer *l = pr->layer;
    B->maxpool_forward(ctx, &l->s, l->x, l->y, l->argmax);
    return dot(l->y, l->r, pool_out(&l->s));
}

static void pool_mark(Probe *pr) {
    PoolLayer *l = pr->layer;
    memcpy(l->argmax_mark, l->argmax, pool_out(&l->s) * sizeof(int32_t));
}

static int pool_same(Probe *pr) {
    PoolLayer *l = pr->layer;
    return memcmp(l->argmax_mark, l->argmax, pool_out(&l->s) * sizeof(int32_t)) == 0;
}

static void check_maxpool(int n, int c, int h_in, int w_in, int k, int stride) {
    PoolLayer l = {.s = {.batch = n, .c = c, .h_in = h_in, .w_in = w_in, .k = k, .stride = stride}};
    l.s.h_out = (h_in - k) / stride + 1;
    l.s.w_out = (w_in - k) / stride + 1;
    char name[128];
    snprintf(name, sizeof name, "maxpool n=%d c=%d %dx%d k=%d stride=%d", n, c, h_in, w_in, k,
             stride);
    size_t nx = (size_t)n * c * h_in * w_in, ny = pool_out(&l.s);
    l.x = falloc(nx), l.y = falloc(ny), l.r = falloc(ny);
    l.argmax = B->alloc(ctx, ny * sizeof(int32_t));
    l.argmax_mark = B->alloc(ctx, ny * sizeof(int32_t));
    float *dx = falloc(nx);

    /* distinct values 0.05 apart (a shuffled ramp): no ties, no argmax change for eps = 1e-2 */
    for (size_t i = 0; i < nx; i++)
        l.x[i] = 0.05f * (float)i - 0.025f * (float)nx;
    for (size_t i = nx - 1; i > 0; i--) {
        size_t j = (size_t)(xorshift64() % (i + 1));
        float t = l.x[i];
        l.x[i] = l.x[j], l.x[j] = t;
    }
    fill_uniform(l.r, ny, -1, 1);

    B->maxpool_forward(ctx, &l.s, l.x, l.y, l.argmax);
    B->maxpool_backward(ctx, &l.s, l.x, l.y, l.argmax, l.r, dx);
    Probe pr = {.loss = pool_loss, .same_branch = pool_same, .mark = pool_mark, .layer = &l};
    fd_check(name, "dx", &pr, l.x, dx, nx, 1e-2f, 1e-2);

    B->free(ctx, l.x), B->free(ctx, l.y), B->free(ctx, l.r), B->free(ctx, l.argmax);
    B->free(ctx, l.argmax_mark), B->free(ctx, dx);
}

/* ---- ReLU ---- */

typedef struct {
    size_t n;
    float *x, *y, *r;
} ReluLayer;

static double relu_loss(Probe *pr) {
    ReluLayer *l = pr->layer;
    B->relu_forward(ctx, l->n, l->x, l->y);
    return dot(l->y, l->r, l->n);
}

static void check_relu(size_t n) {
    ReluLayer l = {.n = n};
    char name[64];
    snprintf(name, sizeof name, "relu n=%zu", n);
    l.x = falloc(n), l.y = falloc(n), l.r = falloc(n);
    float *dx = falloc(n);
    fill_uniform(l.x, n, -1, 1);
    for (size_t i = 0; i < n; i++) /* keep |x| >= 0.05 so x +- eps never crosses 0 */
        l.x[i] = l.x[i] >= 0 ? 0.05f + l.x[i] : l.x[i] - 0.05f;
    fill_uniform(l.r, n, -1, 1);

    B->relu_forward(ctx, n, l.x, l.y);
    B->relu_backward(ctx, n, l.y, l.r, dx);
    Probe pr = {.loss = relu_loss, .layer = &l};
    fd_check(name, "dx", &pr, l.x, dx, n, 1e-2f, 1e-2);

    B->free(ctx, l.x), B->free(ctx, l.y), B->free(ctx, l.r), B->free(ctx, dx);
}

/* ---- softmax cross-entropy ---- */

typedef struct {
    int n, c;
    float *z;
    int32_t *labels;
} XentLayer;

static double xent_loss(Probe *pr) {
    XentLayer *l = pr->layer;
    float stats[2]; /* {loss, correct}: host memory on the CPU backend */
    B->softmax_xent(ctx, l->n, l->c, l->z, l->labels, NULL, stats);
    return stats[0];
}

static void check_xent(int n, int c) {
    XentLayer l = {.n = n, .c = c};
    char name[64];
    snprintf(name, sizeof name, "softmax_xent n=%d c=%d", n, c);
    size_t nz = (size_t)n * c;
    l.z = falloc(nz);
    l.labels = B->alloc(ctx, (size_t)n * sizeof(int32_t));
    float *dz = falloc(nz);
    fill_uniform(l.z, nz, -2, 2);
    for (int i = 0; i < n; i++)
        l.labels[i] = (int32_t)(xorshift64() % (uint64_t)c);

    float stats[2];
    B->softmax_xent(ctx, n, c, l.z, l.labels, dz, stats);
    Probe pr = {.loss = xent_loss, .layer = &l};
    /* Gradients are O(1/n) and smaller for many classes, while the float loss (~log c) carries
     * ~1e-7 relative rounding, i.e. ~2e-5 of noise in fd at eps = 1e-2: entries below 0.1/n are
     * therefore judged absolutely (error <= 1e-3/n). */
    fd_check(name, "dlogits", &pr, l.z, dz, nz, 1e-2f, 0.1 / n);

    B->free(ctx, l.z), B->free(ctx, l.labels), B->free(ctx, dz);
}

int main(void) {
    BackendConfig cfg = {.threads = 1, .local_rank = 0, .gpus_per_node = 0};
    if (B->init(&cfg, &ctx) != 0) {
        fprintf(stderr, "cpu_backend init failed\n");
        return 1;
    }

    check_fc(3, 7, 5);
    check_fc(1, 33, 17);

    /*         n  c_in h_in w_in c_out k stride pad */
    check_conv(2, 3, 7, 6, 4, 3, 2, 1); /* stride 2, pad 1, odd sizes */
    check_conv(2, 2, 8, 8, 3, 5, 1, 0); /* LeNet-like */
    check_conv(1, 2, 9, 7, 3, 4, 3, 2); /* stride 3, pad 2 */
    check_conv(2, 4, 5, 5, 3, 1, 1, 0); /* pointwise */

    check_maxpool(2, 3, 8, 8, 2, 2);
    check_maxpool(1, 2, 9, 7, 3, 2); /* overlapping windows, odd sizes */

    check_relu(1000);

    check_xent(4, 7);
    check_xent(1, 10);
    check_xent(16, 100);

    B->finalize(ctx);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
