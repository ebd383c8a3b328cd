/* cpu_norm.c - the CPU backend's normalisation layers: local response normalisation across
 * channels and batch normalisation (training, inference, backward). Semantics: backend.h. */
#include "cpu_kernels.h"
#include "cpu_vec.h"

#include <math.h>
#include <string.h>

/* ---- LRN ------------------------------------------------------------------------------------- */

/* d[n] += x[n]^2 */
static void vadd_sq(float *restrict d, const float *restrict x, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += x[i + j] * x[i + j];
    for (; i < n; i++)
        d[i] += x[i] * x[i];
}

/* d[n] += g[n] * y[n] / s[n] */
static void vadd_gy_over_s(float *restrict d, const float *restrict g, const float *restrict y,
                           const float *restrict s, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += g[i + j] * y[i + j] / s[i + j];
    for (; i < n; i++)
        d[i] += g[i] * y[i] / s[i];
}

/* s^-beta: 0.75 (AlexNet, GoogLeNet) as r*sqrt(r) with r = 1/sqrt(s), which vectorises (the
 * kernels are built with -fno-math-errno); any other beta through powf. */
static inline float pow_neg_beta(float s, float beta) {
    if (beta == 0.75f) {
        const float r = 1.0f / sqrtf(s);
        return r * sqrtf(r);
    }
    return powf(s, -beta);
}

/* s = bias + a * s (in place), y = x * s^-beta */
static void lrn_finish(float *restrict y, float *restrict s, const float *restrict x, size_t n,
                       float bias, float a, float beta) {
    size_t i = 0;
    if (beta == 0.75f)
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float sv = bias + a * s[i + j];
                const float r = 1.0f / sqrtf(sv);
                s[i + j] = sv;
                y[i + j] = x[i + j] * (r * sqrtf(r));
            }
    for (; i < n; i++) {
        s[i] = bias + a * s[i];
        y[i] = x[i] * pow_neg_beta(s[i], beta);
    }
}

/* d = g * s^-beta - k * x * d */
static void lrn_back_finish(float *restrict d, const float *restrict g, const float *restrict s,
                            const float *restrict x, size_t n, float k, float beta) {
    size_t i = 0;
    if (beta == 0.75f)
        for (; i + VBLOCK <= n; i += VBLOCK)
            for (int j = 0; j < VBLOCK; j++) {
                const float r = 1.0f / sqrtf(s[i + j]);
                d[i + j] = g[i + j] * (r * sqrtf(r)) - k * x[i + j] * d[i + j];
            }
    for (; i < n; i++)
        d[i] = g[i] * pow_neg_beta(s[i], beta) - k * x[i] * d[i];
}

/* Per sample and channel c, on rows of hw contiguous pixels: scale[c] = sum of x[c']^2 over the
 * window, then scale[c] = bias + alpha/size * scale[c] and y[c] = x[c] * scale[c]^-beta. */
void cpu_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale) {
    (void)ctx;
    const size_t hw = (size_t)s->h * s->w, chw = (size_t)s->c * hw;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const float a = s->alpha / (float)s->size;
    for (int n = 0; n < s->batch; n++) {
        const float *xn = x + n * chw; /* xn[c, hw] */
        float *yn = y + n * chw, *sn = scale + n * chw;
        for (int c = 0; c < s->c; c++) {
            float *sc = sn + c * hw;
            cpu_vfill(sc, hw, 0.0f);
            const int c0 = c - before < 0 ? 0 : c - before;
            const int c1 = c + after >= s->c ? s->c - 1 : c + after;
            for (int cc = c0; cc <= c1; cc++)
                vadd_sq(sc, xn + cc * hw, hw);
            lrn_finish(yn + c * hw, sc, xn + c * hw, hw, s->bias, a, s->beta);
        }
    }
}

/* dx[c] = dy[c] * s[c]^-beta - (2 alpha beta / size) * x[c] * sum over the channels c' whose
 * window holds c of dy[c'] * y[c'] / s[c']. dx[c] first collects that sum, then is finished. */
