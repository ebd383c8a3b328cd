/* cpu_vec.h - the CPU kernels' shared vector helpers, each defined once: VBLOCK and the blocked
 * loops (add, add a scalar, scale, sum, fill) and the branch-free exp, sigmoid and tanh.
 *
 * Vectorisation: GCC 12 at plain -O2 uses the "very cheap" vectoriser cost model, which leaves a
 * loop scalar when it would need a remainder loop or a runtime aliasing check. The element-wise
 * loops are therefore written as VBLOCK-wide blocks (an inner loop of constant length, on restrict
 * pointers or through block-local temporaries) plus a scalar tail, or, for SGD, as a main loop over
 * a multiple of VBLOCK elements plus a tail: shapes that -O2 vectorises (checked with
 * -fopt-info-vec); -O3 and clang vectorise them too. Left as plain loops they stayed scalar at -O2
 * (SGD over FCN-5's 118.6M parameters then took ~1.5-2x as long as the memory-bound vector loop).
 */
#ifndef DTBENCH_CPU_VEC_H
#define DTBENCH_CPU_VEC_H

#include <stddef.h>
#include <stdint.h>

#define VBLOCK 8 /* lanes of a blocked loop: 8 floats, one AVX register */

/* y[n] += alpha * x[n] (alpha 1: a plain sum, the product folded away) */
static inline void cpu_vaxpy(float *restrict y, const float *restrict x, size_t n, float alpha) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] += alpha * x[i + j];
    for (; i < n; i++)
        y[i] += alpha * x[i];
}

/* d[n] += v */
static inline void cpu_vadd_scalar(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] += v;
    for (; i < n; i++)
        d[i] += v;
}

/* d[n] *= v */
static inline void cpu_vscale(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] *= v;
    for (; i < n; i++)
        d[i] *= v;
}

/* sum of x[n] in VBLOCK interleaved partial sums the compiler vectorises (the order of the
 * additions is fixed, so results are reproducible) */
static inline float cpu_vsum(const float *restrict x, size_t n) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            acc[j] += x[i + j];
    float s = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j];
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* d[n] = v, in blocks of VBLOCK lanes the compiler vectorises. */
static inline void cpu_vfill(float *restrict d, size_t n, float v) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] = v;
    for (; i < n; i++)
        d[i] = v;
}

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
