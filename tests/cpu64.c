/* cpu64.c - "cpu64", the layer comparison's second CPU configuration (tests/layer_compare.c):
 * the CPU backend with its convolutions and fully connected layers computed in float64 (every
 * operand widened, im2col and cblas_dgemm, each result rounded once to fp32) instead of fp32
 * GEMMs and Winograd; every other layer is the CPU backend's. So the two configurations differ
 * exactly where a GPU differs most (the products' summation), and cpu64's products are the exact
 * values rounded once: cpu against cpu64 measures the CPU backend's own fp32 error per layer. */
#include "cpu64.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

extern const BackendOps cpu_backend;

static double *widen(const float *x, size_t n) {
    double *d = malloc((n ? n : 1) * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

static void narrow(float *y, const double *d, size_t n) {
    for (size_t i = 0; i < n; i++)
        y[i] = (float)d[i];
}

/* ---- fully connected: y = x W^T + b; dW = dy^T x; db = column sums of dy; dx = dy W -------- */

static void fc64_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                         const float *b, float *y) {
    (void)ctx;
    const size_t ny = (size_t)s->batch * s->out;
    double *x64 = widen(x, (size_t)s->batch * s->in), *w64 = widen(w, (size_t)s->out * s->in);
    double *y64 = calloc(ny ? ny : 1, sizeof(double));
    for (size_t i = 0; b && i < ny; i++)
        y64[i] = b[i % (size_t)s->out];
    if (s->batch > 0 && s->out > 0 && s->in > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->batch, s->out, s->in, 1.0, x64,
                    s->in, w64, s->in, b ? 1.0 : 0.0, y64, s->out);
    narrow(y, y64, ny);
    free(x64), free(w64), free(y64);
}

static void fc64_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db) {
    (void)ctx;
    const size_t nx = (size_t)s->batch * s->in, nw = (size_t)s->out * s->in;
    double *x64 = widen(x, nx), *w64 = widen(w, nw), *dy64 = widen(dy, (size_t)s->batch * s->out);
    double *dw64 = calloc(nw ? nw : 1, sizeof(double)), *dx64 = calloc(nx ? nx : 1, sizeof(double));
    if (s->batch > 0 && s->out > 0 && s->in > 0) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, s->out, s->in, s->batch, 1.0, dy64,
                    s->out, x64, s->in, 0.0, dw64, s->in);
        if (dx)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->batch, s->in, s->out, 1.0,
                        dy64, s->out, w64, s->in, 0.0, dx64, s->in);
    }
    narrow(dw, dw64, nw);
    if (dx) narrow(dx, dx64, nx);
    for (int o = 0; db && o < s->out; o++) {
        double acc = 0;
        for (int i = 0; i < s->batch; i++)
            acc += dy64[(size_t)i * s->out + o];
        db[o] = (float)acc;
    }
    free(x64), free(w64), free(dy64), free(dw64), free(dx64);
}

/* ---- convolution: per sample, col[c_in*k*k, h_out*w_out] of the input, then GEMMs ----------- */

static void im2col64(const ConvShape *s, const float *x, double *col) {
    const size_t hw = (size_t)s->h_out * s->w_out;
    for (int ci = 0; ci < s->c_in; ci++)
        for (int kh = 0; kh < s->k; kh++)
            for (int kw = 0; kw < s->k; kw++) {
                double *row = col + (((size_t)ci * s->k + kh) * s->k + kw) * hw;
                for (int oh = 0; oh < s->h_out; oh++)
                    for (int ow = 0; ow < s->w_out; ow++) {
                        const int ih = oh * s->stride - s->pad + kh,
                                  iw = ow * s->stride - s->pad + kw;
                        row[(size_t)oh * s->w_out + ow] =
                            ih < 0 || iw < 0 || ih >= s->h_in || iw >= s->w_in
                                ? 0.0
                                : x[((size_t)ci * s->h_in + ih) * s->w_in + iw];
                    }
            }
}

