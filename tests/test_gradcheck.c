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
 * The model-zoo layers are checked the same way: padded max pooling (kinks skipped as above),
 * average and global average pooling, LRN, batch normalisation in training mode (dx, dgamma,
 * dbeta through the batch statistics), concatenation, residual add, dropout (a fixed seeded mask:
 * the layer is linear in x), embedding (dW) and the LSTM layer (dx, dW, db through every step).
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

/* ---- model-zoo layers ---- */

/* A generic layer for the zoo checks: forward() writes y[ny] from the current inputs. */
typedef struct ZooLayer {
    void (*forward)(struct ZooLayer *);
    float *y, *r;
    size_t ny;
    void *state;
    int32_t *argmax, *argmax_mark; /* max pooling: the branch taken */
    size_t nargmax;
} ZooLayer;

static double zoo_loss(Probe *pr) {
    ZooLayer *l = pr->layer;
    l->forward(l);
    return dot(l->y, l->r, l->ny);
}
static void zoo_mark(Probe *pr) {
    ZooLayer *l = pr->layer;
    memcpy(l->argmax_mark, l->argmax, l->nargmax * sizeof(int32_t));
}
static int zoo_same(Probe *pr) {
    ZooLayer *l = pr->layer;
    return memcmp(l->argmax_mark, l->argmax, l->nargmax * sizeof(int32_t)) == 0;
}

/* distinct values `gap` apart, shuffled: no ties, no kink within eps < gap/2 */
static void fill_ramp(float *x, size_t n, float gap) {
    for (size_t i = 0; i < n; i++)
        x[i] = gap * (float)i - 0.5f * gap * (float)n;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(xorshift64() % (i + 1));
        float t = x[i];
        x[i] = x[j], x[j] = t;
    }
}

typedef struct {
    PoolShape s;
    float *x;
    int avg;
} PoolState;

static void pool_fwd(ZooLayer *l) {
    PoolState *st = l->state;
    if (st->avg)
        B->avgpool_forward(ctx, &st->s, st->x, l->y);
    else
        B->maxpool_forward(ctx, &st->s, st->x, l->y, l->argmax);
}

static void check_pool(int n, int c, int h, int w, int k, int stride, int pad, int avg) {
    PoolState st = {{n, c, h, w, k, stride, pad, (h + 2 * pad - k) / stride + 1,
                     (w + 2 * pad - k) / stride + 1},
                    NULL,
                    avg};
    char name[128];
    snprintf(name, sizeof name, "%s n=%d c=%d %dx%d k=%d stride=%d pad=%d",
             avg ? "avgpool" : "maxpool", n, c, h, w, k, stride, pad);
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * st.s.h_out * st.s.w_out;
    st.x = falloc(nx);
    float *dx = falloc(nx);
    ZooLayer l = {pool_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, ny};
    l.argmax = B->alloc(ctx, ny * sizeof(int32_t));
    l.argmax_mark = B->alloc(ctx, ny * sizeof(int32_t));
    fill_ramp(st.x, nx, 0.05f);
    fill_uniform(l.r, ny, -1, 1);
    pool_fwd(&l);
    if (avg)
        B->avgpool_backward(ctx, &st.s, l.r, dx);
    else
        B->maxpool_backward(ctx, &st.s, l.argmax, l.r, dx);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    if (!avg) pr.same_branch = zoo_same, pr.mark = zoo_mark;
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, dx), B->free(ctx, l.y), B->free(ctx, l.r);
    B->free(ctx, l.argmax), B->free(ctx, l.argmax_mark);
}

typedef struct {
    size_t planes, plane;
    float *x;
} GapState;

static void gap_fwd(ZooLayer *l) {
    GapState *st = l->state;
    B->global_avgpool_forward(ctx, st->planes, st->plane, st->x, l->y);
}

