/* gpu_module.h - the entry point of dtbench's GPU module, dtbench-cuda.so: the CUDA backend and,
 * where NCCL was found, the NCCL transport and collectives, with the CUDA runtime, cuBLAS(Lt),
 * cuDNN and NCCL they link. The program links none of them: the registry (comm/parts.c) loads the
 * module with dlopen when --device cuda or --transport nccl is asked for, so one build starts in
 * milliseconds on a node without CUDA and refuses a GPU run there in one line. The module uses
 * what it needs of the program (base/, comm/, MPI) through the program's exported symbols. */
#ifndef DTBENCH_GPU_MODULE_H
#define DTBENCH_GPU_MODULE_H

#include "backend.h"
#include "coll.h"
#include "devinfo.h"
#include "transport.h"

#define GPU_MODULE_FILE  "dtbench-cuda.so"
#define GPU_MODULE_ENTRY "dtbench_gpu_module" /* const GpuModule *dtbench_gpu_module(void) */

/* The tables the program and the module share, by size: a module built from other sources than
 * the program is refused rather than called through a different layout. */
#define GPU_MODULE_ABI                                                                             \
    ((unsigned)(sizeof(BackendOps) + 3 * sizeof(TransportOps) + 7 * sizeof(CollOps) +              \
                11 * sizeof(BackendConfig) + 13 * sizeof(TransportConfig) +                        \
                17 * sizeof(DeviceInfo) + 19 * sizeof(Coll)))

typedef struct {
    const char *build; /* "VERSION COMMIT" of the sources it was built from */
    unsigned abi;      /* GPU_MODULE_ABI as the module saw it */
    const BackendOps *backend;
    int (*device_count)(void); /* CUDA devices visible; 0 without GPU or driver (never fails) */
    void (*device_info)(BackendCtx *ctx, DeviceInfo *info);
    const TransportOps *nccl_transport; /* NULL: built without NCCL */
    const CollOps *nccl_coll;           /* NULL: built without NCCL */
} GpuModule;

typedef const GpuModule *(*GpuModuleEntry)(void);

#endif
