/* test_cpu_conv.c - the CPU backend's convolution (kernels/cpu/cpu_conv.c, cpu_im2col.c,
 * cpu_winograd.c): forward and backward against the naive reference (tests/ref_conv.c) with and
 * without bias and input gradient, output buffers pre-filled with NaN, the workspace size and its
 * bounds (a guard past it must stay untouched); the shapes cover LeNet, stride 2/3, padding, "same"
 * padding, pad >= k, pointwise (no im2col), uncovered last rows, 1x1 outputs, the GEMM grouping of
 * small images and the row blocking of large ones, and Winograd F(2x2, 3x3) (odd sizes, several
 * blocks, the weight gradient above 256 channels). Tolerance 1e-4 relative to max(1, |ref|). Then
 * the backward against finite differences of the forward (tests/gradcheck.h). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <stdio.h>
#include <stdlib.h>

#define GUARD 64 /* floats past the workspace that must stay untouched */

static int guard_intact(const float *g) {
    for (int i = 0; i < GUARD; i++)
        if (g[i] != 12345.0f) return 0;
    return 1;
}

static ConvShape conv_shape(int n, int c_in, int h_in, int w_in, int c_out, int k, int stride,
                            int pad) {
    ConvShape s = {.batch = n,
                   .c_in = c_in,
                   .h_in = h_in,
                   .w_in = w_in,
                   .c_out = c_out,
                   .k = k,
                   .stride = stride,
                   .pad = pad};
    s.h_out = (h_in + 2 * pad - k) / stride + 1;
    s.w_out = (w_in + 2 * pad - k) / stride + 1;
    return s;
}

