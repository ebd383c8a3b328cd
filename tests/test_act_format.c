/* test_act_format.c - the model's side of the activation-format seam (backend.h's ActFormat), on
 * the CPU: a fake backend that stores activations NHWC fp32, or NCHW bf16, runs each layer by
 * converting its inputs to NCHW fp32, calling the CPU backend and converting its outputs back; a
 * fully connected layer on a flattened NHWC input multiplies the NHWC features with the weights
 * mapped by kernels/layout.h (and its weight gradient mapped back), as a real NHWC backend must.
 * The same models, seeds, inputs and steps on it and on the CPU backend give:
 *   - NHWC fp32: the CPU's losses and parameters within 1e-5 (only the flattened fc sums in
 *     another order), for LeNet (conv, max pooling, flatten, fc) and a model with every join
 *     (batch norm, residual add, ReLU, padded max pooling, channel concatenation, an output read
 *     by two layers), whole batch and in two micro-batches (offsets of later samples);
 *   - NCHW bf16 (2-byte activations): bit for bit what the fake gives storing the same rounded
 *     values in fp32 (so every size and offset of 2-byte activations is right), for the same
 *     models and ResNet-8 (global average pooling); and within 5e-2 of the CPU backend (the
 *     rounding of activations to bf16 through two steps on batches of 4).
 * And the model hands the backend its parameters (weights_ready, where 16-bit copies are made)
 * once when built and once per step, before the first micro-batch, never per layer or call.
 * A model that sized or offset an activation in fp32 bytes, passed a concatenation's rows in the
 * wrong layout, forgot the input conversion or summed gradients with the fp32 axpy would read
 * other samples' values or outside its buffers (the sanitizer build catches the latter). */
#include "harness.h"
#include "half_bits.h" /* defines: gc_bf16_from_float, gc_bf16_to_float */
#include "layers.h"
#include "layout.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_resnet8;

/* one counted check (tests/harness.h), its message already formatted */
static void check(int ok, const char *what) {
    EXPECT(ok, "%s", what);
}

/* ---- the fake backend: the CPU backend behind conversions ------------------------------------ */

static ActFormat FMT; /* the format the fake declares */
static int ROUND;     /* fp32 storage holding values rounded to bf16: the reference of bf16 */

/* n values of x (fmt) as fp32 and back; flat: no permutation */
static float *flat_in(const float *x, size_t n) {
    float *t = xmalloc((n ? n : 1) * sizeof *t);
    if (FMT.type == ACT_FP32)
        memcpy(t, x, n * sizeof *t);
    else
        for (size_t i = 0; i < n; i++)
            t[i] = gc_bf16_to_float(((const uint16_t *)x)[i]);
    return t;
}
static void flat_out(const float *t, size_t n, float *x) {
    if (FMT.type == ACT_FP32 && ROUND)
        for (size_t i = 0; i < n; i++)
            x[i] = gc_bf16_to_float(gc_bf16_from_float(t[i]));
    else if (FMT.type == ACT_FP32)
        memcpy(x, t, n * sizeof *t);
    else
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)x)[i] = gc_bf16_from_float(t[i]);
}
/* an image tensor [n, c, hw] in fmt as fp32 NCHW, and back */
static float *img_in(const float *x, size_t n, size_t c, size_t hw) {
    float *t = flat_in(x, n * c * hw);
    if (FMT.layout == ACT_NCHW) return t;
    const size_t total = n * c * hw;
    float *u = xmalloc((total ? total : 1) * sizeof *u);
    layout_to_nchw(n, c, hw, t, u);
    free(t);
    return u;
}
static void img_out(const float *t, size_t n, size_t c, size_t hw, float *x) {
    if (FMT.layout == ACT_NCHW) {
        flat_out(t, n * c * hw, x);
        return;
    }
    const size_t total = n * c * hw;
    float *u = xmalloc((total ? total : 1) * sizeof *u);
    layout_to_nhwc(n, c, hw, t, u);
    flat_out(u, n * c * hw, x);
    free(u);
}

static void f_format(BackendCtx *c, ActFormat *f) {
    (void)c, *f = FMT;
}
static void f_input(BackendCtx *c, int n, int ch, int h, int w, const float *x, float *xa) {
    (void)c, img_out(x, n, ch, (size_t)h * w, xa);
}
static void f_act_add(BackendCtx *c, size_t n, const float *x, float *y) {
    float *a = flat_in(x, n), *b = flat_in(y, n);
    cpu_backend.axpy(c, n, 1.0f, a, b);
    flat_out(b, n, y);
    free(a), free(b);
}