static void check_global_avgpool(size_t planes, size_t plane) {
    GapState st = {planes, plane, falloc(planes * plane)};
    char name[96];
    snprintf(name, sizeof name, "global_avgpool planes=%zu plane=%zu", planes, plane);
    float *dx = falloc(planes * plane);
    ZooLayer l = {gap_fwd, falloc(planes), falloc(planes), planes, &st, NULL, NULL, 0};
    fill_uniform(st.x, planes * plane, -1, 1);
    fill_uniform(l.r, planes, -1, 1);
    B->global_avgpool_backward(ctx, planes, plane, l.r, dx);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check(name, "dx", &pr, st.x, dx, planes * plane, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, dx), B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    LrnShape s;
    float *x, *scale;
} LrnState;

static void lrn_fwd(ZooLayer *l) {
    LrnState *st = l->state;
    B->lrn_forward(ctx, &st->s, st->x, l->y, st->scale);
}

static void check_lrn(int n, int c, int h, int w, int size, float alpha, float beta, float bias) {
    LrnState st = {{n, c, h, w, size, alpha, beta, bias}, NULL, NULL};
    char name[128];
    snprintf(name, sizeof name, "lrn n=%d c=%d %dx%d size=%d alpha=%g beta=%g bias=%g", n, c, h, w,
             size, alpha, beta, bias);
    size_t nx = (size_t)n * c * h * w;
    st.x = falloc(nx), st.scale = falloc(nx);
    float *dx = falloc(nx);
    ZooLayer l = {lrn_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -2, 2);
    fill_uniform(l.r, nx, -1, 1);
    lrn_fwd(&l);
    B->lrn_backward(ctx, &st.s, st.x, l.y, st.scale, l.r, dx);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.scale), B->free(ctx, dx), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

typedef struct {
    BnShape s;
    float *x, *gamma, *beta, *mean, *invstd, *rmean, *rvar;
} BnState;

static void bn_fwd(ZooLayer *l) {
    BnState *st = l->state;
    B->batchnorm_forward_train(ctx, &st->s, st->x, st->gamma, st->beta, l->y, st->mean, st->invstd,
                               st->rmean, st->rvar);
}

static void check_batchnorm(int n, int c, int spatial) {
    BnState st = {{n, c, spatial, 1e-5f, 0.1f}, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "batchnorm n=%d c=%d spatial=%d", n, c, spatial);
    size_t nx = (size_t)n * c * spatial;
    st.x = falloc(nx), st.gamma = falloc(c), st.beta = falloc(c), st.mean = falloc(c);
    st.invstd = falloc(c), st.rmean = falloc(c), st.rvar = falloc(c);
    float *dx = falloc(nx), *dg = falloc(c), *db = falloc(c);
    ZooLayer l = {bn_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -2, 2);
    fill_uniform(st.gamma, c, 0.5f, 1.5f);
    fill_uniform(st.beta, c, -1, 1);
    fill_uniform(l.r, nx, -1, 1);
    bn_fwd(&l);
    B->batchnorm_backward(ctx, &st.s, st.x, st.gamma, st.mean, st.invstd, l.r, dx, dg, db);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    /* dx sums to ~0 over each channel: entries are small differences, judged against 1e-1 */
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-1);
    fd_check(name, "dgamma", &pr, st.gamma, dg, c, 1e-2f, 1e-2);
    fd_check(name, "dbeta", &pr, st.beta, db, c, 1e-2f, 1e-2);
    float *bufs[] = {st.x,    st.gamma, st.beta, st.mean, st.invstd, st.rmean,
                     st.rvar, dx,       dg,      db,      l.y,       l.r};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        B->free(ctx, bufs[i]);
}

typedef struct {
    int n;
    size_t sizes[3];
    float *xs[3];
} ConcatState;

static void concat_fwd(ZooLayer *l) {
    ConcatState *st = l->state;
    B->concat_forward(ctx, st->n, 3, (const float *const *)st->xs, st->sizes, l->y);
}

