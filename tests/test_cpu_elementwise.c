/* test_cpu_elementwise.c - the CPU backend's element-wise kernels (kernels/cpu/cpu_elementwise.c)
 * and their math (kernels/common/elem_math.h): ReLU (exact zeros, in place), concatenation (a
 * branch without gradient), residual add (in place), dropout (the mask as the reference defines it,
 * 1-rate kept within 3 sigma, the same mask for samples split across calls), axpy and scale against
 * the naive references (tests/ref_elementwise.c), outputs pre-filled with NaN; dt_expf, dt_tanhf
 * and dt_sigmoidf against libm in double; then the backward passes against finite differences
 * (tests/gradcheck.h; ReLU inputs kept 0.05 away from the kink; dropout with a fixed mask is
 * linear in x). */
#include "elem_math.h" /* dt_expf, dt_sigmoidf, dt_tanhf: tested directly */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_relu(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n), *t = falloc(n);
    float *ry = halloc(n), *rdx = halloc(n);
    fill_uniform(x, n, -1, 1);
    for (size_t i = 0; i < n; i += 7)
        x[i] = (i % 14) ? 0.0f : -0.0f; /* exact zeros */
    fill_uniform(dy, n, -1, 1);

    fill_nan(y, n);
    B->relu_forward(ctx, n, x, y);
    ref_relu_forward(n, x, ry);
    check_close(fmt_label("relu_forward %s", shape), y, ry, n, 0.0, 0.0);

    fill_nan(dx, n);
    B->relu_backward(ctx, n, y, dy, dx);
    ref_relu_backward(n, x, dy, rdx);
    check_close(fmt_label("relu_backward %s", shape), dx, rdx, n, 0.0, 0.0);

    memcpy(t, x, n * sizeof(float)); /* in place: y == x, then dx == dy */
    B->relu_forward(ctx, n, t, t);
    check_close(fmt_label("relu_forward (in place) %s", shape), t, ry, n, 0.0, 0.0);
    memcpy(t, dy, n * sizeof(float));
    B->relu_backward(ctx, n, y, t, t);
    check_close(fmt_label("relu_backward (in place) %s", shape), t, rdx, n, 0.0, 0.0);

    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, t);
    free(ry), free(rdx);
}

static void test_concat_add(int n) {
    enum { NIN = 4 };
    size_t sizes[NIN] = {64 * 9, 128 * 9, 32 * 9, 1};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d sizes=%zu,%zu,%zu,%zu", n, sizes[0], sizes[1], sizes[2],
             sizes[3]);
    size_t total = 0;
    float *xs[NIN], *dxs[NIN], *rdxs[NIN];
    for (int i = 0; i < NIN; i++) {
        total += sizes[i];
        xs[i] = falloc(n * sizes[i]), dxs[i] = falloc(n * sizes[i]), rdxs[i] = halloc(n * sizes[i]);
        fill_uniform(xs[i], n * sizes[i], -1, 1);
        fill_nan(dxs[i], n * sizes[i]);
    }
    float *y = falloc(n * total), *dy = falloc(n * total), *ry = halloc(n * total);
    fill_uniform(dy, n * total, -1, 1);
    fill_nan(y, n * total);
    B->concat_forward(ctx, n, NIN, (const float *const *)xs, sizes, y);
    ref_concat_forward(n, NIN, (const float *const *)xs, sizes, ry);
    check_close(fmt_label("concat_forward %s", shape), y, ry, n * total, 0.0, 0.0);
    float *skip = dxs[2];
    dxs[2] = NULL; /* a branch that needs no gradient */
    B->concat_backward(ctx, n, NIN, sizes, dy, dxs);
    ref_concat_backward(n, NIN, sizes, dy, rdxs);
    for (int i = 0; i < NIN; i++)
        if (dxs[i])
            check_close(fmt_label("concat_backward %s", shape), dxs[i], rdxs[i], n * sizes[i], 0.0,
                        0.0);
    EXPECT(isnan(skip[0]), "concat_backward skips a NULL input");
    dxs[2] = skip;

    size_t m = (size_t)n * 1003;
    float *a = falloc(m), *b = falloc(m), *s = falloc(m), *rs = halloc(m), *da = falloc(m);
    fill_uniform(a, m, -1, 1);
    fill_uniform(b, m, -1, 1);
    fill_nan(s, m);
    B->add_forward(ctx, m, a, b, s);
    ref_add_forward(m, a, b, rs);
    check_close("add_forward n*1003", s, rs, m, 0.0, 0.0);
    B->add_forward(ctx, m, a, b, a); /* in place */
    check_close("add_forward (in place) n*1003", a, rs, m, 0.0, 0.0);
    fill_nan(da, m);
    B->add_backward(ctx, m, s, da, NULL);
    check_close("add_backward n*1003", da, s, m, 0.0, 0.0);

    for (int i = 0; i < NIN; i++)
        B->free(ctx, xs[i]), B->free(ctx, dxs[i]), free(rdxs[i]);
    B->free(ctx, y), B->free(ctx, dy), B->free(ctx, a), B->free(ctx, b), B->free(ctx, s);
    B->free(ctx, da);
    free(ry), free(rs);
}