/* fc: features as stored (pixel-major after an NHWC flatten: the weights mapped) */
static float *fc_weights(const FcShape *s, const float *w) {
    float *t = xmalloc((size_t)s->out * s->in * sizeof *t);
    if (FMT.layout == ACT_NHWC && s->flat_c)
        fc_weights_to_nhwc(s->out, s->flat_c, s->flat_hw, w, t);
    else
        memcpy(t, w, (size_t)s->out * s->in * sizeof *t);
    return t;
}
static void f_fc_forward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                         const float *b, float *y) {
    float *xt = flat_in(x, (size_t)s->batch * s->in), *wt = fc_weights(s, w);
    float *yt = s->logits ? y : xmalloc((size_t)s->batch * s->out * sizeof *yt);
    cpu_backend.fc_forward(c, s, xt, wt, b, yt);
    if (!s->logits) flat_out(yt, (size_t)s->batch * s->out, y), free(yt);
    free(xt), free(wt);
}
static void f_fc_backward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db) {
    const size_t nx = (size_t)s->batch * s->in, nw = (size_t)s->out * s->in;
    float *xt = flat_in(x, nx), *wt = fc_weights(s, w), *dxt = dx ? xmalloc(nx * 4) : NULL;
    float *dyt = s->logits ? (float *)dy : flat_in(dy, (size_t)s->batch * s->out);
    float *dwt = xmalloc(nw * sizeof *dwt);
    cpu_backend.fc_backward(c, s, xt, wt, dyt, dxt, dwt, db);
    if (FMT.layout == ACT_NHWC && s->flat_c)
        fc_weights_from_nhwc(s->out, s->flat_c, s->flat_hw, dwt, dw);
    else
        memcpy(dw, dwt, nw * sizeof *dw);
    if (dx) flat_out(dxt, nx, dx);
    if (!s->logits) free(dyt);
    free(xt), free(wt), free(dxt), free(dwt);
}

static void f_conv_forward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                           const float *b, float *y, void *work) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c_in, hwi), *yt = xmalloc(s->batch * s->c_out * hwo * 4);
    cpu_backend.conv_forward(c, s, xt, w, b, yt, work);
    img_out(yt, s->batch, s->c_out, hwo, y);
    free(xt), free(yt);
}
static void f_conv_backward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, void *work) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c_in, hwi), *dyt = img_in(dy, s->batch, s->c_out, hwo);
    float *dxt = dx ? xmalloc(s->batch * s->c_in * hwi * 4) : NULL;
    cpu_backend.conv_backward(c, s, xt, w, dyt, dxt, dw, db, work);
    if (dx) img_out(dxt, s->batch, s->c_in, hwi, dx);
    free(xt), free(dyt), free(dxt);
}

/* the CPU's max pooling records argmax in NCHW planes, which its backward reads back */
static void f_maxpool_forward(BackendCtx *c, const PoolShape *s, const float *x, float *y,
                              int32_t *am) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c, hwi), *yt = xmalloc(s->batch * s->c * hwo * 4);
    cpu_backend.maxpool_forward(c, s, xt, yt, am);
    img_out(yt, s->batch, s->c, hwo, y);
    free(xt), free(yt);
}
static void f_maxpool_backward(BackendCtx *c, const PoolShape *s, const int32_t *am,
                               const float *dy, float *dx) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *dyt = img_in(dy, s->batch, s->c, hwo), *dxt = xmalloc(s->batch * s->c * hwi * 4);
    cpu_backend.maxpool_backward(c, s, am, dyt, dxt);
    img_out(dxt, s->batch, s->c, hwi, dx);
    free(dyt), free(dxt);
}
/* global average pooling: planes = n*c of plane values (NCHW only: the model refuses NHWC) */
static void f_gap_forward(BackendCtx *c, size_t planes, size_t plane, const float *x, float *y) {
    float *xt = flat_in(x, planes * plane), *yt = xmalloc(planes * 4);
    cpu_backend.global_avgpool_forward(c, planes, plane, xt, yt);
    flat_out(yt, planes, y);
    free(xt), free(yt);
}
static void f_gap_backward(BackendCtx *c, size_t planes, size_t plane, const float *dy, float *dx) {
    float *dyt = flat_in(dy, planes), *dxt = xmalloc(planes * plane * 4);
    cpu_backend.global_avgpool_backward(c, planes, plane, dyt, dxt);
    flat_out(dxt, planes * plane, dx);
    free(dyt), free(dxt);
}

