/* act_fake.c - the fake activation-format backend of act_fake.h: the CPU backend behind
 * conversions between the declared format and fp32 NCHW. */
#include "act_fake.h"
#include "half_bits.h" /* defines: gc_bf16_*, gc_fp16_* */
#include "layout.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ActFormat act_fake_format;
int act_fake_round;
const float *act_fake_grads;
size_t act_fake_ngrads;
int act_fake_weights_calls, act_fake_bad_filters, act_fake_fused_calls;
const float *act_fake_weights_seen;

#define FMT             act_fake_format
#define FAKE_MAX_INPUTS 8 /* more than a concatenation of the model has */

/* ---- conversions --------------------------------------------------------------------------- */

static float widen(uint16_t h) {
    return FMT.type == ACT_FP16 ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
}
static uint16_t narrow(float v, ActType t) {
    return t == ACT_FP16 ? gc_fp16_from_float(v) : gc_bf16_from_float(v);
}

static float *fbuf(size_t n) {
    return xmalloc((n ? n : 1) * sizeof(float));
}

/* n values of x (fmt) as fp32 and back; flat: no permutation */
static float *flat_in(const float *x, size_t n) {
    float *t = xmalloc((n ? n : 1) * sizeof *t);
    if (FMT.type == ACT_FP32)
        memcpy(t, x, n * sizeof *t);
    else
        for (size_t i = 0; i < n; i++)
            t[i] = widen(((const uint16_t *)x)[i]);
    return t;
}
static void flat_out(const float *t, size_t n, float *x) {
    if (FMT.type != ACT_FP32) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)x)[i] = narrow(t[i], FMT.type);
        return;
    }
    if (act_fake_round) {
        for (size_t i = 0; i < n; i++) {
            const uint16_t h = narrow(t[i], (ActType)act_fake_round);
            x[i] = act_fake_round == ACT_FP16 ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
        }
    } else if (x != t) {
        memcpy(x, t, n * sizeof *t);
    }
}
/* an image tensor [n, c, hw] in fmt as fp32 NCHW, and back */
static float *img_in(const float *x, size_t n, size_t c, size_t hw) {
    float *t = flat_in(x, n * c * hw);
    if (FMT.layout == ACT_NCHW) return t;
    float *u = fbuf(n * c * hw);
    layout_to_nchw(n, c, hw, t, u);
    free(t);
    return u;
}
static void img_out(const float *t, size_t n, size_t c, size_t hw, float *x) {
    if (FMT.layout == ACT_NCHW) {
        flat_out(t, n * c * hw, x);
        return;
    }
    float *u = fbuf(n * c * hw);
    layout_to_nhwc(n, c, hw, t, u);
    flat_out(u, n * c * hw, x);
    free(u);
}

/* ---- format, input, gradient sums ------------------------------------------------------------ */

