/* layer_join.c - the layer kinds that join several inputs (rows of the table in layers.h):
 * concatenation along channels (GoogLeNet's inception modules) and the residual add (ResNet).
 * Their backward writes every input's gradient itself (LK_OWN_INPUT_GRADS), one input at a time,
 * since several may share the model's dy_scratch. No parameters. */
#include "layers.h"

/* ---- concatenation --------------------------------------------------------------------------- */

static void concat_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    L->out_c = 0;
    for (int k = 0; k < L->ninputs; k++) {
        const Layer *Q = L->inputs[k] >= 0 ? &m->layers[L->inputs[k]] : NULL;
        int qh = Q ? Q->out_h : m->in_h, qw = Q ? Q->out_w : m->in_w;
        if (qh != L->in_h || qw != L->in_w || (Q && Q->seq))
            layer_problem(m, L, "joins inputs of other sizes");
        L->out_c += Q ? Q->out_c : m->in_c;
    }
}

/* The rows the backend concatenates and each input's share of a row: samples and per-sample
 * sizes; with NHWC activations pixels and channels (backend.h's ActFormat). */
static int concat_rows(const LayerStep *t, size_t *sizes) {
    const Layer *L = t->L;
    const size_t hw = (size_t)L->in_h * L->in_w;
    const int nhwc = t->m->act.layout == ACT_NHWC;
    for (int k = 0; k < L->ninputs; k++)
        sizes[k] = layer_input_size(t->m, L, k) / (nhwc ? hw : 1);
    return nhwc ? t->n * (int)hw : t->n;
}

static void concat_forward(const LayerStep *t) {
    const Layer *L = t->L;
    const float *xs[LAYER_MAX_INPUTS];
    size_t sizes[LAYER_MAX_INPUTS];
    const int rows = concat_rows(t, sizes);
    for (int k = 0; k < L->ninputs; k++)
        xs[k] = layer_input_y(t->m, L, k, t->s0);
    t->m->be->concat_forward(t->m->ctx, rows, L->ninputs, xs, sizes, t->y);
}

static void concat_backward(const LayerStep *t) {
    const Layer *L = t->L;
    size_t sizes[LAYER_MAX_INPUTS];
    const int rows = concat_rows(t, sizes);
    for (int k = 0; k < L->ninputs; k++) {
        if (!t->dest[k]) continue;
        float *dxs[LAYER_MAX_INPUTS] = {NULL};
        dxs[k] = t->dest[k];
        t->m->be->concat_backward(t->m->ctx, rows, L->ninputs, sizes, t->dy, dxs);
        layer_finish_input_grad(t, k, (size_t)t->n * layer_input_size(t->m, L, k));
    }
}

static const LayerOp concat_ops[] = {
    LAYER_OP(concat_forward), LAYER_OP(concat_backward), {0, NULL}};

const LayerKindOps layer_concat = {
    .name = "concat",
    .flags = LK_OUTPUT_REUSABLE | LK_OWN_INPUT_GRADS,
    .plan = concat_plan,
    .forward = concat_forward,
    .backward = concat_backward,
    .needs = concat_ops,
};

/* ---- residual add ---------------------------------------------------------------------------- */

static void add_plan(Model *m, Layer *L, const Layer *P) {
    if (L->ninputs != 2) layer_bad_table(m->desc, L->d.name, "add needs two inputs");
    const Layer *Q = L->inputs[1] >= 0 ? &m->layers[L->inputs[1]] : NULL;
    if (!P || !Q || Q->out_c != L->in_c || Q->out_h != L->in_h || Q->out_w != L->in_w)
        layer_problem(m, L, "adds inputs of other shapes");
    L->flops = (double)L->in_size;
}

static void add_forward(const LayerStep *t) {
    t->m->be->add_forward(t->m->ctx, (size_t)t->n * t->L->out_size, t->x,
                          layer_input_y(t->m, t->L, 1, t->s0), t->y);
}

static void add_backward(const LayerStep *t) {
    const size_t count = (size_t)t->n * t->L->out_size;
    for (int k = 0; k < t->L->ninputs; k++) {
        if (!t->dest[k]) continue;
        t->m->be->add_backward(t->m->ctx, count, t->dy, t->dest[k], NULL);
        layer_finish_input_grad(t, k, count);
    }
}

static const LayerOp add_ops[] = {LAYER_OP(add_forward), LAYER_OP(add_backward), {0, NULL}};

const LayerKindOps layer_add = {
    .name = "add",
    .flags = LK_TAKES_SEQUENCE | LK_OUTPUT_REUSABLE | LK_OWN_INPUT_GRADS,
    .plan = add_plan,
    .forward = add_forward,
    .backward = add_backward,
    .needs = add_ops,
};
