/* test_cpu_norm.c - the CPU backend's normalisation layers (kernels/cpu/cpu_norm.c): LRN (AlexNet's
 * constants, strong normalisation, an even window with another beta: the powf path, a window of
 * one channel) and batch normalisation (after a conv, after an fc with a shifted mean; training
 * forward with its batch statistics and running averages, inference, backward) against the naive
 * references (tests/ref_norm.c), outputs pre-filled with NaN; then their backward passes against
 * finite differences (tests/gradcheck.h; batch norm in training mode: dx, dgamma, dbeta through
 * the batch statistics). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_lrn(int n, int c, int h, int w, int size, float alpha, float beta, float bias,
                     float range) {
    LrnShape s = {n, c, h, w, size, alpha, beta, bias};
    char shape[160];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d size=%d alpha=%g beta=%g bias=%g |x|<=%g", n, c,
             h, w, size, alpha, beta, bias, range);
    size_t nx = (size_t)n * c * h * w;
    float *x = falloc(nx), *y = falloc(nx), *sc = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *ry = halloc(nx), *rdx = halloc(nx);
    fill_uniform(x, nx, -range, range);
    fill_uniform(dy, nx, -1, 1);
    fill_nan(y, nx);
    B->lrn_forward(ctx, &s, x, y, sc);
    ref_lrn_forward(&s, x, ry);
    check_close(fmt_label("lrn_forward %s", shape), y, ry, nx, 1e-5, 1e-5);
    fill_nan(dx, nx);
    B->lrn_backward(ctx, &s, x, y, sc, dy, dx);
    ref_lrn_backward(&s, x, dy, rdx);
    check_close(fmt_label("lrn_backward %s", shape), dx, rdx, nx, 1e-5, 1e-5);
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, sc), B->free(ctx, dy), B->free(ctx, dx);
    free(ry), free(rdx);
}

static void test_batchnorm(int n, int c, int spatial, float offset) {
    BnShape s = {n, c, spatial, 1e-5f, 0.1f};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d spatial=%d mean~%g", n, c, spatial, offset);
    size_t nx = (size_t)n * c * spatial;
    float *x = falloc(nx), *y = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *g = falloc(c), *b = falloc(c), *mean = falloc(c), *invstd = falloc(c);
    float *rm = falloc(c), *rv = falloc(c), *dg = falloc(c), *dbeta = falloc(c);
    float *ry = halloc(nx), *rdx = halloc(nx), *rmean = halloc(c), *rinv = halloc(c);
    float *rrm = halloc(c), *rrv = halloc(c), *rdg = halloc(c), *rdb = halloc(c);
    fill_uniform(x, nx, offset - 1, offset + 1);
    fill_uniform(dy, nx, -1, 1);
    fill_uniform(g, c, 0.5f, 1.5f);
    fill_uniform(b, c, -1, 1);
    fill_uniform(rm, c, -1, 1);
    fill_uniform(rv, c, 0.5f, 2);
    memcpy(rrm, rm, c * sizeof(float));
    memcpy(rrv, rv, c * sizeof(float));

    fill_nan(y, nx);
    B->batchnorm_forward_train(ctx, &s, x, g, b, y, mean, invstd, rm, rv);
    ref_batchnorm_forward_train(&s, x, g, b, ry, rmean, rinv, rrm, rrv);
    check_close(fmt_label("batchnorm_forward_train y %s", shape), y, ry, nx, 1e-4, 1e-4);
    check_close(fmt_label("batchnorm_forward_train mean %s", shape), mean, rmean, c, 1e-5, 1e-5);
    check_close(fmt_label("batchnorm_forward_train invstd %s", shape), invstd, rinv, c, 1e-5, 1e-5);
    check_close(fmt_label("batchnorm_forward_train running_mean %s", shape), rm, rrm, c, 1e-5,
                1e-5);
    check_close(fmt_label("batchnorm_forward_train running_var %s", shape), rv, rrv, c, 1e-5, 1e-5);
    fill_nan(dx, nx);
    fill_nan(dg, c);
    fill_nan(dbeta, c);
    B->batchnorm_backward(ctx, &s, x, g, mean, invstd, dy, dx, dg, dbeta);
    ref_batchnorm_backward(&s, x, g, dy, rdx, rdg, rdb);
    check_close(fmt_label("batchnorm_backward dx %s", shape), dx, rdx, nx, 1e-4, 1e-4);
    check_close(fmt_label("batchnorm_backward dgamma %s", shape), dg, rdg, c, 1e-4, 1e-4);
    check_close(fmt_label("batchnorm_backward dbeta %s", shape), dbeta, rdb, c, 1e-4, 1e-4);
    fill_nan(y, nx);
    B->batchnorm_forward_infer(ctx, &s, x, g, b, rm, rv, y);
    ref_batchnorm_forward_infer(&s, x, g, b, rrm, rrv, ry);
    check_close(fmt_label("batchnorm_forward_infer %s", shape), y, ry, nx, 1e-4, 1e-4);

    float *bufs[] = {x, y, dy, dx, g, b, mean, invstd, rm, rv, dg, dbeta};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        B->free(ctx, bufs[i]);
    free(ry), free(rdx), free(rmean), free(rinv), free(rrm), free(rrv), free(rdg), free(rdb);
}

/* ---- finite differences ---- */