static int f_format_for(Precision p, ActLayout layout, ActFormat *f, char *why, size_t len) {
    (void)p, (void)why, (void)len;
    *f = layout == ACT_NHWC ? FMT : (ActFormat){ACT_NCHW, ACT_FP32};
    return 1;
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
/* The reference of 16-bit storage (act_fake_round): its axpy also rounds, as act_add does, except
 * on the parameters' gradients (micro-batches summed, fp32 in every format). */
static void f_axpy(BackendCtx *c, size_t n, float alpha, const float *x, float *y) {
    cpu_backend.axpy(c, n, alpha, x, y);
    if (act_fake_round && !(y >= act_fake_grads && y < act_fake_grads + act_fake_ngrads))
        flat_out(y, n, y);
}

/* ---- parameters: counted, and the convolutions' declared places checked ---------------------- */

static ConvWeights *declared;
static int ndeclared;
static void f_weights_layout(BackendCtx *c, const ConvWeights *cw, int n) {
    (void)c;
    free(declared);
    declared = xcalloc((size_t)n + 1, sizeof *cw);
    memcpy(declared, cw, (size_t)n * sizeof *cw);
    ndeclared = n;
}
static void f_weights_ready(BackendCtx *c, const float *params, size_t n) {
    (void)c, (void)n;
    act_fake_weights_calls++, act_fake_weights_seen = params;
}
/* w (and b) are where weights_layout put a filter of shape s */
static void check_filter(const ConvShape *s, const float *w, const float *b) {
    const float *p = act_fake_weights_seen;
    for (int i = 0; p && i < ndeclared; i++) {
        const ConvWeights *d = &declared[i];
        if (w != p + d->w_off) continue;
        const int bias_ok = d->b_off == SIZE_MAX ? b == NULL : b == p + d->b_off;
        if (d->k == s->c_out && d->c == s->c_in && d->khw == s->k * s->k && bias_ok) return;
    }
    act_fake_bad_filters++;
}

/* ---- matrix products --------------------------------------------------------------------------
 */

/* fc: features as stored (pixel-major after an NHWC flatten: the weights mapped) */
static float *fc_weights(const FcShape *s, const float *w) {
    float *t = fbuf((size_t)s->out * s->in);
    if (FMT.layout == ACT_NHWC && s->flat_c)
        fc_weights_to_nhwc(s->out, s->flat_c, s->flat_hw, w, t);
    else
        memcpy(t, w, (size_t)s->out * s->in * sizeof *t);
    return t;
}
static void f_fc_forward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                         const float *b, float *y) {
    float *xt = flat_in(x, (size_t)s->batch * s->in), *wt = fc_weights(s, w);
    float *yt = s->logits ? y : fbuf((size_t)s->batch * s->out);
    cpu_backend.fc_forward(c, s, xt, wt, b, yt);
    if (!s->logits) flat_out(yt, (size_t)s->batch * s->out, y), free(yt);
    free(xt), free(wt);
}
static void f_fc_backward(BackendCtx *c, const FcShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db) {
    const size_t nx = (size_t)s->batch * s->in, nw = (size_t)s->out * s->in;
    float *xt = flat_in(x, nx), *wt = fc_weights(s, w), *dxt = dx ? fbuf(nx) : NULL;
    float *dyt = s->logits ? (float *)dy : flat_in(dy, (size_t)s->batch * s->out);
    float *dwt = fbuf(nw);
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
    check_filter(s, w, b);
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c_in, hwi), *yt = fbuf(s->batch * s->c_out * hwo);
    cpu_backend.conv_forward(c, s, xt, w, b, yt, work);
    img_out(yt, s->batch, s->c_out, hwo, y);
    free(xt), free(yt);
}
static void f_conv_backward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, void *work) {
    check_filter(s, w, db ? w + (size_t)s->c_out * s->c_in * s->k * s->k : NULL);
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c_in, hwi), *dyt = img_in(dy, s->batch, s->c_out, hwo);
    float *dxt = dx ? fbuf(s->batch * s->c_in * hwi) : NULL;
    cpu_backend.conv_backward(c, s, xt, w, dyt, dxt, dw, db, work);
    if (dx) img_out(dxt, s->batch, s->c_in, hwi, dx);
    free(xt), free(dyt), free(dxt);
}
/* fused: the CPU's convolution, then its ReLU on the stored values (the unfused rows) */
static void f_conv_relu_forward(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                                const float *b, float *y, void *work) {
    act_fake_fused_calls++;
    f_conv_forward(c, s, x, w, b, y, work);
    const size_t n = (size_t)s->batch * s->c_out * s->h_out * s->w_out;
    float *t = flat_in(y, n);
    cpu_backend.relu_forward(c, n, t, t);
    flat_out(t, n, y);
    free(t);
}

/* ---- pooling, normalisation -------------------------------------------------------------------
 */

