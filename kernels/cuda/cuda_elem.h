/* cuda_elem.h - the per-element arithmetic of dtbench's CUDA kernels, written once and compiled
 * twice: as __host__ __device__ functions by nvcc (kernels/cuda/cuda_*_kernels.cu call them) and as
 * plain static inline C by the CPU-only test tests/test_device_arith.c, which checks them bit for
 * bit against the CPU backend's kernels. So what a GPU kernel computes per element is tested in CI
 * without a GPU; what is left to the GPU tests is indexing, reduction order and the libraries.
 *
 * Rules: no libm call whose GPU and host results may differ (only +, -, *, /, sqrtf and double
 * sqrt, which are correctly rounded on both sides: nvcc's defaults -prec-div=true
 * -prec-sqrt=true, and the CUDA kernels are built with -fmad=false so that no multiply-add is
 * contracted); powf only on the generic LRN exponent, which the CPU backend also takes through
 * powf. Plain C11 and C++17. */
#ifndef DTBENCH_CUDA_ELEM_H
#define DTBENCH_CUDA_ELEM_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "elem_math.h" /* defines: DT_HD; dt_expf, dt_sigmoidf, dt_tanhf (one definition for CPU
                          * and GPU) */

/* ---- SGD (backend.h): g' = g + wd*p; v = momentum*v + g'; p -= lr*v ------------------------ */
DT_HD void dt_sgd_momentum(float *p, float g, float *v, float lr, float momentum, float wd) {
    const float gi = g + wd * *p;
    const float vi = momentum * *v + gi;
    *v = vi;
    *p -= lr * vi;
}
DT_HD float dt_sgd_plain(float p, float g, float lr, float wd) {
    return p - lr * (g + wd * p);
}

/* ---- AdamW (backend.h's AdamWStep), PyTorch's order of operations -------------------------- */
/* p *= decay; m += c1 (g - m); v = b2 v + c2 g g; p -= step (m / (sqrt(v) / root2 + eps)), with
 * decay = 1 - lr*wd, c1 = 1 - beta1, c2 = 1 - beta2, step = lr / bias1, root2 = sqrt(bias2) (as
 * kernels/cpu/cpu_optim.c's cpu_adamw_update computes them) */
DT_HD void dt_adamw(float *p, float g, float *m, float *v, float decay, float c1, float b2,
                    float c2, float step, float root2, float eps) {
    const float pi = *p * decay;
    const float mi = *m + c1 * (g - *m);
    const float vi = b2 * *v + c2 * g * g;
    *m = mi, *v = vi;
    *p = pi - step * (mi / (sqrtf(vi) / root2 + eps));
}

/* ---- softmax cross-entropy: one element of dlogits = exp(z - m) * (inv_n / S) - [label] inv_n */
DT_HD float dt_xent_grad(float e, float scale, int is_label, float inv_n) {
    float v = e * scale;
    if (is_label) v -= inv_n;
    return v;
}

/* ---- dropout (backend.h's counter-based mask) ---------------------------------------------- */
DT_HD uint64_t dt_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
/* key of global sample g */
DT_HD uint64_t dt_dropout_key(uint64_t seed, uint64_t g) {
    return dt_mix64(seed ^ (g * 0x9E3779B97F4A7C15ULL));
}
/* 1 when element j of the sample with `key` is kept */
DT_HD int dt_dropout_keep(uint64_t key, uint64_t j, float rate) {
    const float u = (float)(dt_mix64(key + j) >> 40) * (1.0f / 16777216.0f);
    return u >= rate;
}
DT_HD float dt_dropout_scale(float rate) {
    return 1.0f / (1.0f - rate);
}

/* ---- pooling windows ----------------------------------------------------------------------- */
/* Window rows [*lo, *hi) of output index o: o*stride - pad + [0, k), clipped to [0, len). */
DT_HD void dt_window(int o, int stride, int pad, int k, int len, int *lo, int *hi) {
    const int start = o * stride - pad;
    *lo = start < 0 ? 0 : start;
    *hi = start + k > len ? len : start + k;
}
/* Outputs [*lo, *hi) whose window holds input i (for the gathering backward passes):
 * o*stride - pad <= i < o*stride - pad + k, clipped to [0, out_len). */
DT_HD void dt_outputs_of(int i, int stride, int pad, int k, int out_len, int *lo, int *hi) {
    const int a = i + pad - k + 1; /* o*stride >= a */
    int l = a <= 0 ? 0 : (a + stride - 1) / stride;
    int h = (i + pad) / stride + 1; /* o*stride <= i + pad */
    if (h > out_len) h = out_len;
    if (l > h) l = h;
    *lo = l, *hi = h;
}
DT_HD float dt_avgpool_inv(int k) {
    return 1.0f / (float)(k * k);
}

