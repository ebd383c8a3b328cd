/* test_cuda_kernels.c - every layer of the CUDA backend against the naive CPU references
 * (tests/ref_kernels.c) on the same seeded inputs. Exits 77 (skipped) when no GPU is visible.
 *
 * Inputs are made on the host, uploaded, run through cuda_backend, downloaded and compared:
 * element i passes when |got - ref| <= rtol * max(floor, |ref|); NaN never passes; outputs are
 * pre-filled with NaN on the device so a forgotten element fails. Tolerances (fp32 throughout):
 *   fc (cuBLAS + our bias kernels)        1e-4 * max(1, |ref|)   like the CPU backend
 *   conv (cuDNN, the algorithm strict fp32 admits: kernels/cuda/cuda_plan.h), against the float64
 *   result (tests/conv_check.c): every element within gamma(K) * sum|products|, the error bound
 *   of a direct fp32 sum of its K products (relative to the size of the products, not of the
 *   result: a gradient summing to near zero is held to its terms' rounding, no looser)
 *   max pooling forward / ReLU             exact
 *   max pooling backward                   1e-6 (inputs without ties: cuDNN and the reference
 *                                          route each gradient to the same maximum)
 *   softmax loss 1e-5, dlogits 1e-4 * max(1/n, |ref|), correct count exact
 *   SGD                                    1e-6 * max(1, |ref|) (the GPU may fuse multiply-adds)
 *   AdamW p, m, v                          1e-5 * max(1, 0.1, 0.01 resp., |ref|) against the
 *                                          float64 reference over several steps
 * Each result line keeps its form "<what>: max abs diff <X> ..." (tests/compare_tf32_logs.py reads
 * it); the checks are counted by tests/harness.h. Exit status: 0 all pass, 1 a failure, 77 no
 * GPU. */
#include "backend.h"
#include "conv_check.h" /* defines: conv_exact, conv_measure */
#include "cuda.h"
#include "harness.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *B = &cuda_backend;
static BackendCtx *ctx;
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static float uniform(float lo, float hi) {
    uint64_t x = rng_state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    rng_state = x;
    return lo + (hi - lo) * (float)((x >> 40) * (1.0 / 16777216.0));
}

static float *host(size_t n, float lo, float hi) /* host array, uniform in [lo, hi) */
{
    float *p = halloc(n);
    for (size_t i = 0; i < n; i++)
        p[i] = uniform(lo, hi);
    return p;
}

static void *dev_copy(const void *h, size_t bytes) /* device copy of a host array */
{
    void *d = B->alloc(ctx, bytes);
    B->upload(ctx, d, h, bytes);
    return d;
}

static float *dev_nan(size_t n) /* device array of NaN */
{
    float *h = halloc(n);
    fill_nan(h, n);
    float *d = dev_copy(h, n * sizeof(float));
    free(h);
    return d;
}

static float *fetch(const float *d, size_t n) /* host copy of a device array */
{
    float *h = halloc(n);
    B->download(ctx, h, d, n * sizeof(float));
    return h;
}

/* Compares the device array got[n] with the host reference ref[n]. */
static void check(const char *kernel, const char *shape, const float *got_dev, const float *ref,
                  size_t n, double rtol, double floor) {
    float *got = fetch(got_dev, n);
    double worst = 0.0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]);
        if (!(d <= rtol * fmax(floor, fabs((double)ref[i])))) ok = 0;
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    printf("%s %s: max abs diff %.3g (tolerance %.0e*max(%.3g,|ref|)) %s\n", kernel, shape, worst,
           rtol, floor, ok ? "ok" : "FAIL");
    check_count(ok);
    free(got);
}

/* ---- fully connected ---- */

