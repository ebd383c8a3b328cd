/* cpu.c - the CPU compute backend (OpenBLAS): layer kernels of a training step on host memory.
 *
 * Exports `cpu_backend`, a BackendOps (see backend.h). Fully connected and convolution layers are
 * single-precision GEMMs (convolution: im2col + one GEMM per sample, see cpu_im2col.c); the other
 * kernels are plain loops written so the compiler can vectorise them. Nothing allocates memory in a
 * hot path: the convolution scratch is the caller's `work` buffer. "Device" memory is host memory,
 * so upload/download are copies and synchronize is a no-op.
 *
 * Vectorisation: GCC 12 at plain -O2 uses the "very cheap" vectoriser cost model, which leaves a
 * loop scalar when it would need a remainder loop or a runtime aliasing check. The element-wise
 * loops are therefore written as VBLOCK-wide blocks (an inner loop of constant length, on restrict
 * pointers or through block-local temporaries) plus a scalar tail, or, for SGD, as a main loop over
 * a multiple of VBLOCK elements plus a tail: shapes that -O2 vectorises (checked with
 * -fopt-info-vec); -O3 and clang vectorise them too. Left as plain loops they stayed scalar at -O2
 * (SGD over FCN-5's 118.6M parameters then took ~1.5-2x as long as the memory-bound vector loop).
 *
 * Threads: init() sets OpenBLAS's thread count to cfg->threads (process-wide, OpenBLAS has no
 * per-context setting); the non-GEMM loops run on the calling thread.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "backend.h"
#include "cpu_im2col.h"
#include "cpu_winograd.h" /* 3x3 stride-1 convolutions */
#include "cpu_zoo.h"      /* the model-zoo layers' kernels, entered into the table below */

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct BackendCtx {
    int threads;                       /* OpenBLAS threads set at init (0: OpenBLAS's default) */
    double marks[BACKEND_TIMER_SLOTS]; /* timer_record(): CLOCK_MONOTONIC seconds per slot */
};

/* ---- vector helpers (see "Vectorisation" above) ------------------------------------------ */

#define VBLOCK 8

/* d[n] += s[n] */
static void vec_add(float *restrict d, const float *restrict s, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += s[i + j];
    for (; i < n; i++)
        d[i] += s[i];
}

/* d[n] += v */
static void vec_add_scalar(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += v;
    for (; i < n; i++)
        d[i] += v;
}

/* d[n] *= v */
static void vec_scale(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] *= v;
    for (; i < n; i++)
        d[i] *= v;
}

/* ---- lifetime ------------------------------------------------------------------------------ */

/* OpenBLAS older than the CPU (e.g. 0.3.21 on Sapphire/Emerald Rapids) falls back to its generic
 * SSE3 "Prescott" kernels, several times slower. Say so, and what to set: a benchmark must not
 * quietly measure the wrong kernels. */
static void warn_generic_kernels(void) {
    const char *core = openblas_get_corename();
    if (!core || strcasecmp(core, "prescott") != 0) return;
    const char *better = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                         : __builtin_cpu_supports("avx2")  ? "Haswell"
                                                           : NULL;
    if (better)
        fprintf(stderr,
                "dtbench: warning: OpenBLAS does not know this CPU and uses its generic Prescott "
                "(SSE3) kernels; for a fair measurement export OPENBLAS_CORETYPE=%s to every "
                "rank\n",
                better);
}

static int cpu_init(const BackendConfig *cfg, BackendCtx **out) {
    if (!out) return -1;
    *out = NULL;
    BackendCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return -1;
    if (cfg && cfg->threads > 0) {
        openblas_set_num_threads(cfg->threads);
        ctx->threads = cfg->threads;
    }
    if (cfg && cfg->verbose) warn_generic_kernels();
    *out = ctx;
    return 0;
}

static void cpu_finalize(BackendCtx *ctx) {
    free(ctx);
}

static void cpu_describe(BackendCtx *ctx, char *buf, size_t len) {
    (void)ctx;
    if (!buf || len == 0) return;
    snprintf(buf, len, "%s; core %s; threads %d", openblas_get_config(), openblas_get_corename(),
             openblas_get_num_threads());
}

/* ---- memory -------------------------------------------------------------------------------- */

