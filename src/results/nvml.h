/* nvml.h - the few NVML calls dtbench needs (GPU power, memory, utilisation, driver version),
 * loaded at run time with dlopen("libnvidia-ml.so.1"): the library ships with the NVIDIA driver,
 * not with the CUDA toolkit, so a build machine without a driver (CI) neither has it nor needs it.
 * Builds without CUDA; every function fails politely when the library is missing. */
#ifndef DTBENCH_NVML_H
#define DTBENCH_NVML_H

#include <stddef.h>

typedef struct NvmlGpu NvmlGpu;

/* Loads and initialises NVML (once per process; thread-safe after the first call returns).
 * 0 on success; otherwise -1 with the reason in err. */
int nvml_open(char *err, size_t len);

/* The GPU with this PCI bus id ("0000:3B:00.0", as cudaDeviceGetPCIBusId writes it); NULL with
 * the reason in err. */
NvmlGpu *nvml_gpu(const char *pci_bus_id, char *err, size_t len);

/* One reading: board power in W, device memory in use in MiB (all processes), GPU utilisation in
 * percent over NVML's last sample period. A value NVML cannot give is NaN. 0 when at least one
 * value was read. */
int nvml_read(NvmlGpu *gpu, double *power_w, double *memory_mib, double *utilization);

/* The driver's version ("580.65.06"); empty when NVML is not available. */
void nvml_driver_version(char *buf, size_t len);

#endif