/* ---- LRN (backend.h's LrnShape) ------------------------------------------------------------ */
/* s^-beta: 0.75 as r*sqrt(r) with r = 1/sqrt(s), as the CPU backend computes it */
DT_HD float dt_pow_neg_beta(float s, float beta) {
    if (beta == 0.75f) {
        const float r = 1.0f / sqrtf(s);
        return r * sqrtf(r);
    }
    return powf(s, -beta);
}
/* scale = bias + alpha/size * (sum of squares) */
DT_HD float dt_lrn_scale(float bias, float a, float sumsq) {
    return bias + a * sumsq;
}
/* one term of the backward sum: dy[c'] * y[c'] / s[c'] */
DT_HD float dt_lrn_back_term(float g, float y, float s) {
    return g * y / s;
}
/* dx = dy * s^-beta - k * x * sum, k = 2 alpha beta / size */
DT_HD float dt_lrn_back(float g, float s, float x, float sum, float k, float beta) {
    return g * dt_pow_neg_beta(s, beta) - k * x * sum;
}

/* ---- batch normalisation (backend.h's BnShape) --------------------------------------------- */
/* running = (1 - momentum) * running + momentum * batch value */
DT_HD float dt_bn_running(float running, float momentum, float value) {
    return (1.0f - momentum) * running + momentum * value;
}
/* y = x * mul + add with mul = gamma*invstd, add = beta - mean*mul */
DT_HD void dt_bn_coeffs(float gamma, float beta, float mean, float invstd, float *mul, float *add) {
    *mul = gamma * invstd;
    *add = beta - mean * *mul;
}
DT_HD float dt_bn_affine(float x, float mul, float add) {
    return x * mul + add;
}
/* inference: invstd from the running variance */
DT_HD float dt_bn_infer_invstd(float running_var, float eps) {
    return 1.0f / sqrtf(running_var + eps);
}
/* dx = k * (dy - m_dy - (x - mean) * m_xdy), k = gamma*invstd */
DT_HD float dt_bn_back(float k, float g, float m_dy, float x, float mean, float m_xdy) {
    return k * (g - m_dy - (x - mean) * m_xdy);
}

/* The fused epilogue of batch norm: v (= dt_bn_affine) + z when `add`, then ReLU when `relu`,
 * with the CPU's residual add (a + b) and ReLU (v > 0 ? v : 0), so fused equals unfused. */
DT_HD float dt_bn_epilogue(float v, float z, int add, int relu) {
    if (add) v = v + z;
    if (relu) v = v > 0.0f ? v : 0.0f;
    return v;
}
/* The gradient through a ReLU whose output is y: the CPU's ReLU backward (y > 0 ? dy : 0). */
DT_HD float dt_relu_grad(float dy, float y) {
    return y > 0.0f ? dy : 0.0f;
}

/* The batch statistics of one channel from its shifted sums s1 = sum (x - shift) and
 * s2 = sum (x - shift)^2 over `count` values, in double (the shift, one value of the channel,
 * keeps s2 - s1^2/count free of cancellation whatever the mean): the mean, 1/sqrt(var + eps) of
 * the biased variance (to normalise) and the unbiased variance (for the running statistics), as
 * kernels/cpu/cpu_norm.c defines them. */
DT_HD void dt_bn_stats(double s1, double s2, double count, float shift, float eps, float *mean,
                       float *invstd, float *unbiased) {
    const double m = s1 / count;
    double sq = s2 - s1 * m; /* sum (x - mean)^2 */
    if (sq < 0.0) sq = 0.0;
    const double var = sq / count;
    *mean = (float)((double)shift + m);
    *invstd = (float)(1.0 / sqrt(var + (double)eps));
    *unbiased = (float)(count > 1.0 ? sq / (count - 1.0) : var);
}

/* The backward's per-channel factors from sum dy and sum dy (x - mean) over `count` values
 * (kernels/cpu/cpu_norm.c): dbeta, dgamma, and for dt_bn_back k = gamma*invstd, m_dy, m_xdy. */
DT_HD void dt_bn_back_factors(double sum_dy, double sum_dy_dev, double count, float gamma,
                              float invstd, float *dgamma, float *dbeta, float *k, float *m_dy,
                              float *m_xdy) {
    *dbeta = (float)sum_dy;
    *dgamma = (float)(sum_dy_dev * invstd);
    *k = gamma * invstd;
    *m_dy = (float)(sum_dy / count);
    *m_xdy = (float)(sum_dy_dev / count) * invstd * invstd;
}

/* ---- walking one channel of an NCHW tensor ---------------------------------------------------
 * Channel c of x[n, C, sp] holds units e = 0 .. n*sp - 1 (a unit: one element, or V consecutive
 * ones when sp is a multiple of V and the kernel loads V at once; sp then counts units) at
 *   index(e) = (e / sp) * stride + c * sp + e % sp,   stride = C * sp.
 * A block takes units [e0, e1) of the channel; thread t of T visits e0 + t, e0 + t + T, ... The
 * walk keeps (e / sp, e % sp) up to date with one add and one compare per step instead of a
 * division per element, and indexes in 32 bits (the caller guarantees n * stride < 2^31). */
