/* layer_norm.c - the normalisation layer kinds (rows of the table in layers.h): local response
 * normalisation across channels (AlexNet, GoogLeNet) and batch normalisation (trained gamma and
 * beta, running statistics in the model's `buffers`, batch statistics kept per micro-batch). */
#include "layers.h"

/* ---- LRN ------------------------------------------------------------------------------------- */

static LrnShape lrn_shape(const Layer *L, int n) {
    return (LrnShape){n, L->in_c, L->in_h, L->in_w, L->d.k, L->d.alpha, L->d.beta, L->d.bias};
}

static void lrn_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    L->flops = L->flops_dx = (double)L->in_size * (2.0 * L->d.k + 3.0); /* window sums again */
}

/* s of every sample, read by the backward */
static void lrn_alloc(Model *m, Layer *L) {
    L->aux = layer_alloc(m, (size_t)m->batch * L->out_size * sizeof(float));
}

static void lrn_forward(const LayerStep *t) {
    LrnShape s = lrn_shape(t->L, t->n);
    t->m->be->lrn_forward(t->m->ctx, &s, t->x, t->y, t->L->aux + (size_t)t->s0 * t->L->out_size);
}

static void lrn_backward(const LayerStep *t) {
    const Layer *L = t->L;
    LrnShape s = lrn_shape(L, t->n);
    const float *y = layer_y_at(t->m, L, t->s0);
    if (t->dx)
        t->m->be->lrn_backward(t->m->ctx, &s, t->x, y, L->aux + (size_t)t->s0 * L->out_size, t->dy,
                               t->dx);
}

static const LayerOp lrn_ops[] = {LAYER_OP(lrn_forward), LAYER_OP(lrn_backward), {0, NULL}};

const LayerKindOps layer_lrn = {
    .name = "lrn",
    .flags = LK_BWD_READS_INPUT | LK_BWD_READS_OUTPUT,
    .plan = lrn_plan,
    .alloc = lrn_alloc,
    .forward = lrn_forward,
    .backward = lrn_backward,
    .needs = lrn_ops,
};

/* ---- batch normalisation --------------------------------------------------------------------- */

static BnShape bn_shape(const Layer *L, int n) {
    return (BnShape){n, L->in_c, L->in_h * L->in_w, 1e-5f, 0.1f};
}

static void bn_plan(Model *m, Layer *L, const Layer *P) {
    if (!P) layer_problem(m, L, "cannot normalise the model input");
    L->nw = L->nb = (size_t)L->in_c;
    L->nbuf = 2 * (size_t)L->in_c; /* running mean, running variance */
    L->flops = 5.0 * (double)L->in_size;
    /* x^ = (x - mean) invstd, sums of dy and dy x^; dx = gamma invstd (dy - (sum dy + x^ sum
     * dy x^) / m) */
    L->flops_dw = L->flops_dx = 4.0 * (double)L->in_size;
}

/* gamma 1, beta 0 */
static void bn_init(const Layer *L, uint64_t key, float *w, float *b) {
    (void)key;
    for (size_t j = 0; j < L->nw; j++)
        w[j] = 1.0f;
    for (size_t j = 0; j < L->nb; j++)
        b[j] = 0.0f;
}

/* per micro-batch: the batch mean and 1/std [2, c] */
static void bn_alloc(Model *m, Layer *L) {
    L->aux_slot_bytes = 2 * (size_t)L->in_c * sizeof(float);
    L->aux = layer_alloc(m, L->aux_slot_bytes * (size_t)m->slots);
}

static void bn_forward(const LayerStep *t) {
    const Layer *L = t->L;
    const Model *m = t->m;
    BnShape s = bn_shape(L, t->n);
    float *run = m->buffers + (L->buf_off - m->buf_base), *saved = L->aux + t->slot * 2 * L->in_c;
    if (L->fuse_relu >= 0) { /* with the ReLU (and the residual add) after it: model_fuse.c */
        const float *z = layer_fused_z(t);
        float *y = layer_fused_y(t);
        if (t->train)
            m->be->bn_act_forward_train(m->ctx, &s, t->x, t->w, t->b, z, y, saved, saved + L->in_c,
                                        run, run + L->in_c);
        else
            m->be->bn_act_forward_infer(m->ctx, &s, t->x, t->w, t->b, run, run + L->in_c, z, y);
        return;
    }
    if (t->train)
        m->be->batchnorm_forward_train(m->ctx, &s, t->x, t->w, t->b, t->y, saved, saved + L->in_c,
                                       run, run + L->in_c);
    else
        m->be->batchnorm_forward_infer(m->ctx, &s, t->x, t->w, t->b, run, run + L->in_c, t->y);
}

static void bn_backward(const LayerStep *t) {
    const Layer *L = t->L;
    BnShape s = bn_shape(L, t->n);
    const float *saved = L->aux + t->slot * 2 * L->in_c;
    /* dx is always written: a batch norm never reads the data (bn_plan) */
    if (L->fuse_relu >= 0) {
        t->m->be->bn_act_backward(t->m->ctx, &s, t->x, t->w, saved, saved + L->in_c,
                                  layer_fused_y(t), layer_fused_dy(t), t->dx, layer_fused_dz(t),
                                  t->dw, t->db);
        return;
    }
    t->m->be->batchnorm_backward(t->m->ctx, &s, t->x, t->w, saved, saved + L->in_c, t->dy, t->dx,
                                 t->dw, t->db);
}

static const LayerOp bn_ops[] = {LAYER_OP(batchnorm_forward_train),
                                 LAYER_OP(batchnorm_forward_infer),
                                 LAYER_OP(batchnorm_backward),
                                 {0, NULL}};

const LayerKindOps layer_batchnorm = {
    .name = "batchnorm",
    .flags = LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT,
    .plan = bn_plan,
    .init = bn_init,
    .alloc = bn_alloc,
    .forward = bn_forward,
    .backward = bn_backward,
    .needs = bn_ops,
};
