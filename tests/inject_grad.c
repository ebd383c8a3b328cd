/* inject_grad.c - a wrong gradient in one layer of a backend (see inject_grad.h). */
#include "inject_grad.h"
#include "half_bits.h" /* defines: gc_bf16_*, gc_fp16_* */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static BackendOps injected;
static const BackendOps *inner;
static const float *inject_dw; /* the weight gradient perturbed */
static ActType inject_act;     /* the activations' type (dx is an activation gradient) */

/* n values of type t at dev: element 0 (the same element in NCHW and NHWC) += their 2-norm */
static void perturb(BackendCtx *ctx, float *dev, size_t n, ActType t) {
    const size_t eb = ACT_TYPE_BYTES(t);
    void *raw = malloc(n * eb);
    float *h = malloc(n * sizeof(float));
    inner->download(ctx, raw, dev, n * eb);
    for (size_t i = 0; i < n; i++) {
        const uint16_t b = eb == 2 ? ((const uint16_t *)raw)[i] : 0;
        h[i] = t == ACT_BF16   ? gc_bf16_to_float(b)
               : t == ACT_FP16 ? gc_fp16_to_float(b)
                               : ((const float *)raw)[i];
    }
    double norm = 0;
    for (size_t i = 0; i < n; i++)
        norm += (double)h[i] * h[i];
    h[0] += norm > 0 ? (float)sqrt(norm) : 1.0f; /* ||error|| = ||gradient||: unmistakable */
    if (eb == 2)
        ((uint16_t *)raw)[0] = t == ACT_FP16 ? gc_fp16_from_float(h[0]) : gc_bf16_from_float(h[0]);
    else
        ((float *)raw)[0] = h[0];
    inner->upload(ctx, dev, raw, n * eb);
    free(h), free(raw);
}

static void inj_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, void *work) {
    inner->conv_backward(ctx, s, x, w, dy, dx, dw, db, work);
    if (dw != inject_dw) return;
    perturb(ctx, dw, (size_t)s->c_out * s->c_in * s->k * s->k, ACT_FP32);
    if (dx) perturb(ctx, dx, (size_t)s->batch * s->c_in * s->h_in * s->w_in, inject_act);
}

static void inj_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db) {
    inner->fc_backward(ctx, s, x, w, dy, dx, dw, db);
    if (dw != inject_dw) return;
    perturb(ctx, dw, (size_t)s->out * s->in, ACT_FP32);
    if (dx) perturb(ctx, dx, (size_t)s->batch * s->in, inject_act);
}

const BackendOps *inject_grad_wrap(const BackendOps *be) {
    inner = be, injected = *be;
    injected.conv_backward = inj_conv_backward, injected.fc_backward = inj_fc_backward;
    return &injected;
}

void inject_grad_at(const float *dw, ActType act) {
    inject_dw = dw, inject_act = act;
}
