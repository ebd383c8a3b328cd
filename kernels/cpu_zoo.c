/* cpu_zoo.c - CPU kernels of the model-zoo layers: padded max and average pooling, global average
 * pooling, LRN, batch normalisation, concatenation, residual add, dropout, embedding, the LSTM
 * layer, and axpy/scale for gradient accumulation. Semantics and layouts are those of backend.h.
 *
 * Same rules as cpu.c: no allocation, GEMMs through OpenBLAS (the LSTM's input, recurrent and
 * weight-gradient products), element-wise loops written as VBLOCK-wide blocks on restrict
 * pointers or block-local temporaries so that GCC's -O2 cost model vectorises them, and
 * transcendental functions through the branch-free cpu_expf (cpu_zoo.h) rather than libm's
 * scalar expf/tanhf.
 */
#include "cpu_zoo.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#define VBLOCK 8

/* ---- axpy, scale ----------------------------------------------------------------------------- */

void cpu_axpy(BackendCtx *ctx, size_t n, float alpha, const float *restrict x, float *restrict y) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] += alpha * x[i + j];
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

void cpu_scale(BackendCtx *ctx, size_t n, float alpha, float *restrict x) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            x[i + j] *= alpha;
    for (; i < n; i++)
        x[i] *= alpha;
}

void cpu_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (dst != src) memmove(dst, src, bytes);
}

/* ---- padded pooling -------------------------------------------------------------------------- */

/* Window rows [*lo, *hi) of output index o: o*stride - pad + [0, k), clipped to [0, len). */
static void window(int o, int stride, int pad, int k, int len, int *lo, int *hi) {
    int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > len ? len : start + k;
}

/* Outputs o in [*lo, *hi) whose input o*stride + offset lies in [0, in_len), clamped to
 * [0, out_len) (as in cpu_im2col.c). */
static void valid_outputs(int out_len, int in_len, int stride, int offset, int *lo, int *hi) {
    int l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int h = in_len - 1 - offset < 0 ? 0 : (in_len - 1 - offset) / stride + 1;
    if (h > out_len) h = out_len;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* One window position (kh, kw) for a whole output row: every output ow in [lo, hi) whose
 * candidate row[ow*stride + off] is larger than its maximum so far takes it (strict: the first
 * maximum in row-major window order stays), with index base + ow*stride + off. Written as
 * selects so that the stride-1 case vectorises. */
static void max_candidates(float *restrict m, int32_t *restrict a, const float *restrict row,
                           int off, int32_t base, int stride, int lo, int hi) {
    if (stride == 1) {
        int ow = lo;
        for (; ow + VBLOCK <= hi; ow += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float v = row[ow + j + off], cur = m[ow + j];
                /* the index select as a bit mask: GCC turns a ?: on the int array into a branch */
                const int32_t take = -(int32_t)(v > cur), idx = base + ow + j + off;
                m[ow + j] = v > cur ? v : cur;
                a[ow + j] = (a[ow + j] & ~take) | (idx & take);
            }
        for (; ow < hi; ow++)
            if (row[ow + off] > m[ow]) m[ow] = row[ow + off], a[ow] = base + ow + off;
        return;
    }
    /* strided: the same selects (no branch to mispredict on random data) */
    int ow = lo;
    for (; ow + VBLOCK <= hi; ow += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float v = row[(ow + j) * stride + off], cur = m[ow + j];
            const int32_t take = -(int32_t)(v > cur), idx = base + (ow + j) * stride + off;
            m[ow + j] = v > cur ? v : cur;
            a[ow + j] = (a[ow + j] & ~take) | (idx & take);
        }
    for (; ow < hi; ow++) {
        const float v = row[ow * stride + off];
        if (v > m[ow]) m[ow] = v, a[ow] = base + ow * stride + off;
    }
}

/* Max over the part of each window inside the image (padding never wins), row by row: for each
 * output row, every window position (kh, kw) in row-major order offers one candidate to every
 * output of the row. argmax = ih*w_in + iw of the first maximum; a window entirely in the
 * padding gives y = 0, argmax -1. */
void cpu_maxpool_pad_forward(BackendCtx *ctx, const PadPoolShape *s, const float *x, float *y,
                             int32_t *argmax) {
    (void)ctx;
    const int w_in = s->w_in, h_out = s->h_out, w_out = s->w_out, k = s->k;
    const int stride = s->stride, pad = s->pad;
    const size_t in_plane = (size_t)s->h_in * w_in, out_plane = (size_t)h_out * w_out;
    const size_t planes = (size_t)s->batch * s->c;
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_plane; /* xp[h_in, w_in] */
        for (int oh = 0; oh < h_out; oh++) {
            float *m = y + pl * out_plane + (size_t)oh * w_out; /* m[w_out]: this output row */
            int32_t *a = argmax + pl * out_plane + (size_t)oh * w_out;
            for (int ow = 0; ow < w_out; ow++)
                m[ow] = -INFINITY, a[ow] = -1;
            for (int kh = 0; kh < k; kh++) {
                const int ih = oh * stride - pad + kh;
                if (ih < 0 || ih >= s->h_in) continue;
                for (int kw = 0; kw < k; kw++) {
                    int lo, hi;
                    valid_outputs(w_out, w_in, stride, kw - pad, &lo, &hi);
                    /* candidate of output ow: x[ih, ow*stride + kw - pad] */
                    max_candidates(m, a, xp + (size_t)ih * w_in, kw - pad, ih * w_in, stride, lo,
                                   hi);
                }
            }
            for (int ow = 0; ow < w_out; ow++)
                if (a[ow] < 0) m[ow] = 0.0f;
        }
    }
}

