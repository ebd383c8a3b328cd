/* ref_conv.c - naive reference kernels: the convolution (kernels/cpu/cpu_conv.c, cpu_im2col.c,
 * cpu_winograd.c). Textbook definitions as nested loops with double accumulators; backward passes
 * written as gathers, sharing no structure with the backends' GEMM/im2col formulation
 * (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- convolution ---- */

/* flat indices into x[n,c_in,h_in,w_in], W[c_out,c_in,k,k], y[n,c_out,h_out,w_out] */
static size_t xi(const ConvShape *s, int n, int c, int h, int w) {
    return (((size_t)n * s->c_in + c) * s->h_in + h) * s->w_in + w;
}
static size_t wi(const ConvShape *s, int co, int ci, int ki, int kj) {
    return (((size_t)co * s->c_in + ci) * s->k + ki) * s->k + kj;
}
static size_t yi(const ConvShape *s, int n, int co, int oh, int ow) {
    return (((size_t)n * s->c_out + co) * s->h_out + oh) * s->w_out + ow;
}

void ref_conv_forward(const ConvShape *s, const float *x, const float *w, const float *b,
                      float *y) {
    for (int n = 0; n < s->batch; n++)
        for (int co = 0; co < s->c_out; co++)
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++) {
                    double acc = b ? b[co] : 0.0;
                    for (int ci = 0; ci < s->c_in; ci++)
                        for (int ki = 0; ki < s->k; ki++)
                            for (int kj = 0; kj < s->k; kj++) {
                                int ih = oh * s->stride - s->pad + ki;
                                int iw = ow * s->stride - s->pad + kj;
                                if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
                                acc += (double)w[wi(s, co, ci, ki, kj)] * x[xi(s, n, ci, ih, iw)];
                            }
                    y[yi(s, n, co, oh, ow)] = (float)acc;
                }
}

void ref_conv_backward(const ConvShape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db) {
    /* dW[co,ci,ki,kj] = sum over n, oh, ow of dy[n,co,oh,ow] * x[n,ci,ih,iw] */
    for (int co = 0; co < s->c_out; co++)
        for (int ci = 0; ci < s->c_in; ci++)
            for (int ki = 0; ki < s->k; ki++)
                for (int kj = 0; kj < s->k; kj++) {
                    double acc = 0.0;
                    for (int n = 0; n < s->batch; n++)
                        for (int oh = 0; oh < s->h_out; oh++)
                            for (int ow = 0; ow < s->w_out; ow++) {
                                int ih = oh * s->stride - s->pad + ki;
                                int iw = ow * s->stride - s->pad + kj;
                                if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
                                acc += (double)dy[yi(s, n, co, oh, ow)] * x[xi(s, n, ci, ih, iw)];
                            }
                    dw[wi(s, co, ci, ki, kj)] = (float)acc;
                }

    /* db[co] = sum over n, oh, ow of dy[n,co,oh,ow] */
    for (int co = 0; co < s->c_out; co++) {
        double acc = 0.0;
        for (int n = 0; n < s->batch; n++)
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++)
                    acc += dy[yi(s, n, co, oh, ow)];
        db[co] = (float)acc;
    }

    if (!dx) return;
    /* dx[n,ci,ih,iw] = sum over co, ki, kj of W[co,ci,ki,kj] * dy[n,co,oh,ow] for every output
     * position with oh*stride - pad + ki == ih and ow*stride - pad + kj == iw */
    for (int n = 0; n < s->batch; n++)
        for (int ci = 0; ci < s->c_in; ci++)
            for (int ih = 0; ih < s->h_in; ih++)
                for (int iw = 0; iw < s->w_in; iw++) {
                    double acc = 0.0;
                    for (int co = 0; co < s->c_out; co++)
                        for (int ki = 0; ki < s->k; ki++)
                            for (int kj = 0; kj < s->k; kj++) {
                                int th = ih + s->pad - ki, tw = iw + s->pad - kj;
                                if (th < 0 || tw < 0 || th % s->stride || tw % s->stride) continue;
                                int oh = th / s->stride, ow = tw / s->stride;
                                if (oh >= s->h_out || ow >= s->w_out) continue;
                                acc += (double)w[wi(s, co, ci, ki, kj)] * dy[yi(s, n, co, oh, ow)];
                            }
                    dx[xi(s, n, ci, ih, iw)] = (float)acc;
                }
}
