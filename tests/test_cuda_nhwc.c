/* test_cuda_nhwc.c - the CUDA backend with NHWC 16-bit activations (--act-layout nhwc under
 * --precision bf16 and fp16) on a GPU, through its table, against the CPU backend run on the
 * same (widened) 16-bit values in NCHW. Every output is pre-filled with 0xffff (NaN in both
 * types): an element a kernel forgets fails. Exits 77 (skipped) without a GPU.
 * Tolerances, per precision (u = 2^-8 bf16, 2^-11 fp16):
 *   bit for bit, the CPU's fp32 result rounded once: input_to_act, act_add, ReLU and its
 *     backward, the residual add and its backward, dropout on an NHWC image (the CPU's mask),
 *     concatenation of channels, max pooling (argmax too) with and without padding, average
 *     pooling, global average pooling, LRN, forward and backward (tests/test_device_nhwc.c shows
 *     the same arithmetic on the CPU);
 *   within one rounding (u |cpu| + 1e-6; statistics and parameter gradients 1e-5 relative):
 *     batch norm, training (plain, with its ReLU, with a residual add and ReLU), inference and
 *     backward, dz bit for bit;
 *   ||gpu - cpu|| / ||cpu|| <= 4u (the weights rounded to 16 bits, one rounding of the output):
 *     convolutions (forward, with bias and ReLU fused, backward data, filter and bias; LeNet's,
 *     ResNet-50's 3x3 and strided 1x1, GoogLeNet's 5x5), the fc (flattened NHWC input, a vector,
 *     the logits), forward and backward. */
#include "harness.h"
#include "backend.h"
#include "cuda.h"
#include "half_bits.h"
#include "layout.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *G = &cuda_backend, *C = &cpu_backend;
static BackendCtx *gctx, *cctx;
static int HALF;
static double U; /* unit roundoff of the type */

static uint16_t r16(float v) {
    return HALF ? gc_fp16_from_float(v) : gc_bf16_from_float(v);
}
static float w16(uint16_t h) {
    return HALF ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
}
static const char *tname(void) {
    return HALF ? "fp16" : "bf16";
}

/* ---- tensors: host fp32 NCHW <-> device 16-bit NHWC ----------------------------------------- */

/* random values already representable in the type (what the GPU stores) */
static float *rnd(size_t n, float lo, float hi) {
    float *x = rand_floats(n, lo, hi);
    for (size_t i = 0; i < n; i++)
        x[i] = w16(r16(x[i]));
    return x;
}
/* x[n][c][hw] as a device NHWC 16-bit tensor (hw 1: a vector) */
static void *up16(const float *x, size_t n, size_t c, size_t hw) {
    const size_t t = n * c * hw;
    float *p = malloc((t + 1) * sizeof *p);
    uint16_t *h = malloc((t + 1) * sizeof *h);
    layout_to_nhwc(n, c, hw, x, p);
    for (size_t i = 0; i < t; i++)
        h[i] = r16(p[i]);
    void *d = G->alloc(gctx, (t + 1) * 2);
    G->upload(gctx, d, h, t * 2);
    free(p), free(h);
    return d;
}
static void *poison16(size_t t) {
    uint16_t *h = malloc((t + 1) * 2);
    memset(h, 0xff, (t + 1) * 2);
    void *d = G->alloc(gctx, (t + 1) * 2);
    G->upload(gctx, d, h, (t + 1) * 2);
    free(h);
    return d;
}
static float *upf(const float *x, size_t n) {
    float *d = G->alloc(gctx, (n + 1) * 4);
    G->upload(gctx, d, x, n * 4);
    return d;
}
static float *dnan(size_t n) {
    float *h = malloc((n + 1) * 4);
    for (size_t i = 0; i <= n; i++)
        h[i] = NAN;
    float *d = upf(h, n + 1);
    free(h);
    return d;
}
/* the device NHWC 16-bit tensor back as fp32 NCHW */
static float *down16(const void *d, size_t n, size_t c, size_t hw) {
    const size_t t = n * c * hw;
    uint16_t *h = malloc((t + 1) * 2);
    float *p = malloc((t + 1) * 4), *x = malloc((t + 1) * 4);
    G->download(gctx, h, d, t * 2);
    for (size_t i = 0; i < t; i++)
        p[i] = w16(h[i]);
    layout_to_nchw(n, c, hw, p, x);
    free(h), free(p);
    return x;
}
static float *downf(const float *d, size_t n) {
    float *h = malloc((n + 1) * 4);
    G->download(gctx, h, d, n * 4);
    return h;
}