void cpu_maxpool_pad_backward(BackendCtx *ctx, const PadPoolShape *s, const int32_t *argmax,
                              const float *dy, float *dx) {
    (void)ctx;
    const size_t in_plane = (size_t)s->h_in * s->w_in, out_plane = (size_t)s->h_out * s->w_out;
    const size_t planes = (size_t)s->batch * s->c;
    memset(dx, 0, planes * in_plane * sizeof(float));
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        const int32_t *ap = argmax + pl * out_plane;
        for (size_t o = 0; o < out_plane; o++)
            if (ap[o] >= 0) dxp[ap[o]] += dyp[o];
    }
}

/* y = (sum of the window's pixels inside the image) / (k*k): padding counts as zeros. */
void cpu_avgpool_forward(BackendCtx *ctx, const PadPoolShape *s, const float *x, float *y) {
    (void)ctx;
    const int w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t in_plane = (size_t)s->h_in * w_in, out_plane = (size_t)h_out * w_out;
    const size_t planes = (size_t)s->batch * s->c;
    const float inv = 1.0f / (float)(s->k * s->k);
    for (size_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * in_plane;
        float *yp = y + pl * out_plane;
        for (int oh = 0; oh < h_out; oh++) {
            int h0, h1;
            window(oh, s->stride, s->pad, s->k, s->h_in, &h0, &h1);
            for (int ow = 0; ow < w_out; ow++) {
                int w0, w1;
                window(ow, s->stride, s->pad, s->k, w_in, &w0, &w1);
                float sum = 0.0f;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        sum += xp[(size_t)ih * w_in + iw];
                yp[(size_t)oh * w_out + ow] = sum * inv;
            }
        }
    }
}

void cpu_avgpool_backward(BackendCtx *ctx, const PadPoolShape *s, const float *dy, float *dx) {
    (void)ctx;
    const int w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t in_plane = (size_t)s->h_in * w_in, out_plane = (size_t)h_out * w_out;
    const size_t planes = (size_t)s->batch * s->c;
    const float inv = 1.0f / (float)(s->k * s->k);
    memset(dx, 0, planes * in_plane * sizeof(float));
    for (size_t pl = 0; pl < planes; pl++) {
        float *dxp = dx + pl * in_plane;
        const float *dyp = dy + pl * out_plane;
        for (int oh = 0; oh < h_out; oh++) {
            int h0, h1;
            window(oh, s->stride, s->pad, s->k, s->h_in, &h0, &h1);
            for (int ow = 0; ow < w_out; ow++) {
                int w0, w1;
                window(ow, s->stride, s->pad, s->k, w_in, &w0, &w1);
                const float g = dyp[(size_t)oh * w_out + ow] * inv;
                for (int ih = h0; ih < h1; ih++)
                    for (int iw = w0; iw < w1; iw++)
                        dxp[(size_t)ih * w_in + iw] += g;
            }
        }
    }
}

