/* cpu_im2col.c - im2col / col2im for the CPU convolution (see cpu_im2col.h for the layout).
 *
 * For each (c, ki, kj) row of the column matrix, the output positions whose input falls inside the
 * image form one rectangle [oh_lo, oh_hi) x [ow_lo, ow_hi); everything outside it is padding. The
 * ranges are computed once per row so the inner loops are branch-free copies (stride 1: contiguous,
 * vectorisable) with the padded borders zero-filled around them. The col2im accumulation is blocked
 * by 8 (plus a tail) so that GCC's -O2 cost model vectorises it (see cpu.c, "Vectorisation").
 */
#include "cpu_im2col.h"

#include <string.h>

/* Output indices o in [*lo, *hi) with 0 <= o*stride + offset < in_len, clamped to [0, out_len). */
static void valid_range(int out_len, int in_len, int stride, int offset, int *lo, int *hi) {
    int l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int h = in_len - 1 - offset < 0 ? 0 : (in_len - 1 - offset) / stride + 1;
    if (h > out_len) h = out_len;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

void cpu_im2col(const ConvShape *s, const float *restrict x, float *restrict col) {
    const int k = s->k, stride = s->stride, pad = s->pad;
    const int h_in = s->h_in, w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t plane = (size_t)h_in * w_in;
    const size_t hw = (size_t)h_out * w_out;

    for (int c = 0; c < s->c_in; c++) {
        const float *xc = x + c * plane; /* x[c, h_in, w_in] */
        for (int ki = 0; ki < k; ki++) {
            int oh_lo, oh_hi;
            valid_range(h_out, h_in, stride, ki - pad, &oh_lo, &oh_hi);
            for (int kj = 0; kj < k; kj++) {
                const int off = kj - pad; /* iw = ow*stride + off */
                int ow_lo, ow_hi;
                valid_range(w_out, w_in, stride, off, &ow_lo, &ow_hi);
                float *row = col + ((size_t)(c * k + ki) * k + kj) * hw; /* row[h_out, w_out] */

                memset(row, 0, (size_t)oh_lo * w_out * sizeof(float));
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    const float *src = xc + (size_t)(oh * stride + ki - pad) * w_in;
                    float *dst = row + (size_t)oh * w_out;
                    for (int ow = 0; ow < ow_lo; ow++)
                        dst[ow] = 0.0f;
                    if (stride == 1) {
                        memcpy(dst + ow_lo, src + ow_lo + off,
                               (size_t)(ow_hi - ow_lo) * sizeof(float));
                    } else {
                        for (int ow = ow_lo; ow < ow_hi; ow++)
                            dst[ow] = src[ow * stride + off];
                    }
                    for (int ow = ow_hi; ow < w_out; ow++)
                        dst[ow] = 0.0f;
                }
                memset(row + (size_t)oh_hi * w_out, 0,
                       (size_t)(h_out - oh_hi) * w_out * sizeof(float));
            }
        }
    }
}

void cpu_col2im(const ConvShape *s, const float *restrict col, float *restrict dx) {
    const int k = s->k, stride = s->stride, pad = s->pad;
    const int h_in = s->h_in, w_in = s->w_in, h_out = s->h_out, w_out = s->w_out;
    const size_t plane = (size_t)h_in * w_in;
    const size_t hw = (size_t)h_out * w_out;

    memset(dx, 0, (size_t)s->c_in * plane * sizeof(float));
    for (int c = 0; c < s->c_in; c++) {
        float *dxc = dx + c * plane; /* dx[c, h_in, w_in] */
        for (int ki = 0; ki < k; ki++) {
            int oh_lo, oh_hi;
            valid_range(h_out, h_in, stride, ki - pad, &oh_lo, &oh_hi);
            for (int kj = 0; kj < k; kj++) {
                const int off = kj - pad;
                int ow_lo, ow_hi;
                valid_range(w_out, w_in, stride, off, &ow_lo, &ow_hi);
                const float *row = col + ((size_t)(c * k + ki) * k + kj) * hw;
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    float *dst = dxc + (size_t)(oh * stride + ki - pad) * w_in;
                    const float *src = row + (size_t)oh * w_out;
                    if (stride == 1) {
                        float *d = dst + (ow_lo + off); /* ow_lo + off >= 0 by construction */
                        const float *sr = src + ow_lo;
                        const int len = ow_hi - ow_lo;
                        int j = 0;
                        for (; j + 8 <= len; j += 8)
                            for (int u = 0; u < 8; u++)
                                d[j + u] += sr[j + u];
                        for (; j < len; j++)
                            d[j] += sr[j];
                    } else {
                        for (int ow = ow_lo; ow < ow_hi; ow++)
                            dst[ow * stride + off] += src[ow];
                    }
                }
            }
        }
    }
}
