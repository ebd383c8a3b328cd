/* layer_elementwise.c - the element-wise layer kinds (rows of the table in layers.h): ReLU (which
 * runs in its producer's buffers when it may, see LK_IN_PLACE) and inverted dropout (seeded,
 * counter-based masks: the same whatever the ranks, stages or micro-batches). No parameters. */
#include "layers.h"
#include "util.h" /* defines: rng_mix */

/* ---- ReLU ------------------------------------------------------------------------------------ */

static void relu_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    L->flops = L->flops_dx = (double)L->in_size;
}

static void relu_forward(const LayerStep *t) {
    t->m->be->relu_forward(t->m->ctx, (size_t)t->n * t->L->out_size, t->x, t->y);
}

static void relu_backward(const LayerStep *t) {
    const Layer *L = t->L;
    const float *y = layer_y_at(t->m, L, t->s0);
    if (t->dx) t->m->be->relu_backward(t->m->ctx, (size_t)t->n * L->out_size, y, t->dy, t->dx);
}

static const LayerOp relu_ops[] = {{0, NULL}}; /* relu_* are mandatory */

const LayerKindOps layer_relu = {
    .name = "relu",
    .flags = LK_TAKES_SEQUENCE | LK_IN_PLACE | LK_BWD_READS_OUTPUT,
    .plan = relu_plan,
    .forward = relu_forward,
    .backward = relu_backward,
    .needs = relu_ops,
};

/* ---- dropout --------------------------------------------------------------------------------- */

static void dropout_alloc(Model *m, Layer *L) {
    L->mask = layer_alloc(m, (size_t)m->batch * L->out_size);
}

/* An image stored NHWC: the backend maps its elements to the NCHW mask (DropoutShape). */
static void dropout_image(const Model *m, const Layer *L, DropoutShape *s) {
    const int hw = L->out_h * L->out_w;
    if (m->act.layout == ACT_NHWC && hw > 1 && !L->seq) s->c = L->out_c, s->hw = hw;
}

/* Training: a mask from the layer's seed and the global sample index; evaluation: a copy. */
static void dropout_forward(const LayerStep *t) {
    const Layer *L = t->L;
    const Model *m = t->m;
    if (t->train) {
        DropoutShape s = {t->n,
                          L->out_size,
                          L->d.rate,
                          rng_mix(m->seed ^ (0xd20b0000ULL + (uint64_t)t->i)),
                          m->sample_origin + (uint64_t)t->s0,
                          0,
                          0};
        dropout_image(m, L, &s);
        m->be->dropout_forward(m->ctx, &s, t->x, t->y, L->mask + (size_t)t->s0 * L->out_size);
    } else {
        m->be->copy(m->ctx, t->y, t->x, (size_t)t->n * L->out_size * layer_out_bytes(m, L));
    }
}

static void dropout_backward(const LayerStep *t) {
    const Layer *L = t->L;
    if (!t->dx) return;
    DropoutShape s = {t->n, L->out_size, L->d.rate, 0, 0, 0, 0};
    dropout_image(t->m, L, &s);
    t->m->be->dropout_backward(t->m->ctx, &s, L->mask + (size_t)t->s0 * L->out_size, t->dy, t->dx);
}

static const LayerOp dropout_ops[] = {
    LAYER_OP(dropout_forward), LAYER_OP(dropout_backward), LAYER_OP(copy), {0, NULL}};

const LayerKindOps layer_dropout = {
    .name = "dropout",
    /* not (yet) LK_OUTPUT_REUSABLE, though its backward reads only its mask */
    .flags = LK_TAKES_SEQUENCE | LK_STEP_ARGUMENTS,
    .plan = relu_plan, /* one FLOP per element, shape-preserving */
    .alloc = dropout_alloc,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .needs = dropout_ops,
};