static void check_concat(int n) {
    ConcatState st = {n, {12, 7, 20}, {NULL, NULL, NULL}};
    size_t total = 39;
    ZooLayer l = {concat_fwd, falloc(n * total), falloc(n * total), n * total, &st, NULL, NULL, 0};
    float *dxs[3];
    for (int i = 0; i < 3; i++) {
        st.xs[i] = falloc(n * st.sizes[i]);
        dxs[i] = falloc(n * st.sizes[i]);
        fill_uniform(st.xs[i], n * st.sizes[i], -1, 1);
    }
    fill_uniform(l.r, n * total, -1, 1);
    B->concat_backward(ctx, n, 3, st.sizes, l.r, dxs);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    const char *what[3] = {"dx0", "dx1", "dx2"};
    for (int i = 0; i < 3; i++)
        fd_check("concat n=3 sizes=12,7,20", what[i], &pr, st.xs[i], dxs[i], n * st.sizes[i], 1e-2f,
                 1e-2);
    for (int i = 0; i < 3; i++)
        B->free(ctx, st.xs[i]), B->free(ctx, dxs[i]);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    size_t n;
    float *a, *b;
} AddState;

static void add_fwd(ZooLayer *l) {
    AddState *st = l->state;
    B->add_forward(ctx, st->n, st->a, st->b, l->y);
}

static void check_add(size_t n) {
    AddState st = {n, falloc(n), falloc(n)};
    ZooLayer l = {add_fwd, falloc(n), falloc(n), n, &st, NULL, NULL, 0};
    float *da = falloc(n), *db = falloc(n);
    fill_uniform(st.a, n, -1, 1);
    fill_uniform(st.b, n, -1, 1);
    fill_uniform(l.r, n, -1, 1);
    B->add_backward(ctx, n, l.r, da, db);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check("add n=500", "da", &pr, st.a, da, n, 1e-2f, 1e-2);
    fd_check("add n=500", "db", &pr, st.b, db, n, 1e-2f, 1e-2);
    B->free(ctx, st.a), B->free(ctx, st.b), B->free(ctx, da), B->free(ctx, db);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    DropoutShape s;
    float *x;
    uint8_t *mask;
} DropState;

static void drop_fwd(ZooLayer *l) {
    DropState *st = l->state;
    B->dropout_forward(ctx, &st->s, st->x, l->y, st->mask);
}

