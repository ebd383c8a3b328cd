/* cpu_optim.c - the CPU backend's loss and optimizer: softmax cross-entropy (vectorised max and
 * exp-sum per row), the fused SGD-with-momentum update and the fused AdamW update. Semantics:
 * backend.h. */
#include "cpu_kernels.h"
#include "cpu_vec.h"

#include <math.h>

/* ---- softmax cross-entropy ----------------------------------------------------------------- */

/* sum of exp(z[j] - m) over z[n], also written to d[n] unless d is NULL; dt_expf in VBLOCK float
 * lanes (each lane sums n/VBLOCK terms), the lanes added in double. d may be z (in place): each
 * block is read into temporaries before it is written, which vectorises without restrict. */
static double vec_exp_sum(const float *z, float *d, size_t n, float m) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    if (d) {
        for (; i + VBLOCK <= n; i += VBLOCK) {
            float e[VBLOCK];
            for (int j = 0; j < VBLOCK; j++)
                e[j] = dt_expf(z[i + j] - m);
            for (int j = 0; j < VBLOCK; j++) {
                acc[j] += e[j];
                d[i + j] = e[j];
            }
        }
    } else {
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++)
                acc[j] += dt_expf(z[i + j] - m);
    }
    double sum = 0.0;
    for (int j = 0; j < VBLOCK; j++)
        sum += acc[j];
    for (; i < n; i++) {
        const float e = dt_expf(z[i] - m);
        if (d) d[i] = e;
        sum += e;
    }
    return sum;
}

/* logits[n,c], labels[n] -> stats = {mean loss, correct}; dlogits[n,c] = (softmax - onehot)/n
 * unless NULL. dlogits may be logits (in place, a language model's 50k-way rows): a row's logits
 * are all read (its max, first maximum and label's logit) before its gradient overwrites them.
 * Per row: m = max z, S = sum exp(z - m), loss = log S - (z_label - m). A label outside [0, c)
 * gives a NaN loss and no one-hot term (never an out-of-bounds access). exp is dt_expf
 * (elem_math.h), which vectorises: libm's scalar expf made the 10000-way softmax of every position
 * of the LSTM models a large share of their step. */
void cpu_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                      float *dlogits, float *stats) {
    (void)ctx;
    double total = 0.0;
    int hits = 0;
    const float inv_n = n > 0 ? 1.0f / (float)n : 0.0f;

    for (int i = 0; i < n && c > 0; i++) {
        const float *z = logits + (size_t)i * c; /* z[c] */
        const int32_t label = labels[i];

        const float m = cpu_vmax(z, (size_t)c);
        int best = 0; /* the first maximum (NaN logits: none, stop at the end) */
        while (best < c - 1 && z[best] != m)
            best++;
        if (best == label) hits++;
        const int valid = label >= 0 && label < c;
        const float z_label = valid ? z[label] : 0.0f; /* read before d may overwrite z */

        /* c can be large (FCN-5: 26752 classes, the LSTMs' vocabulary: 10000 per position) */
        float *d = dlogits ? dlogits + (size_t)i * c : NULL; /* d[c]: exp(z - m), then scaled */
        const double sum = vec_exp_sum(z, d, (size_t)c, m);
        if (d) {
            cpu_vscale(d, (size_t)c, (float)(inv_n / sum));
            if (valid) d[label] -= inv_n;
        }
        if (valid)
            total += log(sum) - (double)(z_label - m);
        else
            total = NAN;
    }
    stats[0] = n > 0 ? (float)(total / n) : 0.0f;
    stats[1] = (float)hits;
}

/* ---- SGD ----------------------------------------------------------------------------------- */

/* PyTorch SGD (dampening 0, no Nesterov), fused over p[n], g[n], v[n]:
 *   g' = g + wd*p;  v = momentum*v + g';  p -= lr*v   (momentum == 0: p -= lr*g', v untouched) */
void cpu_sgd_update(BackendCtx *ctx, size_t n, float *restrict p, const float *restrict g,
                    float *restrict v, float lr, float momentum, float weight_decay) {
    (void)ctx;
    size_t i = 0, nm = n & ~(size_t)(VBLOCK - 1); /* [0, nm): vectorised; [nm, n): tail */
    if (momentum != 0.0f) {
        for (; i < nm; i++) { /* vectorised */
            const float gi = g[i] + weight_decay * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * vi;
        }
        for (; i < n; i++) { /* tail */
            const float gi = g[i] + weight_decay * p[i];
            const float vi = momentum * v[i] + gi;
            v[i] = vi;
            p[i] -= lr * vi;
        }
    } else {
        for (; i < nm; i++)
            p[i] -= lr * (g[i] + weight_decay * p[i]);
        for (; i < n; i++)
            p[i] -= lr * (g[i] + weight_decay * p[i]);
    }
}

/* ---- AdamW --------------------------------------------------------------------------------- */

/* One element of PyTorch's AdamW (backend.h's AdamWStep), in its order of operations:
 *   p *= 1 - lr*wd;  m += (1 - beta1)(g - m);  v = beta2 v + (1 - beta2) g g;
 *   p -= (lr / bias1) (m / (sqrt(v) / sqrt(bias2) + eps))
 * decay = 1 - lr*wd, c1 = 1 - beta1, c2 = 1 - beta2, step = lr / bias1, root2 = sqrt(bias2): the
 * same expression as kernels/cuda/cuda_elem.h's dt_adamw (tests/test_device_arith.c compares them
 * bit for bit). */
static inline void adamw_elem(float *p, float g, float *m, float *v, float decay, float c1,
                              float b2, float c2, float step, float root2, float eps) {
    const float pi = *p * decay;
    const float mi = *m + c1 * (g - *m);
    const float vi = b2 * *v + c2 * g * g;
    *m = mi, *v = vi;
    *p = pi - step * (mi / (sqrtf(vi) / root2 + eps));
}

/* Fused over p[n], g[n], m[n], v[n]: one pass, memory-bound (7 floats moved per parameter). The
 * main loop covers a multiple of VBLOCK elements so that -O2 vectorises it (cpu_vec.h); sqrtf has
 * no errno branch here (-fno-math-errno, Makefile.am). */
void cpu_adamw_update(BackendCtx *ctx, size_t n, float *restrict p, const float *restrict g,
                      float *restrict m, float *restrict v, const AdamWStep *a) {
    (void)ctx;
    const float decay = 1.0f - a->lr * a->weight_decay, c1 = 1.0f - a->beta1, b2 = a->beta2;
    const float c2 = 1.0f - a->beta2, step = a->lr / a->bias1, root2 = sqrtf(a->bias2);
    const float eps = a->eps;
    size_t i = 0, nm = n & ~(size_t)(VBLOCK - 1); /* [0, nm): vectorised; [nm, n): tail */
    for (; i < nm; i++)
        adamw_elem(&p[i], g[i], &m[i], &v[i], decay, c1, b2, c2, step, root2, eps);
    for (; i < n; i++)
        adamw_elem(&p[i], g[i], &m[i], &v[i], decay, c1, b2, c2, step, root2, eps);
}

/* 1 if no element of x is inf or NaN: x - x is 0 for finite x and NaN otherwise, so one
 * vectorisable sum decides (the loss scaler's overflow check, --precision fp16). */
int cpu_all_finite(BackendCtx *ctx, size_t n, const float *x) {
    (void)ctx;
    float acc = 0.0f;
    for (size_t i = 0; i < n; i++)
        acc += x[i] - x[i];
    return acc == 0.0f;
}
