/* cpu_bf16_onednn.h - the oneDNN engine of --precision bf16 on the CPU: matrix products and
 * convolutions with bf16 inputs and fp32 accumulation on the CPU's matrix units (AMX where present,
 * else AVX512-BF16) through oneDNN's matmul and convolution primitives, as PyTorch's CPU
 * autocast(bfloat16) runs them. Weights are rounded (and, for convolutions, laid out as the
 * primitive wants them) once per parameter generation, i.e. once per training step, not per call
 * (cpu_dnnl_weights_ready); inputs and gradients are rounded per call.
 *
 * Built when configure finds oneDNN (Debian: libdnnl-dev; kernels/cpu/cpu_bf16_onednn.c), otherwise
 * kernels/cpu/cpu_bf16_onednn_none.c, whose cpu_dnnl_available() says so. */
#ifndef DTBENCH_CPU_BF16_ONEDNN_H
#define DTBENCH_CPU_BF16_ONEDNN_H

#include "backend.h"

#include <stddef.h>

typedef struct CpuDnnl CpuDnnl;

/* 1 if this engine runs here: oneDNN built in and a CPU with native bf16 products (oneDNN's
 * effective ISA avx512_core_bf16 or above); else 0 with the reason in why. isa (may be NULL): the
 * ISA oneDNN uses, e.g. "Intel AVX-512 with ... Intel AMX ...". */
int cpu_dnnl_available(char *why, size_t len, const char **isa);

/* threads: oneDNN's threads (--threads). NULL when not available. */
CpuDnnl *cpu_dnnl_create(int threads);
void cpu_dnnl_free(CpuDnnl *d);

/* The parameters hold this step's weights (BackendOps.weights_ready, before each step's first
 * forward pass, after the update): the rounded weights are remade at their next use. A weight is
 * known by its address: between two calls its buffer must hold the same values (the parameters
 * of one model, written only between steps). */
void cpu_dnnl_weights_ready(CpuDnnl *d);

/* Row-major C[m,n] = alpha op(A) op(B) + beta C (beta 0: C is not read), as cblas_sgemm, with
 * inputs rounded to bf16. weight: 1 when A, 2 when B is a parameter (its rounded copy is kept for
 * the generation), 0 neither. Products with k <= CPU_DNNL_SMALL_K (weight gradients: k is the
 * batch) run as fp32 GEMMs of the rounded inputs (the same arithmetic: a product of two bf16
 * values is exact in fp32): their cost is writing C, where the matrix units gain nothing. */
#define CPU_DNNL_SMALL_K 128
void cpu_dnnl_gemm(CpuDnnl *d, int weight, int ta, int tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* Convolutions (semantics: backend.h) through oneDNN's primitives; 0 when oneDNN has no
 * implementation for the shape (the caller then runs im2col + cpu_dnnl_gemm). */
int cpu_dnnl_conv_forward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                          const float *b, float *y);
int cpu_dnnl_conv_backward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db);

#endif
