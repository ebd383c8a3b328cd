/* elem_math.h - e^x, sigmoid and tanh, defined once for every backend: the CPU kernels
 * (kernels/cpu/cpu_vec.h's loops, cpu_optim.c's softmax, cpu_recurrent.c's LSTM cell) and the CUDA
 * kernels (through kernels/cuda/cuda_elem.h) call these same functions, so the LSTM cell and the
 * softmax compute the same bits on both devices.
 *
 * Plain C11 and C++17 with only +, -, * and / (correctly rounded on host and device; the CUDA
 * kernels are built with -fmad=false) and no libm call; branch-free, so that GCC's -O2 vectoriser
 * takes the loops that call them. Compiled by nvcc as __host__ __device__ functions. */
#ifndef DTBENCH_ELEM_MATH_H
#define DTBENCH_ELEM_MATH_H

#include <stdint.h>
#include <string.h>

#ifndef DT_HD
#ifdef __CUDACC__
#define DT_HD __host__ __device__ static inline
#else
#define DT_HD static inline
#endif
#endif

/* e^x, within 2 ulp for x in [-87.3, 88.3] and saturating outside (e^-87.3 ~ 1e-38 instead of
 * 0): Cephes' expf (range reduction by ln 2, degree-6 polynomial, exponent bits set directly). */
DT_HD float dt_expf(float x) {
    const float x0 = x; /* NaN in, NaN out; the clamps below send NaN to -87.3 so that the
                         * float-to-int conversion never sees it (UBSan: INT_MIN - 128) */
    x = x > -87.3f ? x : -87.3f;
    x = x < 88.3f ? x : 88.3f;
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
    const int32_t bits = (n + 127) << 23; /* 2^n, n in [-126, 127] */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x0 == x0 ? p * two_n : x0;
}

/* 1 / (1 + e^-x) and tanh x = 2 sigmoid(2x) - 1 (absolute error ~1e-7 near 0) */
DT_HD float dt_sigmoidf(float x) {
    return 1.0f / (1.0f + dt_expf(-x));
}
DT_HD float dt_tanhf(float x) {
    return 2.0f / (1.0f + dt_expf(-2.0f * x)) - 1.0f;
}

#endif
