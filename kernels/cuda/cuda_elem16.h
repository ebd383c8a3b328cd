/* cuda_elem16.h - what one thread of the CUDA backend's NHWC 16-bit kernels computes (the
 * activation format NHWC bf16/fp16, backend.h's ActFormat; kernels in cuda_act16_kernels.cu; batch
 * norm's in cuda_bn16.h, on the vector access below), written once and compiled twice, as
 * cuda_elem.h is: as __host__ __device__ functions by nvcc and as plain C by
 * tests/test_device_nhwc.c, which plays every thread of a launch on the CPU and compares with the
 * CPU backend run on the widened values in NCHW. Values are 16-bit patterns (dt16) widened to fp32
 * (base/half_bits.h) for arithmetic and rounded once per output to nearest even; sums run in fp32
 * or double in the CPU backend's order where it has one, so a 16-bit output is the CPU's fp32
 * result of the same inputs, rounded. Indices: an NHWC tensor [n][p][c] of c channels and hw pixels
 * (p = h*w_size + w), as kernels/common/layout.h's layout_nhwc. Plain C11 and C++17. */
#ifndef DTBENCH_CUDA_ELEM16_H
#define DTBENCH_CUDA_ELEM16_H

#include "backend.h"   /* defines: PoolShape, LrnShape, DropoutShape */
#include "cuda_elem.h" /* defines: DT_HD, dt_window, dt_outputs_of, dt_lrn_*, dt_bn_*, dt_dropout_* */
#include "half_bits.h" /* defines: gc_bf16_*, gc_fp16_*, gc_bits, gc_float */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef uint16_t dt16; /* a bf16 (half 0) or IEEE half (half 1) pattern */

DT_HD float dt16_f(dt16 h, int half) {
    return half ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
}
DT_HD dt16 dt16_r(float v, int half) {
    return half ? gc_fp16_from_float(v) : gc_bf16_from_float(v);
}

/* ---- vector access: a unit of vec consecutive values of a row (8, 4 or 1) in one access ------ */
#ifdef __CUDACC__
#define DT16_UNROLL_LOOP _Pragma("unroll")
#else
#define DT16_UNROLL_LOOP
#endif

/* up to 8 values of a row: a unit of 8 (one 16-byte access), 4 (8 bytes) or 1 */
typedef struct {
    dt16 v[8];
} __attribute__((aligned(16))) Dt16x8;
typedef struct {
    dt16 v[4];
} __attribute__((aligned(8))) Dt16x4;

/* unit i (vec values from offset i) of p, in one access */
DT_HD Dt16x8 dt16_ld(const dt16 *p, size_t i, int vec) {
    Dt16x8 q = {{0}};
    if (vec == 8) {
#ifdef __CUDACC__
        q = *(const Dt16x8 *)(p + i);
#else
        memcpy(&q, p + i, sizeof q);
#endif
    } else if (vec == 4) {
#ifdef __CUDACC__
        const Dt16x4 h = *(const Dt16x4 *)(p + i);
#else
        Dt16x4 h;
        memcpy(&h, p + i, sizeof h);
#endif
        for (int j = 0; j < 4; j++)
            q.v[j] = h.v[j];
    } else {
        q.v[0] = p[i];
    }
    return q;
}
DT_HD void dt16_st(dt16 *p, size_t i, int vec, Dt16x8 q) {
    if (vec == 8) {
#ifdef __CUDACC__
        *(Dt16x8 *)(p + i) = q;
#else
        memcpy(p + i, &q, sizeof q);
#endif
    } else if (vec == 4) {
        Dt16x4 h;
        for (int j = 0; j < 4; j++)
            h.v[j] = q.v[j];
#ifdef __CUDACC__
        *(Dt16x4 *)(p + i) = h;
#else
        memcpy(p + i, &h, sizeof h);
#endif
    } else {
        p[i] = q.v[0];
    }
}

