/* cuda_precision.h - --precision on the GPU (docs/gpu.md "Precision"). Written without a GPU:
 * compiled and linked in CI, run only by the GPU tests.
 *   fp32: cuBLAS default math (no TF32), cuDNN algorithms under CUDNN_FMA_MATH only (cuda.c);
 *   tf32: cuBLAS CUBLAS_TF32_TENSOR_OP_MATH, cuDNN algorithms under CUDNN_TENSOR_OP_MATH on fp32
 *         tensors (TF32 tensor cores);
 *   bf16 / fp16: the operands of every GEMM rounded into 16-bit copies, cublasGemmEx with
 *         CUDA_R_16BF / CUDA_R_16F inputs, fp32 output and CUBLAS_COMPUTE_32F (fp32 accumulation);
 *         convolutions on 16-bit copies of x, W, dy with cuDNN descriptors of that type and a
 *         CUDNN_DATA_FLOAT compute type, results (y, dx, dW; rounded to 16 bits as autocast's are)
 *         widened back to fp32. Activations, parameters, gradients, optimizer state, batch-norm
 *         statistics, softmax and loss stay fp32.
 * CUDA-only header, callable from C. */
#ifndef DTBENCH_CUDA_PRECISION_H
#define DTBENCH_CUDA_PRECISION_H

#include "backend.h"
#include "cuda_plan.h" /* defines: ColGemm */

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kernels (cuda_precision_kernels.cu), queued on s: y[n] = 16-bit x (half: IEEE half, else bf16),
 * round to nearest even; x[n] widened to fp32; *flag = 1 if some x[i] is inf/NaN, else 0 */
cudaError_t dtp_to_16(cudaStream_t s, int half, size_t n, const float *x, void *y);
cudaError_t dtp_from_16(cudaStream_t s, int half, size_t n, const void *x, float *y);
cudaError_t dtp_nonfinite(cudaStream_t s, size_t n, const float *x, int *flag);
/* x[n] = uniform values in [-1, 1) from the counter-based hash of (seed, i), stored as fp32
 * (bytes 4) or 16-bit (bytes 2; half: IEEE half, else bf16): inputs for timing algorithms, never
 * zeros (which some kernels run faster on) */
cudaError_t dtp_fill(cudaStream_t s, int bytes, int half, size_t n, uint64_t seed, void *x);

#ifndef __CUDACC__
/* host side (cuda_precision.c) */
#include "cuda_ctx.h" /* defines: struct BackendCtx, ConvPlan */

/* At init: the cuBLAS math mode of the precision, the overflow flag. */
void cuda_prec_init(BackendCtx *ctx, Precision p);
int cuda_precision_ok(Precision p, int threads, char *why, size_t len);
int cuda_prec_16bit(const BackendCtx *ctx); /* bf16 or fp16 */
/* C = op(A) op(B) + beta C (column-major, alpha 1) in the context's precision */
void cuda_prec_gemm(BackendCtx *ctx, ColGemm g, const float *a, const float *b, float beta,
                    float *c);
/* Scratch of at least `bytes` (grown, synchronising, only on a first larger request: in the
 * first step) for 16-bit copies and fc intermediates. */
void *cuda_prec_scratch(BackendCtx *ctx, size_t bytes);
/* The 16-bit copy weights_ready made of params x[0 .. count), NULL when x is not in them. */
const void *cuda_prec_weights16(const BackendCtx *ctx, const float *x, size_t count);
int cuda_all_finite(BackendCtx *ctx, size_t n, const float *x);
/* backend.h's weights_ready: bf16/fp16 keep a 16-bit copy of the parameters, made once per step,
 * which the GEMMs and convolutions take instead of converting the weights at every call. */
void cuda_weights_ready(BackendCtx *ctx, const float *params, size_t n);
/* Bytes of 16-bit copies a convolution needs beyond cuDNN's workspace (0 in fp32/tf32). */
size_t cuda_prec_conv_extra(const BackendCtx *ctx, const ConvShape *s);
/* cuDNN's data type for the plan's x, W, y descriptors (float, bf16 or half). */
cudnnDataType_t cuda_prec_conv_type(const BackendCtx *ctx);
/* The convolution on 16-bit copies made in work after cuDNN's workspace (conv_ws bytes). */
void cuda_prec_conv_forward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                            float *y, void *work, size_t conv_ws);
void cuda_prec_conv_backward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, void *work, size_t conv_ws);
void cuda_prec_free(BackendCtx *ctx);
/* The first line of /ranks/kernel_choices: the precision and its cuBLAS/cuDNN modes. */
void cuda_prec_describe(const BackendCtx *ctx, char *line, size_t len);
#endif

#ifdef __cplusplus
}
#endif

#endif