/* ---- comparisons ------------------------------------------------------------------------------
 */

/* got (widened) == ref rounded once, every element */
static int exact(const float *got, const float *ref, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &(float){w16(r16(ref[i]))}, 4)) {
            printf("  [%zu]: %.8g vs %.8g (rounded %.8g)\n", i, got[i], ref[i], w16(r16(ref[i])));
            return 0;
        }
    return 1;
}
static int one_rounding(const float *got, const float *ref, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - ref[i]) <= U * fabs((double)ref[i]) + 1e-6)) {
            printf("  [%zu]: %.8g vs %.8g\n", i, got[i], ref[i]);
            return 0;
        }
    return 1;
}
static int rel(const float *got, const float *ref, size_t n, double tol) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(got[i] - ref[i]) <= tol * (1.0 + fabsf(ref[i])))) {
            printf("  [%zu]: %.9g vs %.9g\n", i, got[i], ref[i]);
            return 0;
        }
    return 1;
}
static double normwise(const float *got, const float *ref, size_t n) {
    double dd = 0, rr = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) return INFINITY;
        dd += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]), rr += (double)ref[i] * ref[i];
    }
    return rr > 0 ? sqrt(dd / rr) : sqrt(dd);
}

/* Concatenation of ca and cb channels as rows of pixels of n samples of hw pixels, and its split
 * (skip_a: the first input has no gradient, which stays untouched); 1 when both are exact. */
static int concat_case(size_t n, size_t hw, size_t ca, size_t cb, int skip_a) {
    const size_t c = ca + cb, t = n * c * hw;
    float *a = rnd(n * ca * hw, -1, 1), *b = rnd(n * cb * hw, -1, 1), *cat = malloc(t * 4);
    for (size_t i = 0; i < n; i++) { /* the CPU's NCHW concatenation per sample */
        memcpy(cat + i * c * hw, a + i * ca * hw, ca * hw * 4);
        memcpy(cat + i * c * hw + ca * hw, b + i * cb * hw, cb * hw * 4);
    }
    const float *xs[2] = {up16(a, n, ca, hw), up16(b, n, cb, hw)};
    const size_t sizes[2] = {ca, cb};
    void *o = poison16(t);
    G->concat_forward(gctx, (int)(n * hw), 2, xs, sizes, o);
    float *got = down16(o, n, c, hw);
    int ok = exact(got, cat, t);
    free(got);
    float *outs[2] = {poison16(n * ca * hw), poison16(n * cb * hw)}, *grads[2] = {outs[0], outs[1]};
    if (skip_a) grads[0] = NULL;
    G->concat_backward(gctx, (int)(n * hw), 2, sizes, o, grads);
    got = down16(outs[0], n, ca, hw);
    for (size_t i = 0; skip_a && i < n * ca * hw; i++) /* poison16's pattern, untouched */
        ok &= !(got[i] == got[i]);
    if (!skip_a) ok &= exact(got, a, n * ca * hw);
    free(got);
    got = down16(outs[1], n, cb, hw), ok &= exact(got, b, n * cb * hw), free(got);
    free(a), free(b), free(cat);
    return ok;
}

/* ---- element-wise ---------------------------------------------------------------------------- */

