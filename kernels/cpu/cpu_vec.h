/* cpu_vec.h - the CPU kernels' shared vector helpers, each defined once: VBLOCK and the blocked
 * loops (add, add a scalar, scale, sum, max, fill). The branch-free exp, sigmoid and tanh the CPU
 * kernels call (dt_expf, dt_sigmoidf, dt_tanhf) are kernels/common/elem_math.h's, shared with CUDA.
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

#include "elem_math.h" /* defines: dt_expf, dt_sigmoidf, dt_tanhf */

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

/* max of z[n] (n >= 1), in VBLOCK lanes */
static inline float cpu_vmax(const float *restrict z, size_t n) {
    float acc[VBLOCK];
    for (int j = 0; j < VBLOCK; j++)
        acc[j] = z[0];
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            acc[j] = z[i + j] > acc[j] ? z[i + j] : acc[j];
    float m = acc[0];
    for (int j = 1; j < VBLOCK; j++)
        m = acc[j] > m ? acc[j] : m;
    for (; i < n; i++)
        m = z[i] > m ? z[i] : m;
    return m;
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

#endif