static void test_conv(int n, int c_in, int h_in, int w_in, int c_out, int k, int stride, int pad) {
    ConvShape s = conv_shape(n, c_in, h_in, w_in, c_out, k, stride, pad);
    char shape[160];
    snprintf(shape, sizeof shape, "n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in,
             h_in, w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h_in * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * s.h_out * s.w_out;

    size_t ws = B->conv_workspace_bytes(ctx, &s);
    size_t want = (size_t)c_in * k * k * s.h_out * s.w_out * sizeof(float); /* one im2col */
    EXPECT(ws >= want, "conv_workspace_bytes %s = %zu >= one sample's columns", shape, ws);
    float *work = falloc(ws / sizeof(float) + GUARD);
    float *guard = work + ws / sizeof(float);
    for (int i = 0; i < GUARD; i++)
        guard[i] = 12345.0f;

    float *x = falloc(nx), *w = falloc(nw), *b = falloc(c_out), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(c_out);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(c_out);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -1, 1);
    fill_uniform(b, c_out, -1, 1);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    B->conv_forward(ctx, &s, x, w, b, y, work);
    ref_conv_forward(&s, x, w, b, ry);
    check_close(fmt_label("conv_forward %s", shape), y, ry, ny, 1e-4, 1e-4);

    fill_nan(dx, nx);
    fill_nan(dw, nw);
    fill_nan(db, c_out);
    B->conv_backward(ctx, &s, x, w, dy, dx, dw, db, work);
    ref_conv_backward(&s, x, w, dy, rdx, rdw, rdb);
    check_close(fmt_label("conv_backward dx %s", shape), dx, rdx, nx, 1e-4, 1e-4);
    check_close(fmt_label("conv_backward dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("conv_backward db %s", shape), db, rdb, c_out, 1e-4, 1e-4);

    B->conv_backward(ctx, &s, x, w, dy, NULL, dw, db, work); /* overwrite, dx == NULL */
    check_close(fmt_label("conv_backward(dx=NULL) dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("conv_backward(dx=NULL) db %s", shape), db, rdb, c_out, 1e-4, 1e-4);

    /* no bias (ResNet): b == NULL forward, db == NULL backward */
    fill_nan(y, ny);
    B->conv_forward(ctx, &s, x, w, NULL, y, work);
    ref_conv_forward(&s, x, w, NULL, ry);
    check_close(fmt_label("conv_forward(b=NULL) %s", shape), y, ry, ny, 1e-4, 1e-4);
    fill_nan(dw, nw);
    B->conv_backward(ctx, &s, x, w, dy, dx, dw, NULL, work);
    check_close(fmt_label("conv_backward(db=NULL) dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("conv_backward(db=NULL) dx %s", shape), dx, rdx, nx, 1e-4, 1e-4);

    EXPECT(guard_intact(guard), "conv workspace bounds %s", shape);

    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db), B->free(ctx, work);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- finite differences ---- */

typedef struct {
    ConvShape s;
    float *x, *w, *b;
    void *work;
} ConvState;

static void conv_fwd(GradLayer *l) {
    ConvState *st = l->state;
    B->conv_forward(ctx, &st->s, st->x, st->w, st->b, l->y, st->work);
}

static void gradcheck_conv(int n, int c_in, int h_in, int w_in, int c_out, int k, int stride,
                           int pad) {
    ConvState st = {.s = conv_shape(n, c_in, h_in, w_in, c_out, k, stride, pad)};
    char name[160];
    snprintf(name, sizeof name, "conv n=%d c_in=%d %dx%d c_out=%d k=%d stride=%d pad=%d", n, c_in,
             h_in, w_in, c_out, k, stride, pad);
    size_t nx = (size_t)n * c_in * h_in * w_in, nw = (size_t)c_out * c_in * k * k;
    size_t ny = (size_t)n * c_out * st.s.h_out * st.s.w_out;
    st.x = falloc(nx), st.w = falloc(nw), st.b = falloc(c_out);
    st.work = B->alloc(ctx, B->conv_workspace_bytes(ctx, &st.s));
    GradLayer l = {.forward = conv_fwd, .y = falloc(ny), .r = falloc(ny), .ny = ny, .state = &st};
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(c_out);
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(st.w, nw, -1, 1);
    fill_uniform(st.b, c_out, -1, 1);
    fill_uniform(l.r, ny, -1, 1);

    conv_fwd(&l);
    B->conv_backward(ctx, &st.s, st.x, st.w, l.r, dx, dw, db, st.work);
    /* The convolution is linear in x, w and b: central differences have no truncation error at
     * any step, and a step of 0.1 lifts them well above the fp32 rounding of the loss (6720 terms
     * for Winograd's shape: at 0.01 its noise reached 1.1e-2 relative with OpenBLAS's SkylakeX
     * kernels, 1.7e-3 with Prescott's). */
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-1f, 1e-2);
    fd_check(name, "dw", &pr, st.w, dw, nw, 1e-1f, 1e-2);
    fd_check(name, "db", &pr, st.b, db, c_out, 1e-1f, 1e-2);

    B->free(ctx, st.x), B->free(ctx, st.w), B->free(ctx, st.b), B->free(ctx, l.y);
    B->free(ctx, l.r), B->free(ctx, st.work), B->free(ctx, dx), B->free(ctx, dw);
    B->free(ctx, db);
}

int main(void) {
    kernel_test_init(0xc0de);
    /*        n  c_in h_in w_in c_out k stride pad */
    test_conv(3, 1, 28, 28, 20, 5, 1, 0);  /* LeNet conv1 */
    test_conv(2, 20, 12, 12, 50, 5, 1, 0); /* LeNet conv2 */
    test_conv(2, 3, 9, 7, 4, 3, 2, 1);     /* stride 2, pad 1, odd sizes */
    test_conv(1, 5, 6, 6, 3, 3, 1, 1);     /* "same" padding, batch 1 */
    test_conv(2, 6, 5, 7, 4, 1, 1, 0);     /* pointwise (no im2col) */
    test_conv(2, 3, 7, 7, 2, 1, 2, 0);     /* 1x1 with stride 2 */
    test_conv(1, 2, 11, 8, 3, 4, 3, 2);    /* stride 3, pad 2, even kernel */
    test_conv(1, 2, 5, 5, 3, 2, 1, 2);     /* pad >= k: outputs that see only padding */
    test_conv(2, 2, 8, 8, 3, 3, 2, 0);     /* last input row/column not covered */
    test_conv(1, 3, 5, 5, 2, 5, 1, 0);     /* kernel as large as the input: 1x1 output */
    test_conv(4, 8, 16, 16, 16, 3, 2, 1);  /* ResNet-like downsampling */
    /* the CPU backend's GEMM grouping (several small images per GEMM, a last partial group) and
     * row blocking (a column matrix over 8 MB, in blocks of output rows) */
    test_conv(5, 16, 14, 14, 8, 3, 1, 1);   /* 196 pixels: groups of 3 and 2 samples */
    test_conv(3, 32, 7, 7, 16, 1, 1, 0);    /* pointwise, grouped */
    test_conv(1, 64, 64, 64, 8, 3, 1, 1);   /* blocked: 576 x 4096 columns */
    test_conv(1, 64, 130, 130, 4, 3, 2, 1); /* blocked, stride 2 */
    /* 3x3, stride 1, pad 1, >= 16 channels, >= 400 pixels: the CPU backend's Winograd F(2x2, 3x3)
     * for the forward and the input gradient (weights: GEMM below 256 channels, Winograd above) */
    test_conv(2, 16, 20, 21, 24, 3, 1, 1);   /* odd width: a half tile */
    test_conv(1, 32, 21, 23, 16, 3, 1, 1);   /* odd height and width */
    test_conv(3, 16, 28, 28, 64, 3, 1, 1);   /* several blocks of tile rows */
    test_conv(1, 256, 20, 21, 256, 3, 1, 1); /* the weight gradient by Winograd too */

    /*             n  c_in h_in w_in c_out k stride pad */
    gradcheck_conv(2, 3, 7, 6, 4, 3, 2, 1);     /* stride 2, pad 1, odd sizes */
    gradcheck_conv(2, 2, 8, 8, 3, 5, 1, 0);     /* LeNet-like */
    gradcheck_conv(1, 2, 9, 7, 3, 4, 3, 2);     /* stride 3, pad 2 */
    gradcheck_conv(2, 4, 5, 5, 3, 1, 1, 0);     /* pointwise */
    gradcheck_conv(1, 16, 20, 21, 16, 3, 1, 1); /* Winograd F(2x2, 3x3) forward and input grad */
    return kernel_test_finish();
}