static void test_elementwise(void) {
    const size_t n = 4, c = 12, hw = 25, t = n * c * hw;
    float *x = rnd(t, -2, 2), *z = rnd(t, -2, 2), *g = rnd(t, -1, 1), *r = malloc(t * 4);
    float *r2 = malloc(t * 4);
    void *dx = up16(x, n, c, hw), *dz = up16(z, n, c, hw), *dg = up16(g, n, c, hw);
    void *o = poison16(t), *o2 = poison16(t);
    int ok = 1;
    /* input_to_act: the fp32 NCHW input */
    float *xin = rand_floats(t, -3, 3), *dxin = upf(xin, t);
    G->input_to_act(gctx, (int)n, (int)c, 5, 5, dxin, o);
    float *got = down16(o, n, c, hw);
    ok &= exact(got, xin, t), free(got);
    /* ReLU, its backward from the output, the add, act_add */
    C->relu_forward(cctx, t, x, r);
    G->relu_forward(gctx, t, dx, o);
    got = down16(o, n, c, hw), ok &= exact(got, r, t), free(got);
    C->relu_backward(cctx, t, r, g, r2);
    G->relu_backward(gctx, t, o, dg, o2);
    got = down16(o2, n, c, hw), ok &= exact(got, r2, t), free(got);
    C->add_forward(cctx, t, x, z, r);
    G->add_forward(gctx, t, dx, dz, o);
    got = down16(o, n, c, hw), ok &= exact(got, r, t), free(got);
    G->act_add(gctx, t, dz, dx); /* dx += dz */
    got = down16(dx, n, c, hw), ok &= exact(got, r, t), free(got);
    EXPECT(ok, "%s: input_to_act, ReLU and its backward, add, act_add = the CPU's, rounded",
           tname());
    /* dropout on an NHWC image */
    DropoutShape s = {(int)n, c * hw, 0.4f, 99, 5, (int)c, (int)hw, NULL}, sc = s;
    sc.c = sc.hw = 0;
    uint8_t *cm = malloc(t), *gm = malloc(t), *dm = G->alloc(gctx, t);
    C->dropout_forward(cctx, &sc, x, r, cm);
    dx = up16(x, n, c, hw);
    G->dropout_forward(gctx, &s, dx, o, dm);
    got = down16(o, n, c, hw), ok = exact(got, r, t), free(got);
    G->download(gctx, gm, dm, t);
    for (size_t i = 0; i < n; i++)
        for (size_t q = 0; q < c; q++)
            for (size_t p = 0; p < hw; p++)
                ok &= gm[layout_nhwc(c, hw, i, q, p)] == cm[layout_nchw(c, hw, i, q, p)];
    C->dropout_backward(cctx, &sc, cm, g, r);
    G->dropout_backward(gctx, &s, dm, dg, o);
    got = down16(o, n, c, hw), ok &= exact(got, r, t), free(got);
    EXPECT(ok, "%s: dropout of an NHWC image: the CPU's mask and values, forward and backward",
           tname());
    ok = concat_case(n, hw, 5, 7, 0); /* 2-byte units (the concatenation kernel's, cuda_elem.h) */
    ok &= concat_case(n, hw, 16, 24, 1); /* 16-byte units, the first input without gradient */
    EXPECT(ok, "%s: concatenation of channels (rows of pixels) and its split", tname());
    free(x), free(z), free(g), free(r), free(r2), free(xin), free(cm), free(gm);
}

/* ---- pooling, LRN ---------------------------------------------------------------------------- */

