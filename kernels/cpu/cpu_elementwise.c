/* cpu_elementwise.c - the CPU backend's element-wise kernels: ReLU, dropout, residual add,
 * concatenation, and the axpy / scale / copy used for gradient accumulation and loss scaling.
 * Semantics: backend.h. */
#include "cpu_kernels.h"
#include "cpu_vec.h"
#include "rng.h" /* defines: rng_mix, rng_uniform (the mask of backend.h) */

#include <string.h>

/* ---- ReLU ---------------------------------------------------------------------------------- */
/* In place is allowed (y == x, dx == dy or dx == y): each block is loaded into temporaries before
 * it is stored, which is also what lets -O2 vectorise without restrict. */

void cpu_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float t[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = x[i + j];
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = t[j] > 0.0f ? t[j] : 0.0f;
    }
    for (; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void cpu_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx) {
    (void)ctx;
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float ty[VBLOCK], tg[VBLOCK];
        for (int j = 0; j < VBLOCK; j++) {
            ty[j] = y[i + j];
            tg[j] = dy[i + j];
        }
        for (int j = 0; j < VBLOCK; j++)
            dx[i + j] = ty[j] > 0.0f ? tg[j] : 0.0f;
    }
    for (; i < n; i++)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- axpy, scale ----------------------------------------------------------------------------- */

void cpu_axpy(BackendCtx *ctx, size_t n, float alpha, const float *restrict x, float *restrict y) {
    (void)ctx;
    cpu_vaxpy(y, x, n, alpha);
}

void cpu_scale(BackendCtx *ctx, size_t n, float alpha, float *restrict x) {
    (void)ctx;
    cpu_vscale(x, n, alpha);
}

void cpu_scale_by(BackendCtx *ctx, size_t n, float alpha, const float *factor, float *restrict x) {
    (void)ctx;
    cpu_vscale(x, n, alpha * factor[0]); /* the product scale() would be given */
}

void cpu_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (dst != src) memmove(dst, src, bytes);
}

/* ---- concatenation, residual add ------------------------------------------------------------- */

void cpu_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                        const size_t *sizes, float *y) {
    (void)ctx;
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        float *yn = y + n * total;
        for (int i = 0; i < ninputs; i++) {
            memcpy(yn, xs[i] + n * sizes[i], sizes[i] * sizeof(float));
            yn += sizes[i];
        }
    }
}

void cpu_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                         const float *dy, float *const *dxs) {
    (void)ctx;
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        const float *g = dy + n * total;
        for (int i = 0; i < ninputs; i++) {
            if (dxs[i]) memcpy(dxs[i] + n * sizes[i], g, sizes[i] * sizeof(float));
            g += sizes[i];
        }
    }
}

void cpu_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y) {
    (void)ctx;
    size_t i = 0; /* y may alias a or b: each block is loaded before it is stored */
    for (; i + VBLOCK <= n; i += VBLOCK) {
        float t[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = a[i + j] + b[i + j];
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = t[j];
    }
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

void cpu_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db) {
    (void)ctx;
    if (da && da != dy) memcpy(da, dy, n * sizeof(float));
    if (db && db != dy) memcpy(db, dy, n * sizeof(float));
}

/* ---- dropout --------------------------------------------------------------------------------- */

void cpu_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                         uint8_t *mask) {
    (void)ctx;
    const float keep_scale = 1.0f / (1.0f - s->rate);
    const uint64_t first = s->first_sample + (s->origin ? *s->origin : 0);
    for (int i = 0; i < s->batch; i++) {
        const uint64_t g = first + (uint64_t)i;
        const uint64_t key = rng_mix(s->seed ^ (g * 0x9E3779B97F4A7C15ULL));
        const float *xi = x + (size_t)i * s->size;
        float *yi = y + (size_t)i * s->size;
        uint8_t *mi = mask + (size_t)i * s->size;
        for (size_t j = 0; j < s->size; j++) {
            const float u = rng_uniform(key + j);
            const int keep = u >= s->rate;
            mi[j] = (uint8_t)keep;
            yi[j] = keep ? xi[j] * keep_scale : 0.0f;
        }
    }
}

void cpu_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                          const float *dy, float *dx) {
    (void)ctx;
    const float keep_scale = 1.0f / (1.0f - s->rate);
    const size_t n = (size_t)s->batch * s->size;
    for (size_t i = 0; i < n; i++)
        dx[i] = mask[i] ? dy[i] * keep_scale : 0.0f;
}
