/* layer_elementwise.c - the element-wise layer kinds (rows of the table in layers.h): ReLU (which
 * runs in its producer's buffers when it may, see LK_IN_PLACE) and inverted dropout (seeded,
 * counter-based masks: the same whatever the ranks, stages or micro-batches). No parameters. */
#include "layers.h"
#include "rng.h" /* defines: rng_mix */

#include <string.h>

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

/* The mask; on a device, once per model, the sample origin in device memory
 * (model_set_sample_origin), which the kernels read when they run: a step's arguments are the
 * same at every step, so that it can be replayed from a captured graph. */
static void dropout_alloc(Model *m, Layer *L) {
    L->mask = layer_alloc(m, (size_t)m->batch * L->out_size);
    if (m->be->device_memory && !m->origin) m->origin = layer_alloc(m, sizeof *m->origin);
}

/* The layer's DropoutShape for samples [s0, s0 + n): its padding zeroed, so that the call is the
 * same, byte for byte, at every step (a replayed step makes the calls it captured). An image
 * stored NHWC: the backend maps its elements to the NCHW mask (DropoutShape.c, hw). */
static DropoutShape dropout_shape(const LayerStep *t) {
    const Layer *L = t->L;
    const Model *m = t->m;
    DropoutShape s;
    memset(&s, 0, sizeof s);
    s.batch = t->n, s.size = L->out_size, s.rate = L->d.rate;
    const int hw = L->out_h * L->out_w;
    if (m->act.layout == ACT_NHWC && hw > 1 && !L->seq) s.c = L->out_c, s.hw = hw;
    return s;
}

/* Training: a mask from the layer's seed and the global sample index: the batch's origin + the
 * chunk's first sample, the origin read by the kernel from m->origin on a device, passed as a
 * value on the host (whose backend has no graphs: the path that does not depend on the upload,
 * which the tests compare a device's with); evaluation: a copy. */
static void dropout_forward(const LayerStep *t) {
    const Layer *L = t->L;
    const Model *m = t->m;
    if (t->train) {
        DropoutShape s = dropout_shape(t);
        s.seed = rng_mix(m->seed ^ (0xd20b0000ULL + (uint64_t)t->i));
        s.first_sample = (m->origin ? 0 : m->sample_origin) + (uint64_t)t->s0;
        s.origin = m->origin;
        m->be->dropout_forward(m->ctx, &s, t->x, t->y, L->mask + (size_t)t->s0 * L->out_size);
    } else {
        m->be->copy(m->ctx, t->y, t->x, (size_t)t->n * L->out_size * layer_out_bytes(m, L));
    }
}

static void dropout_backward(const LayerStep *t) {
    const Layer *L = t->L;
    if (!t->dx) return;
    const DropoutShape s = dropout_shape(t);
    t->m->be->dropout_backward(t->m->ctx, &s, L->mask + (size_t)t->s0 * L->out_size, t->dy, t->dx);
}

static const LayerOp dropout_ops[] = {
    LAYER_OP(dropout_forward), LAYER_OP(dropout_backward), LAYER_OP(copy), {0, NULL}};

const LayerKindOps layer_dropout = {
    .name = "dropout",
    /* not (yet) LK_OUTPUT_REUSABLE, though its backward reads only its mask; no
     * LK_STEP_ARGUMENTS: what changes per step (the batch's first sample) it reads from memory */
    .flags = LK_TAKES_SEQUENCE,
    .plan = relu_plan, /* one FLOP per element, shape-preserving */
    .alloc = dropout_alloc,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .needs = dropout_ops,
};
