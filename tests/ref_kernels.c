/* ref_kernels.c - naive reference kernels for the backend tests (see ref_kernels.h).
 *
 * Every kernel is the textbook definition as nested loops with double accumulators. The backward
 * passes are written as gathers (each output element sums its own contributions) so they share no
 * structure with the GEMM/im2col formulation of the backends.
 */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- fully connected ---- */

void ref_fc_forward(const FcShape *s, const float *x, const float *w, const float *b, float *y) {
    for (int i = 0; i < s->batch; i++) {
        for (int o = 0; o < s->out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int j = 0; j < s->in; j++)
                acc += (double)x[(size_t)i * s->in + j] * w[(size_t)o * s->in + j];
            y[(size_t)i * s->out + o] = (float)acc;
        }
    }
}

void ref_fc_backward(const FcShape *s, const float *x, const float *w, const float *dy, float *dx,
                     float *dw, float *db) {
    for (int o = 0; o < s->out; o++) {
        for (int j = 0; j < s->in; j++) {
            double acc = 0.0;
            for (int i = 0; i < s->batch; i++)
                acc += (double)dy[(size_t)i * s->out + o] * x[(size_t)i * s->in + j];
            dw[(size_t)o * s->in + j] = (float)acc;
        }
        double acc = 0.0;
        for (int i = 0; i < s->batch; i++)
            acc += dy[(size_t)i * s->out + o];
        db[o] = (float)acc;
    }
    if (!dx) return;
    for (int i = 0; i < s->batch; i++) {
        for (int j = 0; j < s->in; j++) {
            double acc = 0.0;
            for (int o = 0; o < s->out; o++)
                acc += (double)dy[(size_t)i * s->out + o] * w[(size_t)o * s->in + j];
            dx[(size_t)i * s->in + j] = (float)acc;
        }
    }
}

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

/* ---- max pooling ---- */

/* position (ih*w_in + iw) of the first maximum of window (oh, ow) of plane p */
static int pool_argmax(const PoolShape *s, const float *p, int oh, int ow) {
    int best = -1;
    for (int ki = 0; ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
            int idx = (oh * s->stride + ki) * s->w_in + ow * s->stride + kj;
            if (best < 0 || p[idx] > p[best]) best = idx;
        }
    return best;
}

void ref_maxpool_forward(const PoolShape *s, const float *x, float *y, int32_t *argmax) {
    size_t in_plane = (size_t)s->h_in * s->w_in, out_plane = (size_t)s->h_out * s->w_out;
    for (int n = 0; n < s->batch; n++)
        for (int c = 0; c < s->c; c++) {
            size_t pl = (size_t)n * s->c + c;
            const float *p = x + pl * in_plane;
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++) {
                    int a = pool_argmax(s, p, oh, ow);
                    size_t o = pl * out_plane + (size_t)oh * s->w_out + ow;
                    y[o] = p[a];
                    argmax[o] = a;
                }
        }
}

void ref_maxpool_backward(const PoolShape *s, const float *x, const float *dy, float *dx) {
    size_t in_plane = (size_t)s->h_in * s->w_in, out_plane = (size_t)s->h_out * s->w_out;
    double *acc = malloc(in_plane * sizeof *acc);
    if (!acc) abort();
    for (int n = 0; n < s->batch; n++)
        for (int c = 0; c < s->c; c++) {
            size_t pl = (size_t)n * s->c + c;
            for (size_t i = 0; i < in_plane; i++)
                acc[i] = 0.0;
            for (int oh = 0; oh < s->h_out; oh++)
                for (int ow = 0; ow < s->w_out; ow++)
                    acc[pool_argmax(s, x + pl * in_plane, oh, ow)] +=
                        dy[pl * out_plane + (size_t)oh * s->w_out + ow];
            for (size_t i = 0; i < in_plane; i++)
                dx[pl * in_plane + i] = (float)acc[i];
        }
    free(acc);
}

/* ---- ReLU ---- */

void ref_relu_forward(size_t n, const float *x, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ref_relu_backward(size_t n, const float *x, const float *dy, float *dx) {
    for (size_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- softmax cross-entropy ---- */

double ref_softmax_xent(int n, int c, const float *logits, const int32_t *labels, float *dlogits,
                        int *correct) {
    double total = 0.0;
    int hits = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * c;
        int best = 0;
        for (int j = 1; j < c; j++)
            if (z[j] > z[best]) best = j;
        if (best == labels[i]) hits++;

        double sum = 0.0;
        for (int j = 0; j < c; j++)
            sum += exp((double)z[j] - z[best]);
        double log_sum = log(sum) + z[best]; /* log sum_j exp(z_j) */
        total += log_sum - z[labels[i]];
        if (dlogits)
            for (int j = 0; j < c; j++) {
                double softmax = exp((double)z[j] - log_sum);
                double onehot = j == labels[i] ? 1.0 : 0.0;
                dlogits[(size_t)i * c + j] = (float)((softmax - onehot) / n);
            }
    }
    if (correct) *correct = hits;
    return total / n;
}

/* ---- SGD ---- */

void ref_sgd_update(size_t n, float *p, const float *g, float *v, float lr, float momentum,
                    float weight_decay) {
    for (size_t i = 0; i < n; i++) {
        double grad = (double)g[i] + (double)weight_decay * p[i];
        double step = grad;
        if (momentum != 0.0f) {
            double buf = (double)momentum * v[i] + grad;
            v[i] = (float)buf;
            step = buf;
        }
        p[i] = (float)(p[i] - (double)lr * step);
    }
}
