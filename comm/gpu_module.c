/* gpu_module.c - the GPU module's entry point (see gpu_module.h): what it holds, for the registry
 * that loaded it. Compiled into dtbench-cuda.so only. */
#include <config.h>
#include "gpu_module.h"
#include "cuda.h" /* defines: cuda_backend, cuda_device_count, cuda_device_info */

#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif

/* Present when the module was built with NCCL (comm/libdtnccl.a linked in), NULL otherwise. */
extern const TransportOps nccl_transport __attribute__((weak)); /* comm/transport_nccl.c */
extern const CollOps coll_nccl __attribute__((weak));           /* comm/coll_nccl.c */

const GpuModule *dtbench_gpu_module(void);

const GpuModule *dtbench_gpu_module(void) {
    static GpuModule m;
    m = (GpuModule){
        .build = PACKAGE_VERSION " " DTBENCH_GIT_COMMIT,
        .abi = GPU_MODULE_ABI,
        .backend = &cuda_backend,
        .device_count = cuda_device_count,
        .device_info = cuda_device_info,
        .nccl_transport = &nccl_transport,
        .nccl_coll = &coll_nccl,
    };
    return &m;
}
