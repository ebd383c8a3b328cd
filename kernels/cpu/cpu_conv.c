/* cpu_conv.c - the CPU backend's convolution: im2col + GEMM (cpu_im2col.c), 1x1 convolutions as
 * plain GEMMs, 3x3 stride-1 convolutions through Winograd F(2x2,3x3) where it wins
 * (cpu_winograd.c), small images grouped so the GEMMs stay wide. Semantics: backend.h. With
 * --precision bf16, the bf16 engine's own convolutions where it has them (oneDNN's), else
 * im2col + the bf16 GEMM. */
#include "cpu_bf16.h" /* defines: the bf16 convolutions, CPU_BF16_WEIGHT_A */
#include "cpu_kernels.h"
#include "cpu_im2col.h"
#include "cpu_winograd.h" /* 3x3 stride-1 convolutions */
#include "cpu_vec.h"

#include <string.h>

/* ---- convolution --------------------------------------------------------------------------- */

/* The column matrix of a large image is far bigger than the caches (VGG16's conv1_2: 576 x 50176
 * floats, 115 MB per sample): writing it and reading it back in the GEMM made the large layers
 * memory-bound (28-40 GFLOPS against 80-100 for the small ones). The convolution therefore runs
 * over blocks of output rows whose column block is about CONV_BLOCK_BYTES: written, multiplied
 * and (backward) scattered back while it is still in the core's L2. */
#define CONV_BLOCK_BYTES     (512 * 1024)
#define CONV_BLOCK_MIN_COLS  256        /* narrower GEMMs run well below the kernel's peak */
#define CONV_UNBLOCKED_BYTES (8u << 20) /* a column matrix up to this size is not cut */

/* Output rows per column block: all of them when the sample's column matrix is small, else about
 * CONV_BLOCK_BYTES of columns but at least CONV_BLOCK_MIN_COLS of them (every block repacks the
 * weights: too narrow a block costs more than the cache saves). Measured on VGG16's 3x3 layers
 * (4 samples, 1 thread, process CPU time): forward + backward 1.62 s instead of 1.8-2.1 s
 * unblocked; 64x224x224 forward 95 instead of 66 GFLOPS. */
static int conv_block_rows(const ConvShape *s) {
    const size_t col_bytes = (size_t)s->c_in * s->k * s->k * sizeof(float); /* one column */
    const size_t w = (size_t)s->w_out;
    if (col_bytes * w * s->h_out <= CONV_UNBLOCKED_BYTES || w == 0) return s->h_out;
    size_t cols = CONV_BLOCK_BYTES / col_bytes;
    if (cols < CONV_BLOCK_MIN_COLS) cols = CONV_BLOCK_MIN_COLS;
    size_t rows = (cols + w - 1) / w;
    return rows > (size_t)s->h_out ? s->h_out : (int)rows;
}

/* Winograd's transforms run in fp32 and its products are not convolutions of rounded inputs: with
 * --precision bf16 every convolution is im2col + the bf16 GEMM (as autocast's bf16 convolution). */
static int wino(BackendCtx *ctx, const ConvShape *s) {
    return !cpu_ctx_bf16(ctx) && cpu_wino_applies(s);
}

/* A 1x1, stride-1, unpadded convolution's column matrix is the input itself: no im2col needed. */
static int conv_is_pointwise(const ConvShape *s) {
    return s->k == 1 && s->stride == 1 && s->pad == 0;
}

/* --precision bf16: the engine's own convolution (oneDNN's primitives, in their channels-last
 * layouts) except for pointwise ones, whose per-sample GEMMs on the NCHW data need no layout
 * change at all: oneDNN's primitives paid two transposing reorders per pass (x in, y out) and its
 * 1x1 backward kernels were slow (ResNet-50, batch 16, one thread, alternating runs on the loaded
 * 2-core VM: 3.5-4.6 s per step with primitives for every convolution, 3.0-3.2 s with this). */
static int bf16_primitive(BackendCtx *ctx, const ConvShape *s) {
    return cpu_ctx_bf16(ctx) && !conv_is_pointwise(s);
}