/* the CPU's max pooling records argmax in NCHW planes, which its backward reads back */
static void f_maxpool_forward(BackendCtx *c, const PoolShape *s, const float *x, float *y,
                              int32_t *am) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c, hwi), *yt = fbuf(s->batch * s->c * hwo);
    cpu_backend.maxpool_forward(c, s, xt, yt, am);
    img_out(yt, s->batch, s->c, hwo, y);
    free(xt), free(yt);
}
static void f_maxpool_backward(BackendCtx *c, const PoolShape *s, const int32_t *am,
                               const float *dy, float *dx) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *dyt = img_in(dy, s->batch, s->c, hwo), *dxt = fbuf(s->batch * s->c * hwi);
    cpu_backend.maxpool_backward(c, s, am, dyt, dxt);
    img_out(dxt, s->batch, s->c, hwi, dx);
    free(dyt), free(dxt);
}
static void f_avgpool_forward(BackendCtx *c, const PoolShape *s, const float *x, float *y) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *xt = img_in(x, s->batch, s->c, hwi), *yt = fbuf(s->batch * s->c * hwo);
    cpu_backend.avgpool_forward(c, s, xt, yt);
    img_out(yt, s->batch, s->c, hwo, y);
    free(xt), free(yt);
}
static void f_avgpool_backward(BackendCtx *c, const PoolShape *s, const float *dy, float *dx) {
    const size_t hwi = (size_t)s->h_in * s->w_in, hwo = (size_t)s->h_out * s->w_out;
    float *dyt = img_in(dy, s->batch, s->c, hwo), *dxt = fbuf(s->batch * s->c * hwi);
    cpu_backend.avgpool_backward(c, s, dyt, dxt);
    img_out(dxt, s->batch, s->c, hwi, dx);
    free(dyt), free(dxt);
}
/* global average pooling: x [n, c, plane] in the format (NHWC: [n, plane, c]) -> y [n, c] */
static void f_gap_forward(BackendCtx *c, size_t n, size_t ch, size_t plane, const float *x,
                          float *y) {
    float *xt = img_in(x, n, ch, plane), *yt = fbuf(n * ch);
    cpu_backend.global_avgpool_forward(c, n, ch, plane, xt, yt);
    flat_out(yt, n * ch, y);
    free(xt), free(yt);
}
static void f_gap_backward(BackendCtx *c, size_t n, size_t ch, size_t plane, const float *dy,
                           float *dx) {
    float *dyt = flat_in(dy, n * ch), *dxt = fbuf(n * ch * plane);
    cpu_backend.global_avgpool_backward(c, n, ch, plane, dyt, dxt);
    img_out(dxt, n, ch, plane, dx);
    free(dyt), free(dxt);
}
/* LRN: scale is the fake's own record (NCHW, fp32) */
static void f_lrn_forward(BackendCtx *c, const LrnShape *s, const float *x, float *y, float *sc) {
    const size_t hw = (size_t)s->h * s->w, n = (size_t)s->batch * s->c * hw;
    float *xt = img_in(x, s->batch, s->c, hw), *yt = fbuf(n);
    cpu_backend.lrn_forward(c, s, xt, yt, sc);
    img_out(yt, s->batch, s->c, hw, y);
    free(xt), free(yt);
}
static void f_lrn_backward(BackendCtx *c, const LrnShape *s, const float *x, const float *y,
                           const float *sc, const float *dy, float *dx) {
    const size_t hw = (size_t)s->h * s->w, n = (size_t)s->batch * s->c * hw;
    float *xt = img_in(x, s->batch, s->c, hw), *yt = img_in(y, s->batch, s->c, hw);
    float *dyt = img_in(dy, s->batch, s->c, hw), *dxt = fbuf(n);
    cpu_backend.lrn_backward(c, s, xt, yt, sc, dyt, dxt);
    img_out(dxt, s->batch, s->c, hw, dx);
    free(xt), free(yt), free(dyt), free(dxt);
}

static size_t bn_count(const BnShape *s) {
    return (size_t)s->batch * s->c * s->spatial;
}
static void f_bn_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, float *y, float *sm, float *si, float *rm, float *rv) {
    float *xt = img_in(x, s->batch, s->c, s->spatial), *yt = fbuf(bn_count(s));
    cpu_backend.batchnorm_forward_train(c, s, xt, g, b, yt, sm, si, rm, rv);
    img_out(yt, s->batch, s->c, s->spatial, y);
    free(xt), free(yt);
}
static void f_bn_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                       const float *b, const float *rm, const float *rv, float *y) {
    float *xt = img_in(x, s->batch, s->c, s->spatial), *yt = fbuf(bn_count(s));
    cpu_backend.batchnorm_forward_infer(c, s, xt, g, b, rm, rv, yt);
    img_out(yt, s->batch, s->c, s->spatial, y);
    free(xt), free(yt);
}
static void f_bn_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                          const float *sm, const float *si, const float *dy, float *dx, float *dg,
                          float *db) {
    float *xt = img_in(x, s->batch, s->c, s->spatial),
          *dyt = img_in(dy, s->batch, s->c, s->spatial), *dxt = fbuf(bn_count(s));
    cpu_backend.batchnorm_backward(c, s, xt, g, sm, si, dyt, dxt, dg, db);
    img_out(dxt, s->batch, s->c, s->spatial, dx);
    free(xt), free(dyt), free(dxt);
}

