/* layer_gemm.c - the layer kinds that are matrix products with trained weights: convolution and
 * fully connected (rows of the table in layers.h). Xavier-uniform weights, zero biases. */
#include "layers.h"

#include <math.h>

/* Xavier-uniform bound sqrt(6 / (fan_in + fan_out)) over `out` output channels or features. */
static void init_xavier(const Layer *L, uint64_t key, float *w, float *b) {
    if (L->d.init_std > 0.0f) { /* a transformer's projection: normal(0, init_std) */
        layer_init_normal(L, key, L->d.init_std, w, b);
        return;
    }
    const int fc = L->d.kind == LAYER_FC;
    size_t out = fc && L->seq ? (size_t)L->out_w : (size_t)L->out_c;
    double fan_in = (double)L->nw / out, fan_out = (double)L->nw / L->in_c;
    if (fc) fan_out = (double)out;
    layer_init_uniform(L, key, (float)sqrt(6.0 / (fan_in + fan_out)), w, b);
}

/* ---- convolution ----------------------------------------------------------------------------- */

static ConvShape conv_shape(const Layer *L, int n) {
    return (ConvShape){n,      L->in_c,     L->in_h,  L->in_w,  L->out_c,
                       L->d.k, L->d.stride, L->d.pad, L->out_h, L->out_w};
}

static void conv_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    const LayerDesc *d = &L->d;
    const int c = L->in_c;
    L->out_c = d->out;
    L->out_h = layer_window_out(L->in_h, d->k, d->stride, d->pad);
    L->out_w = layer_window_out(L->in_w, d->k, d->stride, d->pad);
    L->nw = (size_t)d->out * c * d->k * d->k;
    L->nb = d->no_bias ? 0 : (size_t)d->out;
    L->flops = 2.0 * d->out * L->out_h * L->out_w * c * d->k * d->k;
    L->flops_dw = L->flops_dx = L->flops; /* dW = dy x^T and dx = W^T dy: the same products */
}

static void conv_plan_work(Model *m, Layer *L) {
    ConvShape s = conv_shape(L, m->chunk);
    layer_need_work(m, m->be->conv_workspace_bytes(m->ctx, &s));
}

static void conv_forward(const LayerStep *t) {
    ConvShape s = conv_shape(t->L, t->n);
    if (t->L->fuse_relu >= 0) /* with the ReLU after it, in its output (model_fuse.c) */
        t->m->be->conv_relu_forward(t->m->ctx, &s, t->x, t->w, t->b, layer_fused_y(t), t->m->work);
    else
        t->m->be->conv_forward(t->m->ctx, &s, t->x, t->w, t->b, t->y, t->m->work);
}

static void conv_backward(const LayerStep *t) {
    ConvShape s = conv_shape(t->L, t->n);
    t->m->be->conv_backward(t->m->ctx, &s, t->x, t->w, t->dy, t->dx, t->dw, t->db, t->m->work);
}

static const LayerOp no_ops[] = {{0, NULL}}; /* all it calls is mandatory in BackendOps */

const LayerKindOps layer_conv = {
    .name = "conv",
    .flags = LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT | LK_DECAY_WEIGHTS,
    .plan = conv_plan,
    .init = init_xavier,
    .plan_work = conv_plan_work,
    .forward = conv_forward,
    .backward = conv_backward,
    .needs = no_ops,
};

/* ---- fully connected ------------------------------------------------------------------------- */

/* On a sequence, the same fc at every position. An input of several pixels is flattened from
 * [in_c, in_h*in_w]; the model's last layer writes the logits (FcShape, backend.h). */
static FcShape fc_shape(const Model *m, const Layer *L, int n) {
    const int logits = layer_is_logits(m, L);
    if (L->seq) return (FcShape){n * L->seq, L->in_w, L->out_w, 0, 0, logits};
    const int hw = L->in_h * L->in_w;
    return (FcShape){n, (int)L->in_size, L->out_c, hw > 1 ? L->in_c : 0, hw > 1 ? hw : 0, logits};
}

static void fc_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    const LayerDesc *d = &L->d;
    const int seq = L->seq;
    int out = d->out ? d->out : m->classes;
    size_t features = seq ? (size_t)L->in_w : L->in_size;
    if (seq)
        L->out_c = seq, L->out_h = 1, L->out_w = out;
    else
        L->out_c = out, L->out_h = 1, L->out_w = 1;
    L->nw = (size_t)out * features;
    L->nb = d->no_bias ? 0 : (size_t)out;
    L->flops = 2.0 * out * (double)features * (seq ? seq : 1);
    L->flops_dw = L->flops_dx = L->flops;
}

static void fc_forward(const LayerStep *t) {
    FcShape s = fc_shape(t->m, t->L, t->n);
    t->m->be->fc_forward(t->m->ctx, &s, t->x, t->w, t->b, t->y);
}

static void fc_backward(const LayerStep *t) {
    FcShape s = fc_shape(t->m, t->L, t->n);
    t->m->be->fc_backward(t->m->ctx, &s, t->x, t->w, t->dy, t->dx, t->dw, t->db);
}

const LayerKindOps layer_fc = {
    .name = "fc",
    .flags = LK_TAKES_SEQUENCE | LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT | LK_DECAY_WEIGHTS,
    .plan = fc_plan,
    .init = init_xavier,
    .forward = fc_forward,
    .backward = fc_backward,
    .needs = no_ops,
};