static void test_fc(int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    char shape[64];
    snprintf(shape, sizeof shape, "n=%d in=%d out=%d", n, in, out);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    float *x = host(nx, -1, 1), *w = host(nw, -1, 1), *b = host(out, -1, 1), *dy = host(ny, -1, 1);
    float *ry = malloc(ny * 4), *rdx = malloc(nx * 4), *rdw = malloc(nw * 4),
          *rdb = malloc(out * 4);
    float *dx_ = dev_copy(x, nx * 4), *dw_ = dev_copy(w, nw * 4), *db_ = dev_copy(b, out * 4);
    float *ddy = dev_copy(dy, ny * 4), *y = dev_nan(ny), *gx = dev_nan(nx), *gw = dev_nan(nw),
          *gb = dev_nan(out);

    B->fc_forward(ctx, &s, dx_, dw_, db_, y);
    ref_fc_forward(&s, x, w, b, ry);
    check("fc_forward", shape, y, ry, ny, 1e-4, 1.0);
    B->fc_backward(ctx, &s, dx_, dw_, ddy, gx, gw, gb);
    ref_fc_backward(&s, x, w, dy, rdx, rdw, rdb);
    check("fc_backward dx", shape, gx, rdx, nx, 1e-4, 1.0);
    check("fc_backward dw", shape, gw, rdw, nw, 1e-4, 1.0);
    check("fc_backward db", shape, gb, rdb, out, 1e-4, 1.0);
    B->fc_backward(ctx, &s, dx_, dw_, ddy, NULL, gw, gb); /* overwrites, does not accumulate */
    check("fc_backward(dx=NULL) dw", shape, gw, rdw, nw, 1e-4, 1.0);

    void *devs[] = {dx_, dw_, db_, ddy, y, gx, gw, gb};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        B->free(ctx, devs[i]);
    free(x), free(w), free(b), free(dy), free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- convolution: against the float64 result, within the strict fp32 bound ---- */

/* Direction dir of shape s computed on the device (got_dev) against conv_exact: every element
 * within gamma(K) * sum|products| (kernels/cuda/cuda_plan.h); b (forward only) is added after the
 * sum, one more rounding: bound' = bound (1 + u) + u |exact + b|. */
static void check_conv(ConvDir dir, const char *shape, const ConvShape *s, const float *got_dev,
                       const float *x, const float *w, const float *b, const float *dy) {
    const size_t n = conv_result_count(dir, s), plane = (size_t)s->h_out * s->w_out;
    double *exact = malloc(n * sizeof(double)), *bound = malloc(n * sizeof(double));
    conv_exact(dir, s, x, w, dy, exact, bound);
    for (size_t i = 0; b && i < n; i++) {
        exact[i] += b[i / plane % (size_t)s->c_out];
        bound[i] = bound[i] * (1 + 0x1p-24) + 0x1p-24 * fabs(exact[i]);
    }
    float *got = fetch(got_dev, n);
    ConvErr e = conv_measure(got, exact, bound, n);
    const int ok = e.nonfinite == 0 && e.max_ratio <= 1.0;
    printf("conv %s %s: max abs diff %.3g from float64 (%.3g of its largest), %.3g of the strict "
           "fp32 bound %s\n",
           conv_dir_name(dir), shape, e.max_err, e.max_rel, e.max_ratio, ok ? "ok" : "FAIL");
    check_count(ok);
    free(exact), free(bound), free(got);
}

/* db[co] = sum of dy over samples and pixels, against the float64 sum: gamma(K) * sum|dy| */
static void check_conv_bias(const char *shape, const ConvShape *s, const float *got_dev,
                            const float *dy) {
    const size_t plane = (size_t)s->h_out * s->w_out;
    double *exact = calloc((size_t)s->c_out, sizeof(double));
    double *bound = calloc((size_t)s->c_out, sizeof(double));
    for (int co = 0; co < s->c_out; co++) {
        double sum_abs = 0;
        for (int n = 0; n < s->batch; n++)
            for (size_t p = 0; p < plane; p++) {
                const double v = dy[((size_t)n * s->c_out + co) * plane + p];
                exact[co] += v, sum_abs += fabs(v);
            }
        bound[co] = conv_fp32_bound((double)s->batch * plane, sum_abs);
    }
    float *got = fetch(got_dev, (size_t)s->c_out);
    ConvErr e = conv_measure(got, exact, bound, (size_t)s->c_out);
    const int ok = e.nonfinite == 0 && e.max_ratio <= 1.0;
    printf("conv bwd_bias %s: max abs diff %.3g from float64, %.3g of the strict fp32 bound %s\n",
           shape, e.max_err, e.max_ratio, ok ? "ok" : "FAIL");
    check_count(ok);
    free(exact), free(bound), free(got);
}

static void test_conv(int n, int c_in, int h, int w_in, int c_out, int k, int stride, int pad) {
    ConvShape s = {n,
                   c_in,
                   h,
                   w_in,
                   c_out,
                   k,
                   stride,
                   pad,
                   (h + 2 * pad - k) / stride + 1,
                   (w_in + 2 * pad - k) / stride + 1};
    char shape[128];
    snprintf(shape, sizeof shape, "n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in, h,
             w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * s.h_out * s.w_out;
    float *x = host(nx, -1, 1), *w = host(nw, -1, 1), *b = host(c_out, -1, 1),
          *dy = host(ny, -1, 1);
    size_t wsb = B->conv_workspace_bytes(ctx, &s);
    void *work = wsb ? B->alloc(ctx, wsb) : NULL;
    float *dx_ = dev_copy(x, nx * 4), *dw_ = dev_copy(w, nw * 4), *db_ = dev_copy(b, c_out * 4);
    float *ddy = dev_copy(dy, ny * 4), *y = dev_nan(ny), *gx = dev_nan(nx), *gw = dev_nan(nw),
          *gb = dev_nan(c_out);

    B->conv_forward(ctx, &s, dx_, dw_, db_, y, work);
    check_conv(CONV_FWD, shape, &s, y, x, w, b, dy);
    B->conv_backward(ctx, &s, dx_, dw_, ddy, gx, gw, gb, work);
    check_conv(CONV_BWD_DATA, shape, &s, gx, x, w, NULL, dy);
    check_conv(CONV_BWD_FILTER, shape, &s, gw, x, w, NULL, dy);
    check_conv_bias(shape, &s, gb, dy);

    void *devs[] = {dx_, dw_, db_, ddy, y, gx, gw, gb, work};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        if (devs[i]) B->free(ctx, devs[i]);
    free(x), free(w), free(b), free(dy);
}

/* ---- max pooling (distinct inputs: a shuffled ramp, so no window has a tie) ---- */

static void test_maxpool(int n, int c, int h, int w_in, int k, int stride) {
    PoolShape s = {n, c, h, w_in, k, stride, 0, (h - k) / stride + 1, (w_in - k) / stride + 1};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d k=%d stride=%d", n, c, h, w_in, k, stride);
    size_t nx = (size_t)n * c * h * w_in, ny = (size_t)n * c * s.h_out * s.w_out;
    float *x = malloc(nx * 4), *dy = host(ny, -1, 1), *ry = malloc(ny * 4), *rdx = malloc(nx * 4);
    int32_t *ram = malloc(ny * 4);
    for (size_t i = 0; i < nx; i++)
        x[i] = 0.01f * (float)i;
    for (size_t i = nx - 1; i > 0; i--) {
        size_t j = (size_t)((uniform(0, 1) * 0.999999f) * (float)(i + 1));
        float t = x[i];
        x[i] = x[j], x[j] = t;
    }
    float *dx_ = dev_copy(x, nx * 4), *ddy = dev_copy(dy, ny * 4), *y = dev_nan(ny),
          *gx = dev_nan(nx);
    int32_t *am = B->alloc(ctx, ny * sizeof(int32_t));

    B->maxpool_forward(ctx, &s, dx_, y, am);
    ref_maxpool_forward(&s, x, ry, ram);
    check("maxpool_forward", shape, y, ry, ny, 0.0, 1.0);
    B->maxpool_backward(ctx, &s, am, ddy, gx);
    ref_maxpool_backward(&s, x, dy, rdx);
    check("maxpool_backward", shape, gx, rdx, nx, 1e-6, 1.0);

    B->free(ctx, dx_), B->free(ctx, ddy), B->free(ctx, y), B->free(ctx, gx), B->free(ctx, am);
    free(x), free(dy), free(ry), free(rdx), free(ram);
}

/* ---- ReLU (with exact zeros, and in place) ---- */

static void test_relu(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    float *x = host(n, -1, 1), *dy = host(n, -1, 1), *ry = malloc(n * 4), *rdx = malloc(n * 4);
    for (size_t i = 0; i < n; i += 7)
        x[i] = 0.0f;
    ref_relu_forward(n, x, ry);
    ref_relu_backward(n, x, dy, rdx);
    float *dx_ = dev_copy(x, n * 4), *ddy = dev_copy(dy, n * 4), *y = dev_nan(n), *gx = dev_nan(n);

    B->relu_forward(ctx, n, dx_, y);
    check("relu_forward", shape, y, ry, n, 0.0, 1.0);
    B->relu_backward(ctx, n, y, ddy, gx);
    check("relu_backward", shape, gx, rdx, n, 0.0, 1.0);
    B->relu_forward(ctx, n, dx_, dx_); /* in place */
    check("relu_forward (in place)", shape, dx_, ry, n, 0.0, 1.0);
    B->relu_backward(ctx, n, y, ddy, ddy);
    check("relu_backward (in place)", shape, ddy, rdx, n, 0.0, 1.0);

    B->free(ctx, dx_), B->free(ctx, ddy), B->free(ctx, y), B->free(ctx, gx);
    free(x), free(dy), free(ry), free(rdx);
}

/* ---- softmax cross-entropy ---- */

static void test_xent(int n, int c, float scale) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d |logits|<=%g", n, c, scale);
    size_t nz = (size_t)n * c;
    float *z = host(nz, -scale, scale), *rdz = malloc(nz * 4);
    int32_t *lab = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) {
        lab[i] = (int32_t)(uniform(0, 1) * 0.999999f * (float)c);
        if (i % 3 == 0) z[(size_t)i * c + lab[i]] += scale; /* some rows right */
    }
    int rcorr = 0;
    double rloss = ref_softmax_xent(n, c, z, lab, rdz, &rcorr);
    float *dz_ = dev_copy(z, nz * 4), *gz = dev_nan(nz), *st = dev_nan(2), *st2 = dev_nan(2);
    int32_t *dlab = dev_copy(lab, (size_t)n * 4);

    B->softmax_xent(ctx, n, c, dz_, dlab, gz, st);
    B->softmax_xent(ctx, n, c, dz_, dlab, NULL, st2);
    float want[2] = {(float)rloss, (float)rcorr};
    check("softmax_xent loss", shape, st, want, 1, 1e-5, 1.0);
    check("softmax_xent loss (dlogits=NULL)", shape, st2, want, 1, 1e-5, 1.0);
    check("softmax_xent correct", shape, st + 1, want + 1, 1, 0.0, 1.0);
    check("softmax_xent dlogits", shape, gz, rdz, nz, 1e-4, 1.0 / n);

    B->free(ctx, dz_), B->free(ctx, gz), B->free(ctx, st), B->free(ctx, st2), B->free(ctx, dlab);
    free(z), free(rdz), free(lab);
}