/* x[planes, plane] -> y[planes] = mean of each plane, in VBLOCK partial sums */
void cpu_global_avgpool_forward(BackendCtx *ctx, size_t planes, size_t plane, const float *x,
                                float *y) {
    (void)ctx;
    const float inv = 1.0f / (float)plane;
    for (size_t pl = 0; pl < planes; pl++) {
        y[pl] = cpu_vsum(x + pl * plane, plane) * inv;
    }
}

void cpu_global_avgpool_backward(BackendCtx *ctx, size_t planes, size_t plane, const float *dy,
                                 float *dx) {
    (void)ctx;
    const float inv = 1.0f / (float)plane;
    for (size_t pl = 0; pl < planes; pl++) {
        float *restrict d = dx + pl * plane;
        const float g = dy[pl] * inv;
        size_t i = 0;
        for (; i + VBLOCK <= plane; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++)
                d[i + j] = g;
        for (; i < plane; i++)
            d[i] = g;
    }
}

/* ---- LRN ------------------------------------------------------------------------------------- */

/* d[n] += x[n]^2 */
static void vadd_sq(float *restrict d, const float *restrict x, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += x[i + j] * x[i + j];
    for (; i < n; i++)
        d[i] += x[i] * x[i];
}

/* d[n] += g[n] * y[n] / s[n] */
static void vadd_gy_over_s(float *restrict d, const float *restrict g, const float *restrict y,
                           const float *restrict s, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += g[i + j] * y[i + j] / s[i + j];
    for (; i < n; i++)
        d[i] += g[i] * y[i] / s[i];
}

/* s^-beta: 0.75 (AlexNet, GoogLeNet) as r*sqrt(r) with r = 1/sqrt(s), which vectorises (the
 * kernels are built with -fno-math-errno); any other beta through powf. */
static inline float pow_neg_beta(float s, float beta) {
    if (beta == 0.75f) {
        const float r = 1.0f / sqrtf(s);
        return r * sqrtf(r);
    }
    return powf(s, -beta);
}

/* s = bias + a * s (in place), y = x * s^-beta */
static void lrn_finish(float *restrict y, float *restrict s, const float *restrict x, size_t n,
                       float bias, float a, float beta) {
    size_t i = 0;
    if (beta == 0.75f)
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float sv = bias + a * s[i + j];
                const float r = 1.0f / sqrtf(sv);
                s[i + j] = sv;
                y[i + j] = x[i + j] * (r * sqrtf(r));
            }
    for (; i < n; i++) {
        s[i] = bias + a * s[i];
        y[i] = x[i] * pow_neg_beta(s[i], beta);
    }
}

/* d = g * s^-beta - k * x * d */
static void lrn_back_finish(float *restrict d, const float *restrict g, const float *restrict s,
                            const float *restrict x, size_t n, float k, float beta) {
    size_t i = 0;
    if (beta == 0.75f)
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float r = 1.0f / sqrtf(s[i + j]);
                d[i + j] = g[i + j] * (r * sqrtf(r)) - k * x[i + j] * d[i + j];
            }
    for (; i < n; i++)
        d[i] = g[i] * pow_neg_beta(s[i], beta) - k * x[i] * d[i];
}

/* Per sample and channel c, on rows of hw contiguous pixels: scale[c] = sum of x[c']^2 over the
 * window, then scale[c] = bias + alpha/size * scale[c] and y[c] = x[c] * scale[c]^-beta. */
void cpu_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale) {
    (void)ctx;
    const size_t hw = (size_t)s->h * s->w, chw = (size_t)s->c * hw;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const float a = s->alpha / (float)s->size;
    for (int n = 0; n < s->batch; n++) {
        const float *xn = x + n * chw; /* xn[c, hw] */
        float *yn = y + n * chw, *sn = scale + n * chw;
        for (int c = 0; c < s->c; c++) {
            float *sc = sn + c * hw;
            cpu_vfill(sc, hw, 0.0f);
            const int c0 = c - before < 0 ? 0 : c - before;
            const int c1 = c + after >= s->c ? s->c - 1 : c + after;
            for (int cc = c0; cc <= c1; cc++)
                vadd_sq(sc, xn + cc * hw, hw);
            lrn_finish(yn + c * hw, sc, xn + c * hw, hw, s->bias, a, s->beta);
        }
    }
}

/* dx[c] = dy[c] * s[c]^-beta - (2 alpha beta / size) * x[c] * sum over the channels c' whose
 * window holds c of dy[c'] * y[c'] / s[c']. dx[c] first collects that sum, then is finished. */
