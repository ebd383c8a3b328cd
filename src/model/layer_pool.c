/* layer_pool.c - the pooling layer kinds (rows of the table in layers.h): max pooling and average
 * pooling with zero padding, and global average pooling. No parameters. */
#include "layers.h"

static PoolShape pool_shape(const Layer *L, int n) {
    return (PoolShape){n,           L->in_c,  L->in_h,  L->in_w, L->d.k,
                       L->d.stride, L->d.pad, L->out_h, L->out_w};
}

/* A window of k, stride and padding: max and average pooling. */
static void window_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    const LayerDesc *d = &L->d;
    if (d->pad >= d->k) layer_problem(m, L, "has padding as wide as its window");
    L->out_h = layer_window_out(L->in_h, d->k, d->stride, d->pad);
    L->out_w = layer_window_out(L->in_w, d->k, d->stride, d->pad);
    L->flops = (double)L->in_c * L->out_h * L->out_w * d->k * d->k;
    /* backward: average pooling spreads each dy over its window; max pooling routes it to one
     * place (one add per output) */
    L->flops_dx = d->kind == LAYER_MAXPOOL ? (double)L->in_c * L->out_h * L->out_w : L->flops;
}

/* ---- max pooling ----------------------------------------------------------------------------- */

static void maxpool_alloc(Model *m, Layer *L) {
    L->argmax = layer_alloc(m, (size_t)m->batch * L->out_size * sizeof(int32_t));
}

static void maxpool_forward(const LayerStep *t) {
    const Layer *L = t->L;
    PoolShape s = pool_shape(L, t->n);
    t->m->be->maxpool_forward(t->m->ctx, &s, t->x, t->y, L->argmax + (size_t)t->s0 * L->out_size);
}

static void maxpool_backward(const LayerStep *t) {
    const Layer *L = t->L;
    if (!t->dx) return;
    PoolShape s = pool_shape(L, t->n);
    t->m->be->maxpool_backward(t->m->ctx, &s, L->argmax + (size_t)t->s0 * L->out_size, t->dy,
                               t->dx);
}

static const LayerOp maxpool_ops[] = {{0, NULL}}; /* maxpool_* are mandatory */

const LayerKindOps layer_maxpool = {
    .name = "maxpool",
    .flags = LK_OUTPUT_REUSABLE,
    .plan = window_plan,
    .alloc = maxpool_alloc,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .needs = maxpool_ops,
};

/* ---- average pooling ------------------------------------------------------------------------- */

static void avgpool_forward(const LayerStep *t) {
    PoolShape s = pool_shape(t->L, t->n);
    t->m->be->avgpool_forward(t->m->ctx, &s, t->x, t->y);
}

static void avgpool_backward(const LayerStep *t) {
    PoolShape s = pool_shape(t->L, t->n);
    if (t->dx) t->m->be->avgpool_backward(t->m->ctx, &s, t->dy, t->dx);
}

static const LayerOp avgpool_ops[] = {
    LAYER_OP(avgpool_forward), LAYER_OP(avgpool_backward), {0, NULL}};

const LayerKindOps layer_avgpool = {
    .name = "avgpool",
    .flags = LK_OUTPUT_REUSABLE,
    .plan = window_plan,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .needs = avgpool_ops,
};

/* ---- global average pooling: [c, h, w] -> [c, 1, 1] ------------------------------------------ */

static void gavgpool_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    L->out_h = L->out_w = 1;
    L->flops = L->flops_dx = (double)L->in_size;
}

static void gavgpool_forward(const LayerStep *t) {
    const Layer *L = t->L;
    t->m->be->global_avgpool_forward(t->m->ctx, (size_t)t->n, (size_t)L->in_c,
                                     (size_t)L->in_h * L->in_w, t->x, t->y);
}

static void gavgpool_backward(const LayerStep *t) {
    const Layer *L = t->L;
    if (t->dx)
        t->m->be->global_avgpool_backward(t->m->ctx, (size_t)t->n, (size_t)L->in_c,
                                          (size_t)L->in_h * L->in_w, t->dy, t->dx);
}

static const LayerOp gavgpool_ops[] = {
    LAYER_OP(global_avgpool_forward), LAYER_OP(global_avgpool_backward), {0, NULL}};

const LayerKindOps layer_gavgpool = {
    .name = "gavgpool",
    .flags = LK_OUTPUT_REUSABLE,
    .plan = gavgpool_plan,
    .forward = gavgpool_forward,
    .backward = gavgpool_backward,
    .needs = gavgpool_ops,
};