static void test_dropout(int n, size_t size, float rate) {
    DropoutShape s = {n, size, rate, 0xfeedULL, 1000, 0, 0, NULL};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d size=%zu rate=%g", n, size, rate);
    size_t nx = (size_t)n * size;
    float *x = falloc(nx), *y = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *ry = halloc(nx), *rdx = halloc(nx);
    uint8_t *mask = B->alloc(ctx, nx), *rmask = malloc(nx);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(dy, nx, -1, 1);
    fill_nan(y, nx);
    B->dropout_forward(ctx, &s, x, y, mask);
    ref_dropout_forward(&s, x, ry, rmask);
    check_close(fmt_label("dropout_forward %s", shape), y, ry, nx, 1e-6, 1e-6);
    size_t same = 0, kept = 0;
    for (size_t i = 0; i < nx; i++)
        same += mask[i] == rmask[i], kept += mask[i];
    printf("dropout_forward mask %s: %zu of %zu as the reference, %.4f kept (expected %.4f)\n",
           shape, same, nx, (double)kept / nx, 1.0 - rate);
    EXPECT(same == nx, "dropout mask equals the reference");
    EXPECT(fabs((double)kept / nx - (1.0 - rate)) <= 3 * sqrt(rate * (1 - rate) / nx) + 1e-9,
           "dropout keeps 1-rate within 3 sigma");
    fill_nan(dx, nx);
    B->dropout_backward(ctx, &s, mask, dy, dx);
    ref_dropout_backward(&s, rmask, dy, rdx);
    check_close(fmt_label("dropout_backward %s", shape), dx, rdx, nx, 1e-6, 1e-6);
    /* the same samples in a later call (a micro-batch, another rank's slice): the same mask */
    if (n >= 3) {
        DropoutShape part = s;
        part.batch = n - 2, part.first_sample = s.first_sample + 2;
        float *y2 = falloc(nx);
        uint8_t *m2 = B->alloc(ctx, nx);
        B->dropout_forward(ctx, &part, x + 2 * size, y2, m2);
        check_close(fmt_label("dropout_forward, samples 2.. in their own call %s", shape), y2,
                    y + 2 * size, (size_t)(n - 2) * size, 0.0, 0.0);
        B->free(ctx, y2), B->free(ctx, m2);
    }
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, mask);
    free(ry), free(rdx), free(rmask);
}

static void test_axpy_scale(size_t n) {
    char shape[64];
    snprintf(shape, sizeof shape, "n=%zu", n);
    float *x = falloc(n), *y = falloc(n), *r = halloc(n);
    fill_uniform(x, n, -1, 1);
    fill_uniform(y, n, -1, 1);
    for (size_t i = 0; i < n; i++)
        r[i] = (float)((double)y[i] + 0.37 * x[i]);
    B->axpy(ctx, n, 0.37f, x, y);
    check_close(fmt_label("axpy %s", shape), y, r, n, 1e-6, 1e-6);
    for (size_t i = 0; i < n; i++)
        r[i] = (float)((double)y[i] * -1.5);
    B->scale(ctx, n, -1.5f, y);
    check_close(fmt_label("scale %s", shape), y, r, n, 1e-6, 1e-6);
    B->free(ctx, x), B->free(ctx, y);
    free(r);
}

/* dt_expf (softmax, sigmoid, tanh of the LSTM) against libm's exp in double */
static void test_expf(void) {
    double worst = 0.0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.0f + 175.0f * (float)i / 200000.0f;
        double rel = fabs(dt_expf(x) - exp((double)x)) / exp((double)x);
        if (rel > worst) worst = rel;
    }
    EXPECT(worst <= 3e-7, "dt_expf on [-87, 88]: max relative error %.3g (tolerance 3e-7)", worst);
    EXPECT(dt_expf(-1000.0f) < 1e-37f && isfinite(dt_expf(1000.0f)) && dt_expf(1000.0f) > 1e38f,
           "dt_expf saturates (-1000 -> tiny, 1000 -> finite)");
    /* a diverged run feeds NaN logits to the softmax: NaN out, and no int overflow (UBSan) */
    EXPECT(isnan(dt_expf(NAN)), "dt_expf(NaN) is NaN");
    double worst_t = 0.0;
    for (int i = 0; i <= 20000; i++) {
        float x = -20.0f + 40.0f * (float)i / 20000.0f;
        worst_t = fmax(worst_t, fabs(dt_tanhf(x) - tanh((double)x)));
        worst_t = fmax(worst_t, fabs(dt_sigmoidf(x) - 1.0 / (1.0 + exp(-(double)x))));
    }
    EXPECT(worst_t <= 3e-7,
           "dt_tanhf, dt_sigmoidf on [-20, 20]: max abs error %.3g (tolerance 3e-7)", worst_t);
}

/* ---- finite differences ---- */

typedef struct {
    size_t n;
    float *x;
} ReluState;