void cpu_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                      const float *scale, const float *dy, float *dx) {
    (void)ctx;
    const size_t hw = (size_t)s->h * s->w, chw = (size_t)s->c * hw;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const float k = 2.0f * s->alpha * s->beta / (float)s->size;
    for (int n = 0; n < s->batch; n++) {
        const float *xn = x + n * chw, *yn = y + n * chw, *sn = scale + n * chw;
        const float *dyn = dy + n * chw;
        float *dxn = dx + n * chw;
        for (int c = 0; c < s->c; c++) {
            float *d = dxn + c * hw;
            cpu_vfill(d, hw, 0.0f);
            /* c' with c in [c' - before, c' + after], i.e. c' in [c - after, c + before] */
            const int c0 = c - after < 0 ? 0 : c - after;
            const int c1 = c + before >= s->c ? s->c - 1 : c + before;
            for (int cc = c0; cc <= c1; cc++)
                vadd_gy_over_s(d, dyn + cc * hw, yn + cc * hw, sn + cc * hw, hw);
            lrn_back_finish(d, dyn + c * hw, sn + c * hw, xn + c * hw, hw, k, s->beta);
        }
    }
}

/* ---- batch normalisation --------------------------------------------------------------------- */

/* sum of (p - m)^2 */
static float plane_sq_dev(const float *restrict p, size_t n, float m) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float d = p[i + j] - m;
            acc[j] += d * d;
        }
    float s = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j];
    for (; i < n; i++)
        s += (p[i] - m) * (p[i] - m);
    return s;
}

/* sum of a[i] and of a[i]*(p[i] - m), in one pass */
static void plane_sum_dot_dev(const float *restrict a, const float *restrict p, size_t n, float m,
                              double *sum_a, double *sum_dot) {
    float acc[VBLOCK] = {0}, dot[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            acc[j] += a[i + j];
            dot[j] += a[i + j] * (p[i + j] - m);
        }
    float s = 0.0f, d = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j], d += dot[j];
    for (; i < n; i++)
        s += a[i], d += a[i] * (p[i] - m);
    *sum_a += s, *sum_dot += d;
}

/* y = x * mul + add over one plane */
static void plane_affine(float *restrict y, const float *restrict x, size_t n, float mul,
                         float add) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = x[i + j] * mul + add;
    for (; i < n; i++)
        y[i] = x[i] * mul + add;
}

/* Two passes per channel (mean, then squared deviations: no cancellation), plane sums in float
 * lanes added up in double. */
void cpu_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var) {
    (void)ctx;
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    const double count = (double)s->batch * (double)sp;
    for (int c = 0; c < s->c; c++) {
        double sum = 0.0;
        for (int n = 0; n < s->batch; n++)
            sum += cpu_vsum(x + n * stride + c * sp, sp);
        const float mean = (float)(sum / count);
        double sq = 0.0;
        for (int n = 0; n < s->batch; n++)
            sq += plane_sq_dev(x + n * stride + c * sp, sp, mean);
        const double var = sq / count;
        const float invstd = (float)(1.0 / sqrt(var + (double)s->eps));
        save_mean[c] = mean;
        save_invstd[c] = invstd;
        const double unbiased = count > 1 ? sq / (count - 1) : var;
        running_mean[c] = (1.0f - s->momentum) * running_mean[c] + s->momentum * mean;
        running_var[c] = (1.0f - s->momentum) * running_var[c] + s->momentum * (float)unbiased;
        const float mul = gamma[c] * invstd, add = beta[c] - mean * mul;
        for (int n = 0; n < s->batch; n++)
            plane_affine(y + n * stride + c * sp, x + n * stride + c * sp, sp, mul, add);
    }
}

void cpu_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float *y) {
    (void)ctx;
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    for (int c = 0; c < s->c; c++) {
        const float invstd = 1.0f / sqrtf(running_var[c] + s->eps);
        const float mul = gamma[c] * invstd, add = beta[c] - running_mean[c] * mul;
        for (int n = 0; n < s->batch; n++)
            plane_affine(y + n * stride + c * sp, x + n * stride + c * sp, sp, mul, add);
    }
}

