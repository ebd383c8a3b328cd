/* ref_elementwise.c - naive reference kernels: ReLU, concatenation, residual add, dropout
 * (kernels/cpu/cpu_elementwise.c). Textbook definitions as nested loops with double accumulators;
 * backward passes written as gathers, sharing no structure with the backends' GEMM/im2col
 * formulation (ref_kernels.h). */
#include "ref_kernels.h"

#include <math.h>
#include <stdlib.h>

/* ---- ReLU ---- */

void ref_relu_forward(size_t n, const float *x, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ref_relu_backward(size_t n, const float *x, const float *dy, float *dx) {
    for (size_t i = 0; i < n; i++)
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

/* ---- concatenation, add ---- */

void ref_concat_forward(int batch, int ninputs, const float *const *xs, const size_t *sizes,
                        float *y) {
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        size_t off = 0;
        for (int i = 0; i < ninputs; i++)
            for (size_t j = 0; j < sizes[i]; j++)
                y[n * total + off++] = xs[i][n * sizes[i] + j];
    }
}

void ref_concat_backward(int batch, int ninputs, const size_t *sizes, const float *dy,
                         float *const *dxs) {
    size_t total = 0;
    for (int i = 0; i < ninputs; i++)
        total += sizes[i];
    for (int n = 0; n < batch; n++) {
        size_t off = 0;
        for (int i = 0; i < ninputs; i++)
            for (size_t j = 0; j < sizes[i]; j++, off++)
                if (dxs[i]) dxs[i][n * sizes[i] + j] = dy[n * total + off];
    }
}

void ref_add_forward(size_t n, const float *a, const float *b, float *y) {
    for (size_t i = 0; i < n; i++)
        y[i] = a[i] + b[i];
}

/* ---- dropout ---- */

static uint64_t ref_mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void ref_dropout_forward(const DropoutShape *s, const float *x, float *y, uint8_t *mask) {
    for (int i = 0; i < s->batch; i++) {
        uint64_t g = s->first_sample + (s->origin ? *s->origin : 0) + (uint64_t)i;
        uint64_t key = ref_mix64(s->seed ^ (g * 0x9E3779B97F4A7C15ULL));
        for (size_t j = 0; j < s->size; j++) {
            double u = (double)(ref_mix64(key + j) >> 40) / 16777216.0;
            size_t e = (size_t)i * s->size + j;
            mask[e] = u >= s->rate;
            y[e] = mask[e] ? (float)(x[e] / (1.0 - s->rate)) : 0.0f;
        }
    }
}

void ref_dropout_backward(const DropoutShape *s, const uint8_t *mask, const float *dy, float *dx) {
    for (size_t e = 0; e < (size_t)s->batch * s->size; e++)
        dx[e] = mask[e] ? (float)(dy[e] / (1.0 - s->rate)) : 0.0f;
}