/* ---- element-wise rows: the layout does not matter, only the type -----------------------------
 */

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
    const size_t bytes = n * ACT_TYPE_BYTES(FMT.type);
    if (da && da != dy) memcpy(da, dy, bytes);
    if (db && db != dy) memcpy(db, dy, bytes);
}
/* rows of the concatenation as the model passes them (samples, or pixels in NHWC) */
static void f_concat_forward(BackendCtx *c, int rows, int k, const float *const *xs,
                             const size_t *sizes, float *y) {
    size_t total = 0;
    const float *ts[FAKE_MAX_INPUTS];
    for (int i = 0; i < k; i++)
        total += sizes[i], ts[i] = flat_in(xs[i], (size_t)rows * sizes[i]);
    float *yt = fbuf((size_t)rows * total);
    cpu_backend.concat_forward(c, rows, k, ts, sizes, yt);
    flat_out(yt, (size_t)rows * total, y);
    for (int i = 0; i < k; i++)
        free((void *)ts[i]);
    free(yt);
}
static void f_concat_backward(BackendCtx *c, int rows, int k, const size_t *sizes, const float *dy,
                              float *const *dxs) {
    size_t total = 0;
    float *ts[FAKE_MAX_INPUTS];
    for (int i = 0; i < k; i++)
        total += sizes[i], ts[i] = dxs[i] ? fbuf((size_t)rows * sizes[i]) : NULL;
    float *dyt = flat_in(dy, (size_t)rows * total);
    cpu_backend.concat_backward(c, rows, k, sizes, dyt, ts);
    for (int i = 0; i < k; i++)
        if (dxs[i]) flat_out(ts[i], (size_t)rows * sizes[i], dxs[i]), free(ts[i]);
    free(dyt);
}
/* dropout: an NHWC image (s->hw > 0) converted to NCHW, where the CPU's mask applies; the mask is
 * the fake's own record, in NCHW order */
static float *drop_in(const DropoutShape *s, const float *x) {
    return s->hw ? img_in(x, s->batch, s->c, s->hw) : flat_in(x, s->batch * s->size);
}
static void drop_out(const DropoutShape *s, const float *t, float *x) {
    if (s->hw)
        img_out(t, s->batch, s->c, s->hw, x);
    else
        flat_out(t, s->batch * s->size, x);
}
static void f_dropout_forward(BackendCtx *c, const DropoutShape *s, const float *x, float *y,
                              uint8_t *mask) {
    DropoutShape nchw = *s;
    nchw.c = nchw.hw = 0;
    float *t = drop_in(s, x), *u = fbuf(s->batch * s->size);
    cpu_backend.dropout_forward(c, &nchw, t, u, mask);
    drop_out(s, u, y);
    free(t), free(u);
}
static void f_dropout_backward(BackendCtx *c, const DropoutShape *s, const uint8_t *mask,
                               const float *dy, float *dx) {
    DropoutShape nchw = *s;
    nchw.c = nchw.hw = 0;
    float *t = drop_in(s, dy), *u = fbuf(s->batch * s->size);
    cpu_backend.dropout_backward(c, &nchw, mask, t, u);
    drop_out(s, u, dx);
    free(t), free(u);
}

/* ---- fused batch norm: the unfused rows' calls in their order ---------------------------------
 */

static void f_bn_act_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                           const float *b, const float *z, float *y, float *sm, float *si,
                           float *rm, float *rv) {
    act_fake_fused_calls++;
    f_bn_train(c, s, x, g, b, y, sm, si, rm, rv);
    if (z) f_add_forward(c, bn_count(s), y, z, y);
    f_relu_forward(c, bn_count(s), y, y);
}
static void f_bn_act_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                           const float *b, const float *rm, const float *rv, const float *z,
                           float *y) {
    act_fake_fused_calls++;
    f_bn_infer(c, s, x, g, b, rm, rv, y);
    if (z) f_add_forward(c, bn_count(s), y, z, y);
    f_relu_forward(c, bn_count(s), y, y);
}
static void f_bn_act_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                              const float *sm, const float *si, const float *y, float *dy,
                              float *dx, float *dz, float *dg, float *db) {
    act_fake_fused_calls++;
    f_relu_backward(c, bn_count(s), y, dy, dy);
    if (dz) f_add_backward(c, bn_count(s), dy, dz, NULL);
    f_bn_backward(c, s, x, g, sm, si, dy, dx, dg, db);
}

