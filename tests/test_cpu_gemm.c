/* test_cpu_gemm.c - the CPU backend's fully connected layer (kernels/cpu/cpu_gemm.c): forward and
 * backward against the naive reference (tests/ref_gemm.c) on LeNet's sizes, batch 1, odd sizes,
 * with and without bias and input gradient, output buffers pre-filled with NaN; then the backward
 * against finite differences of the forward (tests/gradcheck.h). Tolerance 1e-4 relative to
 * max(1, |ref|). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <stdio.h>
#include <stdlib.h>

static void test_fc(int n, int in, int out) {
    FcShape s = {.batch = n, .in = in, .out = out};
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d in=%d out=%d", n, in, out);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;

    float *x = falloc(nx), *w = falloc(nw), *b = falloc(out), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(out);
    float *ry = halloc(ny), *rdx = halloc(nx), *rdw = halloc(nw), *rdb = halloc(out);
    fill_uniform(x, nx, -1, 1);
    fill_uniform(w, nw, -1, 1);
    fill_uniform(b, out, -1, 1);
    fill_uniform(dy, ny, -1, 1);

    fill_nan(y, ny);
    B->fc_forward(ctx, &s, x, w, b, y);
    ref_fc_forward(&s, x, w, b, ry);
    check_close(fmt_label("fc_forward %s", shape), y, ry, ny, 1e-4, 1e-4);

    fill_nan(dx, nx);
    fill_nan(dw, nw);
    fill_nan(db, out);
    B->fc_backward(ctx, &s, x, w, dy, dx, dw, db);
    ref_fc_backward(&s, x, w, dy, rdx, rdw, rdb);
    check_close(fmt_label("fc_backward dx %s", shape), dx, rdx, nx, 1e-4, 1e-4);
    check_close(fmt_label("fc_backward dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("fc_backward db %s", shape), db, rdb, out, 1e-4, 1e-4);

    /* no bias: b == NULL, db == NULL */
    fill_nan(y, ny);
    B->fc_forward(ctx, &s, x, w, NULL, y);
    ref_fc_forward(&s, x, w, NULL, ry);
    check_close(fmt_label("fc_forward(b=NULL) %s", shape), y, ry, ny, 1e-4, 1e-4);
    fill_nan(dw, nw);
    B->fc_backward(ctx, &s, x, w, dy, dx, dw, NULL);
    check_close(fmt_label("fc_backward(db=NULL) dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    B->fc_forward(ctx, &s, x, w, b, y);
    ref_fc_forward(&s, x, w, b, ry);

    /* first-layer form: dx == NULL; dw, db overwritten (not accumulated onto the previous call) */
    B->fc_backward(ctx, &s, x, w, dy, NULL, dw, db);
    check_close(fmt_label("fc_backward(dx=NULL) dw %s", shape), dw, rdw, nw, 1e-4, 1e-4);
    check_close(fmt_label("fc_backward(dx=NULL) db %s", shape), db, rdb, out, 1e-4, 1e-4);

    B->free(ctx, x), B->free(ctx, w), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
    free(ry), free(rdx), free(rdw), free(rdb);
}

/* ---- finite differences ---- */

typedef struct {
    FcShape s;
    float *x, *w, *b;
} FcState;

static void fc_fwd(GradLayer *l) {
    FcState *st = l->state;
    B->fc_forward(ctx, &st->s, st->x, st->w, st->b, l->y);
}

static void gradcheck_fc(int n, int in, int out) {
    FcState st = {.s = {.batch = n, .in = in, .out = out}};
    char name[96];
    snprintf(name, sizeof name, "fc n=%d in=%d out=%d", n, in, out);
    size_t nx = (size_t)n * in, nw = (size_t)out * in, ny = (size_t)n * out;
    st.x = falloc(nx), st.w = falloc(nw), st.b = falloc(out);
    GradLayer l = {.forward = fc_fwd, .y = falloc(ny), .r = falloc(ny), .ny = ny, .state = &st};
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(out);
    fill_uniform(st.x, nx, -1, 1);
    fill_uniform(st.w, nw, -1, 1);
    fill_uniform(st.b, out, -1, 1);
    fill_uniform(l.r, ny, -1, 1);

    fc_fwd(&l);
    B->fc_backward(ctx, &st.s, st.x, st.w, l.r, dx, dw, db);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, nx, 1e-2f, 1e-2);
    fd_check(name, "dw", &pr, st.w, dw, nw, 1e-2f, 1e-2);
    fd_check(name, "db", &pr, st.b, db, out, 1e-2f, 1e-2);

    B->free(ctx, st.x), B->free(ctx, st.w), B->free(ctx, st.b), B->free(ctx, l.y);
    B->free(ctx, l.r), B->free(ctx, dx), B->free(ctx, dw), B->free(ctx, db);
}

int main(void) {
    kernel_test_init(0x6e6d);
    test_fc(64, 800, 500); /* LeNet fc1 */
    test_fc(64, 500, 10);  /* LeNet fc2 */
    test_fc(1, 7, 3);
    test_fc(5, 37, 19);
    test_fc(3, 1, 1);
    test_fc(2, 2675, 129);

    gradcheck_fc(3, 7, 5);
    gradcheck_fc(1, 33, 17);
    return kernel_test_finish();
}