static void test_pool(const PoolShape *s) {
    const size_t N = (size_t)s->batch, C_ = (size_t)s->c, hi = (size_t)s->h_in * s->w_in;
    const size_t ho = (size_t)s->h_out * s->w_out, nin = N * C_ * hi, nout = N * C_ * ho;
    float *x = rnd(nin, -2, 2), *dy = rnd(nout, -1, 1), *y = malloc(nout * 4),
          *dx = malloc(nin * 4);
    int32_t *cam = malloc(nout * 4), *gam = malloc(nout * 4), *am_nchw = malloc(nout * 4);
    int32_t *dam = G->alloc(gctx, nout * 4);
    void *gx = up16(x, N, C_, hi), *gdy = up16(dy, N, C_, ho), *gy = poison16(nout);
    void *gdx = poison16(nin);
    C->maxpool_forward(cctx, s, x, y, cam);
    C->maxpool_backward(cctx, s, cam, dy, dx);
    G->maxpool_forward(gctx, s, gx, gy, dam);
    G->maxpool_backward(gctx, s, dam, gdy, gdx);
    float *got = down16(gy, N, C_, ho), *gotx = down16(gdx, N, C_, hi);
    int ok = exact(got, y, nout) && exact(gotx, dx, nin);
    G->download(gctx, gam, dam, nout * 4);
    for (size_t i = 0; i < N; i++) /* the GPU's argmax in NHWC order: the same plane indices */
        for (size_t q = 0; q < C_; q++)
            for (size_t o = 0; o < ho; o++)
                am_nchw[layout_nchw(C_, ho, i, q, o)] = gam[layout_nhwc(C_, ho, i, q, o)];
    ok &= memcmp(am_nchw, cam, nout * 4) == 0;
    free(got), free(gotx);
    C->avgpool_forward(cctx, s, x, y);
    C->avgpool_backward(cctx, s, dy, dx);
    G->avgpool_forward(gctx, s, gx, gy);
    G->avgpool_backward(gctx, s, gdy, gdx);
    got = down16(gy, N, C_, ho), gotx = down16(gdx, N, C_, hi);
    ok &= exact(got, y, nout) && exact(gotx, dx, nin);
    EXPECT(ok,
           "%s: max pooling (argmax too) and average pooling [%d,%d,%d,%d] k%d s%d p%d, "
           "forward and backward = the CPU's, rounded",
           tname(), s->batch, s->c, s->h_in, s->w_in, s->k, s->stride, s->pad);
    free(got), free(gotx), free(x), free(dy), free(y), free(dx), free(cam), free(gam);
    free(am_nchw);
}

static void test_gap_lrn(void) {
    const size_t n = 4, c = 24, hw = 49, t = n * c * hw;
    float *x = rnd(t, -2, 2), *dy = rnd(n * c, -1, 1), *y = malloc(n * c * 4), *dx = malloc(t * 4);
    void *gx = up16(x, n, c, hw), *gdy = up16(dy, n, c, 1), *gy = poison16(n * c);
    void *gdx = poison16(t);
    C->global_avgpool_forward(cctx, n, c, hw, x, y);
    C->global_avgpool_backward(cctx, n, c, hw, dy, dx);
    G->global_avgpool_forward(gctx, n, c, hw, gx, gy);
    G->global_avgpool_backward(gctx, n, c, hw, gdy, gdx);
    float *got = down16(gy, n, c, 1), *gotx = down16(gdx, n, c, hw);
    int ok = exact(got, y, n * c) && exact(gotx, dx, t);
    EXPECT(ok, "%s: global average pooling [%zu,%zu,%zu] = the CPU's, rounded", tname(), n, c, hw);
    free(got), free(gotx), free(y), free(dy);
    /* LRN: backward from the GPU's stored output (what its backward reads) */
    LrnShape s = {(int)n, (int)c, 7, 7, 5, 1e-2f, 0.75f, 2.0f};
    float *g = rnd(t, -1, 1), *ly = malloc(t * 4), *sc = malloc(t * 4);
    void *gg = up16(g, n, c, hw), *gly = poison16(t);
    float *gsc = dnan(t);
    C->lrn_forward(cctx, &s, x, ly, sc);
    G->lrn_forward(gctx, &s, gx, gly, gsc);
    got = down16(gly, n, c, hw), ok = exact(got, ly, t);
    C->lrn_backward(cctx, &s, x, got, sc, g, dx);
    G->lrn_backward(gctx, &s, gx, gly, gsc, gg, gdx);
    gotx = down16(gdx, n, c, hw), ok &= exact(gotx, dx, t);
    EXPECT(ok, "%s: LRN forward and backward = the CPU's, rounded", tname());
    free(got), free(gotx), free(x), free(dx), free(g), free(ly), free(sc);
}

/* ---- batch norm -------------------------------------------------------------------------------
 */

