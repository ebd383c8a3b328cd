// cuda_precision.cu - the conversion kernels of --precision bf16 / fp16 on the GPU
// (kernels/cuda_precision.h): fp32 tensors rounded to bf16 or IEEE half (round to nearest even,
// CUDA's __float2bfloat16_rn / __float2half_rn) for cuBLAS and cuDNN, results widened back, and
// the loss scaler's overflow check. One thread per element, grid-stride loops.
#include "cuda_precision.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

static unsigned blocks(size_t n) {
    size_t b = (n + 255) / 256;
    return b > 65535 ? 65535u : (unsigned)(b ? b : 1);
}

__global__ void k_to_bf16(size_t n, const float *x, __nv_bfloat16 *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}
__global__ void k_to_half(size_t n, const float *x, __half *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}
__global__ void k_from_bf16(size_t n, const __nv_bfloat16 *x, float *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __bfloat162float(x[i]);
}
__global__ void k_from_half(size_t n, const __half *x, float *y) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = __half2float(x[i]);
}
// *flag = 1 if some x[i] is inf or NaN (flag zeroed by the caller)
__global__ void k_nonfinite(size_t n, const float *x, int *flag) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (!isfinite(x[i])) *flag = 1;
}

extern "C" cudaError_t dtp_to_16(cudaStream_t s, int half, size_t n, const float *x, void *y) {
    if (!n) return cudaSuccess;
    if (half)
        k_to_half<<<blocks(n), 256, 0, s>>>(n, x, (__half *)y);
    else
        k_to_bf16<<<blocks(n), 256, 0, s>>>(n, x, (__nv_bfloat16 *)y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtp_from_16(cudaStream_t s, int half, size_t n, const void *x, float *y) {
    if (!n) return cudaSuccess;
    if (half)
        k_from_half<<<blocks(n), 256, 0, s>>>(n, (const __half *)x, y);
    else
        k_from_bf16<<<blocks(n), 256, 0, s>>>(n, (const __nv_bfloat16 *)x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtp_nonfinite(cudaStream_t s, size_t n, const float *x, int *flag) {
    cudaError_t e = cudaMemsetAsync(flag, 0, sizeof(int), s);
    if (e != cudaSuccess || !n) return e;
    k_nonfinite<<<blocks(n), 256, 0, s>>>(n, x, flag);
    return cudaGetLastError();
}