void cpu_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                      const float *scale, const float *dy, float *dx) {
    (void)ctx;
    const size_t hw = (size_t)s->h * s->w, chw = (size_t)s->c * hw;
    const int before = s->size / 2, after = (s->size - 1) / 2;
    const float k = 2.0f * s->alpha * s->beta / (float)s->size;
    for (int n = 0; n < s->batch; n++) {
        const float *xn = x + n * chw, *yn = y + n * chw, *sn = scale + n * chw;
        const float *dyn = dy + n * chw;
        float *dxn = dx + n * chw;
        for (int c = 0; c < s->c; c++) {
            float *d = dxn + c * hw;
            cpu_vfill(d, hw, 0.0f);
            /* c' with c in [c' - before, c' + after], i.e. c' in [c - after, c + before] */
            const int c0 = c - after < 0 ? 0 : c - after;
            const int c1 = c + before >= s->c ? s->c - 1 : c + before;
            for (int cc = c0; cc <= c1; cc++)
                vadd_gy_over_s(d, dyn + cc * hw, yn + cc * hw, sn + cc * hw, hw);
            lrn_back_finish(d, dyn + c * hw, sn + c * hw, xn + c * hw, hw, k, s->beta);
        }
    }
}

/* ---- batch normalisation --------------------------------------------------------------------- */

/* sum of (p - m)^2 */
static float plane_sq_dev(const float *restrict p, size_t n, float m) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float d = p[i + j] - m;
            acc[j] += d * d;
        }
    float s = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j];
    for (; i < n; i++)
        s += (p[i] - m) * (p[i] - m);
    return s;
}

/* sum of a[i] and of a[i]*(p[i] - m), in one pass */
static void plane_sum_dot_dev(const float *restrict a, const float *restrict p, size_t n, float m,
                              double *sum_a, double *sum_dot) {
    float acc[VBLOCK] = {0}, dot[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            acc[j] += a[i + j];
            dot[j] += a[i + j] * (p[i + j] - m);
        }
    float s = 0.0f, d = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j], d += dot[j];
    for (; i < n; i++)
        s += a[i], d += a[i] * (p[i] - m);
    *sum_a += s, *sum_dot += d;
}

/* y = x * mul + add over one plane */
static void plane_affine(float *restrict y, const float *restrict x, size_t n, float mul,
                         float add) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = x[i + j] * mul + add;
    for (; i < n; i++)
        y[i] = x[i] * mul + add;
}

/* The gradient that reaches a batch norm fused with the ReLU after it: dy where the ReLU's output
 * y is positive, else 0 (the ReLU's backward, as cpu_relu_backward computes it). */
static inline float relu_grad(float y, float dy) {
    return y > 0.0f ? dy : 0.0f;
}

/* y = relu(x * mul + add + z) over one plane (z NULL: no add), with the arithmetic of the unfused
 * rows: the affine map, the residual add (cpu_add_forward), the ReLU (cpu_relu_forward). y may be
 * x or z. */
static void plane_affine_act(float *y, const float *x, const float *z, size_t n, float mul,
                             float add) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float v[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            v[j] = x[i + j] * mul + add;
        if (z)
            for (int j = 0; j < VBLOCK; j++)
                v[j] = v[j] + z[i + j];
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = v[j] > 0.0f ? v[j] : 0.0f;
    }
    for (; i < n; i++) {
        float v = x[i] * mul + add;
        if (z) v = v + z[i];
        y[i] = v > 0.0f ? v : 0.0f;
    }
}

/* Channel c's batch statistics (two passes: the mean, then squared deviations: no cancellation;
 * plane sums in float lanes added up in double), saved and folded into the running ones; returns
 * the affine map y = x * mul + add in *mul, *add. */