/* ---- SGD ---- */

static void test_sgd(size_t n, float lr, float momentum, float wd, int steps) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%zu lr=%g momentum=%g wd=%g steps=%d", n, lr, momentum, wd,
             steps);
    float *p = host(n, -1, 1), *g = host(n, -1, 1), *v = host(n, -0.1f, 0.1f);
    float *dp = dev_copy(p, n * 4), *dg = dev_copy(g, n * 4), *dv = dev_copy(v, n * 4);
    for (int i = 0; i < steps; i++) {
        ref_sgd_update(n, p, g, v, lr, momentum, wd);
        B->sgd_update(ctx, n, dp, dg, dv, lr, momentum, wd);
    }
    check("sgd_update p", shape, dp, p, n, 1e-6, 1.0);
    if (momentum != 0.0f) check("sgd_update v", shape, dv, v, n, 1e-6, 1.0);
    B->free(ctx, dp), B->free(ctx, dg), B->free(ctx, dv);
    free(p), free(g), free(v);
}

/* AdamW over several steps against the reference (m and v start at 0, as the model's do) */
static void test_adamw(size_t n, float lr, float wd, int steps) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%zu lr=%g wd=%g steps=%d", n, lr, wd, steps);
    const float b1 = 0.9f, b2 = 0.95f, eps = 1e-8f;
    float *p = host(n, -1, 1), *g = host(n, -1, 1), *m = halloc(n), *v = halloc(n);
    memset(m, 0, n * 4), memset(v, 0, n * 4);
    float *dp = dev_copy(p, n * 4), *dg = dev_copy(g, n * 4), *dm = dev_copy(m, n * 4);
    float *dv = dev_copy(v, n * 4);
    for (int t = 1; t <= steps; t++) {
        const AdamWStep a = {.lr = lr,
                             .beta1 = b1,
                             .beta2 = b2,
                             .eps = eps,
                             .weight_decay = wd,
                             .bias1 = (float)(1.0 - pow(b1, t)),
                             .bias2 = (float)(1.0 - pow(b2, t))};
        ref_adamw_update(n, p, g, m, v, t, lr, b1, b2, eps, wd);
        B->adamw_update(ctx, n, dp, dg, dm, dv, &a);
    }
    check("adamw_update p", shape, dp, p, n, 1e-5, 1.0);
    check("adamw_update m", shape, dm, m, n, 1e-5, 0.1);
    check("adamw_update v", shape, dv, v, n, 1e-5, 0.01);
    B->free(ctx, dp), B->free(ctx, dg), B->free(ctx, dm), B->free(ctx, dv);
    free(p), free(g), free(m), free(v);
}