static void test_bn(int batch, int c, int spatial, int mode) {
    const BnShape s = {batch, c, spatial, 1e-5f, 0.1f};
    const size_t n = (size_t)batch * c * spatial, C_ = (size_t)c, hw = (size_t)spatial;
    float *x = rnd(n, -2, 3), *z = rnd(n, -1, 1), *dy = rnd(n, -1, 1);
    float *ga = rand_floats(C_, 0.5f, 1.5f), *be = rand_floats(C_, -1, 1);
    float *rm = rand_floats(C_, -1, 1), *rv = rand_floats(C_, 0.5f, 2);
    float *dga = upf(ga, C_), *dbe = upf(be, C_), *drm = upf(rm, C_), *drv = upf(rv, C_);
    void *gx = up16(x, batch, C_, hw), *gz = up16(z, batch, C_, hw), *gdy = up16(dy, batch, C_, hw);
    void *gy = poison16(n), *gdx = poison16(n), *gdz = poison16(n);
    float *gm = dnan(C_), *gi = dnan(C_), *gdg = dnan(C_), *gdb = dnan(C_);
    const int relu = mode > 0;
    const float *zz = mode == 2 ? z : NULL;
    /* the CPU's rows */
    float *y = malloc(n * 4), *m = malloc(C_ * 4), *iv = malloc(C_ * 4), *yi = malloc(n * 4);
    C->batchnorm_forward_infer(cctx, &s, x, ga, be, rm, rv, yi);
    C->batchnorm_forward_train(cctx, &s, x, ga, be, y, m, iv, rm, rv);
    if (zz) C->add_forward(cctx, n, y, zz, y), C->add_forward(cctx, n, yi, zz, yi);
    if (relu) C->relu_forward(cctx, n, y, y), C->relu_forward(cctx, n, yi, yi);
    /* the GPU: inference (running statistics as given), then training */
    if (mode) {
        G->bn_act_forward_infer(gctx, &s, gx, dga, dbe, drm, drv, zz ? gz : NULL, gy);
    } else {
        G->batchnorm_forward_infer(gctx, &s, gx, dga, dbe, drm, drv, gy);
    }
    float *got = down16(gy, batch, C_, hw);
    int ok = one_rounding(got, yi, n);
    free(got);
    if (mode)
        G->bn_act_forward_train(gctx, &s, gx, dga, dbe, zz ? gz : NULL, gy, gm, gi, drm, drv);
    else
        G->batchnorm_forward_train(gctx, &s, gx, dga, dbe, gy, gm, gi, drm, drv);
    got = down16(gy, batch, C_, hw);
    float *hm = downf(gm, C_), *hi = downf(gi, C_), *hrm = downf(drm, C_), *hrv = downf(drv, C_);
    ok &= one_rounding(got, y, n) && rel(hm, m, C_, 1e-5) && rel(hi, iv, C_, 1e-5) &&
          rel(hrm, rm, C_, 1e-5) && rel(hrv, rv, C_, 1e-5);
    /* backward: the CPU's ReLU in place on the GPU's stored output, the add's gradient */
    float *g = malloc(n * 4), *dx = malloc(n * 4), *dg = malloc(C_ * 4), *db = malloc(C_ * 4);
    memcpy(g, dy, n * 4);
    if (relu) C->relu_backward(cctx, n, got, g, g);
    C->batchnorm_backward(cctx, &s, x, ga, hm, hi, g, dx, dg, db);
    if (mode)
        G->bn_act_backward(gctx, &s, gx, dga, gm, gi, gy, gdy, gdx, zz ? gdz : NULL, gdg, gdb);
    else
        G->batchnorm_backward(gctx, &s, gx, dga, gm, gi, gdy, gdx, gdg, gdb);
    float *hdx = down16(gdx, batch, C_, hw), *hdg = downf(gdg, C_), *hdb = downf(gdb, C_);
    ok &= one_rounding(hdx, dx, n) && rel(hdg, dg, C_, 1e-5) && rel(hdb, db, C_, 1e-5);
    if (zz) {
        float *hdz = down16(gdz, batch, C_, hw);
        ok &= exact(hdz, g, n);
        free(hdz);
    }
    EXPECT(ok,
           "%s: batch norm [%d,%d,%d] %s: inference, training, backward = the CPU's rows within "
           "one rounding (statistics, gradients 1e-5)",
           tname(), batch, c, spatial,
           mode == 0   ? "plain"
           : mode == 1 ? "+ReLU"
                       : "+add+ReLU");
    free(x), free(z), free(dy), free(ga), free(be), free(rm), free(rv), free(y), free(m), free(iv);
    free(yi), free(got), free(hm), free(hi), free(hrm), free(hrv), free(g), free(dx), free(dg);
    free(db), free(hdx), free(hdg), free(hdb);
}