static void bn_channel_stats(const BnShape *s, const float *x, int c, const float *gamma,
                             const float *beta, float *save_mean, float *save_invstd,
                             float *running_mean, float *running_var, float *mul, float *add) {
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    const double count = (double)s->batch * (double)sp;
    double sum = 0.0;
    for (int n = 0; n < s->batch; n++)
        sum += cpu_vsum(x + n * stride + c * sp, sp);
    const float mean = (float)(sum / count);
    double sq = 0.0;
    for (int n = 0; n < s->batch; n++)
        sq += plane_sq_dev(x + n * stride + c * sp, sp, mean);
    const double var = sq / count;
    const float invstd = (float)(1.0 / sqrt(var + (double)s->eps));
    save_mean[c] = mean;
    save_invstd[c] = invstd;
    const double unbiased = count > 1 ? sq / (count - 1) : var;
    running_mean[c] = (1.0f - s->momentum) * running_mean[c] + s->momentum * mean;
    running_var[c] = (1.0f - s->momentum) * running_var[c] + s->momentum * (float)unbiased;
    *mul = gamma[c] * invstd, *add = beta[c] - mean * *mul;
}

/* The forward passes, plain (act 0: y = BN(x)) or fused (act 1: y = relu(BN(x) + z), z may be
 * NULL): training from the batch's statistics, inference from the running ones. */
static void bn_forward_train(const BnShape *s, const float *x, const float *gamma,
                             const float *beta, int act, const float *z, float *y, float *save_mean,
                             float *save_invstd, float *running_mean, float *running_var) {
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    for (int c = 0; c < s->c; c++) {
        float mul, add;
        bn_channel_stats(s, x, c, gamma, beta, save_mean, save_invstd, running_mean, running_var,
                         &mul, &add);
        for (int n = 0; n < s->batch; n++) {
            const size_t o = n * stride + c * sp;
            if (act)
                plane_affine_act(y + o, x + o, z ? z + o : NULL, sp, mul, add);
            else
                plane_affine(y + o, x + o, sp, mul, add);
        }
    }
}

static void bn_forward_infer(const BnShape *s, const float *x, const float *gamma,
                             const float *beta, const float *running_mean, const float *running_var,
                             int act, const float *z, float *y) {
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    for (int c = 0; c < s->c; c++) {
        const float invstd = 1.0f / sqrtf(running_var[c] + s->eps);
        const float mul = gamma[c] * invstd, add = beta[c] - running_mean[c] * mul;
        for (int n = 0; n < s->batch; n++) {
            const size_t o = n * stride + c * sp;
            if (act)
                plane_affine_act(y + o, x + o, z ? z + o : NULL, sp, mul, add);
            else
                plane_affine(y + o, x + o, sp, mul, add);
        }
    }
}

void cpu_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var) {
    (void)ctx;
    bn_forward_train(s, x, gamma, beta, 0, NULL, y, save_mean, save_invstd, running_mean,
                     running_var);
}

void cpu_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float *y) {
    (void)ctx;
    bn_forward_infer(s, x, gamma, beta, running_mean, running_var, 0, NULL, y);
}

/* Batch norm -> (residual add ->) ReLU in one pass over the output (src/model/model_fuse.c): the
 * same bits as the three unfused rows, one pass over memory instead of three. */
void cpu_bn_act_forward_train(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                              const float *beta, const float *z, float *y, float *save_mean,
                              float *save_invstd, float *running_mean, float *running_var) {
    (void)ctx;
    bn_forward_train(s, x, gamma, beta, 1, z, y, save_mean, save_invstd, running_mean, running_var);
}

void cpu_bn_act_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                              const float *beta, const float *running_mean,
                              const float *running_var, const float *z, float *y) {
    (void)ctx;
    bn_forward_infer(s, x, gamma, beta, running_mean, running_var, 1, z, y);
}

/* sum of g[i] and of g[i]*(p[i] - m) with g = relu_grad(y, dy), in one pass, also written to dz
 * (when not NULL): plane_sum_dot_dev of the ReLU's gradient, without writing it anywhere else. */
static void plane_sum_dot_dev_act(const float *restrict y, const float *restrict dy,
                                  const float *restrict p, size_t n, float m, float *restrict dz,
                                  double *sum_a, double *sum_dot) {
    float acc[VBLOCK] = {0}, dot[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float g[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            g[j] = relu_grad(y[i + j], dy[i + j]);
        for (int j = 0; j < VBLOCK; j++) {
            acc[j] += g[j];
            dot[j] += g[j] * (p[i + j] - m);
        }
        if (dz)
            for (int j = 0; j < VBLOCK; j++)
                dz[i + j] = g[j];
    }
    float s = 0.0f, d = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j], d += dot[j];
    for (; i < n; i++) {
        const float g = relu_grad(y[i], dy[i]);
        s += g, d += g * (p[i] - m);
        if (dz) dz[i] = g;
    }
    *sum_a += s, *sum_dot += d;
}