static BackendOps tables[2]; /* unfused, fused */
static void make(BackendOps *f, int fused) {
    *f = cpu_backend;
    f->name = fused ? "fake-format-fused" : "fake-format";
    f->act_format_for = f_format_for, f->activation_format = f_format;
    f->input_to_act = f_input, f->act_add = f_act_add, f->axpy = f_axpy;
    f->weights_ready = f_weights_ready, f->weights_layout = f_weights_layout;
    f->fc_forward = f_fc_forward, f->fc_backward = f_fc_backward;
    f->conv_forward = f_conv_forward, f->conv_backward = f_conv_backward;
    f->maxpool_forward = f_maxpool_forward, f->maxpool_backward = f_maxpool_backward;
    f->avgpool_forward = f_avgpool_forward, f->avgpool_backward = f_avgpool_backward;
    f->global_avgpool_forward = f_gap_forward, f->global_avgpool_backward = f_gap_backward;
    f->lrn_forward = f_lrn_forward, f->lrn_backward = f_lrn_backward;
    f->batchnorm_forward_train = f_bn_train, f->batchnorm_forward_infer = f_bn_infer;
    f->batchnorm_backward = f_bn_backward;
    f->relu_forward = f_relu_forward, f->relu_backward = f_relu_backward;
    f->add_forward = f_add_forward, f->add_backward = f_add_backward;
    f->concat_forward = f_concat_forward, f->concat_backward = f_concat_backward;
    f->dropout_forward = f_dropout_forward, f->dropout_backward = f_dropout_backward;
    f->embedding_forward = NULL, f->embedding_backward = NULL; /* not converted: never called */
    f->lstm_forward = NULL, f->lstm_backward = NULL;
    f->bn_act_forward_train = NULL, f->bn_act_forward_infer = NULL; /* the CPU's: NCHW only */
    f->bn_act_backward = NULL, f->conv_relu_forward = NULL;
    if (fused) {
        f->bn_act_forward_train = f_bn_act_train, f->bn_act_forward_infer = f_bn_act_infer;
        f->bn_act_backward = f_bn_act_backward, f->conv_relu_forward = f_conv_relu_forward;
    }
}

const BackendOps *act_fake_backend(int fused) {
    if (!tables[0].name) make(&tables[0], 0), make(&tables[1], 1);
    return &tables[fused ? 1 : 0];
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
    ROW(LAYER_MAXPOOL, "pool", 0, 3, 2, 1, NULL), /* [8,4,4], padded */
    {.kind = LAYER_LRN, .name = "norm", .k = 3, .alpha = 1e-3f, .beta = 0.75f, .bias = 1.0f},
    ROW(LAYER_CONV, "convA", 4, 1, 1, 0, "norm"),        /* [4,4,4] */
    ROW(LAYER_CONV, "convB", 6, 3, 1, 1, "norm"),        /* [6,4,4] */
    ROW(LAYER_RELU, "reluB", 0, 0, 0, 0, NULL),          /* fuses with convB's forward */
    ROW(LAYER_CONCAT, "cat", 0, 0, 0, 0, "convA,reluB"), /* [10,4,4] */
    {.kind = LAYER_DROPOUT, .name = "drop", .rate = 0.3f},
    ROW(LAYER_FC, "fc1", 16, 0, 0, 0, NULL), /* flattened from [10, 16 pixels] */
    ROW(LAYER_RELU, "relu3", 0, 0, 0, 0, NULL),
    ROW(LAYER_FC, "fc2", 0, 0, 0, 0, NULL),
};
const ModelDesc act_fake_joins = {.name = "joins",
                                  .about = "every join",
                                  .in_c = 3,
                                  .in_h = 8,
                                  .in_w = 8,
                                  .classes = 5,
                                  .nlayers = (int)(sizeof JOINS / sizeof JOINS[0]),
                                  .layers = JOINS};
