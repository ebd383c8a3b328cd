/* cpu_zoo.h - the CPU kernels of the model-zoo layers (kernels/cpu_zoo.c), entered into
 * cpu_backend's function table by kernels/cpu.c. Semantics, shapes and layouts: backend.h. */
#ifndef DTBENCH_CPU_ZOO_H
#define DTBENCH_CPU_ZOO_H

#include "backend.h"

#include <stddef.h>

/* sum of x[n] in 8 interleaved partial sums the compiler vectorises (shared by cpu.c and
 * cpu_zoo.c; the order of the additions is fixed, so results are reproducible). */
static inline float cpu_vsum(const float *restrict x, size_t n) {
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            acc[j] += x[i + j];
    float s = 0.0f;
    for (int j = 0; j < 8; j++)
        s += acc[j];
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* d[n] = v, in blocks of 8 lanes the compiler vectorises (shared by cpu.c and cpu_zoo.c). */
static inline void cpu_vfill(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            d[i + j] = v;
    for (; i < n; i++)
        d[i] = v;
}

void cpu_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y);
void cpu_scale(BackendCtx *ctx, size_t n, float alpha, float *x);
void cpu_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes);

void cpu_maxpool_pad_forward(BackendCtx *ctx, const PadPoolShape *s, const float *x, float *y,
                             int32_t *argmax);
void cpu_maxpool_pad_backward(BackendCtx *ctx, const PadPoolShape *s, const int32_t *argmax,
                              const float *dy, float *dx);
void cpu_avgpool_forward(BackendCtx *ctx, const PadPoolShape *s, const float *x, float *y);
void cpu_avgpool_backward(BackendCtx *ctx, const PadPoolShape *s, const float *dy, float *dx);
void cpu_global_avgpool_forward(BackendCtx *ctx, size_t planes, size_t plane, const float *x,
                                float *y);
void cpu_global_avgpool_backward(BackendCtx *ctx, size_t planes, size_t plane, const float *dy,
                                 float *dx);

void cpu_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale);
void cpu_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                      const float *scale, const float *dy, float *dx);

void cpu_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var);
void cpu_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float *y);
void cpu_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *dy,
                            float *dx, float *dgamma, float *dbeta);

void cpu_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                        const size_t *sizes, float *y);
void cpu_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                         const float *dy, float *const *dxs);
void cpu_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
void cpu_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db);

void cpu_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                         uint8_t *mask);
void cpu_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                          const float *dy, float *dx);

void cpu_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                           const float *w, float *y);
void cpu_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *dy, float *dw);

size_t cpu_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s);
size_t cpu_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s);
void cpu_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                      const float *b, float *y, void *reserve, void *work);
void cpu_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                       float *db, void *work);

/* e^x, within 2 ulp for x in [-87.3, 88.3] and saturating outside (e^-87.3 ~ 1e-38 instead of
 * 0): Cephes' expf (range reduction by ln 2, degree-6 polynomial, exponent bits set directly),
 * written branch-free so that -O2 vectorises the loops that call it (softmax, sigmoid, tanh). */
static inline float cpu_expf(float x) {
    x = x < -87.3f ? -87.3f : x;
    x = x > 88.3f ? 88.3f : x;
    /* x = n ln2 + r, |r| <= ln2/2; n = round(x / ln2), floor taken on a positive value */
    const int n = (int)(x * 1.44269504088896341f + 128.5f) - 128;
    const float fn = (float)n;
    float r = x - fn * 0.693359375f;
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_n = {.i = (n + 127) << 23}; /* 2^n, n in [-126, 127] */
    return p * two_n.f;
}

/* 1 / (1 + e^-x) and tanh x = 2 sigmoid(2x) - 1 (absolute error ~1e-7 near 0) */
static inline float cpu_sigmoidf(float x) {
    return 1.0f / (1.0f + cpu_expf(-x));
}
static inline float cpu_tanhf(float x) {
    return 2.0f / (1.0f + cpu_expf(-2.0f * x)) - 1.0f;
}

#endif