/* dbeta = sum dy, dgamma = sum dy * xhat, dx = gamma*invstd * (dy - dbeta/N - xhat*dgamma/N) */
void cpu_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *dy,
                            float *dx, float *dgamma, float *dbeta) {
    (void)ctx;
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    const double count = (double)s->batch * (double)sp;
    for (int c = 0; c < s->c; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        for (int n = 0; n < s->batch; n++)
            plane_sum_dot_dev(dy + n * stride + c * sp, x + n * stride + c * sp, sp, mean, &sum_dy,
                              &sum_dy_dev);
        dbeta[c] = (float)sum_dy;
        dgamma[c] = (float)(sum_dy_dev * invstd);
        /* dx = k * (dy - m_dy - (x - mean) * m_xdy) with k = gamma*invstd */
        const float k = gamma[c] * invstd;
        const float m_dy = (float)(sum_dy / count);
        const float m_xdy = (float)(sum_dy_dev / count) * invstd * invstd;
        for (int n = 0; n < s->batch; n++) {
            const float *restrict g = dy + n * stride + c * sp, *restrict xp =
                                                                    x + n * stride + c * sp;
            float *restrict d = dx + n * stride + c * sp;
            size_t i = 0;
            for (; i + VBLOCK <= sp; i += VBLOCK)
                for (int j = 0; j < VBLOCK; j++)
                    d[i + j] = k * (g[i + j] - m_dy - (xp[i + j] - mean) * m_xdy);
            for (; i < sp; i++)
                d[i] = k * (g[i] - m_dy - (xp[i] - mean) * m_xdy);
        }
    }
}

/* ---- concatenation, residual add ------------------------------------------------------------- */

void cpu_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                        const size_t *sizes, float *y) {
    (void)ctx;
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        float *yn = y + n * total;
        for (int i = 0; i < ninputs; i++) {
            memcpy(yn, xs[i] + n * sizes[i], sizes[i] * sizeof(float));
            yn += sizes[i];
        }
    }
}

void cpu_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                         const float *dy, float *const *dxs) {
    (void)ctx;
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        const float *g = dy + n * total;
        for (int i = 0; i < ninputs; i++) {
            if (dxs[i]) memcpy(dxs[i] + n * sizes[i], g, sizes[i] * sizeof(float));
            g += sizes[i];
        }
    }
}

void cpu_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y) {
    (void)ctx;
    size_t i = 0; /* y may alias a or b: each block is loaded before it is stored */
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float t[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = a[i + j] + b[i + j];
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = t[j];
    }
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db) {
    (void)ctx;
    if (da && da != dy) memcpy(da, dy, n * sizeof(float));
    if (db && db != dy) memcpy(db, dy, n * sizeof(float));
}

/* ---- dropout --------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void cpu_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                         uint8_t *mask) {
    (void)ctx;
    const float keep_scale = 1.0f / (1.0f - s->rate);
    for (int i = 0; i < s->batch; i++) {
        const uint64_t g = s->first_sample + (uint64_t)i;
        const uint64_t key = mix64(s->seed ^ (g * 0x9E3779B97F4A7C15ULL));
        const float *xi = x + (size_t)i * s->size;
        float *yi = y + (size_t)i * s->size;
        uint8_t *mi = mask + (size_t)i * s->size;
        for (size_t j = 0; j < s->size; j++) {
            const float u = (float)(mix64(key + j) >> 40) * (1.0f / 16777216.0f);
            const int keep = u >= s->rate;
            mi[j] = (uint8_t)keep;
            yi[j] = keep ? xi[j] * keep_scale : 0.0f;
        }
    }
}

void cpu_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                          const float *dy, float *dx) {
    (void)ctx;
    const float keep_scale = 1.0f / (1.0f - s->rate);
    const size_t n = (size_t)s->batch * s->size;
    for (size_t i = 0; i < n; i++)
        dx[i] = mask[i] ? dy[i] * keep_scale : 0.0f;
}

/* ---- embedding ------------------------------------------------------------------------------- */

static int token(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

void cpu_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                           const float *w, float *y) {
    (void)ctx;
    const size_t dim = (size_t)s->dim;
    for (int r = 0; r < s->rows; r++) {
        const int t = token(ids[r], s->vocab);
        if (t >= 0)
            memcpy(y + r * dim, w + (size_t)t * dim, dim * sizeof(float));
        else
            memset(y + r * dim, 0, dim * sizeof(float));
    }
}