/* vec 32-bit values (int32 argmax, fp32 LRN scale) of one unit, in vec / 4 accesses */
typedef struct {
    uint32_t v[4];
} __attribute__((aligned(16))) Dt32x4;
DT_HD void dt32_ld(const void *p, size_t i, int vec, uint32_t *out) {
    const uint32_t *q = (const uint32_t *)p + i;
    for (int h = 0; h < vec; h += 4) {
        Dt32x4 t = {{0}};
        if (vec >= 4) {
#ifdef __CUDACC__
            t = *(const Dt32x4 *)(q + h);
#else
            memcpy(&t, q + h, sizeof t);
#endif
        } else {
            t.v[0] = q[0];
        }
        for (int j = 0; j < 4 && h + j < vec; j++)
            out[h + j] = t.v[j];
    }
}
DT_HD void dt32_st(void *p, size_t i, int vec, const uint32_t *in) {
    uint32_t *q = (uint32_t *)p + i;
    for (int h = 0; h < vec; h += 4) {
        if (vec >= 4) {
            Dt32x4 t;
            for (int j = 0; j < 4; j++)
                t.v[j] = in[h + j];
#ifdef __CUDACC__
            *(Dt32x4 *)(q + h) = t;
#else
            memcpy(q + h, &t, sizeof t);
#endif
        } else {
            q[0] = in[0];
        }
    }
}

/* Unit u of an NHWC tensor [n][h][w][c] read vec channels at a time (u = pixel * c/vec + channel
 * unit): its sample *n, row *y, column *x and first channel *c0. 32-bit arithmetic: the launchers
 * take fewer than 2^32 units. */
DT_HD void dt16_unit_pos(uint32_t u, int c, int vec, int h, int w, int *n, int *y, int *x,
                         int *c0) {
    const uint32_t units = (uint32_t)(c / vec), pix = u / units, row = pix / (uint32_t)w;
    const uint32_t sample = row / (uint32_t)h;
    *c0 = (int)(u - pix * units) * vec;
    *x = (int)(pix - row * (uint32_t)w);
    *y = (int)(row - sample * (uint32_t)h);
    *n = (int)sample;
}

/* ---- index maps between NCHW [n][c][hw] and NHWC [n][hw][c] --------------------------------- */
/* The NHWC offset of the element at NCHW offset i, and the NCHW offset of NHWC offset o. With
 * n = k_out and hw = kh*kw they map a filter KCRS <-> KRSC too (layout.h's filter_to_krsc). */
DT_HD size_t dt_nhwc_of_nchw(size_t i, size_t c, size_t hw) {
    const size_t n = i / (c * hw), r = i - n * c * hw, ch = r / hw, p = r - ch * hw;
    return (n * hw + p) * c + ch;
}
DT_HD size_t dt_nchw_of_nhwc(size_t o, size_t c, size_t hw) {
    const size_t n = o / (hw * c), r = o - n * hw * c, p = r / c, ch = r - p * c;
    return (n * c + ch) * hw + p;
}

/* ---- element-wise ------------------------------------------------------------------------- */
/* the CPU's ReLU (v > 0 ? v : 0) and its backward (y > 0 ? dy : 0) on the widened values */
DT_HD dt16 dt16_relu(dt16 x, int half) {
    return dt16_f(x, half) > 0.0f ? x : (dt16)0;
}
DT_HD dt16 dt16_relu_grad(dt16 y, dt16 dy, int half) {
    return dt16_f(y, half) > 0.0f ? dy : (dt16)0;
}
/* a + b (the residual add; act_add's y += x) */
DT_HD dt16 dt16_add(dt16 a, dt16 b, int half) {
    return dt16_r(dt16_f(a, half) + dt16_f(b, half), half);
}
/* e / d, and e % d in *r, in 32-bit arithmetic where both fit (every tensor of fewer than 2^32
 * values): a GPU has no 64-bit divide instruction but a long software sequence, which an element
 * kernel would run per element. The same result either way. */
DT_HD size_t dt16_divmod(size_t e, size_t d, size_t *r) {
    if ((e | d) <= 0xffffffffu) {
        const uint32_t e32 = (uint32_t)e, d32 = (uint32_t)d, q = e32 / d32;
        *r = e32 - q * d32;
        return q;
    }
    const size_t q = e / d;
    *r = e - q * d;
    return q;
}
/* y = x + b[c] of a bias over rows of channels (a convolution's or fc's bias, in fp32) */
DT_HD dt16 dt16_bias(dt16 x, float b, int half) {
    return dt16_r(dt16_f(x, half) + b, half);
}
/* the same on unit u of vec values (16-byte accesses for 8), read whole before it is written
 * (in place allowed) */
