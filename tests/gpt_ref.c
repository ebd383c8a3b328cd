/* gpt_ref.c - float64 references of the transformer members and AdamW (gpt_ref.h). */
#include "gpt_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int token(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

void gref_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                         float *y) {
    const size_t D = (size_t)s->dim;
    for (size_t r = 0; r < (size_t)s->batch * s->seq; r++) {
        const int id = token(ids[r], s->vocab);
        const float *pos = wpe + (r % (size_t)s->seq) * D;
        for (size_t c = 0; c < D; c++)
            y[r * D + c] = id >= 0 ? (float)((double)wte[id * D + c] + pos[c]) : pos[c];
    }
}

void gref_tokpos_backward(const TokPosShape *s, const float *ids, const float *dy, float *dwte,
                          float *dwpe, int *repeats) {
    const size_t D = (size_t)s->dim, rows = (size_t)s->batch * s->seq;
    double *acc = calloc((size_t)s->vocab * D + 1, sizeof(double));
    int *count = calloc((size_t)s->vocab + 1, sizeof(int));
    *repeats = 0;
    for (size_t r = 0; r < rows; r++) {
        const int id = token(ids[r], s->vocab);
        if (id < 0) continue;
        if (++count[id] > *repeats) *repeats = count[id];
        for (size_t c = 0; c < D; c++)
            acc[id * D + c] += dy[r * D + c];
    }
    for (size_t i = 0; i < (size_t)s->vocab * D; i++)
        dwte[i] = (float)acc[i];
    for (size_t t = 0; t < (size_t)s->seq; t++)
        for (size_t c = 0; c < D; c++) {
            double a = 0.0;
            for (int b = 0; b < s->batch; b++)
                a += dy[((size_t)b * s->seq + t) * D + c];
            dwpe[t * D + c] = (float)a;
        }
    free(acc), free(count);
}

void gref_tokpos_dwte_float(const TokPosShape *s, const float *ids, const float *dy, float *dwte) {
    const size_t D = (size_t)s->dim, rows = (size_t)s->batch * s->seq;
    memset(dwte, 0, (size_t)s->vocab * D * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const int id = token(ids[r], s->vocab);
        for (size_t c = 0; id >= 0 && c < D; c++)
            dwte[id * D + c] += dy[r * D + c];
    }
}

static void row_stats(const float *x, int n, double eps, double *m, double *r) {
    double s = 0.0, q = 0.0;
    for (int j = 0; j < n; j++)
        s += x[j];
    *m = s / n;
    for (int j = 0; j < n; j++)
        q += (x[j] - *m) * (x[j] - *m);
    *r = 1.0 / sqrt(q / n + eps);
}

void gref_layernorm_forward(const LayerNormShape *s, const float *x, const float *gamma,
                            const float *beta, float *y, float *mean, float *rstd) {
    for (int i = 0; i < s->rows; i++) {
        const float *xr = x + (size_t)i * s->dim;
        double m, r;
        row_stats(xr, s->dim, s->eps, &m, &r);
        mean[i] = (float)m, rstd[i] = (float)r;
        for (int j = 0; j < s->dim; j++)
            y[(size_t)i * s->dim + j] = (float)((xr[j] - m) * r * gamma[j] + beta[j]);
    }
}

void gref_layernorm_backward(const LayerNormShape *s, const float *x, const float *gamma,
                             const float *dy, float *dx, float *dgamma, float *dbeta) {
    const int D = s->dim;
    double *dg = calloc((size_t)D, sizeof(double)), *db = calloc((size_t)D, sizeof(double));
    for (int i = 0; i < s->rows; i++) {
        const float *xr = x + (size_t)i * D, *g = dy + (size_t)i * D;
        double m, r, a = 0.0, b = 0.0;
        row_stats(xr, D, s->eps, &m, &r);
        for (int j = 0; j < D; j++) {
            const double xh = (xr[j] - m) * r;
            a += g[j] * (double)gamma[j], b += g[j] * (double)gamma[j] * xh;
            dg[j] += g[j] * xh, db[j] += g[j];
        }
        a /= D, b /= D;
        for (int j = 0; j < D; j++)
            dx[(size_t)i * D + j] =
                (float)(r * (g[j] * (double)gamma[j] - a - (xr[j] - m) * r * b));
    }
    for (int j = 0; j < D; j++)
        dgamma[j] = (float)dg[j], dbeta[j] = (float)db[j];
    free(dg), free(db);
}

#define K_GELU 0.79788456080286535588 /* sqrt(2/pi) */

double gref_gelu(double x) {
    return 0.5 * x * (1.0 + tanh(K_GELU * (x + 0.044715 * x * x * x)));
}

