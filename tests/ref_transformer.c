/* ref_transformer.c - naive reference kernels: layer normalisation, GELU (tanh approximation),
 * token and position embedding, causal multi-head self-attention (kernels/cpu/cpu_transformer.c).
 * Textbook definitions (backend.h) as nested loops with double accumulators; backward passes
 * written as gathers from the chain rule, recomputing what the forward made, sharing no structure
 * with the backend's GEMM formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) {
        fprintf(stderr, "ref_transformer: out of memory\n");
        exit(2);
    }
    return p;
}

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

/* ---- token and position embedding ---- */

static int ref_token(float id, int vocab) {
    double v = id;
    return v >= 0.0 && v < vocab ? (int)v : -1; /* NaN: out of range */
}

void ref_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                        float *y) {
    for (int b = 0; b < s->batch; b++)
        for (int t = 0; t < s->seq; t++) {
            int id = ref_token(ids[(size_t)b * s->seq + t], s->vocab);
            for (int d = 0; d < s->dim; d++) {
                double v = wpe[(size_t)t * s->dim + d];
                if (id >= 0) v += wte[(size_t)id * s->dim + d];
                y[((size_t)b * s->seq + t) * s->dim + d] = (float)v;
            }
        }
}

void ref_tokpos_backward(const TokPosShape *s, const float *ids, const float *dy, float *dwte,
                         float *dwpe) {
    double *acc = dalloc((size_t)s->vocab * s->dim); /* scatter: each position adds to its id */
    for (size_t r = 0; r < (size_t)s->batch * s->seq; r++) {
        int id = ref_token(ids[r], s->vocab);
        for (int d = 0; id >= 0 && d < s->dim; d++)
            acc[(size_t)id * s->dim + d] += dy[r * s->dim + d];
    }
    for (size_t i = 0; i < (size_t)s->vocab * s->dim; i++)
        dwte[i] = (float)acc[i];
    free(acc);
    for (int t = 0; t < s->seq; t++)
        for (int d = 0; d < s->dim; d++) {
            double sum = 0.0;
            for (int b = 0; b < s->batch; b++)
                sum += dy[((size_t)b * s->seq + t) * s->dim + d];
            dwpe[(size_t)t * s->dim + d] = (float)sum;
        }
}

/* ---- causal self-attention ---- */

/* element d of q (which 0), k (1) or v (2) of head h at position t of sample b */
static double qkv_at(const AttentionShape *s, const float *qkv, int which, int b, int t, int h,
                     int d) {
    size_t c = (size_t)s->heads * s->head_dim;
    return qkv[((size_t)b * s->seq + t) * 3 * c + which * c + (size_t)h * s->head_dim + d];
}

/* p[t][u] = softmax over u <= t of q_t . k_u / sqrt(head_dim), 0 for u > t */
static void ref_probs(const AttentionShape *s, const float *qkv, int b, int h, double *p) {
    const int T = s->seq;
    const double scale = 1.0 / sqrt((double)s->head_dim);
    for (int t = 0; t < T; t++) {
        double *row = p + (size_t)t * T, mx = -INFINITY, sum = 0.0;
        for (int u = 0; u < T; u++) {
            row[u] = 0.0;
            if (u > t) continue; /* the mask */
            for (int d = 0; d < s->head_dim; d++)
                row[u] += qkv_at(s, qkv, 0, b, t, h, d) * qkv_at(s, qkv, 1, b, u, h, d);
            row[u] *= scale;
            mx = row[u] > mx ? row[u] : mx;
        }
        for (int u = 0; u <= t; u++)
            sum += row[u] = exp(row[u] - mx);
        for (int u = 0; u <= t; u++)
            row[u] /= sum;
    }
}

void ref_attention_probs(const AttentionShape *s, const float *qkv, float *p) {
    const size_t TT = (size_t)s->seq * s->seq;
    double *pd = dalloc(TT);
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < s->heads; h++) {
            ref_probs(s, qkv, b, h, pd);
            for (size_t e = 0; e < TT; e++)
                p[((size_t)b * s->heads + h) * TT + e] = (float)pd[e];
        }
    free(pd);
}

void ref_attention_forward(const AttentionShape *s, const float *qkv, float *y) {
    const int T = s->seq, D = s->head_dim;
    const size_t c = (size_t)s->heads * D;
    double *p = dalloc((size_t)T * T);
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < s->heads; h++) {
            ref_probs(s, qkv, b, h, p);
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int u = 0; u <= t; u++)
                        acc += p[(size_t)t * T + u] * qkv_at(s, qkv, 2, b, u, h, d);
                    y[((size_t)b * T + t) * c + (size_t)h * D + d] = (float)acc;
                }
        }
    free(p);
}

/* With S the scaled scores and P = softmax(S) per row: dP[t][u] = dy_t . v_u,
 * dS[t][u] = P[t][u] (dP[t][u] - sum over w of P[t][w] dP[t][w]); then
 * dq_t = scale sum_u dS[t][u] k_u, dk_u = scale sum_t dS[t][u] q_t, dv_u = sum_t P[t][u] dy_t. */
void ref_attention_backward(const AttentionShape *s, const float *qkv, const float *dy,
                            float *dqkv) {
    const int T = s->seq, D = s->head_dim;
    const size_t c = (size_t)s->heads * D;
    const double scale = 1.0 / sqrt((double)D);
    double *p = dalloc((size_t)T * T), *ds = dalloc((size_t)T * T);
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < s->heads; h++) {
            ref_probs(s, qkv, b, h, p);
            const float *dyb = dy + (size_t)b * T * c + (size_t)h * D;
            for (int t = 0; t < T; t++) {
                double dot = 0.0;
                for (int u = 0; u <= t; u++) {
                    double dp = 0.0;
                    for (int d = 0; d < D; d++)
                        dp += dyb[(size_t)t * c + d] * qkv_at(s, qkv, 2, b, u, h, d);
                    ds[(size_t)t * T + u] = dp;
                    dot += p[(size_t)t * T + u] * dp;
                }
                for (int u = 0; u < T; u++)
                    ds[(size_t)t * T + u] =
                        u <= t ? p[(size_t)t * T + u] * (ds[(size_t)t * T + u] - dot) : 0.0;
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (int u = 0; u < T; u++) {
                        dq += ds[(size_t)t * T + u] * qkv_at(s, qkv, 1, b, u, h, d);
                        dk += ds[(size_t)u * T + t] * qkv_at(s, qkv, 0, b, u, h, d);
                        dv += p[(size_t)u * T + t] * dyb[(size_t)u * c + d];
                    }
                    float *o = dqkv + ((size_t)b * T + t) * 3 * c + (size_t)h * D + d;
                    o[0] = (float)(scale * dq), o[c] = (float)(scale * dk), o[2 * c] = (float)dv;
                }
        }
    free(p), free(ds);
}
