/* as_device.h - the CPU backend posing as a device, for tests of every host-staging path without
 * a GPU: the exchange's strategies and transports, the pipeline's messages, the driver's
 * synchronisation. Its buffers are host allocations declared device memory
 * (BackendOps.device_memory 1), so every part that honours the flag reaches them only through
 * upload and download, which it counts (a fake device, kernels/fake/fake_device.h). One backend, in
 * two forms:
 *   as_device_backend(0): the CPU backend's kernels all run on those buffers (dtbench with
 *     DTBENCH_CPU_AS_DEVICE=1, comm/parts.c; tests/exchange_avg --device staged);
 *   as_device_backend(1), sealed: the buffers hold every float byte-swapped and only the memory
 *     operations and the optimizer steps (SGD, AdamW: decode, the CPU's step, encode) are
 *     offered, so a part that read or wrote a buffer directly would see garbage
 *     (tests/staged_check.c). */
#ifndef DTBENCH_AS_DEVICE_H
#define DTBENCH_AS_DEVICE_H

#include "backend.h"

const BackendOps *as_device_backend(int sealed);

/* Bytes moved by upload and download (both forms) since the program started. */
void as_device_traffic(double *uploaded, double *downloaded);

#endif
