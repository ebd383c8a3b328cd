/* ref_transformer.c - naive reference kernels: layer normalisation, GELU (tanh approximation)
 * (kernels/cpu_transformer.c).
 * Textbook definitions (backend.h) as nested loops with double accumulators; backward passes
 * written as gathers from the chain rule, recomputing what the forward made, sharing no structure
 * with the backend's GEMM formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- layer normalisation ---- */

/* the mean and 1/sqrt(biased variance + eps) of row r, in double */
static void ln_stats(const LayerNormShape *s, const float *x, int r, double *mean, double *rstd) {
    double sum = 0.0, sq = 0.0;
    for (int c = 0; c < s->dim; c++)
        sum += x[(size_t)r * s->dim + c];
    *mean = sum / s->dim;
    for (int c = 0; c < s->dim; c++) {
        double d = x[(size_t)r * s->dim + c] - *mean;
        sq += d * d;
    }
    *rstd = 1.0 / sqrt(sq / s->dim + (double)s->eps);
}

void ref_layernorm_forward(const LayerNormShape *s, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd) {
    for (int r = 0; r < s->rows; r++) {
        double m, rs;
        ln_stats(s, x, r, &m, &rs);
        mean[r] = (float)m, rstd[r] = (float)rs;
        for (int c = 0; c < s->dim; c++) {
            size_t i = (size_t)r * s->dim + c;
            y[i] = (float)((x[i] - m) * rs * gamma[c] + beta[c]);
        }
    }
}

/* dx[r,c] = sum over c' of dy[r,c'] gamma[c'] d xhat[r,c'] / d x[r,c], with
 * d xhat[c'] / d x[c] = rstd ([c == c'] - 1/dim - xhat[c] xhat[c'] / dim) */
void ref_layernorm_backward(const LayerNormShape *s, const float *x, const float *gamma,
                            const float *dy, float *dx, float *dgamma, float *dbeta) {
    const int n = s->dim;
    for (int c = 0; c < n; c++) {
        double dg = 0.0, db = 0.0;
        for (int r = 0; r < s->rows; r++) {
            double m, rs;
            ln_stats(s, x, r, &m, &rs);
            size_t i = (size_t)r * n + c;
            dg += dy[i] * (x[i] - m) * rs;
            db += dy[i];
        }
        dgamma[c] = (float)dg, dbeta[c] = (float)db;
    }
    for (int r = 0; r < s->rows; r++) {
        double m, rs;
        ln_stats(s, x, r, &m, &rs);
        const float *xr = x + (size_t)r * n, *dyr = dy + (size_t)r * n;
        for (int c = 0; c < n; c++) {
            double acc = 0.0, xc = (xr[c] - m) * rs;
            for (int k = 0; k < n; k++) {
                double xk = (xr[k] - m) * rs;
                double dxhat = rs * ((c == k ? 1.0 : 0.0) - 1.0 / n - xc * xk / n);
                acc += (double)dyr[k] * gamma[k] * dxhat;
            }
            dx[(size_t)r * n + c] = (float)acc;
        }
    }
}

/* ---- GELU ---- */

static const double gelu_k = 0.79788456080286535588; /* sqrt(2/pi) */

void ref_gelu_forward(size_t n, const float *x, float *y) {
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = (float)(0.5 * v * (1.0 + tanh(gelu_k * (v + 0.044715 * v * v * v))));
    }
}

/* d/dx of 0.5 x (1 + tanh u): 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u' */
void ref_gelu_backward(size_t n, const float *x, const float *dy, float *dx) {
    for (size_t i = 0; i < n; i++) {
        double v = x[i], th = tanh(gelu_k * (v + 0.044715 * v * v * v));
        double du = gelu_k * (1.0 + 3.0 * 0.044715 * v * v);
        dx[i] = (float)(dy[i] * (0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du));
    }
}
