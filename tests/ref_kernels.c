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

/* ---- pooling ---- */

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

/* ---- LRN ---- */

static size_t lrn_idx(const LrnShape *s, int n, int c, size_t pix) {
    return ((size_t)n * s->c + c) * s->h * s->w + pix;
}

/* 1 when channel c is in the window of channel centre: [centre - size/2, centre + (size-1)/2] */
static int lrn_in_window(const LrnShape *s, int centre, int c) {
    return c >= centre - s->size / 2 && c <= centre + (s->size - 1) / 2;
}

static double lrn_scale(const LrnShape *s, const float *x, int n, int centre, size_t pix) {
    double sum = 0.0;
    for (int c = 0; c < s->c; c++)
        if (lrn_in_window(s, centre, c))
            sum += (double)x[lrn_idx(s, n, c, pix)] * x[lrn_idx(s, n, c, pix)];
    return s->bias + (double)s->alpha / s->size * sum;
}

void ref_lrn_forward(const LrnShape *s, const float *x, float *y) {
    size_t hw = (size_t)s->h * s->w;
    for (int n = 0; n < s->batch; n++)
        for (int c = 0; c < s->c; c++)
            for (size_t p = 0; p < hw; p++)
                y[lrn_idx(s, n, c, p)] =
                    (float)(x[lrn_idx(s, n, c, p)] * pow(lrn_scale(s, x, n, c, p), -s->beta));
}

/* dy[c'] / dx[c] = [c' == c] s[c']^-beta
 *                  - beta * x[c'] * s[c']^(-beta-1) * (alpha/size) * 2 x[c] * [c in window(c')] */
void ref_lrn_backward(const LrnShape *s, const float *x, const float *dy, float *dx) {
    size_t hw = (size_t)s->h * s->w;
    for (int n = 0; n < s->batch; n++)
        for (int c = 0; c < s->c; c++)
            for (size_t p = 0; p < hw; p++) {
                double acc = 0.0;
                for (int c2 = 0; c2 < s->c; c2++) {
                    double sc = lrn_scale(s, x, n, c2, p);
                    double d = c2 == c ? pow(sc, -s->beta) : 0.0;
                    if (lrn_in_window(s, c2, c))
                        d -= s->beta * x[lrn_idx(s, n, c2, p)] * pow(sc, -s->beta - 1) *
                             (double)s->alpha / s->size * 2.0 * x[lrn_idx(s, n, c, p)];
                    acc += dy[lrn_idx(s, n, c2, p)] * d;
                }
                dx[lrn_idx(s, n, c, p)] = (float)acc;
            }
}

/* ---- batch normalisation ---- */

static size_t bn_idx(const BnShape *s, int n, int c, int i) {
    return ((size_t)n * s->c + c) * s->spatial + i;
}

static void bn_stats(const BnShape *s, const float *x, int c, double *mean, double *var) {
    double count = (double)s->batch * s->spatial, sum = 0.0, sq = 0.0;
    for (int n = 0; n < s->batch; n++)
        for (int i = 0; i < s->spatial; i++)
            sum += x[bn_idx(s, n, c, i)];
    *mean = sum / count;
    for (int n = 0; n < s->batch; n++)
        for (int i = 0; i < s->spatial; i++)
            sq += (x[bn_idx(s, n, c, i)] - *mean) * (x[bn_idx(s, n, c, i)] - *mean);
    *var = sq / count;
}

void ref_batchnorm_forward_train(const BnShape *s, const float *x, const float *gamma,
                                 const float *beta, float *y, float *mean, float *invstd,
                                 float *running_mean, float *running_var) {
    double count = (double)s->batch * s->spatial;
    for (int c = 0; c < s->c; c++) {
        double m, v;
        bn_stats(s, x, c, &m, &v);
        double is = 1.0 / sqrt(v + s->eps);
        mean[c] = (float)m, invstd[c] = (float)is;
        running_mean[c] = (float)((1.0 - s->momentum) * running_mean[c] + s->momentum * m);
        running_var[c] = (float)((1.0 - s->momentum) * running_var[c] +
                                 s->momentum * (count > 1 ? v * count / (count - 1) : v));
        for (int n = 0; n < s->batch; n++)
            for (int i = 0; i < s->spatial; i++)
                y[bn_idx(s, n, c, i)] =
                    (float)(gamma[c] * (x[bn_idx(s, n, c, i)] - m) * is + beta[c]);
    }
}

void ref_batchnorm_forward_infer(const BnShape *s, const float *x, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, float *y) {
    for (int c = 0; c < s->c; c++)
        for (int n = 0; n < s->batch; n++)
            for (int i = 0; i < s->spatial; i++)
                y[bn_idx(s, n, c, i)] =
                    (float)(gamma[c] * (x[bn_idx(s, n, c, i)] - running_mean[c]) /
                                sqrt((double)running_var[c] + s->eps) +
                            beta[c]);
}

/* dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)) */
void ref_batchnorm_backward(const BnShape *s, const float *x, const float *gamma, const float *dy,
                            float *dx, float *dgamma, float *dbeta) {
    double count = (double)s->batch * s->spatial;
    for (int c = 0; c < s->c; c++) {
        double m, v;
        bn_stats(s, x, c, &m, &v);
        double is = 1.0 / sqrt(v + s->eps), sum_dy = 0.0, sum_dy_xhat = 0.0;
        for (int n = 0; n < s->batch; n++)
            for (int i = 0; i < s->spatial; i++) {
                sum_dy += dy[bn_idx(s, n, c, i)];
                sum_dy_xhat += dy[bn_idx(s, n, c, i)] * (x[bn_idx(s, n, c, i)] - m) * is;
            }
        dbeta[c] = (float)sum_dy, dgamma[c] = (float)sum_dy_xhat;
        for (int n = 0; n < s->batch; n++)
            for (int i = 0; i < s->spatial; i++) {
                double xhat = (x[bn_idx(s, n, c, i)] - m) * is;
                dx[bn_idx(s, n, c, i)] =
                    (float)(gamma[c] * is *
                            (dy[bn_idx(s, n, c, i)] - sum_dy / count - xhat * sum_dy_xhat / count));
            }
    }
}

/* ---- concatenation, add ---- */

void ref_concat_forward(int batch, int ninputs, const float *const *xs, const size_t *sizes,
                        float *y) {
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        size_t off = 0;
        for (int i = 0; i < ninputs; i++)
            for (size_t j = 0; j < sizes[i]; j++)
                y[n * total + off++] = xs[i][n * sizes[i] + j];
    }
}

void ref_concat_backward(int batch, int ninputs, const size_t *sizes, const float *dy,
                         float *const *dxs) {
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        size_t off = 0;
        for (int i = 0; i < ninputs; i++)
            for (size_t j = 0; j < sizes[i]; j++, off++)
                if (dxs[i]) dxs[i][n * sizes[i] + j] = dy[n * total + off];
    }
}

