/* cuda.h - the CUDA compute backend (kernels/cuda.c) and what CUDA-only code elsewhere needs
 * from it: its compute stream and device (NCCL transports enqueue on streams that wait on it),
 * and the device's description for the result file. CUDA-only header. */
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
 * the driver's own version string comes from NVML (src/nvml.c), which the caller may fill in. */
void cuda_device_info(BackendCtx *ctx, DeviceInfo *info);

#endif