/* ---- convolution and fc: on the step's 16-bit weights ------------------------------------------
 */

#define NCONV 4
static const ConvShape CONVS[NCONV] = {
    {8, 20, 12, 12, 50, 5, 1, 0, 8, 8},    /* LeNet's second */
    {4, 64, 28, 28, 64, 3, 1, 1, 28, 28},  /* ResNet-50's 3x3 (no bias) */
    {4, 64, 28, 28, 128, 1, 2, 0, 14, 14}, /* ResNet-50's strided 1x1 */
    {4, 16, 14, 14, 32, 5, 1, 2, 14, 14},  /* GoogLeNet's 5x5 */
};
static const int BIAS[NCONV] = {1, 0, 0, 1};
enum { FC_N = 6, FC_C = 10, FC_HW = 16, FC_OUT = 24, FC_CLASSES = 7 };

static void report(const char *what, const float *got, const float *ref, size_t n, int *ok) {
    const double e = normwise(got, ref, n);
    if (!(e <= 4 * U)) printf("  %s: ||gpu - cpu|| / ||cpu|| = %.3g\n", what, e), *ok = 0;
}

/* The step's weights on the GPU (dp, laid out for the convolutions), and each backend's
 * workspace for the largest convolution. */
static void conv_setup(const size_t *off, const size_t *boff, float *dp, size_t np, void **dwork,
                       void **hwork) {
    ConvWeights cw[NCONV];
    size_t work = 0;
    for (int i = 0; i < NCONV; i++) {
        const ConvShape *s = &CONVS[i];
        cw[i] = (ConvWeights){off[i], boff[i], s->c_out, s->c_in, s->k * s->k};
        const size_t w = G->conv_workspace_bytes(gctx, s);
        if (w > work) work = w;
    }
    G->weights_layout(gctx, cw, NCONV);
    G->weights_ready(gctx, dp, np);
    *dwork = G->alloc(gctx, work + 256);
    size_t cwork = 0;
    for (int i = 0; i < NCONV; i++)
        if (C->conv_workspace_bytes(cctx, &CONVS[i]) > cwork)
            cwork = C->conv_workspace_bytes(cctx, &CONVS[i]);
    *hwork = malloc(cwork + 64);
}

/* Convolution i of CONVS: its filter at p + off (dp + off on the GPU), its bias at boff. */
static void test_conv(int i, const float *p, const float *dp, size_t off, size_t boff, void *dwork,
                      void *hwork) {
    const ConvShape *s = &CONVS[i];
    const size_t hi = (size_t)s->h_in * s->w_in, ho = (size_t)s->h_out * s->w_out;
    const size_t nx = (size_t)s->batch * s->c_in * hi, ny = (size_t)s->batch * s->c_out * ho;
    const size_t nw = (size_t)s->c_out * s->c_in * s->k * s->k;
    float *x = rnd(nx, -1, 1), *dy = rnd(ny, -1, 1), *y = malloc(ny * 4), *dx = malloc(nx * 4);
    float *dw = malloc(nw * 4), *db = malloc(s->c_out * 4);
    const float *b = BIAS[i] ? p + boff : NULL, *gb = BIAS[i] ? dp + boff : NULL;
    void *gx = up16(x, s->batch, s->c_in, hi), *gdy = up16(dy, s->batch, s->c_out, ho);
    void *gy = poison16(ny), *gdx = poison16(nx);
    float *gdw = dnan(nw), *gdb = dnan(s->c_out);
    int ok = 1;
    C->conv_forward(cctx, s, x, p + off, b, y, hwork);
    G->conv_forward(gctx, s, gx, dp + off, gb, gy, dwork);
    float *got = down16(gy, s->batch, s->c_out, ho);
    report("forward", got, y, ny, &ok), free(got);
    C->relu_forward(cctx, ny, y, y);
    G->conv_relu_forward(gctx, s, gx, dp + off, gb, gy, dwork);
    got = down16(gy, s->batch, s->c_out, ho);
    report("forward with ReLU", got, y, ny, &ok), free(got);
    C->conv_backward(cctx, s, x, p + off, dy, dx, dw, BIAS[i] ? db : NULL, hwork);
    G->conv_backward(gctx, s, gx, dp + off, gdy, gdx, gdw, BIAS[i] ? gdb : NULL, dwork);
    float *hdx = down16(gdx, s->batch, s->c_in, hi), *hdw = downf(gdw, nw);
    report("dx", hdx, dx, nx, &ok), report("dw", hdw, dw, nw, &ok);
    if (BIAS[i]) {
        float *hdb = downf(gdb, s->c_out);
        report("db", hdb, db, s->c_out, &ok), free(hdb);
    }
    EXPECT(ok,
           "%s: convolution %dx%dx%dx%d k%d s%d p%d -> %d%s: forward, +ReLU, dx, dw%s "
           "within 4u of the CPU's",
           tname(), s->batch, s->c_in, s->h_in, s->w_in, s->k, s->stride, s->pad, s->c_out,
           BIAS[i] ? " with bias" : "", BIAS[i] ? ", db" : "");
    free(x), free(dy), free(y), free(dx), free(dw), free(db), free(hdx), free(hdw);
}

