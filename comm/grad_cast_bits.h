/* grad_cast_bits.h - fp32 <-> bf16/fp16 on bit patterns, written once and compiled twice: as
 * plain static inline C by comm/grad_cast.c (MPI's wire type, host memory) and as
 * __host__ __device__ functions by nvcc in comm/grad_cast_cuda.cu (NCCL's wire type, GPU
 * memory), so a gradient is rounded the same way whichever transport carries it. Integer
 * arithmetic only: independent of the FPU's rounding mode and flush-to-zero. Round to nearest
 * even; fp16 overflows (|x| >= 65520) to inf, NaN stays a quiet NaN with its sign. Checked
 * against a naive reference on every pattern by tests/test_grad_cast.c. */
#ifndef DTBENCH_GRAD_CAST_BITS_H
#define DTBENCH_GRAD_CAST_BITS_H

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

GC_HD uint16_t gc_bf16_from_float(float x) {
    uint32_t u = gc_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* ties to even; a carry into the exponent is right */
    return (uint16_t)(u >> 16);
}

GC_HD float gc_bf16_to_float(uint16_t h) {
    return gc_float((uint32_t)h << 16);
}

GC_HD uint16_t gc_fp16_from_float(float x) {
    uint32_t u = gc_bits(x), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and inf): inf */
    if (a >= 0x38800000u) {                                   /* normal: >= 2^-14 */
        uint32_t r = a - 0x38000000u;                         /* exponent bias 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    uint32_t e = a >> 23; /* subnormal result: m * 2^-24, m = significand >> (126 - e) */
    if (e < 102) return sign; /* at most 2^-25 (a tie with 0): zero */
    uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e; /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* 1024 is the smallest normal: right */
    return (uint16_t)(sign | q);
}

GC_HD float gc_fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return gc_float(sign | 0x7f800000u | (m << 13));
    if (e) return gc_float(sign | ((e + 112) << 23) | (m << 13));
    if (!m) return gc_float(sign);
    uint32_t k = 0; /* subnormal m * 2^-24: normalise the significand (exact) */
    while (!(m & 0x400u)) m <<= 1, k++;
    return gc_float(sign | ((113 - k) << 23) | ((m & 0x3ffu) << 13));
}

#endif
