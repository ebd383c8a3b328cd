/* fused_rows.c - the fused operations made of unfused calls (see fused_rows.h). */
#include "fused_rows.h"

int fused_rows_calls;
static const BackendOps *be; /* whose unfused members run */

static size_t count(const BnShape *s) {
    return (size_t)s->batch * s->c * s->spatial;
}
static void bn_act_train(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                         const float *b, const float *z, float *y, float *sm, float *si, float *rm,
                         float *rv) {
    fused_rows_calls++;
    be->batchnorm_forward_train(c, s, x, g, b, y, sm, si, rm, rv);
    if (z) be->add_forward(c, count(s), y, z, y);
    be->relu_forward(c, count(s), y, y);
}
static void bn_act_infer(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                         const float *b, const float *rm, const float *rv, const float *z,
                         float *y) {
    fused_rows_calls++;
    be->batchnorm_forward_infer(c, s, x, g, b, rm, rv, y);
    if (z) be->add_forward(c, count(s), y, z, y);
    be->relu_forward(c, count(s), y, y);
}
static void bn_act_backward(BackendCtx *c, const BnShape *s, const float *x, const float *g,
                            const float *sm, const float *si, const float *y, float *dy, float *dx,
                            float *dz, float *dg, float *db) {
    fused_rows_calls++;
    be->relu_backward(c, count(s), y, dy, dy);
    if (dz) be->add_backward(c, count(s), dy, dz, NULL);
    be->batchnorm_backward(c, s, x, g, sm, si, dy, dx, dg, db);
}
static void conv_relu(BackendCtx *c, const ConvShape *s, const float *x, const float *w,
                      const float *b, float *y, void *work) {
    fused_rows_calls++;
    be->conv_forward(c, s, x, w, b, y, work);
    be->relu_forward(c, (size_t)s->batch * s->c_out * s->h_out * s->w_out, y, y);
}

void fused_rows_install(BackendOps *t, const BackendOps *unfused, int with_conv_relu) {
    be = unfused;
    t->bn_act_forward_train = bn_act_train, t->bn_act_forward_infer = bn_act_infer;
    t->bn_act_backward = bn_act_backward;
    t->conv_relu_forward = with_conv_relu ? conv_relu : NULL;
}