void ref_add_forward(size_t n, const float *a, const float *b, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

/* ---- dropout ---- */

static uint64_t ref_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ref_dropout_forward(const DropoutShape *s, const float *x, float *y, uint8_t *mask) {
    for (int i = 0; i < s->batch; i++) {
        uint64_t g = s->first_sample + (uint64_t)i;
        uint64_t key = ref_mix64(s->seed ^ (g * 0x9E3779B97F4A7C15ULL));
        for (size_t j = 0; j < s->size; j++) {
            double u = (double)(ref_mix64(key + j) >> 40) / 16777216.0;
            size_t e = (size_t)i * s->size + j;
            mask[e] = u >= s->rate;
            y[e] = mask[e] ? (float)(x[e] / (1.0 - s->rate)) : 0.0f;
        }
    }
}

void ref_dropout_backward(const DropoutShape *s, const uint8_t *mask, const float *dy, float *dx) {
    for (size_t e = 0; e < (size_t)s->batch * s->size; e++)
        dx[e] = mask[e] ? (float)(dy[e] / (1.0 - s->rate)) : 0.0f;
}

/* ---- embedding ---- */

void ref_embedding_forward(const EmbeddingShape *s, const float *ids, const float *w, float *y) {
    for (int r = 0; r < s->rows; r++) {
        int id = (int)ids[r];
        for (int d = 0; d < s->dim; d++)
            y[(size_t)r * s->dim + d] =
                id >= 0 && id < s->vocab ? w[(size_t)id * s->dim + d] : 0.0f;
    }
}

void ref_embedding_backward(const EmbeddingShape *s, const float *ids, const float *dy, float *dw) {
    for (int v = 0; v < s->vocab; v++)
        for (int d = 0; d < s->dim; d++) {
            double acc = 0.0; /* gather: every row whose id is v */
            for (int r = 0; r < s->rows; r++)
                if ((int)ids[r] == v) acc += dy[(size_t)r * s->dim + d];
            dw[(size_t)v * s->dim + d] = (float)acc;
        }
}

/* ---- LSTM ---- */

static double sigmoid(double x) {
    return 1.0 / (1.0 + exp(-x));
}

/* States of every step in double: act[b][t][4H] (i, f, g, o), c[b][t][H], h[b][t][H]. */
typedef struct {
    double *act, *c, *h;
} LstmStates;

static LstmStates lstm_run(const LstmShape *s, const float *x, const float *w, const float *b) {
    int B = s->batch, T = s->seq, D = s->in, H = s->hidden;
    LstmStates st = {calloc((size_t)B * T * 4 * H, sizeof(double)),
                     calloc((size_t)B * T * H, sizeof(double)),
                     calloc((size_t)B * T * H, sizeof(double))};
    if (!st.act || !st.c || !st.h) abort();
    for (int n = 0; n < B; n++)
        for (int t = 0; t < T; t++) {
            size_t row = (size_t)n * T + t;
            for (int gate = 0; gate < 4 * H; gate++) {
                double z = b[gate];
                for (int d = 0; d < D; d++)
                    z += (double)w[(size_t)gate * (D + H) + d] * x[row * D + d];
                for (int k = 0; k < H && t > 0; k++)
                    z += (double)w[(size_t)gate * (D + H) + D + k] * st.h[(row - 1) * H + k];
                int kind = gate / H; /* 0 i, 1 f, 2 g, 3 o */
                st.act[row * 4 * H + gate] = kind == 2 ? tanh(z) : sigmoid(z);
            }
            for (int j = 0; j < H; j++) {
                const double *a = st.act + row * 4 * H;
                double c_prev = t > 0 ? st.c[(row - 1) * H + j] : 0.0;
                double c = a[H + j] * c_prev + a[j] * a[2 * H + j];
                st.c[row * H + j] = c;
                st.h[row * H + j] = a[3 * H + j] * tanh(c);
            }
        }
    return st;
}

void ref_lstm_forward(const LstmShape *s, const float *x, const float *w, const float *b,
                      float *y) {
    LstmStates st = lstm_run(s, x, w, b);
    for (size_t i = 0; i < (size_t)s->batch * s->seq * s->hidden; i++)
        y[i] = (float)st.h[i];
    free(st.act), free(st.c), free(st.h);
}

void ref_lstm_backward(const LstmShape *s, const float *x, const float *w, const float *b,
                       const float *dy, float *dx, float *dw, float *db) {
    int B = s->batch, T = s->seq, D = s->in, H = s->hidden, ldw = D + H;
    LstmStates st = lstm_run(s, x, w, b);
    double *gw = calloc((size_t)4 * H * ldw, sizeof(double)),
           *gb = calloc((size_t)4 * H, sizeof(double));
    double *gx = calloc((size_t)B * T * D, sizeof(double)),
           *dz = calloc((size_t)4 * H, sizeof(double));
    double *dh = calloc((size_t)H, sizeof(double)), *dc = calloc((size_t)H, sizeof(double));
    double *dh_prev = calloc((size_t)H, sizeof(double));
    if (!gw || !gb || !gx || !dz || !dh || !dc || !dh_prev) abort();
    for (int n = 0; n < B; n++) {
        for (int j = 0; j < H; j++)
            dh[j] = dc[j] = 0.0; /* from step t+1 */
        for (int t = T - 1; t >= 0; t--) {
            size_t row = (size_t)n * T + t;
            const double *a = st.act + row * 4 * H;
            for (int j = 0; j < H; j++) {
                double h_grad = dh[j] + dy[row * H + j];
                double tc = tanh(st.c[row * H + j]);
                double c_grad = dc[j] + h_grad * a[3 * H + j] * (1 - tc * tc);
                double c_prev = t > 0 ? st.c[(row - 1) * H + j] : 0.0;
                dz[j] = c_grad * a[2 * H + j] * a[j] * (1 - a[j]);
                dz[H + j] = c_grad * c_prev * a[H + j] * (1 - a[H + j]);
                dz[2 * H + j] = c_grad * a[j] * (1 - a[2 * H + j] * a[2 * H + j]);
                dz[3 * H + j] = h_grad * tc * a[3 * H + j] * (1 - a[3 * H + j]);
                dc[j] = c_grad * a[H + j];
            }
            for (int k = 0; k < H; k++)
                dh_prev[k] = 0.0;
            for (int gate = 0; gate < 4 * H; gate++) {
                gb[gate] += dz[gate];
                for (int d = 0; d < D; d++) {
                    gw[(size_t)gate * ldw + d] += dz[gate] * x[row * D + d];
                    gx[row * D + d] += dz[gate] * w[(size_t)gate * ldw + d];
                }
                for (int k = 0; k < H; k++) {
                    if (t > 0) gw[(size_t)gate * ldw + D + k] += dz[gate] * st.h[(row - 1) * H + k];
                    dh_prev[k] += dz[gate] * w[(size_t)gate * ldw + D + k];
                }
            }
            for (int k = 0; k < H; k++)
                dh[k] = dh_prev[k];
        }
    }
    for (size_t i = 0; i < (size_t)4 * H * ldw; i++)
        dw[i] = (float)gw[i];
    for (int i = 0; i < 4 * H; i++)
        db[i] = (float)gb[i];
    if (dx)
        for (size_t i = 0; i < (size_t)B * T * D; i++)
            dx[i] = (float)gx[i];
    free(gw), free(gb), free(gx), free(dz), free(dh), free(dc), free(dh_prev), free(st.act),
        free(st.c), free(st.h);
}