DT_HD void dt16_relu_unit(const dt16 *x, dt16 *y, size_t u, int vec, int half) {
    const Dt16x8 a = dt16_ld(x, u * (size_t)vec, vec);
    Dt16x8 o;
    for (int j = 0; j < vec; j++)
        o.v[j] = dt16_relu(a.v[j], half);
    dt16_st(y, u * (size_t)vec, vec, o);
}
DT_HD void dt16_relu_back_unit(const dt16 *y, const dt16 *dy, dt16 *dx, size_t u, int vec,
                               int half) {
    const Dt16x8 a = dt16_ld(y, u * (size_t)vec, vec), g = dt16_ld(dy, u * (size_t)vec, vec);
    Dt16x8 o;
    for (int j = 0; j < vec; j++)
        o.v[j] = dt16_relu_grad(a.v[j], g.v[j], half);
    dt16_st(dx, u * (size_t)vec, vec, o);
}
DT_HD void dt16_add_unit(const dt16 *a, const dt16 *b, dt16 *y, size_t u, int vec, int half) {
    const Dt16x8 p = dt16_ld(a, u * (size_t)vec, vec), q = dt16_ld(b, u * (size_t)vec, vec);
    Dt16x8 o;
    for (int j = 0; j < vec; j++)
        o.v[j] = dt16_add(p.v[j], q.v[j], half);
    dt16_st(y, u * (size_t)vec, vec, o);
}
/* dropout: element q of a sample stored NHWC [hw][c] (s->hw > 0) is element j of the NCHW mask
 * definition (backend.h's DropoutShape); kept values are scaled as the CPU does */
DT_HD uint64_t dt16_dropout_j(size_t q, int c, int hw) {
    if (hw <= 0) return (uint64_t)q;
    size_t ch;
    const size_t p = dt16_divmod(q, (size_t)c, &ch);
    return (uint64_t)ch * (uint64_t)hw + p;
}
/* whether element e of the batch (sample e / size) is kept; first: the batch's first sample
 * (DropoutShape.first_sample plus the origin read from memory) */
DT_HD int dt16_dropout_keep_at(const DropoutShape *s, uint64_t first, size_t e) {
    size_t q;
    const size_t i = dt16_divmod(e, s->size, &q);
    const uint64_t key = dt_dropout_key(s->seed, first + (uint64_t)i);
    return dt_dropout_keep(key, dt16_dropout_j(q, s->c, s->hw), s->rate);
}
DT_HD dt16 dt16_dropout(dt16 x, int keep, float keep_scale, int half) {
    return keep ? dt16_r(dt16_f(x, half) * keep_scale, half) : (dt16)0;
}

/* ---- pooling (PoolShape; NHWC x[n][h_in][w_in][c], y[n][h_out][w_out][c]) ----------------
 * One thread per unit of vec channels of one pixel (dt16_unit_pos), 16-byte accesses for vec 8.
 * argmax records ih*w_in + iw, as the NCHW kernels do (-1: a window wholly in the padding). */

/* output unit u: each channel's window in row-major order, strict > (the first maximum stays) */
DT_HD void dt16_maxpool_unit(const PoolShape *s, int vec, int half, const dt16 *x, uint32_t u,
                             dt16 *y, int32_t *argmax) {
    int n, oh, ow, c0;
    dt16_unit_pos(u, s->c, vec, s->h_out, s->w_out, &n, &oh, &ow, &c0);
    const size_t C = (size_t)s->c;
    const dt16 *xp = x + (size_t)n * s->h_in * s->w_in * C + (size_t)c0;
    float m[8];
    uint32_t a[8];
    Dt16x8 best = {{0}};
    for (int j = 0; j < vec; j++)
        m[j] = -INFINITY, a[j] = (uint32_t)-1;
    for (int kh = 0; kh < s->k; kh++) {
        const int ih = oh * s->stride - s->pad + kh;
        if (ih < 0 || ih >= s->h_in) continue;
        for (int kw = 0; kw < s->k; kw++) {
            const int iw = ow * s->stride - s->pad + kw;
            if (iw < 0 || iw >= s->w_in) continue;
            const Dt16x8 q = dt16_ld(xp, ((size_t)ih * s->w_in + iw) * C, vec);
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++) {
                const float v = dt16_f(q.v[j], half);
                if (v > m[j]) m[j] = v, a[j] = (uint32_t)(ih * s->w_in + iw), best.v[j] = q.v[j];
            }
        }
    }
    const size_t o = (((size_t)n * s->h_out + oh) * s->w_out + ow) * C + (size_t)c0;
    for (int j = 0; j < vec; j++)
        if ((int32_t)a[j] < 0) best.v[j] = 0;
    dt16_st(y, o, vec, best);
    dt32_st(argmax, o, vec, a);
}
/* input unit u: per channel the dy of every output whose maximum it is, added in output order
 * (the CPU's); one pass over argmax and dy, no atomics (a gather: windows may overlap) */