static void f_bn_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, float *y, float *sm, float *si, float *rm, float *rv) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    float *xt = img_in(x, s->batch, s->c, s->spatial), *yt = xmalloc(n * 4);
    cpu_backend.batchnorm_forward_train(c, s, xt, g, b, yt, sm, si, rm, rv);
    img_out(yt, s->batch, s->c, s->spatial, y);
    free(xt), free(yt);
}
static void f_bn_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, const float *rm, const float *rv, float *y) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    float *xt = img_in(x, s->batch, s->c, s->spatial), *yt = xmalloc(n * 4);
    cpu_backend.batchnorm_forward_infer(c, s, xt, g, b, rm, rv, yt);
    img_out(yt, s->batch, s->c, s->spatial, y);
    free(xt), free(yt);
}
static void f_bn_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                          const float *sm, const float *si, const float *dy, float *dx, float *dg,
                          float *db) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    float *xt = img_in(x, s->batch, s->c, s->spatial),
          *dyt = img_in(dy, s->batch, s->c, s->spatial), *dxt = xmalloc(n * 4);
    cpu_backend.batchnorm_backward(c, s, xt, g, sm, si, dyt, dxt, dg, db);
    img_out(dxt, s->batch, s->c, s->spatial, dx);
    free(xt), free(dyt), free(dxt);
}

/* element-wise rows: the layout does not matter, only the type */
static void f_relu_forward(BackendCtx *c, size_t n, const float *x, float *y) {
    float *t = flat_in(x, n);
    cpu_backend.relu_forward(c, n, t, t);
    flat_out(t, n, y);
    free(t);
}
static void f_relu_backward(BackendCtx *c, size_t n, const float *y, const float *dy, float *dx) {
    float *yt = flat_in(y, n), *g = flat_in(dy, n);
    cpu_backend.relu_backward(c, n, yt, g, g);
    flat_out(g, n, dx);
    free(yt), free(g);
}
static void f_add_forward(BackendCtx *c, size_t n, const float *a, const float *b, float *y) {
    float *at = flat_in(a, n), *bt = flat_in(b, n);
    cpu_backend.add_forward(c, n, at, bt, at);
    flat_out(at, n, y);
    free(at), free(bt);
}
static void f_add_backward(BackendCtx *c, size_t n, const float *dy, float *da, float *db) {
    (void)c;
    if (da && da != dy) memcpy(da, dy, n * (FMT.type == ACT_FP32 ? 4 : 2));
    if (db && db != dy) memcpy(db, dy, n * (FMT.type == ACT_FP32 ? 4 : 2));
}
/* rows of the concatenation as the model passes them (samples, or pixels in NHWC) */
static void f_concat_forward(BackendCtx *c, int rows, int k, const float *const *xs,
                             const size_t *sizes, float *y) {
    size_t total = 0;
    const float *ts[8];
    for (int i = 0; i < k; i++)
        total += sizes[i], ts[i] = flat_in(xs[i], (size_t)rows * sizes[i]);
    float *yt = xmalloc((size_t)rows * total * 4);
    cpu_backend.concat_forward(c, rows, k, ts, sizes, yt);
    flat_out(yt, (size_t)rows * total, y);
    for (int i = 0; i < k; i++)
        free((void *)ts[i]);
    free(yt);
}
static void f_concat_backward(BackendCtx *c, int rows, int k, const size_t *sizes, const float *dy,
                              float *const *dxs) {
    size_t total = 0;
    float *ts[8];
    for (int i = 0; i < k; i++)
        total += sizes[i], ts[i] = dxs[i] ? xmalloc((size_t)rows * sizes[i] * 4) : NULL;
    float *dyt = flat_in(dy, (size_t)rows * total);
    cpu_backend.concat_backward(c, rows, k, sizes, dyt, ts);
    for (int i = 0; i < k; i++)
        if (dxs[i]) flat_out(ts[i], (size_t)rows * sizes[i], dxs[i]), free(ts[i]);
    free(dyt);
}

/* The reference of bf16 (ROUND): its axpy also rounds, as act_add does in bf16, except on the
 * parameters' gradients (micro-batches summed, fp32 in every format). */
static const float *GRADS; /* the model's gradients and their count */
static size_t NGRADS;
static void f_axpy(BackendCtx *c, size_t n, float alpha, const float *x, float *y) {
    cpu_backend.axpy(c, n, alpha, x, y);
    if (ROUND && !(y >= GRADS && y < GRADS + NGRADS)) flat_out(y, n, y);
}

