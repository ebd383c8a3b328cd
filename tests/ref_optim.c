/* ref_optim.c - naive reference kernels: softmax cross-entropy, the SGD step and the AdamW step
 * (kernels/cpu/cpu_optim.c). Textbook definitions as nested loops with double accumulators;
 * backward passes written as gathers, sharing no structure with the backends' GEMM/im2col
 * formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

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

/* ---- AdamW ---- */

void ref_adamw_update(size_t n, float *p, const float *g, float *m, float *v, int t, float lr,
                      float beta1, float beta2, float eps, float weight_decay) {
    const double b1 = beta1, b2 = beta2;
    const double bias1 = 1.0 - pow(b1, t), bias2 = 1.0 - pow(b2, t);
    for (size_t i = 0; i < n; i++) {
        const double gi = g[i];
        const double mi = b1 * m[i] + (1.0 - b1) * gi;
        const double vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        const double mhat = mi / bias1, vhat = vi / bias2;
        const double decayed = (double)p[i] * (1.0 - (double)lr * weight_decay);
        p[i] = (float)(decayed - (double)lr * mhat / (sqrt(vhat) + eps));
        m[i] = (float)mi, v[i] = (float)vi;
    }
}
