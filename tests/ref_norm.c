/* ref_norm.c - naive reference kernels: LRN and batch normalisation (kernels/cpu/cpu_norm.c).
 * Textbook definitions as nested loops with double accumulators; backward passes written as
 * gathers, sharing no structure with the backends' GEMM/im2col formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

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
