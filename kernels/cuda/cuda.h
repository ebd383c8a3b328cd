/* cuda.h - the CUDA compute backend (kernels/cuda/cuda.c and cuda_*.c) and what CUDA-only code
 * elsewhere needs from it: its compute stream and device (NCCL transports enqueue on streams that
 * wait on it), and the device's description for the result file. CUDA-only header. */
#ifndef DTBENCH_CUDA_H
#define DTBENCH_CUDA_H

#include "backend.h"
#include "devinfo.h"

#include <cuda_runtime.h>

extern const BackendOps cuda_backend;

/* Visible CUDA devices; 0 when there is none or no usable driver (never fails). */
int cuda_device_count(void);

/* The stream every kernel of ctx runs on, and ctx's device (current on the calling thread). */
cudaStream_t cuda_backend_stream(BackendCtx *ctx);
int cuda_backend_device(BackendCtx *ctx);

/* Name, UUID, PCI bus id and library versions of ctx's device. driver_version is left empty:
 * the driver's own version string comes from NVML (src/results/nvml.c), which the caller may fill
 * in. */
void cuda_device_info(BackendCtx *ctx, DeviceInfo *info);

/* One line per convolution shape planned so far: its shape, and the forward, backward-data and
 * backward-filter algorithms (cuDNN's enum values) with their math types ("FMA": strict fp32),
 * e.g. "conv 64x3x224x224 k7 s2 p3 -> 64: fwd 1 FMA, bwd_data 1 FMA, bwd_filter 1 FMA"; and a
 * last line counting plans made inside a step. For the result file (the recorder stores it per
 * rank). Returns the length the full text needs (as snprintf). */
size_t cuda_conv_algorithms(BackendCtx *ctx, char *buf, size_t len);

#endif