/* Small images (ResNet's and GoogLeNet's 7x7 layers) make GEMMs with N = h_out*w_out = 49 columns,
 * far below the kernel's peak (M=2048, K=512: 113 GFLOPS at N=49, 170 at N=392; at N=196 the loss
 * is small, 149-163 against 160-166) and repacking the weights for every sample. Samples are then
 * grouped, g of them side by side in one column matrix col[K, g*hw], so that one GEMM covers about
 * CONV_GROUP_COLS columns; the output goes through a buffer ybuf[c_out, g*hw] to its NCHW place
 * (the copies in and out are what makes grouping not worth it for larger images). */
#define CONV_GROUP_COLS  384
#define CONV_GROUP_BELOW 128 /* images of fewer pixels are grouped */

/* Samples per GEMM: 1 for images of CONV_GROUP_BELOW pixels or more. */
static int conv_group(const ConvShape *s) {
    const int hw = s->h_out * s->w_out;
    if (hw <= 0 || hw >= CONV_GROUP_BELOW || s->batch <= 1) return 1;
    const int g = (CONV_GROUP_COLS + hw - 1) / hw;
    return g > s->batch ? s->batch : g;
}

/* Workspace: one sample's column matrix col[c_in*k*k, h_out*w_out] (the row blocks use its start);
 * for grouped samples col[K, g*hw] and ybuf[c_out, g*hw]. */
size_t cpu_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    const size_t kk = (size_t)s->c_in * s->k * s->k, hw = (size_t)s->h_out * s->w_out;
    const int g = conv_group(s);
    size_t bytes =
        g == 1 ? kk * hw * sizeof(float) : (kk + (size_t)s->c_out) * g * hw * sizeof(float);
    if (wino(ctx, s) && cpu_wino_workspace_bytes(s) > bytes) bytes = cpu_wino_workspace_bytes(s);
    return bytes;
}

/* Columns of samples i0 .. i0+gn-1 side by side: colg[K, gn*hw] with row stride ld. */
static void conv_group_columns(const ConvShape *s, const float *x, int i0, int gn, float *colg,
                               size_t ld) {
    const size_t hw = (size_t)s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in;
    for (int j = 0; j < gn; j++) {
        const float *xi = x + (size_t)(i0 + j) * x_stride;
        if (conv_is_pointwise(s)) /* the input rows themselves */
            for (int c = 0; c < s->c_in; c++)
                memcpy(colg + (size_t)c * ld + j * hw, xi + (size_t)c * hw, hw * sizeof(float));
        else
            cpu_im2col_rows(s, xi, 0, s->h_out, colg + j * hw, ld);
    }
}

/* Per sample, or per group of samples (conv_group): y[c_out, hw] = W[c_out, K] * col[K, hw] + b
 * with K = c_in*k*k, hw = h_out*w_out; a large image's columns in blocks of output rows. */
