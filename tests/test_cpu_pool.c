/* test_cpu_pool.c - the CPU backend's pooling (kernels/cpu/cpu_pool.c): max and average pooling
 * through the one interface, unpadded (LeNet's pools, odd sizes, overlapping windows, stride 1,
 * ties where the first maximum must win) and padded as in GoogLeNet and ResNet (all-negative
 * inputs: a padding zero must never win), and global average pooling, forward (values and argmax
 * exactly) and backward against the naive reference (tests/ref_pool.c), outputs pre-filled with
 * NaN; then the backward passes against finite differences (tests/gradcheck.h), inputs spaced 0.05
 * apart so no perturbation changes the argmax (an entry that still does is skipped). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <stdio.h>
#include <stdlib.h>

/* Max and average pooling, padding 0 or not. Inputs all negative where there is padding (a padding
 * zero must never win); levels > 0: inputs drawn from `levels` integer values, so windows have
 * ties (the first maximum must win). */
static void test_pool(int n, int c, int h_in, int w_in, int k, int stride, int pad, int levels) {
    PoolShape s = {n, c, h_in, w_in, k, stride, pad, 0, 0};
    s.h_out = (h_in + 2 * pad - k) / stride + 1;
    s.w_out = (w_in + 2 * pad - k) / stride + 1;
    char shape[128];
    snprintf(shape, sizeof shape, "n=%d c=%d %dx%d k=%d stride=%d pad=%d%s", n, c, h_in, w_in, k,
             stride, pad, levels ? " (ties)" : "");
    size_t nx = (size_t)n * c * h_in * w_in, ny = (size_t)n * c * s.h_out * s.w_out;
    float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
    int32_t *am = B->alloc(ctx, ny * sizeof(int32_t)), *ram = malloc(ny * sizeof(int32_t));
    float *ry = halloc(ny), *rdx = halloc(nx);
    fill_uniform(x, nx, pad ? -2 : -1, pad ? -1 : 1);
    if (levels)
        for (size_t i = 0; i < nx; i++)
            x[i] = (float)(int)(rand_uniform(0, (float)levels)) - (pad ? levels : 0);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    for (size_t i = 0; i < ny; i++)
        am[i] = -2;
    B->maxpool_forward(ctx, &s, x, y, am);
    ref_maxpool_forward(&s, x, ry, ram);
    check_close(fmt_label("maxpool_forward %s", shape), y, ry, ny, 0.0, 0.0);
    check_equal_i32(fmt_label("maxpool_forward argmax %s", shape), am, ram, ny);
    fill_nan(dx, nx);
    B->maxpool_backward(ctx, &s, am, dy, dx);
    ref_maxpool_backward(&s, x, dy, rdx);
    check_close(fmt_label("maxpool_backward %s", shape), dx, rdx, nx, 1e-6, 1e-6);

    fill_nan(y, ny);
    B->avgpool_forward(ctx, &s, x, y);
    ref_avgpool_forward(&s, x, ry);
    check_close(fmt_label("avgpool_forward %s", shape), y, ry, ny, 1e-6, 1e-6);
    fill_nan(dx, nx);
    B->avgpool_backward(ctx, &s, dy, dx);
    ref_avgpool_backward(&s, dy, rdx);
    check_close(fmt_label("avgpool_backward %s", shape), dx, rdx, nx, 1e-6, 1e-6);

    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, am);
    free(ram), free(ry), free(rdx);
}

static void test_global_avgpool(size_t planes, size_t plane) {
    char shape[64];
    snprintf(shape, sizeof shape, "planes=%zu plane=%zu", planes, plane);
    float *x = falloc(planes * plane), *y = falloc(planes), *dx = falloc(planes * plane);
    float *ry = halloc(planes), *rdx = halloc(planes * plane), *dy = falloc(planes);
    fill_uniform(x, planes * plane, -1, 1);
    fill_uniform(dy, planes, -1, 1);
    fill_nan(y, planes);
    B->global_avgpool_forward(ctx, 1, planes, plane, x, y);
    ref_global_avgpool_forward(planes, plane, x, ry);
    check_close(fmt_label("global_avgpool_forward %s", shape), y, ry, planes, 1e-5, 1e-5);
    fill_nan(dx, planes * plane);
    B->global_avgpool_backward(ctx, 1, planes, plane, dy, dx);
    ref_global_avgpool_backward(planes, plane, dy, rdx);
    check_close(fmt_label("global_avgpool_backward %s", shape), dx, rdx, planes * plane, 1e-6,
                1e-6);
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dx), B->free(ctx, dy);
    free(ry), free(rdx);
}

/* ---- finite differences ---- */

typedef struct {
    PoolShape s;
    float *x;
    int avg;
} PoolState;

