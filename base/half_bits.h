/* half_bits.h - fp32 <-> bf16/fp16 on bit patterns, written once for every place dtbench rounds to
 * a 2-byte type: as plain static inline C by comm/grad_cast.c (--grad-dtype, MPI's wire type) and
 * kernels/cpu/cpu_bf16.c (--precision bf16 on the CPU), and as __host__ __device__ functions by
 * nvcc in comm/grad_cast_cuda.cu (NCCL's wire type) and kernels/cuda/cuda_precision_kernels.cu
 * (--precision bf16/fp16 on the GPU), so a value is rounded the same way wherever it is rounded.
 * Integer arithmetic, but for two exact or default-rounded float operations on fp16 subnormals
 * (with flush-to-zero they still give the right result: the operands are normal). Round to nearest
 * even; fp16 overflows (|x| >= 65520) to inf, NaN stays a quiet NaN with its sign. Checked
 * against a naive reference on every pattern by tests/test_grad_cast.c. */
#ifndef DTBENCH_HALF_BITS_H
#define DTBENCH_HALF_BITS_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GC_HD __host__ __device__ static inline
#else
#define GC_HD static inline
#endif

GC_HD uint32_t gc_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

GC_HD float gc_float(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Branch-free (selects only), so that the loops over buffers vectorize. */
GC_HD uint16_t gc_bf16_from_float(float x) {
    uint32_t u = gc_bits(x);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16; /* ties to even; a carry is right */
    uint32_t nan = (u >> 16) | 0x0040u;                  /* quiet, sign and payload kept */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

GC_HD float gc_bf16_to_float(uint16_t h) {
    return gc_float((uint32_t)h << 16);
}

GC_HD uint16_t gc_fp16_from_float(float x) {
    uint32_t u = gc_bits(x), a = u & 0x7fffffffu, sign = (u >> 16) & 0x8000u;
    /* normal result (2^-14 <= |x| < 65520): rebias 127 -> 15, round the 13 dropped bits to even
     * (a carry into the exponent is right, up to 0x7c00 = inf just below 65520's tie) */
    uint32_t normal = (a - 0x38000000u + 0x0fffu + ((a >> 13) & 1u)) >> 13;
    /* subnormal result (|x| < 2^-14): |x| + 0.5 puts |x| / 2^-24 rounded to nearest even (the
     * FPU's default rounding, which dtbench never changes) in the low bits of 0.5's pattern */
    uint32_t sub = gc_bits(gc_float(a) + 0.5f) - 0x3f000000u;
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    /* the selects as masks: every path is computed, which lets the loops vectorize */
    uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u), is_big = 0u - (uint32_t)(a >= 0x477ff000u);
    uint32_t is_normal = (0u - (uint32_t)(a >= 0x38800000u)) & ~is_big;
    uint32_t big = (nan & is_nan) | (0x7c00u & ~is_nan); /* NaN, or inf from 65520 up */
    uint32_t r = (big & is_big) | (normal & is_normal) | (sub & ~(is_big | is_normal));
    return (uint16_t)(sign | r);
}

GC_HD float gc_fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t normal = ((e + 112u) << 23) | (m << 13);
    uint32_t infnan = 0x7f800000u | (m << 13);
    uint32_t sub = gc_bits((float)(int32_t)m * 0x1p-24f); /* m 2^-24: exact, a normal fp32 (or 0) */
    uint32_t is_top = 0u - (uint32_t)(e == 0x1fu), is_sub = 0u - (uint32_t)(e == 0u);
    return gc_float(sign | (infnan & is_top) | (sub & is_sub) | (normal & ~(is_top | is_sub)));
}

#endif