/* fc: a flattened NHWC input [FC_C, FC_HW] -> FC_OUT (16-bit), then the logits (fp32); their
 * weights and biases at p + off[NCONV] and p + off[NCONV + 1] (dp on the GPU). */
static void test_fc(const float *p, const float *dp, const size_t *off) {
    const size_t nx = (size_t)FC_N * FC_C * FC_HW, nh = (size_t)FC_N * FC_OUT;
    const size_t nl = (size_t)FC_N * FC_CLASSES;
    const FcShape s1 = {FC_N, FC_C * FC_HW, FC_OUT, FC_C, FC_HW, 0};
    const FcShape s2 = {FC_N, FC_OUT, FC_CLASSES, 0, 0, 1};
    const float *w1 = p + off[NCONV], *b1 = w1 + (size_t)FC_OUT * FC_C * FC_HW;
    const float *w2 = p + off[NCONV + 1], *b2 = w2 + (size_t)FC_CLASSES * FC_OUT;
    float *x = rnd(nx, -1, 1), *h = malloc(nh * 4), *l = malloc(nl * 4), *dl = rnd(nl, -1, 1);
    float *dh = malloc(nh * 4), *dx = malloc(nx * 4), *dw1 = malloc(s1.out * s1.in * 4);
    float *db1 = malloc(FC_OUT * 4), *dw2 = malloc(FC_CLASSES * FC_OUT * 4),
          *db2 = malloc(FC_CLASSES * 4);
    C->fc_forward(cctx, &s1, x, w1, b1, h);
    void *gx = up16(x, FC_N, FC_C, FC_HW), *gh = poison16(nh), *gdh = poison16(nh);
    void *gdx = poison16(nx);
    float *gl = dnan(nl), *gdl = upf(dl, nl);
    float *gdw1 = dnan((size_t)s1.out * s1.in), *gdb1 = dnan(FC_OUT);
    float *gdw2 = dnan((size_t)FC_CLASSES * FC_OUT), *gdb2 = dnan(FC_CLASSES);
    const float *gw1 = dp + off[NCONV], *gw2 = dp + off[NCONV + 1];
    G->fc_forward(gctx, &s1, gx, gw1, gw1 + (size_t)FC_OUT * FC_C * FC_HW, gh);
    float *hh = down16(gh, FC_N, FC_OUT, 1);
    int ok = 1;
    report("fc forward", hh, h, nh, &ok);
    C->fc_forward(cctx, &s2, hh, w2, b2, l); /* the logits from the GPU's hidden layer */
    G->fc_forward(gctx, &s2, gh, gw2, gw2 + (size_t)FC_CLASSES * FC_OUT, gl);
    float *hl = downf(gl, nl);
    report("logits", hl, l, nl, &ok);
    C->fc_backward(cctx, &s2, hh, w2, dl, dh, dw2, db2);
    G->fc_backward(gctx, &s2, gh, gw2, gdl, gdh, gdw2, gdb2);
    float *hdh = down16(gdh, FC_N, FC_OUT, 1), *hdw2 = downf(gdw2, (size_t)FC_CLASSES * FC_OUT);
    float *hdb2 = downf(gdb2, FC_CLASSES);
    report("logits' dx", hdh, dh, nh, &ok),
        report("logits' dw", hdw2, dw2, FC_CLASSES * FC_OUT, &ok);
    report("logits' db", hdb2, db2, FC_CLASSES, &ok);
    C->fc_backward(cctx, &s1, x, w1, hdh, dx, dw1, db1);
    G->fc_backward(gctx, &s1, gx, gw1, gdh, gdx, gdw1, gdb1);
    float *hdx = down16(gdx, FC_N, FC_C, FC_HW), *hdw1 = downf(gdw1, (size_t)s1.out * s1.in);
    float *hdb1 = downf(gdb1, FC_OUT);
    report("fc dx", hdx, dx, nx, &ok), report("fc dw", hdw1, dw1, (size_t)s1.out * s1.in, &ok);
    report("fc db", hdb1, db1, FC_OUT, &ok);
    EXPECT(ok,
           "%s: fc on a flattened NHWC input and on the logits, forward and backward, within "
           "4u of the CPU's (weights in NCHW order)",
           tname());
    free(x), free(h), free(l), free(dl), free(dh), free(dx), free(dw1), free(db1);
    free(dw2), free(db2), free(hh), free(hl), free(hdh), free(hdw2), free(hdb2), free(hdx);
    free(hdw1), free(hdb1);
}

