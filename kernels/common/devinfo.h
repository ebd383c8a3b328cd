/* devinfo.h - what a rank computes on, for the result file's per-rank metadata (/ranks/device_*
 * and the library versions). Filled by the backend that owns the device (the CUDA backend:
 * cuda_device_info in cuda.h; CPU ranks: the processor's model name); fields that do not apply
 * stay empty strings. Plain C, no CUDA. */
#ifndef DTBENCH_DEVINFO_H
#define DTBENCH_DEVINFO_H

#define DEVINFO_LEN 128

typedef struct {
    char name[DEVINFO_LEN];            /* "NVIDIA H100 80GB HBM3", or the CPU model */
    char uuid[DEVINFO_LEN];            /* "GPU-8c1b...", as nvidia-smi -L prints it */
    char pci_bus_id[DEVINFO_LEN];      /* "0000:3B:00.0" */
    char driver_version[DEVINFO_LEN];  /* NVML's driver version ("580.65.06"), else CUDA's */
    char cuda_runtime[DEVINFO_LEN];    /* "13.0" (cudaRuntimeGetVersion) */
    char cuda_driver_api[DEVINFO_LEN]; /* highest CUDA version the driver supports */
    char cudnn[DEVINFO_LEN];           /* "9.19.0" (cudnnGetVersion) */
    char cublas[DEVINFO_LEN];          /* "13.1.0" */
    char nccl[DEVINFO_LEN];            /* "2.28.9" (ncclGetVersion); empty without NCCL */
} DeviceInfo;

#endif
