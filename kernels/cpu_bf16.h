/* cpu_bf16.h - bf16 matrix products for the CPU backend (--precision bf16): inputs rounded to
 * bfloat16 (round to nearest even), products summed in fp32, as PyTorch's CPU autocast(bfloat16)
 * does for matmul and convolution. Two engines, picked once per process:
 *   "openblas-sbgemm": cblas_sbgemm of the linked OpenBLAS (built with BUILD_BFLOAT16), found at
 *                      run time with dlsym, fed bf16 copies of blocks of the operands;
 *   "avx512bf16":      our own blocked GEMM on VDPBF16PS (AVX512-BF16), fp32 accumulators.
 * Neither available: bf16 is refused (cpu_bf16_engine returns NULL and says why). */
#ifndef DTBENCH_CPU_BF16_H
#define DTBENCH_CPU_BF16_H

#include <stddef.h>
#include <stdint.h>

/* Rounding to bf16 and back: gc_bf16_from_float / gc_bf16_to_float (base/half_bits.h). */
#include "half_bits.h"

/* The engine this process uses ("openblas-sbgemm" or "avx512bf16"), or NULL with the reason in
 * why (a CPU without AVX512-BF16 and an OpenBLAS without cblas_sbgemm). Tests may force a choice
 * with DTBENCH_BF16_ENGINE=avx512bf16|openblas-sbgemm|none ("none": as on a CPU without either). */
const char *cpu_bf16_engine(char *why, size_t len);

/* Scratch for the packed bf16 blocks, made once (cpu_bf16_create) and reused by every product. */
typedef struct CpuBf16 CpuBf16;
/* threads: our engine splits each large product's columns over that many threads (--threads);
 * NULL when no engine is available or out of memory */
CpuBf16 *cpu_bf16_create(int threads);
void cpu_bf16_free(CpuBf16 *g);

/* Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C (beta 0: C is not read), with
 * op(A) = A^T when ta, op(B) = B^T when tb, as cblas_sgemm(CblasRowMajor, ...). */
void cpu_bf16_gemm(CpuBf16 *g, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* The engine's own GEMM, whatever the process picked (tests compare both). */
void cpu_bf16_gemm_with(CpuBf16 *g, const char *engine, int ta, int tb, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc);

#endif
