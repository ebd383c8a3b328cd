/* cpu_pool.c - the CPU backend's pooling: max pooling (unpadded 2x2/2 windows unrolled, every
 * other window and padding through one row-wise vectorised kernel), average pooling with zero
 * padding, and global average pooling. Semantics: backend.h. */
#include "cpu_kernels.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

/* ---- max pooling --------------------------------------------------------------------------- */

/* Unpadded 2x2 windows of stride 2 (LeNet, VGG): an unrolled loop, the same first maximum in
 * row-major window order as the general kernel below. */
static void maxpool_2x2(const PoolShape *s, const float *x, float *y, int32_t *argmax) {
    const int w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t in_plane = (size_t)s->h_in * w_in, out_plane = (size_t)h_out * w_out;
    const size_t planes = (size_t)s->batch * s->c;

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

/* ---- the general kernel, average pooling --------------------------------------------------- */

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

/* x[n,c,h_in,w_in] -> y[n,c,h_out,w_out]: the max over the part of each window inside the image
 * (padding never wins), row by row: for each output row, every window position (kh, kw) in
 * row-major order offers one candidate to every output of the row. argmax = ih*w_in + iw of the
 * first maximum; a window entirely in the padding gives y = 0, argmax -1. */
void cpu_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                         int32_t *argmax) {
    (void)ctx;
    if (s->k == 2 && s->stride == 2 && s->pad == 0) {
        maxpool_2x2(s, x, y, argmax);
        return;
    }
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

/* dx[n,c,h_in,w_in] = 0, then dx[plane][argmax] += dy (overlapping windows may share a maximum) */
void cpu_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
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
void cpu_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y) {
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

void cpu_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx) {
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
void cpu_global_avgpool_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                                float *y) {
    (void)ctx;
    const size_t planes = n * c;
    const float inv = 1.0f / (float)plane;
    for (size_t pl = 0; pl < planes; pl++) {
        y[pl] = cpu_vsum(x + pl * plane, plane) * inv;
    }
}

void cpu_global_avgpool_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *dy,
                                 float *dx) {
    (void)ctx;
    const size_t planes = n * c;
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