static void relu_fwd(GradLayer *l) {
    ReluState *st = l->state;
    B->relu_forward(ctx, st->n, st->x, l->y);
}

static void gradcheck_relu(size_t n) {
    ReluState st = {n, falloc(n)};
    char name[64];
    snprintf(name, sizeof name, "relu n=%zu", n);
    GradLayer l = {relu_fwd, falloc(n), falloc(n), n, &st, NULL, NULL, 0};
    float *dx = falloc(n);
    fill_uniform(st.x, n, -1, 1);
    for (size_t i = 0; i < n; i++) /* keep |x| >= 0.05 so x +- eps never crosses 0 */
        st.x[i] = st.x[i] >= 0 ? 0.05f + st.x[i] : st.x[i] - 0.05f;
    fill_uniform(l.r, n, -1, 1);

    relu_fwd(&l);
    B->relu_backward(ctx, n, l.y, l.r, dx);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, n, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, l.y), B->free(ctx, l.r), B->free(ctx, dx);
}

typedef struct {
    int n;
    size_t sizes[3];
    float *xs[3];
} ConcatState;

static void concat_fwd(GradLayer *l) {
    ConcatState *st = l->state;
    B->concat_forward(ctx, st->n, 3, (const float *const *)st->xs, st->sizes, l->y);
}

static void gradcheck_concat(int n) {
    ConcatState st = {n, {12, 7, 20}, {NULL, NULL, NULL}};
    size_t total = 39;
    GradLayer l = {concat_fwd, falloc(n * total), falloc(n * total), n * total, &st, NULL, NULL, 0};
    float *dxs[3];
    for (int i = 0; i < 3; i++) {
        st.xs[i] = falloc(n * st.sizes[i]);
        dxs[i] = falloc(n * st.sizes[i]);
        fill_uniform(st.xs[i], n * st.sizes[i], -1, 1);
    }
    fill_uniform(l.r, n * total, -1, 1);
    B->concat_backward(ctx, n, 3, st.sizes, l.r, dxs);
    Probe pr = grad_layer_probe(&l, 0);
    const char *what[3] = {"dx0", "dx1", "dx2"};
    for (int i = 0; i < 3; i++)
        fd_check("concat n=3 sizes=12,7,20", what[i], &pr, st.xs[i], dxs[i], n * st.sizes[i], 1e-2f,
                 1e-2);
    for (int i = 0; i < 3; i++)
        B->free(ctx, st.xs[i]), B->free(ctx, dxs[i]);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    size_t n;
    float *a, *b;
} AddState;

static void add_fwd(GradLayer *l) {
    AddState *st = l->state;
    B->add_forward(ctx, st->n, st->a, st->b, l->y);
}

static void gradcheck_add(size_t n) {
    AddState st = {n, falloc(n), falloc(n)};
    GradLayer l = {add_fwd, falloc(n), falloc(n), n, &st, NULL, NULL, 0};
    float *da = falloc(n), *db = falloc(n);
    fill_uniform(st.a, n, -1, 1);
    fill_uniform(st.b, n, -1, 1);
    fill_uniform(l.r, n, -1, 1);
    B->add_backward(ctx, n, l.r, da, db);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check("add n=500", "da", &pr, st.a, da, n, 1e-2f, 1e-2);
    fd_check("add n=500", "db", &pr, st.b, db, n, 1e-2f, 1e-2);
    B->free(ctx, st.a), B->free(ctx, st.b), B->free(ctx, da), B->free(ctx, db);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    DropoutShape s;
    float *x;
    uint8_t *mask;
} DropState;

static void drop_fwd(GradLayer *l) {
    DropState *st = l->state;
    B->dropout_forward(ctx, &st->s, st->x, l->y, st->mask);
}

static void gradcheck_dropout(int n, size_t size, float rate) {
    DropState st = {{n, size, rate, 77, 5, 0, 0, NULL}, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "dropout n=%d size=%zu rate=%g", n, size, rate);
    size_t nx = (size_t)n * size;
    st.x = falloc(nx), st.mask = B->alloc(ctx, nx);
    float *dx = falloc(nx);
    GradLayer l = {drop_fwd, falloc(nx), falloc(nx), nx, &st, NULL, NULL, 0};
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(l.r, nx, -1, 1);
    drop_fwd(&l);
    B->dropout_backward(ctx, &st.s, st.mask, l.r, dx);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.mask), B->free(ctx, dx), B->free(ctx, l.y);
    B->free(ctx, l.r);
}

int main(void) {
    kernel_test_init(0xe1e7);
    test_relu(1);
    test_relu(17);
    test_relu(1003);
    test_relu(64 * 500);
    test_concat_add(3);
    test_dropout(5, 1003, 0.5f);
    test_dropout(64, 4096, 0.4f);
    test_dropout(3, 17, 0.0f);
    test_axpy_scale(1003);
    test_expf();

    gradcheck_relu(1000);
    gradcheck_concat(3);
    gradcheck_add(500);
    gradcheck_dropout(4, 50, 0.5f);
    return kernel_test_finish();
}