void cpu_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *dy, float *dw) {
    const size_t dim = (size_t)s->dim;
    memset(dw, 0, (size_t)s->vocab * dim * sizeof(float));
    for (int r = 0; r < s->rows; r++) {
        const int t = token(ids[r], s->vocab);
        if (t >= 0) cpu_axpy(ctx, dim, 1.0f, dy + r * dim, dw + (size_t)t * dim);
    }
}

/* ---- LSTM ------------------------------------------------------------------------------------ */
/* reserve: gates[batch, seq, 4H] (i, f, g, o after their activations), cell[batch, seq, H].
 * work:    dgates[batch, seq, 4H], hprev[batch, seq, H] (h_{t-1}, zero at t = 0),
 *          dh_rec[batch, H] (gradient reaching h_{t-1} through W_hh), dcell[batch, H],
 *          zeros[H] (c_{-1}, and the recurrent gradient of the last step). */

size_t cpu_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    return (size_t)s->batch * s->seq * 5 * (size_t)s->hidden * sizeof(float);
}

size_t cpu_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s) {
    (void)ctx;
    const size_t bt = (size_t)s->batch * s->seq, h = (size_t)s->hidden;
    return (bt * 5 * h + 2 * (size_t)s->batch * h + h) * sizeof(float);
}

static float *lstm_zeros(const LstmShape *s, void *work) {
    const size_t bt = (size_t)s->batch * s->seq, h = (size_t)s->hidden;
    return (float *)work + bt * 5 * h + 2 * (size_t)s->batch * h;
}

/* One step for one sample: the gates' pre-activations gi, gf, gg, go [H] become activations (in
 * place); c = f*c_prev + i*g, h = o*tanh(c). Separate restrict parameters (rather than offsets into
 * one array) are what lets GCC vectorise the VBLOCK loop. */
static void lstm_cell(float *restrict gi, float *restrict gf, float *restrict gg,
                      float *restrict go, const float *restrict c_prev, float *restrict c,
                      float *restrict h, int hidden) {
    int j = 0;
#define LSTM_STEP(J)                                                                               \
    do {                                                                                           \
        const float i = cpu_sigmoidf(gi[J]), f = cpu_sigmoidf(gf[J]);                              \
        const float gv = cpu_tanhf(gg[J]), o = cpu_sigmoidf(go[J]);                                \
        const float cv = f * c_prev[J] + i * gv;                                                   \
        gi[J] = i, gf[J] = f, gg[J] = gv, go[J] = o;                                               \
        c[J] = cv;                                                                                 \
        h[J] = o * cpu_tanhf(cv);                                                                  \
    } while (0)
    for (; j + VBLOCK <= hidden; j += VBLOCK)
        for (int u = 0; u < VBLOCK; u++)
            LSTM_STEP(j + u);
    for (; j < hidden; j++)
        LSTM_STEP(j);
#undef LSTM_STEP
}

void cpu_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                      const float *b, float *y, void *reserve, void *work) {
    (void)ctx;
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    float *gates = reserve;               /* [B, T, 4H] */
    float *cell = gates + bt * (size_t)G; /* [B, T, H] */
    float *zeros = lstm_zeros(s, work);   /* [H] */
    if (B <= 0 || T <= 0 || H <= 0) return;
    memset(zeros, 0, (size_t)H * sizeof(float));

    /* gates[BT, 4H] = b + x[BT, D] W[:, :D]^T: the input part of every step in one GEMM */
    for (size_t r = 0; r < bt; r++)
        memcpy(gates + r * G, b, (size_t)G * sizeof(float));
    if (D > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)bt, G, D, 1.0f, x, D, w, ldw,
                    1.0f, gates, G);
    for (int t = 0; t < T; t++) {
        if (t > 0) /* += h_{t-1}[B, H] W[:, D:]^T, both strided over the sequence */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, G, H, 1.0f,
                        y + (size_t)(t - 1) * H, T * H, w + D, ldw, 1.0f, gates + (size_t)t * G,
                        T * G);
        for (int n = 0; n < B; n++) {
            const size_t row = (size_t)n * T + t;
            float *g = gates + row * G;
            lstm_cell(g, g + H, g + 2 * H, g + 3 * H, t > 0 ? cell + (row - 1) * H : zeros,
                      cell + row * H, y + row * H, H);
        }
    }
}

/* One step back for one sample: from dh = dy + dh_rec (dh_rec: the gradient through W_hh from
 * step t+1, zeros at the last step) and the carried dc, the gates' pre-activation gradients
 * di, df, dg, do [H]; dc becomes the gradient reaching c_{t-1}. */