DT_HD void dt16_maxpool_back_unit(const PoolShape *s, int vec, int half, const int32_t *argmax,
                                  const dt16 *dy, uint32_t u, dt16 *dx) {
    int n, ih, iw, c0, h0, h1, w0, w1;
    dt16_unit_pos(u, s->c, vec, s->h_in, s->w_in, &n, &ih, &iw, &c0);
    const size_t C = (size_t)s->c;
    const uint32_t me = (uint32_t)(ih * s->w_in + iw);
    dt_outputs_of(ih, s->stride, s->pad, s->k, s->h_out, &h0, &h1);
    dt_outputs_of(iw, s->stride, s->pad, s->k, s->w_out, &w0, &w1);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int oh = h0; oh < h1; oh++)
        for (int ow = w0; ow < w1; ow++) {
            const size_t o = (((size_t)n * s->h_out + oh) * s->w_out + ow) * C + (size_t)c0;
            uint32_t am[8];
            dt32_ld(argmax, o, vec, am);
            const Dt16x8 g = dt16_ld(dy, o, vec);
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++)
                if (am[j] == me) acc[j] += dt16_f(g.v[j], half);
        }
    Dt16x8 out;
    for (int j = 0; j < vec; j++)
        out.v[j] = dt16_r(acc[j], half);
    dt16_st(dx, (((size_t)n * s->h_in + ih) * s->w_in + iw) * C + (size_t)c0, vec, out);
}
/* average pooling of output unit u, padding counted as zeros */
DT_HD void dt16_avgpool_unit(const PoolShape *s, int vec, int half, const dt16 *x, uint32_t u,
                             dt16 *y) {
    int n, oh, ow, c0, h0, h1, w0, w1;
    dt16_unit_pos(u, s->c, vec, s->h_out, s->w_out, &n, &oh, &ow, &c0);
    const size_t C = (size_t)s->c;
    const dt16 *xp = x + (size_t)n * s->h_in * s->w_in * C + (size_t)c0;
    dt_window(oh, s->stride, s->pad, s->k, s->h_in, &h0, &h1);
    dt_window(ow, s->stride, s->pad, s->k, s->w_in, &w0, &w1);
    float sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) {
            const Dt16x8 q = dt16_ld(xp, ((size_t)ih * s->w_in + iw) * C, vec);
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++)
                sum[j] += dt16_f(q.v[j], half);
        }
    Dt16x8 out;
    for (int j = 0; j < vec; j++)
        out.v[j] = dt16_r(sum[j] * dt_avgpool_inv(s->k), half);
    dt16_st(y, (((size_t)n * s->h_out + oh) * s->w_out + ow) * C + (size_t)c0, vec, out);
}
DT_HD void dt16_avgpool_back_unit(const PoolShape *s, int vec, int half, const dt16 *dy,
                                  uint32_t u, dt16 *dx) {
    int n, ih, iw, c0, h0, h1, w0, w1;
    dt16_unit_pos(u, s->c, vec, s->h_in, s->w_in, &n, &ih, &iw, &c0);
    const size_t C = (size_t)s->c;
    const float inv = dt_avgpool_inv(s->k);
    dt_outputs_of(ih, s->stride, s->pad, s->k, s->h_out, &h0, &h1);
    dt_outputs_of(iw, s->stride, s->pad, s->k, s->w_out, &w0, &w1);
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int oh = h0; oh < h1; oh++)
        for (int ow = w0; ow < w1; ow++) {
            const Dt16x8 g =
                dt16_ld(dy, (((size_t)n * s->h_out + oh) * s->w_out + ow) * C + (size_t)c0, vec);
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++)
                acc[j] += dt16_f(g.v[j], half) * inv;
        }
    Dt16x8 out;
    for (int j = 0; j < vec; j++)
        out.v[j] = dt16_r(acc[j], half);
    dt16_st(dx, (((size_t)n * s->h_in + ih) * s->w_in + iw) * C + (size_t)c0, vec, out);
}
/* global average pooling of x[n][plane][c] -> y[n][c], output o = n*c + ch: the CPU's 8
 * interleaved partial sums (cpu_vsum), so the mean is the CPU's bit for bit before rounding */
