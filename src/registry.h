/* registry.h - looks up the pluggable parts by name: compute backends, exchange strategies,
 * transports, schedules, recorders and models. registry.c is the only file with #ifdef HAVE_CUDA
 * and friends. The GPU parts (the cuda backend, the nccl transport and collectives) are loaded
 * (src/gpu_module.h) the first time registry_backend or registry_transport is asked for one. */
#ifndef DTBENCH_REGISTRY_H
#define DTBENCH_REGISTRY_H

#include "backend.h"
#include "coll.h"
#include "devinfo.h"
#include "exchange.h"
#include "transport.h"
#include "model.h"
#include "recorder.h"
#include "schedule.h"

/* NULL for an unknown name, or for a GPU part that cannot be loaded (registry_load_error). */
const BackendOps *registry_backend(const char *name);
/* The backend on host memory (CPU), for strategies staged through the host (comm/staged.c). */
const BackendOps *registry_host_backend(void);
const ExchangeOps *registry_exchange(const char *name);
const RecorderOps *registry_recorder(const char *name);
const ModelDesc *registry_model(const char *name);
const TransportOps *registry_transport(const char *name);
const ScheduleOps *registry_schedule(const char *name);

/* Every registered component of a kind, for the resolver (src/resolve.c): sets *n. */
const BackendOps *const *registry_backends(int *n);
const ExchangeOps *const *registry_exchanges(int *n);
const TransportOps *const *registry_transports(int *n);
const ScheduleOps *const *registry_schedules(int *n);
/* Components this build left out (e.g. --device cuda in a CPU-only build) and the options only
 * they read, so that such an option is refused there rather than ignored; NULL-terminated. */
typedef struct {
    const char *label, *reads; /* "--device cuda", "gpus-per-node" */
} RegistryUnbuilt;
const RegistryUnbuilt *registry_unbuilt(void);
/* Collectives of an optional library ("nccl"): NULL when not built, or when no GPU part was asked
 * for (the GPU module is not loaded for them). */
const CollOps *registry_coll(const char *name);
/* Why a GPU part could not be loaded (module missing, a GPU library missing, another build's
 * module), as one line; "" if nothing failed. */
const char *registry_load_error(void);
/* CUDA devices visible to this process for a backend of the GPU module; -1 for any other backend
 * (the CPU's, which needs none). */
int registry_device_count(const BackendOps *be);

/* What this rank computes on (kernels/devinfo.h): the GPU and its libraries for a device backend,
 * the processor's model name otherwise. */
void registry_device_info(const BackendOps *be, BackendCtx *ctx, DeviceInfo *info);

/* Comma-separated names, for --help and error messages. */
const char *registry_backend_names(void);
const char *registry_exchange_names(void);
const char *registry_model_names(void);
const char *registry_transport_names(void);
const char *registry_schedule_names(void);

#endif