double gref_gelu_grad(double x) {
    const double t = tanh(K_GELU * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * K_GELU * (1.0 + 3.0 * 0.044715 * x * x);
}

/* the pair (b, h)'s q, k, v row t, element d */
#define Q(b, t, h, d) qkv[((size_t)(b)*T + (t)) * 3 * C + (size_t)(h)*D + (d)]
#define K(b, t, h, d) qkv[((size_t)(b)*T + (t)) * 3 * C + C + (size_t)(h)*D + (d)]
#define V(b, t, h, d) qkv[((size_t)(b)*T + (t)) * 3 * C + 2 * C + (size_t)(h)*D + (d)]

/* P of pair (b, h) in double [T][T], zeros above the diagonal */
static void probs(const AttentionShape *s, const float *qkv, int b, int h, double *p) {
    const int T = s->seq, D = s->head_dim;
    const size_t C = (size_t)s->heads * D;
    const double scale = 1.0 / sqrt((double)D);
    for (int i = 0; i < T; i++) {
        double mx = -INFINITY, sum = 0.0;
        for (int j = 0; j <= i; j++) {
            double a = 0.0;
            for (int d = 0; d < D; d++)
                a += (double)Q(b, i, h, d) * K(b, j, h, d);
            p[(size_t)i * T + j] = a * scale;
            if (a * scale > mx) mx = a * scale;
        }
        for (int j = 0; j <= i; j++)
            sum += p[(size_t)i * T + j] = exp(p[(size_t)i * T + j] - mx);
        for (int j = 0; j < T; j++)
            p[(size_t)i * T + j] = j <= i ? p[(size_t)i * T + j] / sum : 0.0;
    }
}

void gref_attention_forward(const AttentionShape *s, const float *qkv, float *y, float *pout) {
    const int T = s->seq, D = s->head_dim, H = s->heads;
    const size_t C = (size_t)H * D;
    double *p = malloc((size_t)T * T * sizeof(double));
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < H; h++) {
            probs(s, qkv, b, h, p);
            for (int i = 0; i < T; i++)
                for (int d = 0; d < D; d++) {
                    double a = 0.0;
                    for (int j = 0; j <= i; j++)
                        a += p[(size_t)i * T + j] * V(b, j, h, d);
                    y[((size_t)b * T + i) * C + (size_t)h * D + d] = (float)a;
                }
            for (size_t e = 0; pout && e < (size_t)T * T; e++)
                pout[((size_t)b * H + h) * T * T + e] = (float)p[e];
        }
    free(p);
}

void gref_attention_backward(const AttentionShape *s, const float *qkv, const float *dy,
                             float *dqkv) {
    const int T = s->seq, D = s->head_dim, H = s->heads;
    const size_t C = (size_t)H * D;
    const double scale = 1.0 / sqrt((double)D);
    double *p = malloc((size_t)T * T * sizeof(double)),
           *ds = malloc((size_t)T * T * sizeof(double));
#define DY(b, t, h, d)       dy[((size_t)(b)*T + (t)) * C + (size_t)(h)*D + (d)]
#define DQ(b, t, h, d, part) dqkv[((size_t)(b)*T + (t)) * 3 * C + (part)*C + (size_t)(h)*D + (d)]
    for (int b = 0; b < s->batch; b++)
        for (int h = 0; h < H; h++) {
            probs(s, qkv, b, h, p);
            for (int i = 0; i < T; i++) { /* dP = dY V^T, dS = P (dP - sum dP P) */
                double dot = 0.0;
                for (int j = 0; j <= i; j++) {
                    double a = 0.0;
                    for (int d = 0; d < D; d++)
                        a += (double)DY(b, i, h, d) * V(b, j, h, d);
                    ds[(size_t)i * T + j] = a;
                    dot += a * p[(size_t)i * T + j];
                }
                for (int j = 0; j <= i; j++)
                    ds[(size_t)i * T + j] = p[(size_t)i * T + j] * (ds[(size_t)i * T + j] - dot);
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (int j = 0; j <= t; j++) /* dq_t = scale sum_j dS[t][j] k_j */
                        dq += ds[(size_t)t * T + j] * K(b, j, h, d);
                    for (int i = t; i < T; i++) { /* dk_t, dv_t: queries i >= t */
                        dk += ds[(size_t)i * T + t] * Q(b, i, h, d);
                        dv += p[(size_t)i * T + t] * DY(b, i, h, d);
                    }
                    DQ(b, t, h, d, 0) = (float)(dq * scale);
                    DQ(b, t, h, d, 1) = (float)(dk * scale);
                    DQ(b, t, h, d, 2) = (float)dv;
                }
        }
    free(p), free(ds);
}

void gref_adamw_float(size_t n, float *p, const float *g, float *m, float *v, const AdamWStep *a) {
    for (size_t i = 0; i < n; i++) {
        p[i] = p[i] * (1.0f - a->lr * a->weight_decay);
        m[i] = m[i] + (1.0f - a->beta1) * (g[i] - m[i]);
        v[i] = a->beta2 * v[i] + (1.0f - a->beta2) * g[i] * g[i];
        p[i] = p[i] - (a->lr / a->bias1) * (m[i] / (sqrtf(v[i]) / sqrtf(a->bias2) + a->eps));
    }
}

void gref_adamw_double(size_t n, double *p, const float *g, double *m, double *v,
                       const AdamWStep *a) {
    for (size_t i = 0; i < n; i++) {
        m[i] = a->beta1 * m[i] + (1.0 - a->beta1) * g[i];
        v[i] = a->beta2 * v[i] + (1.0 - a->beta2) * (double)g[i] * g[i];
        const double mhat = m[i] / a->bias1, vhat = v[i] / a->bias2;
        p[i] =
            p[i] * (1.0 - (double)a->lr * a->weight_decay) - a->lr * mhat / (sqrt(vhat) + a->eps);
    }
}
