/* parts.c - the tables of compute backends, exchange strategies, transports and collectives (see
 * parts.h). The only place that knows which optional parts were built: the CUDA backend and NCCL's
 * transport and collectives are added to these tables under #ifdef HAVE_CUDA / HAVE_NCCL, here
 * and nowhere else. */
#include <config.h>
#include "parts.h"
#include "as_device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(HAVE_CUDA) && defined(HAVE_CUDNN)
#include "cuda.h" /* defines: cuda_backend, cuda_device_info */
#define DTBENCH_CUDA_BACKEND 1
#if defined(HAVE_NCCL)
#define DTBENCH_NCCL 1
extern const TransportOps nccl_transport; /* comm/transport_nccl.c */
extern const CollOps coll_nccl;           /* comm/coll_nccl.c */
#endif
#endif

extern const ExchangeOps sync_exchange;  /* comm/sync.c */
extern const ExchangeOps ssp_exchange;   /* comm/ssp.c */
extern const ExchangeOps async_exchange; /* comm/async_ps.c */
extern const ExchangeOps mixed_exchange; /* comm/mixed.c */

static const BackendOps *const BACKENDS[] = {
    &cpu_backend,
#ifdef DTBENCH_CUDA_BACKEND
    &cuda_backend,
#endif
};
static const ExchangeOps *const EXCHANGES[] = {&sync_exchange, &async_exchange, &ssp_exchange,
                                               &mixed_exchange};
static const TransportOps *const TRANSPORTS[] = {
    &mpi_transport,
#ifdef DTBENCH_NCCL
    &nccl_transport,
#endif
    &hier_transport,
};
static const CollOps *const COLLS[] = {
#ifdef DTBENCH_NCCL
    &coll_nccl,
#endif
    NULL,
};

const BackendOps *registry_host_backend(void) {
    return &cpu_backend;
}

/* Tests only: DTBENCH_CPU_AS_DEVICE=1 makes the CPU backend declare device memory (as_device.h),
 * so that every host-staging path of the GPU backend runs, and is checked, on a CPU. */
const BackendOps *registry_backend(const char *name) {
    const char *e = getenv("DTBENCH_CPU_AS_DEVICE");
    for (size_t i = 0; i < REGISTRY_COUNT(BACKENDS); i++)
        if (!strcmp(BACKENDS[i]->name, name))
            return BACKENDS[i] == &cpu_backend && e && !strcmp(e, "1") ? as_device_backend(0)
                                                                       : BACKENDS[i];
    return NULL;
}
const ExchangeOps *registry_exchange(const char *name) {
    REGISTRY_FIND(EXCHANGES, name);
}
const TransportOps *registry_transport(const char *name) {
    REGISTRY_FIND(TRANSPORTS, name);
}
const CollOps *registry_coll(const char *name) {
    for (size_t i = 0; COLLS[i]; i++)
        if (!strcmp(COLLS[i]->name, name)) return COLLS[i];
    return NULL;
}

const BackendOps *const *registry_backends(int *n) {
    REGISTRY_ALL(BACKENDS);
}
const ExchangeOps *const *registry_exchanges(int *n) {
    REGISTRY_ALL(EXCHANGES);
}
const TransportOps *const *registry_transports(int *n) {
    REGISTRY_ALL(TRANSPORTS);
}

static const RegistryUnbuilt UNBUILT[] = {
#ifndef DTBENCH_CUDA_BACKEND
    {"--device cuda", "gpus-per-node,conv-algo"}, /* kernels/cuda.c's reads */
#endif
    {NULL, NULL},
};
const RegistryUnbuilt *registry_unbuilt(void) {
    return UNBUILT;
}

/* The processor's model name from /proc/cpuinfo ("model name", or "Model" on some ARM kernels). */
static void cpu_model(char *buf, size_t len) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    buf[0] = '\0';
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (colon && (!strncmp(line, "model name", 10) || !strncmp(line, "Model", 5))) {
            colon += 1 + (colon[1] == ' ');
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, len, "%s", colon);
            break;
        }
    }
    if (f) fclose(f);
}

void registry_device_info(const BackendOps *be, BackendCtx *ctx, DeviceInfo *info) {
    memset(info, 0, sizeof *info);
#ifdef DTBENCH_CUDA_BACKEND
    if (be == &cuda_backend) {
        cuda_device_info(ctx, info);
        const CollOps *nccl = registry_coll("nccl"); /* the NCCL version, if built */
        if (nccl && nccl->version) nccl->version(info->nccl, sizeof info->nccl);
        return;
    }
#endif
    (void)be, (void)ctx;
    cpu_model(info->name, sizeof info->name);
}

const char *registry_backend_names(void) {
    REGISTRY_NAMES(BACKENDS);
}
const char *registry_exchange_names(void) {
    REGISTRY_NAMES(EXCHANGES);
}
const char *registry_transport_names(void) {
    REGISTRY_NAMES(TRANSPORTS);
}