void cpu_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                      const float *b, float *y, void *work) {
    (void)ctx;
    const int c_out = s->c_out;
    const int kk = s->c_in * s->k * s->k;
    const int hw = s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in;
    const size_t y_stride = (size_t)c_out * hw;
    const int pointwise = conv_is_pointwise(s);
    float *col = work;
    if (s->batch <= 0 || c_out <= 0 || hw <= 0) return;
    if (kk > 0 && bf16_primitive(ctx, s) && cpu_bf16_conv_forward(cpu_ctx_bf16(ctx), s, x, w, b, y))
        return;         /* --precision bf16 on oneDNN's convolution */
    if (wino(ctx, s)) { /* 3x3, stride 1, pad 1: F(2x2, 3x3), cpu_winograd.c */
        cpu_wino_forward(s, x, w, b, y, work);
        return;
    }
    if (kk <= 0) { /* empty product: y = b */
        for (int i = 0; i < s->batch; i++)
            for (int co = 0; co < c_out; co++)
                cpu_vfill(y + i * y_stride + (size_t)co * hw, (size_t)hw, b ? b[co] : 0.0f);
        return;
    }

    const int g = conv_group(s);
    if (g > 1) {
        float *ybuf = col + (size_t)kk * g * hw; /* ybuf[c_out, g*hw] */
        for (int i0 = 0; i0 < s->batch; i0 += g) {
            const int gn = s->batch - i0 < g ? s->batch - i0 : g;
            const int cols = gn * hw;
            conv_group_columns(s, x, i0, gn, col, (size_t)cols);
            cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 0, 0, c_out, cols, kk, 1.0f, w, kk, col, cols, 0.0f,
                     ybuf, cols);
            for (int j = 0; j < gn; j++)
                for (int co = 0; co < c_out; co++) {
                    float *dst = y + (i0 + j) * y_stride + (size_t)co * hw;
                    memcpy(dst, ybuf + (size_t)co * cols + (size_t)j * hw, hw * sizeof(float));
                    if (b) cpu_vadd_scalar(dst, (size_t)hw, b[co]);
                }
        }
        return;
    }

    for (int i = 0; i < s->batch; i++) {
        const float *xi = x + i * x_stride; /* xi[c_in, h_in, w_in] */
        float *yi = y + i * y_stride;       /* yi[c_out, hw] */
        float beta = 0.0f;
        if (b) { /* broadcast the bias, then accumulate the product onto it */
            for (int co = 0; co < c_out; co++)
                cpu_vfill(yi + (size_t)co * hw, (size_t)hw, b[co]);
            beta = 1.0f;
        }
        if (pointwise) {
            cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 0, 0, c_out, hw, kk, 1.0f, w, kk, xi, hw, beta, yi,
                     hw);
            continue;
        }
        const int rows = conv_block_rows(s);
        for (int oh0 = 0; oh0 < s->h_out; oh0 += rows) {
            const int oh1 = oh0 + rows < s->h_out ? oh0 + rows : s->h_out;
            const int cols = (oh1 - oh0) * s->w_out; /* col[K, cols], y[:, oh0*w_out..] */
            cpu_im2col_rows(s, xi, oh0, oh1, col, (size_t)cols);
            cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 0, 0, c_out, cols, kk, 1.0f, w, kk, col, cols, beta,
                     yi + (size_t)oh0 * s->w_out, hw);
        }
    }
}

/* dy[n,c_out,h_out,w_out] -> dW[c_out,K] = sum_i dy_i * col_i^T, db[c_out] = sum dy,
 * dx_i = col2im(W^T dy_i) (skipped if dx == NULL). dW and db are overwritten. Same grouping and
 * blocking as the forward. */