static void *cpu_alloc(BackendCtx *ctx, size_t bytes) {
    (void)ctx;
    size_t size = (bytes + 63) & ~(size_t)63; /* aligned_alloc needs a multiple of the alignment */
    if (size == 0) size = 64;
    void *p = aligned_alloc(64, size);
    if (p) memset(p, 0, size);
    return p;
}

static void cpu_free(BackendCtx *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void cpu_upload(BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes) {
    (void)ctx;
    if (dst_dev != src_host) memcpy(dst_dev, src_host, bytes);
}

static void cpu_download(BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes) {
    (void)ctx;
    if (dst_host != src_dev) memcpy(dst_host, src_dev, bytes);
}

static void cpu_zero(BackendCtx *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}

static void cpu_synchronize(BackendCtx *ctx) {
    (void)ctx;
}

/* ---- fully connected ----------------------------------------------------------------------- */

/* y[n,out] = x[n,in] * W[out,in]^T + b[out] */
static void cpu_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                           const float *b, float *y) {
    (void)ctx;
    const int n = s->batch, in = s->in, out = s->out;
    if (n <= 0 || out <= 0) return;
    if (in <= 0) { /* empty product: y = b */
        for (int i = 0; i < n; i++) {
            if (b)
                memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
            else
                memset(y + (size_t)i * out, 0, (size_t)out * sizeof(float));
        }
        return;
    }
    float beta = 0.0f;
    if (b) { /* broadcast the bias into y, then accumulate the product onto it */
        for (int i = 0; i < n; i++)
            memcpy(y + (size_t)i * out, b, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in, beta, y,
                out);
}

/* dy[n,out] -> dW[out,in] = dy^T x, db[out] = sum_n dy, dx[n,in] = dy W (skipped if dx == NULL) */
static void cpu_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                            const float *dy, float *dx, float *dw, float *db) {
    (void)ctx;
    const int n = s->batch, in = s->in, out = s->out;
    if (out <= 0) {
        if (dx && n > 0 && in > 0) memset(dx, 0, (size_t)n * in * sizeof(float));
        return;
    }
    if (n <= 0) { /* no samples: zero gradients */
        if (in > 0) memset(dw, 0, (size_t)out * in * sizeof(float));
        if (db) memset(db, 0, (size_t)out * sizeof(float));
        return;
    }
    if (in > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in, 0.0f,
                    dw, in);

    /* db[out]: column sums of dy[n,out], row by row so the inner loop is contiguous */
    if (db) {
        memcpy(db, dy, (size_t)out * sizeof(float));
        for (int i = 1; i < n; i++)
            vec_add(db, dy + (size_t)i * out, (size_t)out);
    }

    if (dx && in > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out, w, in,
                    0.0f, dx, in);
}

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

/* A 1x1, stride-1, unpadded convolution's column matrix is the input itself: no im2col needed. */
static int conv_is_pointwise(const ConvShape *s) {
    return s->k == 1 && s->stride == 1 && s->pad == 0;
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
static size_t cpu_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s) {
    (void)ctx;
    const size_t kk = (size_t)s->c_in * s->k * s->k, hw = (size_t)s->h_out * s->w_out;
    const int g = conv_group(s);
    size_t bytes =
        g == 1 ? kk * hw * sizeof(float) : (kk + (size_t)s->c_out) * g * hw * sizeof(float);
    if (cpu_wino_applies(s) && cpu_wino_workspace_bytes(s) > bytes)
        bytes = cpu_wino_workspace_bytes(s);
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
static void cpu_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
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
    if (cpu_wino_applies(s)) { /* 3x3, stride 1, pad 1: F(2x2, 3x3), cpu_winograd.c */
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, cols, kk, 1.0f, w, kk,
                        col, cols, 0.0f, ybuf, cols);
            for (int j = 0; j < gn; j++)
                for (int co = 0; co < c_out; co++) {
                    float *dst = y + (i0 + j) * y_stride + (size_t)co * hw;
                    memcpy(dst, ybuf + (size_t)co * cols + (size_t)j * hw, hw * sizeof(float));
                    if (b) vec_add_scalar(dst, (size_t)hw, b[co]);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, hw, kk, 1.0f, w, kk, xi,
                        hw, beta, yi, hw);
            continue;
        }
        const int rows = conv_block_rows(s);
        for (int oh0 = 0; oh0 < s->h_out; oh0 += rows) {
            const int oh1 = oh0 + rows < s->h_out ? oh0 + rows : s->h_out;
            const int cols = (oh1 - oh0) * s->w_out; /* col[K, cols], y[:, oh0*w_out..] */
            cpu_im2col_rows(s, xi, oh0, oh1, col, (size_t)cols);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, cols, kk, 1.0f, w, kk,
                        col, cols, beta, yi + (size_t)oh0 * s->w_out, hw);
        }
    }
}

