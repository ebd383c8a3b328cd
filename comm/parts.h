/* parts.h - the registry of the parts the driver stands on, looked up by name: compute backends
 * (kernels/), exchange strategies, transports and collectives (comm/). comm/parts.c is the only
 * file that knows which optional parts (CUDA, NCCL) were built; those live in the GPU module
 * (comm/gpu_module.h), loaded the first time registry_backend or registry_transport is asked for
 * one. src/run/registry.c adds the driver's own parts (models, schedules, recorders). comm/'s test
 * programs find their parts here too. */
#ifndef DTBENCH_PARTS_H
#define DTBENCH_PARTS_H

#include "backend.h"
#include "coll.h"
#include "devinfo.h"
#include "exchange.h"
#include "transport.h"

/* NULL when no part has that name, or for a GPU part that cannot be loaded (registry_load_error).
 * The backend "cpu" is the CPU posing as a device (as_device.h) when the environment sets
 * DTBENCH_CPU_AS_DEVICE=1 (tests only). */
const BackendOps *registry_backend(const char *name);
/* The backend on host memory (CPU), for strategies staged through the host (comm/staged.c). */
const BackendOps *registry_host_backend(void);
const ExchangeOps *registry_exchange(const char *name);
const TransportOps *registry_transport(const char *name);
/* Collectives of an optional library ("nccl"): NULL when not built, or when no GPU part was asked
 * for (the GPU module is not loaded for them). */
const CollOps *registry_coll(const char *name);
/* Why a GPU part could not be loaded (module missing, a GPU library missing, another build's
 * module), as one line; "" if nothing failed. */
const char *registry_load_error(void);
/* CUDA devices visible to this process for a backend of the GPU module; -1 for any other backend
 * (the CPU's, which needs none). */
int registry_device_count(const BackendOps *be);

/* Every registered part of a kind, for the resolver (src/run/resolve.c): sets *n. */
const BackendOps *const *registry_backends(int *n);
const ExchangeOps *const *registry_exchanges(int *n);
const TransportOps *const *registry_transports(int *n);
/* Parts this build left out (e.g. --device cuda in a CPU-only build) and the options only they
 * read, so that such an option is refused there rather than ignored; NULL-terminated. */
typedef struct {
    const char *label, *reads; /* "--device cuda", "gpus-per-node" */
} RegistryUnbuilt;
const RegistryUnbuilt *registry_unbuilt(void);

/* What this rank computes on (kernels/common/devinfo.h): the GPU and its libraries for a device
 * backend, the processor's model name otherwise. */
void registry_device_info(const BackendOps *be, BackendCtx *ctx, DeviceInfo *info);

/* Comma-separated names, for --help and error messages. */
const char *registry_backend_names(void);
const char *registry_exchange_names(void);
const char *registry_transport_names(void);

/* For the registries' tables (this file's and src/run/registry.c): the entry of `table` (an array
 * of pointers to structs with a `name`) called `key`, or NULL; every entry (sets *n); the names,
 * comma-separated, in a static buffer. Each is a function's whole body. */
#define REGISTRY_COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define REGISTRY_FIND(table, key)                                                                  \
    for (size_t i = 0; i < REGISTRY_COUNT(table); i++)                                             \
        if (!strcmp(table[i]->name, key)) return table[i];                                         \
    return NULL
#define REGISTRY_ALL(table)                                                                        \
    *n = (int)REGISTRY_COUNT(table);                                                               \
    return table
#define REGISTRY_NAMES(table)                                                                      \
    static char names[256];                                                                        \
    if (!names[0])                                                                                 \
        for (size_t i = 0; i < REGISTRY_COUNT(table); i++) {                                       \
            if (i) strcat(names, ",");                                                             \
            strcat(names, table[i]->name);                                                         \
        }                                                                                          \
    return names

#endif
