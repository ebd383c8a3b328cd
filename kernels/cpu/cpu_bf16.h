/* cpu_bf16.h - bf16 matrix products for the CPU backend (--precision bf16): inputs rounded to
 * bfloat16 (round to nearest even), products summed in fp32, as PyTorch's CPU autocast(bfloat16)
 * does for matmul and convolution. Three engines, the first available one picked per context:
 *   "onednn":          oneDNN's matmul and convolution primitives on the CPU's matrix units (AMX,
 *                      else AVX512-BF16), weights rounded once per step (cpu_bf16_onednn.h);
 *                      where dtbench was built with oneDNN and the CPU has bf16 instructions;
 *   "openblas-sbgemm": cblas_sbgemm of the loaded OpenBLAS (built with BUILD_BFLOAT16), fed bf16
 *                      copies of blocks of the operands;
 *   "avx512bf16":      our own blocked GEMM on VDPBF16PS (AVX512-BF16), fp32 accumulators.
 * The last two round every operand in every call (while packing it). None available: bf16 is
 * refused (cpu_bf16_engine returns NULL and says why). */
#ifndef DTBENCH_CPU_BF16_H
#define DTBENCH_CPU_BF16_H

#include "backend.h" /* defines: ConvShape */

#include <stddef.h>
#include <stdint.h>

/* Rounding to bf16 and back: gc_bf16_from_float / gc_bf16_to_float (base/half_bits.h). */
#include "half_bits.h"

/* The engine a context made now would use ("onednn", "openblas-sbgemm" or "avx512bf16"), or NULL
 * with the reason in why (no oneDNN with bf16 instructions, a CPU without AVX512-BF16 and an
 * OpenBLAS without cblas_sbgemm). Tests may force a choice with
 * DTBENCH_BF16_ENGINE=onednn|avx512bf16|openblas-sbgemm|none ("none": as on a CPU without any). */
const char *cpu_bf16_engine(char *why, size_t len);

/* An engine's state: oneDNN's primitives and weight copies, or the packing scratch of the others;
 * made once (cpu_bf16_create) and reused by every product. */
typedef struct CpuBf16 CpuBf16;
/* threads: each large product runs on that many threads (--threads); NULL when no engine is
 * available or out of memory */
CpuBf16 *cpu_bf16_create(int threads);
void cpu_bf16_free(CpuBf16 *g);
/* The engine g runs, and a line on how (oneDNN: the instructions it uses), for the result file. */
const char *cpu_bf16_name(const CpuBf16 *g);
void cpu_bf16_describe(const CpuBf16 *g, char *buf, size_t len);

/* The parameters hold this step's weights (BackendOps.weights_ready: at build and before each
 * step's first forward pass): the engine's rounded weight copies are remade at their next use. */
void cpu_bf16_weights_ready(CpuBf16 *g);

/* Which operand of a product is a parameter (its rounded copy may be kept for the step). */
enum { CPU_BF16_NO_WEIGHT = 0, CPU_BF16_WEIGHT_A = 1, CPU_BF16_WEIGHT_B = 2 };

/* Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C (beta 0: C is not read), with
 * op(A) = A^T when ta, op(B) = B^T when tb, as cblas_sgemm(CblasRowMajor, ...). */
void cpu_bf16_gemm(CpuBf16 *g, int weight, int ta, int tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Convolutions on the engine's own primitives (semantics: backend.h); 0 when the engine has none
 * for the shape (every engine but oneDNN): the caller runs im2col + cpu_bf16_gemm. */
int cpu_bf16_conv_forward(CpuBf16 *g, const ConvShape *s, const float *x, const float *w,
                          const float *b, float *y);
int cpu_bf16_conv_backward(CpuBf16 *g, const ConvShape *s, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db);

/* The engine's own GEMM, whatever the process picked (tests compare both). */
void cpu_bf16_gemm_with(CpuBf16 *g, const char *engine, int ta, int tb, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc);

#endif