DT_HD dt16 dt16_gap_fwd(const dt16 *x, size_t o, size_t c, size_t plane, int half) {
    const dt16 *p = x + o / c * plane * c + o % c;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    size_t i = 0;
    for (; i + 8 <= plane; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += dt16_f(p[(i + (size_t)j) * c], half);
    float sum = 0.0f;
    for (int j = 0; j < 8; j++)
        sum += acc[j];
    for (; i < plane; i++)
        sum += dt16_f(p[i * c], half);
    return dt16_r(sum * (1.0f / (float)plane), half);
}
DT_HD dt16 dt16_gap_bwd(const dt16 *dy, size_t i, size_t c, size_t plane, int half) {
    const size_t n = i / (plane * c);
    return dt16_r(dt16_f(dy[n * c + i % c], half) * (1.0f / (float)plane), half);
}
/* ... for unit u of vec channels of one pixel (c a multiple of vec) */
DT_HD void dt16_gap_bwd_unit(const dt16 *dy, dt16 *dx, size_t u, size_t c, size_t plane, int vec,
                             int half) {
    const size_t i = u * (size_t)vec, n = i / (plane * c);
    const Dt16x8 g = dt16_ld(dy, n * c + i % c, vec);
    Dt16x8 o;
    for (int j = 0; j < vec; j++)
        o.v[j] = dt16_r(dt16_f(g.v[j], half) * (1.0f / (float)plane), half);
    dt16_st(dx, i, vec, o);
}

/* ---- LRN across channels (LrnShape), element i of NHWC x: the channels are contiguous --------
 * scale[i] (fp32, NHWC order) is kept for the backward, as the NCHW kernels keep theirs. */
DT_HD dt16 dt16_lrn_fwd(const LrnShape *s, const dt16 *x, size_t i, int half, float *scale) {
    const int c = (int)(i % (size_t)s->c);
    const size_t base = i - (size_t)c;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const int c0 = c - before < 0 ? 0 : c - before, c1 = c + after >= s->c ? s->c - 1 : c + after;
    float sum = 0.0f;
    for (int cc = c0; cc <= c1; cc++) {
        const float v = dt16_f(x[base + (size_t)cc], half);
        sum += v * v;
    }
    const float sv = dt_lrn_scale(s->bias, s->alpha / (float)s->size, sum);
    scale[i] = sv;
    return dt16_r(dt16_f(x[i], half) * dt_pow_neg_beta(sv, s->beta), half);
}
DT_HD dt16 dt16_lrn_bwd(const LrnShape *s, const dt16 *x, const dt16 *y, const float *scale,
                        const dt16 *dy, size_t i, int half) {
    const int c = (int)(i % (size_t)s->c);
    const size_t base = i - (size_t)c;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const int c0 = c - after < 0 ? 0 : c - after, c1 = c + before >= s->c ? s->c - 1 : c + before;
    float sum = 0.0f;
    for (int cc = c0; cc <= c1; cc++) {
        const size_t j = base + (size_t)cc;
        sum += dt_lrn_back_term(dt16_f(dy[j], half), dt16_f(y[j], half), scale[j]);
    }
    const float k = 2.0f * s->alpha * s->beta / (float)s->size;
    return dt16_r(dt_lrn_back(dt16_f(dy[i], half), scale[i], dt16_f(x[i], half), sum, k, s->beta),
                  half);
}


/* ---- LRN on units of vec channels of one pixel (dt16_unit_pos's u) ----------------------------
 * The same arithmetic as dt16_lrn_fwd / dt16_lrn_bwd per channel, with each value and term a
 * unit's windows share computed once: the window's channels outside [0, c) add +0 (bit-neutral:
 * a sum that starts at +0 is never -0), so every window has `size` terms at fixed places and a
 * kernel that takes size as a constant keeps them in registers. Needs vec + size - 1 <=
 * DT16_LRN_SPAN; the per-element functions above take any size. */
#define DT16_LRN_SPAN 24

DT_HD void dt16_lrn_fwd_unit(const LrnShape *s, int size, int vec, int half, const dt16 *x,
                             uint32_t u, dt16 *y, float *scale) {
    const int c = s->c, before = size / 2;
    const uint32_t units = (uint32_t)(c / vec), pix = u / units;
    const int c0 = (int)(u - pix * units) * vec;
    const size_t at = (size_t)pix * (size_t)c + (size_t)c0;
    const Dt16x8 own = dt16_ld(x, at, vec);
    float sq[DT16_LRN_SPAN]; /* the square of channel c0 - before + k */
    DT16_UNROLL_LOOP
    for (int k = 0; k < vec + size - 1; k++) {
        const int cc = c0 - before + k;
        float v = 0.0f;
        if (k >= before && k < before + vec)
            v = dt16_f(own.v[k - before], half);
        else if (cc >= 0 && cc < c)
            v = dt16_f(x[at - (size_t)c0 + (size_t)cc], half);
        sq[k] = v * v;
    }
    Dt16x8 out;
    uint32_t sc[8];
    DT16_UNROLL_LOOP
    for (int j = 0; j < vec; j++) {
        float sum = 0.0f;
        DT16_UNROLL_LOOP
        for (int i = 0; i < size; i++)
            sum += sq[j + i];
        const float sv = dt_lrn_scale(s->bias, s->alpha / (float)s->size, sum);
        sc[j] = gc_bits(sv);
        out.v[j] = dt16_r(dt16_f(own.v[j], half) * dt_pow_neg_beta(sv, s->beta), half);
    }
    dt16_st(y, at, vec, out);
    dt32_st(scale, at, vec, sc);
}

DT_HD void dt16_lrn_bwd_unit(const LrnShape *s, int size, int vec, int half, const dt16 *x,
                             const dt16 *y, const float *scale, const dt16 *dy, uint32_t u,
                             dt16 *dx) {
    const int c = s->c, after = (size - 1) / 2;
    const uint32_t units = (uint32_t)(c / vec), pix = u / units;
    const int c0 = (int)(u - pix * units) * vec;
    const size_t at = (size_t)pix * (size_t)c + (size_t)c0, row = at - (size_t)c0;
    const Dt16x8 gd = dt16_ld(dy, at, vec), gy = dt16_ld(y, at, vec);
    uint32_t gs[8];
    dt32_ld(scale, at, vec, gs);
    float t[DT16_LRN_SPAN]; /* the backward term of channel c0 - after + k */
    DT16_UNROLL_LOOP
    for (int k = 0; k < vec + size - 1; k++) {
        const int cc = c0 - after + k;
        float v = 0.0f;
        if (k >= after && k < after + vec)
            v = dt_lrn_back_term(dt16_f(gd.v[k - after], half), dt16_f(gy.v[k - after], half),
                                 gc_float(gs[k - after]));
        else if (cc >= 0 && cc < c)
            v = dt_lrn_back_term(dt16_f(dy[row + (size_t)cc], half),
                                 dt16_f(y[row + (size_t)cc], half), scale[row + (size_t)cc]);
        t[k] = v;
    }
    const Dt16x8 xv = dt16_ld(x, at, vec);
    const float kk = 2.0f * s->alpha * s->beta / (float)s->size;
    Dt16x8 out;
    DT16_UNROLL_LOOP
    for (int j = 0; j < vec; j++) {
        float sum = 0.0f;
        DT16_UNROLL_LOOP
        for (int i = 0; i < size; i++)
            sum += t[j + i];
        out.v[j] = dt16_r(dt_lrn_back(dt16_f(gd.v[j], half), gc_float(gs[j]),
                                      dt16_f(xv.v[j], half), sum, kk, s->beta),
                          half);
    }
    dt16_st(dx, at, vec, out);
}

#endif
