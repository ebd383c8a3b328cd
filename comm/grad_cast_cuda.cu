/* grad_cast_cuda.cu - --grad-dtype on the GPU (see grad_cast_cuda.h): one grid-stride kernel each
 * way, per element base/half_bits.h's conversion (GradDtype 1 = bf16, 2 = fp16). */
#include "half_bits.h" /* defines: gc_bf16_from_float, gc_fp16_from_float, ..._to_float */
#include "grad_cast_cuda.h"

enum { GC_BF16 = 1 };

static unsigned blocks_for(size_t n) {
    size_t b = (n + 255) / 256;
    return (unsigned)(b < 4096 ? (b ? b : 1) : 4096);
}

__global__ static void pack_kernel(int dt, uint16_t *wire, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        wire[i] = dt == GC_BF16 ? gc_bf16_from_float(src[i]) : gc_fp16_from_float(src[i]);
}

__global__ static void unpack_kernel(int dt, float *dst, const uint16_t *wire, size_t n,
                                     float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (dt == GC_BF16 ? gc_bf16_to_float(wire[i]) : gc_fp16_to_float(wire[i])) * scale;
}

extern "C" cudaError_t grad_cast_pack_cuda(cudaStream_t stream, int dt, uint16_t *wire,
                                           const float *src, size_t n) {
    if (!n) return cudaSuccess;
    pack_kernel<<<blocks_for(n), 256, 0, stream>>>(dt, wire, src, n);
    return cudaGetLastError();
}

extern "C" cudaError_t grad_cast_unpack_cuda(cudaStream_t stream, int dt, float *dst,
                                             const uint16_t *wire, size_t n, float scale) {
    if (!n) return cudaSuccess;
    unpack_kernel<<<blocks_for(n), 256, 0, stream>>>(dt, dst, wire, n, scale);
    return cudaGetLastError();
}