/* weights_ready: counted, with the parameter buffer it was given */
static int weights_calls;
static const float *weights_seen;
static void f_weights_ready(BackendCtx *c, const float *params, size_t n) {
    (void)c, (void)n;
    weights_calls++, weights_seen = params;
}

static BackendOps fake; /* cpu_backend with the members above */
static void make_fake(void) {
    fake = cpu_backend;
    fake.name = "fake-format";
    fake.activation_format = f_format, fake.input_to_act = f_input, fake.act_add = f_act_add;
    fake.axpy = f_axpy, fake.weights_ready = f_weights_ready;
    fake.fc_forward = f_fc_forward, fake.fc_backward = f_fc_backward;
    fake.conv_forward = f_conv_forward, fake.conv_backward = f_conv_backward;
    fake.maxpool_forward = f_maxpool_forward, fake.maxpool_backward = f_maxpool_backward;
    fake.global_avgpool_forward = f_gap_forward, fake.global_avgpool_backward = f_gap_backward;
    fake.batchnorm_forward_train = f_bn_train, fake.batchnorm_forward_infer = f_bn_infer;
    fake.batchnorm_backward = f_bn_backward;
    fake.relu_forward = f_relu_forward, fake.relu_backward = f_relu_backward;
    fake.add_forward = f_add_forward, fake.add_backward = f_add_backward;
    fake.concat_forward = f_concat_forward, fake.concat_backward = f_concat_backward;
    fake.avgpool_forward = NULL, fake.avgpool_backward = NULL; /* not converted: never called */
    fake.lrn_forward = NULL, fake.lrn_backward = NULL, fake.dropout_forward = NULL;
    fake.dropout_backward = NULL, fake.embedding_forward = NULL, fake.embedding_backward = NULL;
    fake.lstm_forward = NULL, fake.lstm_backward = NULL;
}

/* ---- a model with every join ------------------------------------------------------------------
 */

#define ROW(kind_, name_, out_, k_, s_, p_, in_)                                                   \
    { .kind = kind_, .name = name_, .out = out_, .k = k_, .stride = s_, .pad = p_, .inputs = in_ }
static const LayerDesc JOINS[] = {
    ROW(LAYER_CONV, "conv1", 8, 3, 1, 1, NULL),
    ROW(LAYER_BATCHNORM, "bn1", 0, 0, 0, 0, NULL),
    ROW(LAYER_RELU, "relu1", 0, 0, 0, 0, NULL),
    {.kind = LAYER_CONV, .name = "conv2", .out = 8, .k = 3, .stride = 1, .pad = 1, .no_bias = 1},
    ROW(LAYER_BATCHNORM, "bn2", 0, 0, 0, 0, NULL),
    ROW(LAYER_ADD, "add", 0, 0, 0, 0, "bn2,relu1"), /* relu1 read twice: gradients summed */
    ROW(LAYER_RELU, "relu2", 0, 0, 0, 0, NULL),
    ROW(LAYER_MAXPOOL, "pool", 0, 3, 2, 1, NULL),        /* [8,4,4], padded */
    ROW(LAYER_CONV, "convA", 4, 1, 1, 0, "pool"),        /* [4,4,4] */
    ROW(LAYER_CONV, "convB", 6, 3, 1, 1, "pool"),        /* [6,4,4] */
    ROW(LAYER_CONCAT, "cat", 0, 0, 0, 0, "convA,convB"), /* [10,4,4] */
    ROW(LAYER_FC, "fc1", 16, 0, 0, 0, NULL),             /* flattened from [10, 16 pixels] */
    ROW(LAYER_RELU, "relu3", 0, 0, 0, 0, NULL),
    ROW(LAYER_FC, "fc2", 0, 0, 0, 0, NULL),
};
static const ModelDesc model_joins = {.name = "joins",
                                      .about = "every join",
                                      .in_c = 3,
                                      .in_h = 8,
                                      .in_w = 8,
                                      .classes = 5,
                                      .nlayers = (int)(sizeof JOINS / sizeof JOINS[0]),
                                      .layers = JOINS};

/* ---- training on a backend
 * ----------------------------------------------------------------------- */

enum { BATCH = 4, STEPS = 2 };

/* Two steps of SGD (micro-batches of BATCH/mb samples, gradients accumulated); the losses and the
 * final parameters come back in loss[STEPS] and a malloc'd array. */