static void check_dropout(int n, size_t size, float rate) {
    DropState st = {{n, size, rate, 77, 5}, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "dropout n=%d size=%zu rate=%g", n, size, rate);
    size_t nx = (size_t)n * size;
    st.x = falloc(nx), st.mask = B->alloc(ctx, nx);
    float *dx = falloc(nx);
    ZooLayer l = {drop_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(l.r, nx, -1, 1);
    drop_fwd(&l);
    B->dropout_backward(ctx, &st.s, st.mask, l.r, dx);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.mask), B->free(ctx, dx), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

typedef struct {
    EmbeddingShape s;
    float *ids, *w;
} EmbState;

static void emb_fwd(ZooLayer *l) {
    EmbState *st = l->state;
    B->embedding_forward(ctx, &st->s, st->ids, st->w, l->y);
}

static void check_embedding(int rows, int vocab, int dim) {
    EmbState st = {{rows, vocab, dim}, falloc(rows), falloc((size_t)vocab * dim)};
    char name[96];
    snprintf(name, sizeof name, "embedding rows=%d vocab=%d dim=%d", rows, vocab, dim);
    size_t ny = (size_t)rows * dim, nw = (size_t)vocab * dim;
    float *dw = falloc(nw);
    ZooLayer l = {emb_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    for (int r = 0; r < rows; r++)
        st.ids[r] = (float)(xorshift64() % (uint64_t)vocab);
    fill_uniform(st.w, nw, -1, 1);
    fill_uniform(l.r, ny, -1, 1);
    B->embedding_backward(ctx, &st.s, st.ids, l.r, dw);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check(name, "dW", &pr, st.w, dw, nw, 1e-2f, 1e-2);
    B->free(ctx, st.ids), B->free(ctx, st.w), B->free(ctx, dw), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

typedef struct {
    LstmShape s;
    float *x, *w, *b;
    void *reserve, *work;
} LstmState;

static void lstm_fwd(ZooLayer *l) {
    LstmState *st = l->state;
    B->lstm_forward(ctx, &st->s, st->x, st->w, st->b, l->y, st->reserve, st->work);
}

static void check_lstm(int batch, int seq, int in, int hidden) {
    LstmState st = {{batch, seq, in, hidden}, NULL, NULL, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "lstm batch=%d seq=%d in=%d hidden=%d", batch, seq, in, hidden);
    size_t nx = (size_t)batch * seq * in, ny = (size_t)batch * seq * hidden;
    size_t nw = (size_t)4 * hidden * (in + hidden), nb = (size_t)4 * hidden;
    st.x = falloc(nx), st.w = falloc(nw), st.b = falloc(nb);
    st.reserve = B->alloc(ctx, B->lstm_reserve_bytes(ctx, &st.s));
    st.work = B->alloc(ctx, B->lstm_workspace_bytes(ctx, &st.s));
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(nb);
    ZooLayer l = {lstm_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(st.w, nw, -0.6f, 0.6f);
    fill_uniform(st.b, nb, -0.5f, 0.5f);
    fill_uniform(l.r, ny, -1, 1);
    lstm_fwd(&l);
    B->lstm_backward(ctx, &st.s, st.x, st.w, l.y, st.reserve, l.r, dx, dw, db, st.work);
    Probe pr = {.loss = zoo_loss, .layer = &l};
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    fd_check(name, "dW", &pr, st.w, dw, nw, 1e-2f, 1e-2);
    fd_check(name, "db", &pr, st.b, db, nb, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.w), B->free(ctx, st.b), B->free(ctx, st.reserve);
    B->free(ctx, st.work), B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
    B->free(ctx, l.y), B->free(ctx, l.r);
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
    check_conv(2, 3, 7, 6, 4, 3, 2, 1);     /* stride 2, pad 1, odd sizes */
    check_conv(2, 2, 8, 8, 3, 5, 1, 0);     /* LeNet-like */
    check_conv(1, 2, 9, 7, 3, 4, 3, 2);     /* stride 3, pad 2 */
    check_conv(2, 4, 5, 5, 3, 1, 1, 0);     /* pointwise */
    check_conv(1, 16, 20, 21, 16, 3, 1, 1); /* Winograd F(2x2, 3x3) forward and input gradient */

    check_pool(2, 3, 8, 8, 2, 2, 0, 0);
    check_pool(1, 2, 9, 7, 3, 2, 0, 0); /* overlapping windows, odd sizes */

    check_relu(1000);

    check_xent(4, 7);
    check_xent(1, 10);
    check_xent(16, 100);

    /*             n  c  h  w  k stride pad avg */
    check_pool(2, 3, 8, 8, 3, 2, 1, 0); /* ResNet stem pool */
    check_pool(1, 2, 7, 7, 3, 1, 1, 0); /* inception pool branch */
    check_pool(2, 3, 8, 8, 3, 2, 1, 1); /* average, padded */
    check_pool(1, 2, 9, 7, 2, 2, 0, 1);
    check_global_avgpool(6, 49);
    check_lrn(2, 7, 3, 4, 5, 1e-4f, 0.75f, 2.0f); /* AlexNet's constants */
    check_lrn(1, 6, 3, 3, 5, 0.5f, 0.75f, 1.0f);  /* strong normalisation */
    check_lrn(1, 5, 2, 3, 4, 0.3f, 0.6f, 1.5f);   /* even window, powf path */
    check_batchnorm(4, 3, 9);
    check_batchnorm(6, 5, 1);
    check_concat(3);
    check_add(500);
    check_dropout(4, 50, 0.5f);
    check_embedding(12, 6, 5);
    check_lstm(2, 4, 3, 5);
    check_lstm(1, 6, 2, 3);

    B->finalize(ctx);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