static void pool_fwd(GradLayer *l) {
    PoolState *st = l->state;
    if (st->avg)
        B->avgpool_forward(ctx, &st->s, st->x, l->y);
    else
        B->maxpool_forward(ctx, &st->s, st->x, l->y, l->argmax);
}

static void gradcheck_pool(int n, int c, int h, int w, int k, int stride, int pad, int avg) {
    PoolState st = {{n, c, h, w, k, stride, pad, (h + 2 * pad - k) / stride + 1,
                     (w + 2 * pad - k) / stride + 1},
                    NULL,
                    avg};
    char name[128];
    snprintf(name, sizeof name, "%s n=%d c=%d %dx%d k=%d stride=%d pad=%d",
             avg ? "avgpool" : "maxpool", n, c, h, w, k, stride, pad);
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * st.s.h_out * st.s.w_out;
    st.x = falloc(nx);
    float *dx = falloc(nx);
    GradLayer l = {pool_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, ny};
    l.argmax = B->alloc(ctx, ny * sizeof(int32_t));
    l.argmax_mark = B->alloc(ctx, ny * sizeof(int32_t));
    fill_ramp(st.x, nx, 0.05f);
    fill_uniform(l.r, ny, -1, 1);
    pool_fwd(&l);
    if (avg)
        B->avgpool_backward(ctx, &st.s, l.r, dx);
    else
        B->maxpool_backward(ctx, &st.s, l.argmax, l.r, dx);
    Probe pr = grad_layer_probe(&l, !avg);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, dx), B->free(ctx, l.y), B->free(ctx, l.r);
    B->free(ctx, l.argmax), B->free(ctx, l.argmax_mark);
}

typedef struct {
    size_t planes, plane;
    float *x;
} GapState;

static void gap_fwd(GradLayer *l) {
    GapState *st = l->state;
    B->global_avgpool_forward(ctx, 1, st->planes, st->plane, st->x, l->y);
}

static void gradcheck_global_avgpool(size_t planes, size_t plane) {
    GapState st = {planes, plane, falloc(planes * plane)};
    char name[96];
    snprintf(name, sizeof name, "global_avgpool planes=%zu plane=%zu", planes, plane);
    float *dx = falloc(planes * plane);
    GradLayer l = {gap_fwd, falloc(planes), falloc(planes), planes, &st, NULL, NULL, 0};
    fill_uniform(st.x, planes * plane, -1, 1);
    fill_uniform(l.r, planes, -1, 1);
    B->global_avgpool_backward(ctx, 1, planes, plane, l.r, dx);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, planes * plane, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, dx), B->free(ctx, l.y), B->free(ctx, l.r);
}

int main(void) {
    kernel_test_init(0x9001);
    /*        n  c  h_in w_in k stride pad ties */
    test_pool(3, 20, 24, 24, 2, 2, 0, 0); /* LeNet pool1 */
    test_pool(2, 50, 8, 8, 2, 2, 0, 0);   /* LeNet pool2 */
    test_pool(1, 3, 7, 9, 2, 2, 0, 0);    /* odd sizes: last row/column dropped */
    test_pool(2, 2, 7, 7, 3, 2, 0, 0);    /* overlapping windows */
    test_pool(1, 2, 5, 6, 3, 1, 0, 0);    /* stride 1 */
    test_pool(2, 3, 9, 9, 3, 3, 0, 0);
    test_pool(2, 4, 8, 8, 2, 2, 0, 3);   /* ties: first maximum wins */
    test_pool(2, 4, 9, 9, 3, 2, 0, 3);   /* ties, overlapping */
    test_pool(2, 3, 12, 12, 3, 2, 1, 0); /* ResNet / GoogLeNet stem pool */
    test_pool(2, 4, 7, 7, 3, 1, 1, 0);   /* inception pool branch: same size */
    test_pool(1, 2, 9, 8, 3, 2, 1, 3);   /* odd sizes, ties */
    test_pool(1, 3, 6, 6, 5, 3, 2, 0);   /* large window */
    test_global_avgpool(2 * 16, 49);
    test_global_avgpool(3, 1);

    gradcheck_pool(2, 3, 8, 8, 2, 2, 0, 0);
    gradcheck_pool(1, 2, 9, 7, 3, 2, 0, 0); /* overlapping windows, odd sizes */
    /*                 n  c  h  w  k stride pad avg */
    gradcheck_pool(2, 3, 8, 8, 3, 2, 1, 0); /* ResNet stem pool */
    gradcheck_pool(1, 2, 7, 7, 3, 1, 1, 0); /* inception pool branch */
    gradcheck_pool(2, 3, 8, 8, 3, 2, 1, 1); /* average, padded */
    gradcheck_pool(1, 2, 9, 7, 2, 2, 0, 1);
    gradcheck_global_avgpool(6, 49);
    return kernel_test_finish();
}