static float *train(const ModelDesc *d, const BackendOps *be, int mb, float *loss) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx = NULL;
    be->init(&cfg, &ctx);
    Model m;
    model_build_part(&m, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH, mb, 0, d->nlayers, be,
                     ctx, 11);
    GRADS = m.grads, NGRADS = m.nparams;
    const int calls_built = weights_calls;
    const size_t nx = (size_t)BATCH * m.x_size;
    float *x = xmalloc(nx * sizeof *x);
    int32_t labels[BATCH];
    for (size_t i = 0; i < nx; i++)
        x[i] = sinf(0.37f * (float)i) + 0.25f * cosf(0.011f * (float)(i * i % 977));
    if (ROUND) flat_out(x, nx, x); /* as input_to_act rounds it in bf16 */
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 3 + 1) % m.classes;
    be->upload(ctx, m.x, x, nx * sizeof *x);
    be->upload(ctx, m.labels, labels, sizeof labels);
    const int chunk = BATCH / mb;
    for (int step = 0; step < STEPS; step++) {
        loss[step] = 0;
        for (int k = 0; k < mb; k++) {
            model_forward_part(&m, k * chunk, chunk, k, 1);
            loss[step] += model_loss_part(&m, k * chunk, chunk, 1, 1.0f / mb, NULL) / mb;
            model_backward_part(&m, k * chunk, chunk, k, k > 0);
        }
        model_sgd(&m, 0.05f, 0.9f, 1e-4f);
    }
    if (be == &fake) { /* once when built, then once per step whatever the micro-batches */
        char what[120];
        snprintf(what, sizeof what,
                 "%s, %d micro-batch(es): weights_ready once at build and once per step, on the "
                 "parameters",
                 d->name, mb);
        check(calls_built == 1 && weights_calls == 1 + STEPS && weights_seen == m.params, what);
        weights_calls = 0;
    }
    float *p = xmalloc(m.nparams * sizeof *p);
    be->download(ctx, p, m.params, m.nparams * sizeof *p);
    model_free(&m);
    be->finalize(ctx);
    free(x);
    return p;
}

/* d trained in format f on the fake, against the CPU backend or (ref_round) against the fake
 * storing fp32 values rounded as bf16 (the same values in 4 bytes: bit for bit, tolerances 0). */
static void compare(const ModelDesc *d, ActFormat f, int mb, int ref_round, double loss_tol,
                    double param_tol) {
    Model plan;
    model_plan(&plan, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH);
    const size_t n = plan.nparams;
    model_free(&plan);
    float lc[STEPS], lf[STEPS];
    float *pc;
    if (ref_round) {
        FMT = (ActFormat){ACT_NCHW, ACT_FP32}, ROUND = 1;
        pc = train(d, &fake, mb, lc);
        ROUND = 0;
    } else {
        pc = train(d, &cpu_backend, mb, lc);
    }
    FMT = f;
    float *pf = train(d, &fake, mb, lf);
    double worst = 0, lworst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, isnan(pf[i]) ? INFINITY : fabs((double)pf[i] - pc[i]));
    for (int s = 0; s < STEPS; s++)
        lworst = fmax(lworst, fabs((double)lf[s] - lc[s]) / fmax(1e-6, fabs((double)lc[s])));
    char what[200];
    snprintf(what, sizeof what,
             "%s, %s %s, %d micro-batch(es) vs %s: losses within %.0e (%.2g), parameters within "
             "%.0e (%.2g)",
             d->name, f.layout == ACT_NHWC ? "NHWC" : "NCHW", f.type == ACT_BF16 ? "bf16" : "fp32",
             mb, ref_round ? "fp32 holding bf16 values" : "the CPU backend", loss_tol, lworst,
             param_tol, worst);
    check(lworst <= loss_tol && worst <= param_tol && isfinite(lf[STEPS - 1]), what);
    free(pc), free(pf);
}

int main(void) {
    make_fake();
    const ActFormat nhwc = {ACT_NHWC, ACT_FP32}, bf16 = {ACT_NCHW, ACT_BF16};
    for (int mb = 1; mb <= 2; mb++) {
        compare(&model_lenet, nhwc, mb, 0, 1e-5, 1e-5);
        compare(&model_joins, nhwc, mb, 0, 1e-5, 1e-5);
        compare(&model_lenet, bf16, mb, 1, 0, 0);
        compare(&model_joins, bf16, mb, 1, 0, 0);
        compare(&model_joins, bf16, mb, 0, 5e-2, 5e-2);
    }
    compare(&model_resnet8, bf16, 1, 1, 0, 0);
    compare(&model_resnet8, bf16, 1, 0, 5e-2, 5e-2);
    return check_summary();
}
