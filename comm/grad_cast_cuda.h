/* grad_cast_cuda.h - --grad-dtype on the GPU: fp32 gradients to and from the 2-byte wire type
 * that NCCL reduces natively (ncclBfloat16, ncclFloat16), queued on a stream. The per-element
 * conversion is base/half_bits.h's, the same as the host's. CUDA and NCCL builds only
 * (comm/grad_cast_cuda.cu, used by comm/coll_nccl.c). */
#ifndef DTBENCH_GRAD_CAST_CUDA_H
#define DTBENCH_GRAD_CAST_CUDA_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
/* wire[n] = cast of src[n]; dt: GradDtype (bf16 or fp16). Returns the launch's error. */
cudaError_t grad_cast_pack_cuda(cudaStream_t stream, int dt, uint16_t *wire, const float *src,
                                size_t n);
/* dst[n] = scale * value of wire[n] */
cudaError_t grad_cast_unpack_cuda(cudaStream_t stream, int dt, float *dst, const uint16_t *wire,
                                  size_t n, float scale);
#ifdef __cplusplus
}
#endif

#endif