void cpu_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, void *work) {
    (void)ctx;
    const int c_out = s->c_out;
    const int kk = s->c_in * s->k * s->k;
    const int hw = s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in;
    const size_t y_stride = (size_t)c_out * hw;
    const int pointwise = conv_is_pointwise(s);
    float *col = work; /* col[K, cols]: im2col(x), then reused for dcol = W^T dy */

    if (s->batch > 0 && c_out > 0 && hw > 0 && kk > 0 && bf16_primitive(ctx, s) &&
        cpu_bf16_conv_backward(cpu_ctx_bf16(ctx), s, x, w, dy, dx, dw, db))
        return; /* --precision bf16 on oneDNN's convolution */
    if (s->batch > 0 && hw > 0 && wino(ctx, s) && cpu_wino_weights_apply(s)) {
        cpu_wino_backward(s, x, w, dy, dx, dw, db, work);
        return;
    }
    if (s->batch > 0 && hw > 0 && dx && wino(ctx, s)) {
        /* weights by the GEMMs below, input gradient by Winograd (after: it reuses the work) */
        cpu_conv_backward(ctx, s, x, w, dy, NULL, dw, db, work);
        cpu_wino_backward_data(s, w, dy, dx, work);
        return;
    }
    if (db && c_out > 0) memset(db, 0, (size_t)c_out * sizeof(float));
    if (s->batch <= 0 || c_out <= 0 || hw <= 0 || kk <= 0) {
        if (c_out > 0 && kk > 0) memset(dw, 0, (size_t)c_out * kk * sizeof(float));
        if (dx && s->batch > 0) memset(dx, 0, s->batch * x_stride * sizeof(float));
        return;
    }
    /* db[c_out] = row sums of every dy_i */
    for (int i = 0; db && i < s->batch; i++)
        for (int co = 0; co < c_out; co++)
            db[co] += cpu_vsum(dy + i * y_stride + (size_t)co * hw, (size_t)hw);

    const int g = conv_group(s);
    if (g > 1) {
        float *dybuf = col + (size_t)kk * g * hw; /* dybuf[c_out, g*hw] */
        for (int i0 = 0; i0 < s->batch; i0 += g) {
            const int gn = s->batch - i0 < g ? s->batch - i0 : g;
            const int cols = gn * hw;
            conv_group_columns(s, x, i0, gn, col, (size_t)cols);
            for (int j = 0; j < gn; j++)
                for (int co = 0; co < c_out; co++)
                    memcpy(dybuf + (size_t)co * cols + (size_t)j * hw,
                           dy + (i0 + j) * y_stride + (size_t)co * hw, hw * sizeof(float));
            /* dW (+)= dybuf[c_out, cols] * col[K, cols]^T; the first group overwrites */
            cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 0, 1, c_out, kk, cols, 1.0f, dybuf, cols, col, cols,
                     i0 == 0 ? 0.0f : 1.0f, dw, kk);
            if (!dx) continue;
            /* dcol[K, cols] = W^T dybuf, into col; then to each sample's dx */
            cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 1, 0, kk, cols, c_out, 1.0f, w, kk, dybuf, cols, 0.0f,
                     col, cols);
            for (int j = 0; j < gn; j++) {
                float *dxi = dx + (i0 + j) * x_stride;
                if (pointwise) {
                    for (int c = 0; c < s->c_in; c++)
                        memcpy(dxi + (size_t)c * hw, col + (size_t)c * cols + (size_t)j * hw,
                               hw * sizeof(float));
                } else {
                    memset(dxi, 0, x_stride * sizeof(float));
                    cpu_col2im_rows_add(s, col + (size_t)j * hw, 0, s->h_out, (size_t)cols, dxi);
                }
            }
        }
        return;
    }

    for (int i = 0; i < s->batch; i++) {
        const float *xi = x + i * x_stride;   /* xi[c_in, h_in, w_in] */
        const float *dyi = dy + i * y_stride; /* dyi[c_out, hw] */
        if (pointwise) {                      /* the column matrix is xi itself; dcol is dxi */
            /* dW[c_out, K] (+)= dyi[c_out, hw] * xi[K, hw]^T; the first sample overwrites */
            cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 0, 1, c_out, kk, hw, 1.0f, dyi, hw, xi, hw,
                     i == 0 ? 0.0f : 1.0f, dw, kk);
            if (dx)
                cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 1, 0, kk, hw, c_out, 1.0f, w, kk, dyi, hw, 0.0f,
                         dx + i * x_stride, hw);
            continue;
        }
        /* Per block of output rows: dW (+)= dyi[:, block] * col^T; then the same buffer takes
         * dcol = W^T dyi[:, block], scattered onto dxi. */
        float *dxi = dx ? dx + i * x_stride : NULL; /* dxi[c_in, h_in, w_in] */
        if (dxi) memset(dxi, 0, x_stride * sizeof(float));
        const int rows = conv_block_rows(s);
        for (int oh0 = 0; oh0 < s->h_out; oh0 += rows) {
            const int oh1 = oh0 + rows < s->h_out ? oh0 + rows : s->h_out;
            const int cols = (oh1 - oh0) * s->w_out;
            const float *dyb = dyi + (size_t)oh0 * s->w_out; /* dyb[c_out, cols], ld hw */
            cpu_im2col_rows(s, xi, oh0, oh1, col, (size_t)cols);
            cpu_gemm(ctx, CPU_BF16_NO_WEIGHT, 0, 1, c_out, kk, cols, 1.0f, dyb, hw, col, cols,
                     i == 0 && oh0 == 0 ? 0.0f : 1.0f, dw, kk);
            if (dxi) {
                cpu_gemm(ctx, CPU_BF16_WEIGHT_A, 1, 0, kk, cols, c_out, 1.0f, w, kk, dyb, hw, 0.0f,
                         col, cols);
                cpu_col2im_rows_add(s, col, oh0, oh1, (size_t)cols, dxi);
            }
        }
    }
}
