// cuda_precision_kernels.cu - the conversion kernels of --precision bf16 / fp16 on the GPU
// (kernels/cuda/cuda_precision.h): fp32 tensors rounded to bf16 or IEEE half (round to nearest
// even, base/half_bits.h's conversions, the same bits as the CPU's --precision bf16 and
// --grad-dtype) for cuBLAS and cuDNN, results widened back, and the loss scaler's overflow check.
// One thread per element, grid-stride loops.
#include "cuda_precision.h"
#include "cuda_elem.h" /* defines: dt_mix64 */
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "half_bits.h" /* defines: gc_bf16_from_float, gc_fp16_from_float, ..._to_float */

template <int HALF> __global__ void k_to_16(size_t n, const float *x, uint16_t *y)
{
    GRID_LOOP(i, n) y[i] = HALF ? gc_fp16_from_float(x[i]) : gc_bf16_from_float(x[i]);
}
template <int HALF> __global__ void k_from_16(size_t n, const uint16_t *x, float *y)
{
    GRID_LOOP(i, n) y[i] = HALF ? gc_fp16_to_float(x[i]) : gc_bf16_to_float(x[i]);
}
// *flag = 1 if some x[i] is inf or NaN (flag zeroed by the caller)
__global__ void k_nonfinite(size_t n, const float *x, int *flag)
{
    GRID_LOOP(i, n)
        if (!isfinite(x[i])) *flag = 1;
}

extern "C" cudaError_t dtp_to_16(cudaStream_t s, int half, size_t n, const float *x, void *y)
{
    if (!n) return cudaSuccess;
    if (half)
        k_to_16<1><<<blocks_for(n), THREADS, 0, s>>>(n, x, (uint16_t *)y);
    else
        k_to_16<0><<<blocks_for(n), THREADS, 0, s>>>(n, x, (uint16_t *)y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtp_from_16(cudaStream_t s, int half, size_t n, const void *x, float *y)
{
    if (!n) return cudaSuccess;
    if (half)
        k_from_16<1><<<blocks_for(n), THREADS, 0, s>>>(n, (const uint16_t *)x, y);
    else
        k_from_16<0><<<blocks_for(n), THREADS, 0, s>>>(n, (const uint16_t *)x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtp_nonfinite(cudaStream_t s, size_t n, const float *x, int *flag)
{
    cudaError_t e = cudaMemsetAsync(flag, 0, sizeof(int), s);
    if (e != cudaSuccess || !n) return e;
    k_nonfinite<<<blocks_for(n), THREADS, 0, s>>>(n, x, flag);
    return cudaGetLastError();
}

// x[i] = uniform in [-1, 1) from the hash of seed + i, as fp32 (BYTES 4) or 16-bit
template <int BYTES, int HALF> __global__ void k_fill(size_t n, uint64_t seed, void *x)
{
    GRID_LOOP(i, n) {
        const float u = (float)(dt_mix64(seed + i) >> 40) * (2.0f / 16777216.0f) - 1.0f;
        if (BYTES == 4)
            ((float *)x)[i] = u;
        else
            ((uint16_t *)x)[i] = HALF ? gc_fp16_from_float(u) : gc_bf16_from_float(u);
    }
}

extern "C" cudaError_t dtp_fill(cudaStream_t s, int bytes, int half, size_t n, uint64_t seed,
                                void *x)
{
    if (!n) return cudaSuccess;
    if (bytes == 4)
        k_fill<4, 0><<<blocks_for(n), THREADS, 0, s>>>(n, seed, x);
    else if (half)
        k_fill<2, 1><<<blocks_for(n), THREADS, 0, s>>>(n, seed, x);
    else
        k_fill<2, 0><<<blocks_for(n), THREADS, 0, s>>>(n, seed, x);
    return cudaGetLastError();
}