/* dy[n,c_out,h_out,w_out] -> dW[c_out,K] = sum_i dy_i * col_i^T, db[c_out] = sum dy,
 * dx_i = col2im(W^T dy_i) (skipped if dx == NULL). dW and db are overwritten. Same grouping and
 * blocking as the forward. */
static void cpu_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                              const float *dy, float *dx, float *dw, float *db, void *work) {
    (void)ctx;
    const int c_out = s->c_out;
    const int kk = s->c_in * s->k * s->k;
    const int hw = s->h_out * s->w_out;
    const size_t x_stride = (size_t)s->c_in * s->h_in * s->w_in;
    const size_t y_stride = (size_t)c_out * hw;
    const int pointwise = conv_is_pointwise(s);
    float *col = work; /* col[K, cols]: im2col(x), then reused for dcol = W^T dy */

    if (s->batch > 0 && hw > 0 && cpu_wino_weights_apply(s)) {
        cpu_wino_backward(s, x, w, dy, dx, dw, db, work);
        return;
    }
    if (s->batch > 0 && hw > 0 && dx && cpu_wino_applies(s)) {
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, kk, cols, 1.0f, dybuf, cols,
                        col, cols, i0 == 0 ? 0.0f : 1.0f, dw, kk);
            if (!dx) continue;
            /* dcol[K, cols] = W^T dybuf, into col; then to each sample's dx */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kk, cols, c_out, 1.0f, w, kk,
                        dybuf, cols, 0.0f, col, cols);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, kk, hw, 1.0f, dyi, hw, xi,
                        hw, i == 0 ? 0.0f : 1.0f, dw, kk);
            if (dx)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kk, hw, c_out, 1.0f, w, kk,
                            dyi, hw, 0.0f, dx + i * x_stride, hw);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, kk, cols, 1.0f, dyb, hw,
                        col, cols, i == 0 && oh0 == 0 ? 0.0f : 1.0f, dw, kk);
            if (dxi) {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, kk, cols, c_out, 1.0f, w, kk,
                            dyb, hw, 0.0f, col, cols);
                cpu_col2im_rows_add(s, col, oh0, oh1, (size_t)cols, dxi);
            }
        }
    }
}

/* ---- max pooling --------------------------------------------------------------------------- */

/* x[n,c,h_in,w_in] -> y[n,c,h_out,w_out]; argmax = flat index (ih*w_in + iw) of the first maximum
 * in each window, row-major order. 2x2 windows of stride 2 (LeNet, VGG) take an unrolled loop;
 * other windows (AlexNet's 3/2) the row-wise vectorised kernel of the padded pool, with pad 0. */
static void cpu_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                                int32_t *argmax) {
    (void)ctx;
    const int k = s->k, stride = s->stride, w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t in_plane = (size_t)s->h_in * w_in, out_plane = (size_t)h_out * w_out;
    const size_t planes = (size_t)s->batch * s->c;
    if (k != 2 || stride != 2) {
        const PadPoolShape ps = {s->batch, s->c, s->h_in, s->w_in, k, stride, 0, h_out, w_out};
        cpu_maxpool_pad_forward(ctx, &ps, x, y, argmax);
        return;
    }

    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_plane; /* xp[h_in, w_in] */
        float *yp = y + pl * out_plane;      /* yp[h_out, w_out] */
        int32_t *ap = argmax + pl * out_plane;
        for (int oh = 0; oh < h_out; oh++) {
            const float *r0 = xp + (size_t)(2 * oh) * w_in;
            const float *r1 = r0 + w_in;
            const int base = 2 * oh * w_in;
            for (int ow = 0; ow < w_out; ow++) {
                const int iw = 2 * ow;
                float m = r0[iw];
                int a = base + iw;
                if (r0[iw + 1] > m) {
                    m = r0[iw + 1];
                    a = base + iw + 1;
                }
                if (r1[iw] > m) {
                    m = r1[iw];
                    a = base + w_in + iw;
                }
                if (r1[iw + 1] > m) {
                    m = r1[iw + 1];
                    a = base + w_in + iw + 1;
                }
                yp[(size_t)oh * w_out + ow] = m;
                ap[(size_t)oh * w_out + ow] = a;
            }
        }
    }
}