static void lstm_cell_backward(const float *restrict ai, const float *restrict af,
                               const float *restrict ag, const float *restrict ao,
                               const float *restrict c, const float *restrict c_prev,
                               const float *restrict dy, const float *restrict dh_rec,
                               float *restrict dc, float *restrict di, float *restrict df,
                               float *restrict dgg, float *restrict dout, int hidden) {
    int j = 0;
#define LSTM_BACK_STEP(J)                                                                          \
    do {                                                                                           \
        const float i = ai[J], f = af[J], g = ag[J], o = ao[J];                                    \
        const float dh = dy[J] + dh_rec[J];                                                        \
        const float tc = cpu_tanhf(c[J]);                                                          \
        const float dcv = dc[J] + dh * o * (1.0f - tc * tc);                                       \
        di[J] = dcv * g * i * (1.0f - i);                                                          \
        df[J] = dcv * c_prev[J] * f * (1.0f - f);                                                  \
        dgg[J] = dcv * i * (1.0f - g * g);                                                         \
        dout[J] = dh * tc * o * (1.0f - o);                                                        \
        dc[J] = dcv * f;                                                                           \
    } while (0)
    for (; j + VBLOCK <= hidden; j += VBLOCK)
        for (int u = 0; u < VBLOCK; u++)
            LSTM_BACK_STEP(j + u);
    for (; j < hidden; j++)
        LSTM_BACK_STEP(j);
#undef LSTM_BACK_STEP
}

void cpu_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                       float *db, void *work) {
    const int B = s->batch, T = s->seq, D = s->in, H = s->hidden, G = 4 * H, ldw = D + H;
    const size_t bt = (size_t)B * T;
    const float *gates = reserve, *cell = gates + bt * (size_t)G;
    float *dgates = work;                   /* [B, T, 4H] */
    float *hprev = dgates + bt * (size_t)G; /* [B, T, H] */
    float *dh_rec = hprev + bt * (size_t)H; /* [B, H] */
    float *dcell = dh_rec + (size_t)B * H;  /* [B, H] */
    float *zeros = lstm_zeros(s, work);     /* [H] */
    memset(dw, 0, (size_t)G * ldw * sizeof(float));
    memset(db, 0, (size_t)G * sizeof(float));
    if (B <= 0 || T <= 0 || H <= 0) {
        if (dx && B > 0 && T > 0) memset(dx, 0, bt * D * sizeof(float));
        return;
    }
    memset(zeros, 0, (size_t)H * sizeof(float));
    memset(dcell, 0, (size_t)B * H * sizeof(float));
    for (int t = T - 1; t >= 0; t--) {
        for (int n = 0; n < B; n++) {
            const size_t row = (size_t)n * T + t;
            const float *a = gates + row * G;
            float *dg = dgates + row * G;
            lstm_cell_backward(a, a + H, a + 2 * H, a + 3 * H, cell + row * H,
                               t > 0 ? cell + (row - 1) * H : zeros, dy + row * H,
                               t < T - 1 ? dh_rec + (size_t)n * H : zeros, dcell + (size_t)n * H,
                               dg, dg + H, dg + 2 * H, dg + 3 * H, H);
        }
        if (t > 0) /* dh_rec[B, H] = dgates_t[B, 4H] W[:, D:] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, H, G, 1.0f,
                        dgates + (size_t)t * G, T * G, w + D, ldw, 0.0f, dh_rec, H);
    }

    /* dW[:, :D] = dgates^T x, dW[:, D:] = dgates^T hprev, db = column sums: one GEMM each */
    for (int n = 0; n < B; n++) {
        memset(hprev + (size_t)n * T * H, 0, (size_t)H * sizeof(float));
        memcpy(hprev + ((size_t)n * T + 1) * H, y + (size_t)n * T * H,
               (size_t)(T - 1) * H * sizeof(float));
    }
    if (D > 0)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, G, D, (int)bt, 1.0f, dgates, G, x, D,
                    0.0f, dw, ldw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, G, H, (int)bt, 1.0f, dgates, G, hprev, H,
                0.0f, dw + D, ldw);
    for (size_t r = 0; r < bt; r++)
        cpu_axpy(ctx, (size_t)G, 1.0f, dgates + r * G, db);
    if (dx && D > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)bt, D, G, 1.0f, dgates, G, w,
                    ldw, 0.0f, dx, D);
}