/* dx = k * (g - m_dy - (x - mean) * m_xdy) over one plane, g = dy */
static void plane_bn_dx(float *restrict d, const float *restrict g, const float *restrict xp,
                        size_t n, float k, float m_dy, float mean, float m_xdy) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] = k * (g[i + j] - m_dy - (xp[i + j] - mean) * m_xdy);
    for (; i < n; i++)
        d[i] = k * (g[i] - m_dy - (xp[i] - mean) * m_xdy);
}

/* the same with g = relu_grad(y, dy) */
static void plane_bn_dx_act(float *restrict d, const float *restrict y, const float *restrict dy,
                            const float *restrict xp, size_t n, float k, float m_dy, float mean,
                            float m_xdy) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float g[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            g[j] = relu_grad(y[i + j], dy[i + j]);
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] = k * (g[j] - m_dy - (xp[i + j] - mean) * m_xdy);
    }
    for (; i < n; i++)
        d[i] = k * (relu_grad(y[i], dy[i]) - m_dy - (xp[i] - mean) * m_xdy);
}

/* dbeta = sum g, dgamma = sum g * xhat, dx = gamma*invstd * (g - dbeta/N - xhat*dgamma/N) with g
 * the gradient reaching the batch norm: dy, or (y not NULL: fused with the ReLU after it) the
 * ReLU's gradient relu_grad(y, dy), also written to dz when not NULL (the residual add's other
 * input). */
static void bn_backward(const BnShape *s, const float *x, const float *gamma,
                        const float *save_mean, const float *save_invstd, const float *y,
                        const float *dy, float *dx, float *dz, float *dgamma, float *dbeta) {
    const size_t sp = (size_t)s->spatial, stride = (size_t)s->c * sp;
    const double count = (double)s->batch * (double)sp;
    for (int c = 0; c < s->c; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        double sum_dy = 0.0, sum_dy_dev = 0.0;
        for (int n = 0; n < s->batch; n++) {
            const size_t o = n * stride + c * sp;
            if (y)
                plane_sum_dot_dev_act(y + o, dy + o, x + o, sp, mean, dz ? dz + o : NULL, &sum_dy,
                                      &sum_dy_dev);
            else
                plane_sum_dot_dev(dy + o, x + o, sp, mean, &sum_dy, &sum_dy_dev);
        }
        dbeta[c] = (float)sum_dy;
        dgamma[c] = (float)(sum_dy_dev * invstd);
        /* dx = k * (g - m_dy - (x - mean) * m_xdy) with k = gamma*invstd */
        const float k = gamma[c] * invstd;
        const float m_dy = (float)(sum_dy / count);
        const float m_xdy = (float)(sum_dy_dev / count) * invstd * invstd;
        for (int n = 0; n < s->batch; n++) {
            const size_t o = n * stride + c * sp;
            if (y)
                plane_bn_dx_act(dx + o, y + o, dy + o, x + o, sp, k, m_dy, mean, m_xdy);
            else
                plane_bn_dx(dx + o, dy + o, x + o, sp, k, m_dy, mean, m_xdy);
        }
    }
}

void cpu_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *dy,
                            float *dx, float *dgamma, float *dbeta) {
    (void)ctx;
    bn_backward(s, x, gamma, save_mean, save_invstd, NULL, dy, dx, NULL, dgamma, dbeta);
}

/* The fused rows' backward: the ReLU's mask applied as the batch norm reads its gradient, the
 * add's other gradient written in the same pass; dy is left as it was. */
void cpu_bn_act_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                         const float *save_mean, const float *save_invstd, const float *y,
                         float *dy, float *dx, float *dz, float *dgamma, float *dbeta) {
    (void)ctx;
    bn_backward(s, x, gamma, save_mean, save_invstd, y, dy, dx, dz, dgamma, dbeta);
}
