/* ref_pool.c - naive reference kernels: max pooling (padding 0 or not), average and global average
 * pooling (kernels/cpu/cpu_pool.c). Textbook definitions as nested loops with double accumulators;
 * backward passes written as gathers, sharing no structure with the backends' GEMM/im2col
 * formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- max and average pooling (padding 0 or not) ---- */

static size_t pp_in(const PoolShape *s, size_t plane, int ih, int iw) {
    return plane * s->h_in * s->w_in + (size_t)ih * s->w_in + iw;
}
static size_t pp_out(const PoolShape *s, size_t plane, int oh, int ow) {
    return plane * s->h_out * s->w_out + (size_t)oh * s->w_out + ow;
}

/* position of the first maximum of window (oh, ow) inside the image, -1 if none */
static int pool_argmax(const PoolShape *s, const float *p, int oh, int ow) {
    int best = -1;
    for (int ki = 0; ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
            int ih = oh * s->stride - s->pad + ki, iw = ow * s->stride - s->pad + kj;
            if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
            int idx = ih * s->w_in + iw;
            if (best < 0 || p[idx] > p[best]) best = idx;
        }
    return best;
}

void ref_maxpool_forward(const PoolShape *s, const float *x, float *y, int32_t *argmax) {
    size_t planes = (size_t)s->batch * s->c;
    for (size_t pl = 0; pl < planes; pl++)
        for (int oh = 0; oh < s->h_out; oh++)
            for (int ow = 0; ow < s->w_out; ow++) {
                int a = pool_argmax(s, x + pp_in(s, pl, 0, 0), oh, ow);
                y[pp_out(s, pl, oh, ow)] = a >= 0 ? x[pp_in(s, pl, 0, 0) + a] : 0.0f;
                argmax[pp_out(s, pl, oh, ow)] = a;
            }
}

void ref_maxpool_backward(const PoolShape *s, const float *x, const float *dy, float *dx) {
    size_t planes = (size_t)s->batch * s->c, in_plane = (size_t)s->h_in * s->w_in;
    double *acc = malloc(in_plane * sizeof *acc);
    if (!acc) abort();
    for (size_t pl = 0; pl < planes; pl++) {
        for (size_t i = 0; i < in_plane; i++)
            acc[i] = 0.0;
        for (int oh = 0; oh < s->h_out; oh++)
            for (int ow = 0; ow < s->w_out; ow++) {
                int a = pool_argmax(s, x + pp_in(s, pl, 0, 0), oh, ow);
                if (a >= 0) acc[a] += dy[pp_out(s, pl, oh, ow)];
            }
        for (size_t i = 0; i < in_plane; i++)
            dx[pl * in_plane + i] = (float)acc[i];
    }
    free(acc);
}

void ref_avgpool_forward(const PoolShape *s, const float *x, float *y) {
    size_t planes = (size_t)s->batch * s->c;
    for (size_t pl = 0; pl < planes; pl++)
        for (int oh = 0; oh < s->h_out; oh++)
            for (int ow = 0; ow < s->w_out; ow++) {
                double acc = 0.0;
                for (int ki = 0; ki < s->k; ki++)
                    for (int kj = 0; kj < s->k; kj++) {
                        int ih = oh * s->stride - s->pad + ki, iw = ow * s->stride - s->pad + kj;
                        if (ih >= 0 && ih < s->h_in && iw >= 0 && iw < s->w_in)
                            acc += x[pp_in(s, pl, ih, iw)];
                    }
                y[pp_out(s, pl, oh, ow)] = (float)(acc / (s->k * s->k));
            }
}

void ref_avgpool_backward(const PoolShape *s, const float *dy, float *dx) {
    size_t planes = (size_t)s->batch * s->c;
    for (size_t pl = 0; pl < planes; pl++)
        for (int ih = 0; ih < s->h_in; ih++)
            for (int iw = 0; iw < s->w_in; iw++) {
                double acc = 0.0; /* every output whose window covers (ih, iw) */
                for (int oh = 0; oh < s->h_out; oh++)
                    for (int ow = 0; ow < s->w_out; ow++) {
                        int top = oh * s->stride - s->pad, left = ow * s->stride - s->pad;
                        if (ih >= top && ih < top + s->k && iw >= left && iw < left + s->k)
                            acc += dy[pp_out(s, pl, oh, ow)];
                    }
                dx[pp_in(s, pl, ih, iw)] = (float)(acc / (s->k * s->k));
            }
}

void ref_global_avgpool_forward(size_t planes, size_t plane, const float *x, float *y) {
    for (size_t p = 0; p < planes; p++) {
        double acc = 0.0;
        for (size_t i = 0; i < plane; i++)
            acc += x[p * plane + i];
        y[p] = (float)(acc / plane);
    }
}

void ref_global_avgpool_backward(size_t planes, size_t plane, const float *dy, float *dx) {
    for (size_t p = 0; p < planes; p++)
        for (size_t i = 0; i < plane; i++)
            dx[p * plane + i] = (float)((double)dy[p] / plane);
}