/* dx[n,c,h_in,w_in] = 0, then dx[plane][argmax] += dy (overlapping windows may share a maximum) */
static void cpu_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const float *x,
                                 const float *y, const int32_t *argmax, const float *dy,
                                 float *dx) {
    (void)ctx, (void)x, (void)y; /* the argmax of the forward pass is enough */
    const size_t in_plane = (size_t)s->h_in * s->w_in, out_plane = (size_t)s->h_out * s->w_out;
    const size_t planes = (size_t)s->batch * s->c;

    memset(dx, 0, planes * in_plane * sizeof(float));
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        const int32_t *ap = argmax + pl * out_plane;
        for (size_t o = 0; o < out_plane; o++)
            dxp[ap[o]] += dyp[o];
    }
}

/* ---- ReLU ---------------------------------------------------------------------------------- */
/* In place is allowed (y == x, dx == dy or dx == y): each block is loaded into temporaries before
 * it is stored, which is also what lets -O2 vectorise without restrict. */

static void cpu_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float t[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = x[i + j];
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = t[j] > 0.0f ? t[j] : 0.0f;
    }
    for (; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

static void cpu_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy,
                              float *dx) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float ty[VBLOCK], tg[VBLOCK];
        for (int j = 0; j < VBLOCK; j++) {
            ty[j] = y[i + j];
            tg[j] = dy[i + j];
        }
        for (int j = 0; j < VBLOCK; j++)
            dx[i + j] = ty[j] > 0.0f ? tg[j] : 0.0f;
    }
    for (; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- softmax cross-entropy ----------------------------------------------------------------- */

/* max of z[n] (n >= 1), in VBLOCK lanes */
static float vec_max(const float *restrict z, size_t n) {
    float acc[VBLOCK];
    for (int j = 0; j < VBLOCK; j++)
        acc[j] = z[0];
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            acc[j] = z[i + j] > acc[j] ? z[i + j] : acc[j];
    float m = acc[0];
    for (int j = 1; j < VBLOCK; j++)
        m = acc[j] > m ? acc[j] : m;
    for (; i < n; i++)
        m = z[i] > m ? z[i] : m;
    return m;
}

/* sum of exp(z[j] - m) over z[n], also written to d[n] unless d is NULL; cpu_expf in VBLOCK float
 * lanes (each lane sums n/VBLOCK terms), the lanes added in double */
static double vec_exp_sum(const float *restrict z, float *restrict d, size_t n, float m) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    if (d) {
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float e = cpu_expf(z[i + j] - m);
                d[i + j] = e;
                acc[j] += e;
            }
    } else {
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++)
                acc[j] += cpu_expf(z[i + j] - m);
    }
    double sum = 0.0;
    for (int j = 0; j < VBLOCK; j++)
        sum += acc[j];
    for (; i < n; i++) {
        const float e = cpu_expf(z[i] - m);
        if (d) d[i] = e;
        sum += e;
    }
    return sum;
}

/* logits[n,c], labels[n] -> stats = {mean loss, correct}; dlogits[n,c] = (softmax - onehot)/n
 * unless NULL.
 * Per row: m = max z, S = sum exp(z - m), loss = log S - (z_label - m). A label outside [0, c)
 * gives a NaN loss and no one-hot term (never an out-of-bounds access). exp is cpu_expf
 * (cpu_zoo.h), which vectorises: libm's scalar expf made the 10000-way softmax of every position
 * of the LSTM models a large share of their step. */