static void test_products(void) {
    /* the parameters: every convolution's filter and bias, then two fc layers */
    size_t off[NCONV + 2], boff[NCONV], np = 0;
    for (int i = 0; i < NCONV; i++) {
        const ConvShape *s = &CONVS[i];
        off[i] = np, np += (size_t)s->c_out * s->c_in * s->k * s->k;
        boff[i] = BIAS[i] ? np : SIZE_MAX, np += BIAS[i] ? (size_t)s->c_out : 0;
    }
    off[NCONV] = np, np += (size_t)FC_OUT * FC_C * FC_HW + FC_OUT;
    off[NCONV + 1] = np, np += (size_t)FC_CLASSES * FC_OUT + FC_CLASSES;
    float *p = rand_floats(np, -0.2f, 0.2f), *dp = upf(p, np);
    void *dwork, *hwork;
    conv_setup(off, boff, dp, np, &dwork, &hwork);
    for (int i = 0; i < NCONV; i++)
        test_conv(i, p, dp, off[i], boff[i], dwork, hwork);
    test_fc(p, dp, off);
    free(p), free(hwork);
}

int main(void) {
    rand_seed(24);
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    BackendConfig ccfg = {.threads = 1};
    if (C->init(&ccfg, &cctx) != 0) return 1;
    for (HALF = 0; HALF <= 1; HALF++) {
        U = HALF ? 0x1p-11 : 0x1p-8;
        BackendConfig cfg = {.threads = 1,
                             .verbose = 1,
                             .precision = HALF ? PRECISION_FP16 : PRECISION_BF16,
                             .act_layout = ACT_NHWC};
        if (G->init(&cfg, &gctx) != 0) return 1;
        ActFormat f;
        G->activation_format(gctx, &f);
        EXPECT(f.layout == ACT_NHWC && f.type == (HALF ? ACT_FP16 : ACT_BF16),
               "%s: the backend declares NHWC %s", tname(), tname());
        test_elementwise();
        const PoolShape pools[] = {{4, 64, 28, 28, 3, 2, 1, 14, 14},
                                   {4, 20, 24, 24, 2, 2, 0, 12, 12},
                                   {2, 48, 13, 13, 3, 2, 0, 6, 6}};
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            test_pool(&pools[i]);
        test_gap_lrn();
        const int bn[][3] = {{8, 64, 28 * 28}, {16, 24, 49}, {4, 20, 9}, {32, 10, 1}};
        for (size_t i = 0; i < sizeof bn / sizeof bn[0]; i++)
            for (int mode = 0; mode < 3; mode++)
                test_bn(bn[i][0], bn[i][1], bn[i][2], mode);
        test_products();
        G->finalize(gctx); /* frees what the tests allocated on it */
    }
    C->finalize(cctx);
    return check_summary();
}
