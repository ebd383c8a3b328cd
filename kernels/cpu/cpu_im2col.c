/* cpu_im2col.c - im2col / col2im for the CPU convolution (see cpu_im2col.h for the layout), over
 * a block of output rows [oh0, oh1) so that the convolution can work on a column block that
 * stays in cache (kernels/cpu/cpu_conv.c).
 *
 * For each (c, ki, kj) row of the column matrix, the output positions whose input falls inside the
 * image form one rectangle [oh_lo, oh_hi) x [ow_lo, ow_hi); everything outside it is padding. The
 * ranges are computed once per row so the inner loops are branch-free copies (stride 1: contiguous,
 * vectorisable) with the padded borders zero-filled around them. The col2im accumulation is blocked
 * by 8 (plus a tail) so that GCC's -O2 cost model vectorises it (see cpu_vec.h).
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

void cpu_im2col(const ConvShape *s, const float *x, float *col) {
    cpu_im2col_rows(s, x, 0, s->h_out, col, (size_t)s->h_out * s->w_out);
}

void cpu_col2im(const ConvShape *s, const float *col, float *dx) {
    memset(dx, 0, (size_t)s->c_in * s->h_in * s->w_in * sizeof(float));
    cpu_col2im_rows_add(s, col, 0, s->h_out, (size_t)s->h_out * s->w_out, dx);
}

void cpu_im2col_rows(const ConvShape *s, const float *restrict x, int oh0, int oh1,
                     float *restrict col, size_t ld) {
    const int k = s->k, stride = s->stride, pad = s->pad;
    const int h_in = s->h_in, w_in = s->w_in, w_out = s->w_out;
    const size_t plane = (size_t)h_in * w_in;

    for (int c = 0; c < s->c_in; c++) {
        const float *xc = x + c * plane; /* x[c, h_in, w_in] */
        for (int ki = 0; ki < k; ki++) {
            int oh_lo, oh_hi;
            valid_range(s->h_out, h_in, stride, ki - pad, &oh_lo, &oh_hi);
            oh_lo = oh_lo < oh0 ? oh0 : (oh_lo > oh1 ? oh1 : oh_lo); /* within the block */
            oh_hi = oh_hi > oh1 ? oh1 : (oh_hi < oh_lo ? oh_lo : oh_hi);
            for (int kj = 0; kj < k; kj++) {
                const int off = kj - pad; /* iw = ow*stride + off */
                int ow_lo, ow_hi;
                valid_range(w_out, w_in, stride, off, &ow_lo, &ow_hi);
                /* row[oh1 - oh0, w_out]: output rows oh0.. of this (c, ki, kj) */
                float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;

                memset(row, 0, (size_t)(oh_lo - oh0) * w_out * sizeof(float));
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    const float *src = xc + (size_t)(oh * stride + ki - pad) * w_in;
                    float *dst = row + (size_t)(oh - oh0) * w_out;
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
                memset(row + (size_t)(oh_hi - oh0) * w_out, 0,
                       (size_t)(oh1 - oh_hi) * w_out * sizeof(float));
            }
        }
    }
}

void cpu_col2im_rows_add(const ConvShape *s, const float *restrict col, int oh0, int oh1, size_t ld,
                         float *restrict dx) {
    const int k = s->k, stride = s->stride, pad = s->pad;
    const int h_in = s->h_in, w_in = s->w_in, w_out = s->w_out;
    const size_t plane = (size_t)h_in * w_in;

    for (int c = 0; c < s->c_in; c++) {
        float *dxc = dx + c * plane; /* dx[c, h_in, w_in] */
        for (int ki = 0; ki < k; ki++) {
            int oh_lo, oh_hi;
            valid_range(s->h_out, h_in, stride, ki - pad, &oh_lo, &oh_hi);
            oh_lo = oh_lo < oh0 ? oh0 : (oh_lo > oh1 ? oh1 : oh_lo);
            oh_hi = oh_hi > oh1 ? oh1 : (oh_hi < oh_lo ? oh_lo : oh_hi);
            for (int kj = 0; kj < k; kj++) {
                const int off = kj - pad;
                int ow_lo, ow_hi;
                valid_range(w_out, w_in, stride, off, &ow_lo, &ow_hi);
                const float *row = col + ((size_t)(c * k + ki) * k + kj) * ld;
                for (int oh = oh_lo; oh < oh_hi; oh++) {
                    float *dst = dxc + (size_t)(oh * stride + ki - pad) * w_in;
                    const float *src = row + (size_t)(oh - oh0) * w_out;
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