/* ---- phase timer ---- */

static void test_timer(void) {
    size_t n = (size_t)1 << 22;
    float *a = B->alloc(ctx, n * 4), *b = B->alloc(ctx, n * 4);
    B->timer_record(ctx, 0);
    for (int i = 0; i < 20; i++)
        B->relu_forward(ctx, n, a, b);
    B->timer_record(ctx, 1);
    double t = B->timer_elapsed(ctx, 0, 1);
    EXPECT(t > 0 && t < 10, "timer: 20 ReLUs over 4M floats took %.3g ms on the GPU timeline",
           t * 1e3);
    B->free(ctx, a), B->free(ctx, b);
}

int main(void) {
    int gpus = cuda_device_count();
    if (gpus == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    BackendConfig cfg = {.threads = 1, .local_rank = 0, .gpus_per_node = 0, .verbose = 1};
    if (B->init(&cfg, &ctx) != 0) return 1;
    char info[512];
    B->describe(ctx, info, sizeof info);
    printf("%s\n", info);

    test_fc(3, 7, 5);
    test_fc(1, 33, 17);
    test_fc(64, 800, 500);   /* LeNet ip1 */
    test_fc(64, 2048, 2048); /* FCN-5 hidden layer */

    /*        n  c_in h  w  c_out k stride pad */
    test_conv(2, 3, 7, 6, 4, 3, 2, 1);
    test_conv(2, 2, 8, 8, 3, 5, 1, 0);
    test_conv(1, 2, 9, 7, 3, 4, 3, 2);
    test_conv(2, 4, 5, 5, 3, 1, 1, 0);      /* pointwise */
    test_conv(64, 1, 28, 28, 20, 5, 1, 0);  /* LeNet conv1 */
    test_conv(64, 20, 12, 12, 50, 5, 1, 0); /* LeNet conv2 */
    size_t kn = B->describe_kernels(ctx, NULL, 0); /* the algorithms those results came from */
    char *kc = malloc(kn + 1);
    B->describe_kernels(ctx, kc, kn + 1);
    printf("%s", kc);
    free(kc);

    test_maxpool(2, 3, 8, 8, 2, 2);
    test_maxpool(1, 2, 9, 7, 3, 2);     /* overlapping windows */
    test_maxpool(64, 20, 24, 24, 2, 2); /* LeNet pool1 */

    test_relu(1000);
    test_relu((size_t)64 * 2048);

    test_xent(4, 7, 2.0f);
    test_xent(64, 10, 5.0f);
    test_xent(16, 26752, 3.0f); /* FCN-5's classes */
    test_xent(3, 5, 60.0f);     /* extreme logits */

    test_sgd(1000, 0.01f, 0.9f, 0.0f, 3);
    test_sgd(1001, 0.1f, 0.0f, 1e-4f, 2);
    test_sgd((size_t)1 << 20, 0.05f, 0.9f, 5e-4f, 4);
    test_adamw(1001, 1e-3f, 0.0f, 3);
    test_adamw((size_t)1 << 20, 6e-4f, 0.1f, 4);

    test_timer();

    B->finalize(ctx);
    return check_summary();
}