static void cpu_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits,
                             const int32_t *labels, float *dlogits, float *stats) {
    (void)ctx;
    double total = 0.0;
    int hits = 0;
    const float inv_n = n > 0 ? 1.0f / (float)n : 0.0f;

    for (int i = 0; i < n && c > 0; i++) {
        const float *z = logits + (size_t)i * c; /* z[c] */
        const int32_t label = labels[i];

        const float m = vec_max(z, (size_t)c);
        int best = 0; /* the first maximum (NaN logits: none, stop at the end) */
        while (best < c - 1 && z[best] != m)
            best++;
        if (best == label) hits++;

        /* c can be large (FCN-5: 26752 classes, the LSTMs' vocabulary: 10000 per position) */
        float *d = dlogits ? dlogits + (size_t)i * c : NULL; /* d[c]: exp(z - m), then scaled */
        const double sum = vec_exp_sum(z, d, (size_t)c, m);
        if (d) {
            vec_scale(d, (size_t)c, (float)(inv_n / sum));
            if (label >= 0 && label < c) d[label] -= inv_n;
        }
        if (label >= 0 && label < c)
            total += log(sum) - (double)(z[label] - m);
        else
            total = NAN;
    }
    stats[0] = n > 0 ? (float)(total / n) : 0.0f;
    stats[1] = (float)hits;
}

/* ---- SGD ----------------------------------------------------------------------------------- */

/* PyTorch SGD (dampening 0, no Nesterov), fused over p[n], g[n], v[n]:
 *   g' = g + wd*p;  v = momentum*v + g';  p -= lr*v   (momentum == 0: p -= lr*g', v untouched) */
static void cpu_sgd_update(BackendCtx *ctx, size_t n, float *restrict p, const float *restrict g,
                           float *restrict v, float lr, float momentum, float weight_decay) {
    (void)ctx;
    size_t i = 0, nm = n & ~(size_t)(VBLOCK - 1); /* [0, nm): vectorised; [nm, n): tail */
    if (momentum != 0.0f) {
        for (; i < nm; i++) { /* vectorised */
            const float gi = g[i] + weight_decay * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * vi;
        }
        for (; i < n; i++) { /* tail */
            const float gi = g[i] + weight_decay * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * vi;
        }
    } else {
        for (; i < nm; i++)
            p[i] -= lr * (g[i] + weight_decay * p[i]);
        for (; i < n; i++)
            p[i] -= lr * (g[i] + weight_decay * p[i]);
    }
}

/* ---- phase timer --------------------------------------------------------------------------- */

static void cpu_timer_record(BackendCtx *ctx, int slot) {
    if (slot < 0 || slot >= BACKEND_TIMER_SLOTS) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ctx->marks[slot] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds from mark a to mark b; NaN for a slot outside [0, BACKEND_TIMER_SLOTS). */
static double cpu_timer_elapsed(BackendCtx *ctx, int slot_a, int slot_b) {
    if (slot_a < 0 || slot_a >= BACKEND_TIMER_SLOTS || slot_b < 0 || slot_b >= BACKEND_TIMER_SLOTS)
        return NAN;
    return ctx->marks[slot_b] - ctx->marks[slot_a];
}

const BackendOps cpu_backend = {
    .name = "cpu",
    .reads = "threads",
    .init = cpu_init,
    .finalize = cpu_finalize,
    .describe = cpu_describe,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .zero = cpu_zero,
    .synchronize = cpu_synchronize,
    .fc_forward = cpu_fc_forward,
    .fc_backward = cpu_fc_backward,
    .conv_workspace_bytes = cpu_conv_workspace_bytes,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .timer_record = cpu_timer_record,
    .timer_elapsed = cpu_timer_elapsed,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .copy = cpu_copy,
    .maxpool_pad_forward = cpu_maxpool_pad_forward,
    .maxpool_pad_backward = cpu_maxpool_pad_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .global_avgpool_forward = cpu_global_avgpool_forward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .lrn_forward = cpu_lrn_forward,
    .lrn_backward = cpu_lrn_backward,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer,
    .batchnorm_backward = cpu_batchnorm_backward,
    .concat_forward = cpu_concat_forward,
    .concat_backward = cpu_concat_backward,
    .add_forward = cpu_add_forward,
    .add_backward = cpu_add_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .lstm_reserve_bytes = cpu_lstm_reserve_bytes,
    .lstm_workspace_bytes = cpu_lstm_workspace_bytes,
    .lstm_forward = cpu_lstm_forward,
    .lstm_backward = cpu_lstm_backward,
};