typedef struct {
    int e, end, step;     /* this unit, the end of the range, T */
    int plane, off;       /* e / sp, e % sp */
    int dplane, doff;     /* T / sp, T % sp */
    int sp, stride, base; /* sp, C * sp, c * sp */
} DtWalk;
DT_HD void dt_walk_init(DtWalk *w, int sp, int stride, int c, int e0, int e1, int t, int T) {
    w->e = e0 + t, w->end = e1, w->step = T;
    w->plane = w->e / sp, w->off = w->e - w->plane * sp;
    w->dplane = T / sp, w->doff = T - w->dplane * sp;
    w->sp = sp, w->stride = stride, w->base = c * sp;
}
DT_HD int dt_walk_more(const DtWalk *w) {
    return w->e < w->end;
}
DT_HD int dt_walk_index(const DtWalk *w) {
    return w->plane * w->stride + w->base + w->off;
}
DT_HD void dt_walk_next(DtWalk *w) {
    w->e += w->step;
    w->plane += w->dplane, w->off += w->doff;
    if (w->off >= w->sp) w->off -= w->sp, w->plane++;
}

/* ---- LSTM cell (backend.h's LstmShape; dtbench's fused gate order i, f, g, o) -------------- */
/* Pre-activations in *gi..*go become activations; returns c, writes h. */
DT_HD float dt_lstm_cell(float *gi, float *gf, float *gg, float *go, float c_prev, float *h) {
    const float i = dt_sigmoidf(*gi), f = dt_sigmoidf(*gf);
    const float gv = dt_tanhf(*gg), o = dt_sigmoidf(*go);
    const float cv = f * c_prev + i * gv;
    *gi = i, *gf = f, *gg = gv, *go = o;
    *h = o * dt_tanhf(cv);
    return cv;
}
/* From the activations i, f, g, o, the cell c and c_prev, dh = dy + dh_rec and the carried dc:
 * the pre-activation gradients; returns the gradient reaching c_prev. */
DT_HD float dt_lstm_cell_back(float i, float f, float g, float o, float c, float c_prev, float dh,
                              float dc, float *di, float *df, float *dg, float *dout) {
    const float tc = dt_tanhf(c);
    const float dcv = dc + dh * o * (1.0f - tc * tc);
    *di = dcv * g * i * (1.0f - i);
    *df = dcv * c_prev * f * (1.0f - f);
    *dg = dcv * i * (1.0f - g * g);
    *dout = dh * tc * o * (1.0f - o);
    return dcv * f;
}

/* ---- embedding: the row of a token id stored as a float, -1 outside [0, vocab) ------------- */
DT_HD int dt_token(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

/* ---- concatenation (backend.h's concat_*) ---------------------------------------------------
 * y[rows][total] holds the inputs' [rows][size_i] blocks side by side (NHWC: rows of pixels, sizes
 * in channels). One launch moves all of it, a thread per unit of y of `unit` bytes: 16 down to the
 * value's size, the largest that divides every input's row and the pointers' alignment (in place
 * of one strided 2-D copy per input, whose NHWC rows are 128-768 bytes). */
#define DT_CONCAT_MAX 8
typedef struct {
    int n;                           /* inputs */
    uint32_t units;                  /* units in a row of y */
    uint32_t off[DT_CONCAT_MAX + 1]; /* input i's units in a row of y: off[i] .. off[i + 1] - 1 */
    void *part[DT_CONCAT_MAX];       /* input i: read forward, written backward (NULL: skipped) */
} DtConcat;

/* The plan of n inputs of sizes[i] values of eb bytes a row, `rows` rows, y and the inputs at
 * parts (NULL: none): *c and *unit (bytes). 0 where one launch does not serve: more than
 * DT_CONCAT_MAX inputs, or 2^31 units or more (the kernel counts in 32 bits). */
DT_HD int dt_concat_plan(DtConcat *c, int n, const size_t *sizes, size_t eb, size_t rows,
                         const void *y, void *const *parts, size_t *unit) {
    if (n < 1 || n > DT_CONCAT_MAX || eb == 0) return 0;
    uintptr_t align = (uintptr_t)y;
    size_t u = 16, total = 0;
    for (int i = 0; i < n; i++) {
        total += sizes[i];
        if (parts[i]) align |= (uintptr_t)parts[i];
    }
    for (; u > eb; u /= 2) {
        int fits = align % u == 0;
        for (int i = 0; i < n; i++)
            fits &= sizes[i] * eb % u == 0;
        if (fits) break;
    }
    const size_t units = total * eb / u;
    if (rows == 0 || units == 0 || units > 0x7fffffffu / rows) return 0;
    c->n = n, c->units = (uint32_t)units, c->off[0] = 0;
    for (int i = 0; i < n; i++) {
        c->off[i + 1] = c->off[i] + (uint32_t)(sizes[i] * eb / u);
        c->part[i] = parts[i];
    }
    *unit = u;
    return 1;
}

/* Unit u of y: its input *i, and the unit's place in that input (its row times the input's units
 * a row, plus its column). */
DT_HD size_t dt_concat_at(const DtConcat *c, uint32_t u, int *i) {
    const uint32_t row = u / c->units, col = u - row * c->units;
    int j = 0;
    while (col >= c->off[j + 1])
        j++;
    *i = j;
    return (size_t)row * (c->off[j + 1] - c->off[j]) + (col - c->off[j]);
}

#endif