typedef struct {
    LrnShape s;
    float *x, *scale;
} LrnState;

static void lrn_fwd(GradLayer *l) {
    LrnState *st = l->state;
    B->lrn_forward(ctx, &st->s, st->x, l->y, st->scale);
}

static void gradcheck_lrn(int n, int c, int h, int w, int size, float alpha, float beta,
                          float bias) {
    LrnState st = {{n, c, h, w, size, alpha, beta, bias}, NULL, NULL};
    char name[128];
    snprintf(name, sizeof name, "lrn n=%d c=%d %dx%d size=%d alpha=%g beta=%g bias=%g", n, c, h, w,
             size, alpha, beta, bias);
    size_t nx = (size_t)n * c * h * w;
    st.x = falloc(nx), st.scale = falloc(nx);
    float *dx = falloc(nx);
    GradLayer l = {lrn_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -2, 2);
    fill_uniform(l.r, nx, -1, 1);
    lrn_fwd(&l);
    B->lrn_backward(ctx, &st.s, st.x, l.y, st.scale, l.r, dx);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.scale), B->free(ctx, dx), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

typedef struct {
    BnShape s;
    float *x, *gamma, *beta, *mean, *invstd, *rmean, *rvar;
} BnState;

static void bn_fwd(GradLayer *l) {
    BnState *st = l->state;
    B->batchnorm_forward_train(ctx, &st->s, st->x, st->gamma, st->beta, l->y, st->mean, st->invstd,
                               st->rmean, st->rvar);
}

static void gradcheck_batchnorm(int n, int c, int spatial) {
    BnState st = {{n, c, spatial, 1e-5f, 0.1f}, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "batchnorm n=%d c=%d spatial=%d", n, c, spatial);
    size_t nx = (size_t)n * c * spatial;
    st.x = falloc(nx), st.gamma = falloc(c), st.beta = falloc(c), st.mean = falloc(c);
    st.invstd = falloc(c), st.rmean = falloc(c), st.rvar = falloc(c);
    float *dx = falloc(nx), *dg = falloc(c), *db = falloc(c);
    GradLayer l = {bn_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -2, 2);
    fill_uniform(st.gamma, c, 0.5f, 1.5f);
    fill_uniform(st.beta, c, -1, 1);
    fill_uniform(l.r, nx, -1, 1);
    bn_fwd(&l);
    B->batchnorm_backward(ctx, &st.s, st.x, st.gamma, st.mean, st.invstd, l.r, dx, dg, db);
    Probe pr = grad_layer_probe(&l, 0);
    /* dx sums to ~0 over each channel: entries are small differences, judged against 1e-1 */
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-1);
    fd_check(name, "dgamma", &pr, st.gamma, dg, c, 1e-2f, 1e-2);
    fd_check(name, "dbeta", &pr, st.beta, db, c, 1e-2f, 1e-2);
    float *bufs[] = {st.x,    st.gamma, st.beta, st.mean, st.invstd, st.rmean,
                     st.rvar, dx,       dg,      db,      l.y,       l.r};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        B->free(ctx, bufs[i]);
}

int main(void) {
    kernel_test_init(0x4e02);
    /*       n  c  h  w  size alpha  beta  bias |x| */
    test_lrn(2, 8, 5, 7, 5, 1e-4f, 0.75f, 2.0f, 1.0f); /* AlexNet */
    test_lrn(1, 6, 4, 4, 5, 0.5f, 0.75f, 1.0f, 3.0f);  /* strong normalisation */
    test_lrn(2, 5, 3, 3, 4, 0.3f, 0.6f, 1.5f, 2.0f);   /* even size, other beta (powf path) */
    test_lrn(1, 3, 2, 9, 1, 1.0f, 0.75f, 1.0f, 1.0f);  /* window of one channel */
    test_batchnorm(4, 6, 25, 0.0f);                    /* after a conv */
    test_batchnorm(8, 10, 1, 3.0f);                    /* after an fc, shifted mean */
    test_batchnorm(2, 3, 1003, -2.0f);

    gradcheck_lrn(2, 7, 3, 4, 5, 1e-4f, 0.75f, 2.0f); /* AlexNet's constants */
    gradcheck_lrn(1, 6, 3, 3, 5, 0.5f, 0.75f, 1.0f);  /* strong normalisation */
    gradcheck_lrn(1, 5, 2, 3, 4, 0.3f, 0.6f, 1.5f);   /* even window, powf path */
    gradcheck_batchnorm(4, 3, 9);
    gradcheck_batchnorm(6, 5, 1);
    return kernel_test_finish();
}
