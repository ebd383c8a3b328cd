/* cuda_kernels.h - launchers of dtbench's own CUDA kernels (kernels/cuda_kernels.cu): what cuBLAS
 * and cuDNN lack. Each queues its kernel on `stream` and returns the launch status; nothing here
 * waits. Callable from C. Shapes follow backend.h (row-major, NCHW). */
#ifndef DTBENCH_CUDA_KERNELS_H
#define DTBENCH_CUDA_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[n,out] += b[out] (broadcast over the batch) */
cudaError_t dtk_bias_add(cudaStream_t stream, int n, int out, const float *b, float *y);

/* db[out] = sum over i of dy[i,out], summed in row order i = 0..n-1 as the CPU backend does */
cudaError_t dtk_bias_grad(cudaStream_t stream, int n, int out, const float *dy, float *db);

/* Softmax cross-entropy over logits[n,c] (backend.h): dlogits[n,c] (skipped when NULL),
 * stats[0] = mean loss, stats[1] = correct predictions. Scratch: row_loss[n] (double) and
 * row_hit[n] (int) of device memory, n <= their capacity. */
cudaError_t dtk_softmax_xent(cudaStream_t stream, int n, int c, const float *logits,
                             const int32_t *labels, float *dlogits, float *stats, double *row_loss,
                             int *row_hit);

/* PyTorch SGD over n parameters (backend.h): g' = g + wd*p; v = momentum*v + g'; p -= lr*v
 * (momentum == 0: p -= lr*g', v untouched) */
cudaError_t dtk_sgd_update(cudaStream_t stream, size_t n, float *p, const float *g, float *v,
                           float lr, float momentum, float weight_decay);

/* x[n] *= s */
cudaError_t dtk_scale(cudaStream_t stream, size_t n, float *x, float s);

#ifdef __cplusplus
}
#endif

#endif