/* dx64 (one sample, zeroed) += the columns' gradient col put back in place */
static void col2im64(const ConvShape *s, const double *col, double *dx64) {
    const size_t hw = (size_t)s->h_out * s->w_out;
    for (int ci = 0; ci < s->c_in; ci++)
        for (int kh = 0; kh < s->k; kh++)
            for (int kw = 0; kw < s->k; kw++) {
                const double *row = col + (((size_t)ci * s->k + kh) * s->k + kw) * hw;
                for (int oh = 0; oh < s->h_out; oh++)
                    for (int ow = 0; ow < s->w_out; ow++) {
                        const int ih = oh * s->stride - s->pad + kh,
                                  iw = ow * s->stride - s->pad + kw;
                        if (ih >= 0 && iw >= 0 && ih < s->h_in && iw < s->w_in)
                            dx64[((size_t)ci * s->h_in + ih) * s->w_in + iw] +=
                                row[(size_t)oh * s->w_out + ow];
                    }
            }
}

static size_t conv64_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    (void)ctx, (void)s;
    return 0; /* allocates its own */
}

static void conv64_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                           const float *b, float *y, void *work) {
    (void)ctx, (void)work;
    const int kk = s->c_in * s->k * s->k, hw = s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in, y_stride = (size_t)s->c_out * hw;
    double *w64 = widen(w, (size_t)s->c_out * kk), *col = malloc((size_t)kk * hw * 8 + 8);
    double *y64 = malloc(y_stride * 8 + 8);
    for (int n = 0; n < s->batch; n++) {
        im2col64(s, x + n * x_stride, col);
        for (size_t i = 0; i < y_stride; i++)
            y64[i] = b ? b[i / (size_t)hw] : 0.0;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->c_out, hw, kk, 1.0, w64, kk, col,
                    hw, 1.0, y64, hw);
        narrow(y + n * y_stride, y64, y_stride);
    }
    free(w64), free(col), free(y64);
}

static void conv64_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db, void *work) {
    (void)ctx, (void)work;
    const int kk = s->c_in * s->k * s->k, hw = s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in, y_stride = (size_t)s->c_out * hw;
    const size_t nw = (size_t)s->c_out * kk;
    double *w64 = widen(w, nw), *dw64 = calloc(nw + 1, 8), *col = malloc((size_t)kk * hw * 8 + 8);
    double *dy64 = malloc(y_stride * 8 + 8), *dx64 = malloc(x_stride * 8 + 8);
    double *db64 = calloc((size_t)s->c_out + 1, 8);
    for (int n = 0; n < s->batch; n++) {
        for (size_t i = 0; i < y_stride; i++)
            dy64[i] = dy[n * y_stride + i], db64[i / (size_t)hw] += dy64[i];
        im2col64(s, x + n * x_stride, col);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s->c_out, kk, hw, 1.0, dy64, hw, col,
                    hw, 1.0, dw64, kk); /* dW += dy col^T */
        if (!dx) continue;
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kk, hw, s->c_out, 1.0, w64, kk, dy64,
                    hw, 0.0, col, hw); /* col = W^T dy */
        memset(dx64, 0, x_stride * 8);
        col2im64(s, col, dx64);
        narrow(dx + n * x_stride, dx64, x_stride);
    }
    narrow(dw, dw64, nw);
    if (db) narrow(db, db64, (size_t)s->c_out);
    free(w64), free(dw64), free(col), free(dy64), free(dx64), free(db64);
}

const BackendOps *cpu64_backend(void) {
    static BackendOps ops;
    if (!ops.name) {
        ops = cpu_backend;
        ops.name = "cpu64";
        ops.fc_forward = fc64_forward, ops.fc_backward = fc64_backward;
        ops.conv_workspace_bytes = conv64_workspace_bytes;
        ops.conv_forward = conv64_forward, ops.conv_backward = conv64_backward;
    }
    return &ops;
}
