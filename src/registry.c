/* registry.c - the tables of compute backends, exchange strategies, transports, schedules,
 * recorders and models.
 * The only place that knows which optional parts were built: optional backends and strategies
 * (CUDA, NCCL) are added to these tables under #ifdef HAVE_CUDA / HAVE_NCCL, here and nowhere else.
 */
#include <config.h>
#include "registry.h"

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

extern const RecorderOps hdf5_recorder; /* src/recorder_hdf5.c */

extern const ModelDesc model_lenet, model_fcn5, model_fcn8; /* src/models.c */
extern const ModelDesc model_alexnet, model_vgg16, model_googlenet, model_resnet50, model_lstm32,
    model_lstm64, model_resnet8; /* src/models.c, the model zoo */

static const BackendOps *const BACKENDS[] = {
    &cpu_backend,
#ifdef DTBENCH_CUDA_BACKEND
    &cuda_backend,
#endif
};
static const ExchangeOps *const EXCHANGES[] = {&sync_exchange, &async_exchange, &ssp_exchange,
                                               &mixed_exchange};
static const RecorderOps *const RECORDERS[] = {&hdf5_recorder};
static const TransportOps *const TRANSPORTS[] = {
    &mpi_transport,
#ifdef DTBENCH_NCCL
    &nccl_transport,
#endif
    &hier_transport,
};
static const ScheduleOps *const SCHEDULES[] = {&data_schedule, &gpipe_schedule, &onef1b_schedule};
static const CollOps *const COLLS[] = {
#ifdef DTBENCH_NCCL
    &coll_nccl,
#endif
    NULL,
};
static const ModelDesc *const MODELS[] = {
    &model_lenet,     &model_fcn5,     &model_fcn8,   &model_alexnet, &model_vgg16,
    &model_googlenet, &model_resnet50, &model_lstm32, &model_lstm64,  &model_resnet8};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
#define FIND(table, key)                                                                           \
    for (size_t i = 0; i < COUNT(table); i++)                                                      \
        if (!strcmp(table[i]->name, key)) return table[i];                                         \
    return NULL

/* Tests only: DTBENCH_CPU_AS_DEVICE=1 makes the CPU backend declare device memory (its upload and
 * download are copies), so that every host-staging path of the GPU backend (exchange strategies,
 * transports, pipeline messages, the driver's synchronisation) runs, and is checked, on a CPU. */
static const BackendOps *as_device(const BackendOps *be) {
    static BackendOps cpu_dev;
    const char *e = getenv("DTBENCH_CPU_AS_DEVICE");
    if (be != &cpu_backend || !e || strcmp(e, "1")) return be;
    if (!cpu_dev.name) cpu_dev = cpu_backend, cpu_dev.device_memory = 1;
    return &cpu_dev;
}

const BackendOps *registry_host_backend(void) {
    return &cpu_backend;
}

const BackendOps *registry_backend(const char *name) {
    for (size_t i = 0; i < COUNT(BACKENDS); i++)
        if (!strcmp(BACKENDS[i]->name, name)) return as_device(BACKENDS[i]);
    return NULL;
}
const ExchangeOps *registry_exchange(const char *name) {
    FIND(EXCHANGES, name);
}
const RecorderOps *registry_recorder(const char *name) {
    FIND(RECORDERS, name);
}
const ModelDesc *registry_model(const char *name) {
    FIND(MODELS, name);
}
const TransportOps *registry_transport(const char *name) {
    FIND(TRANSPORTS, name);
}

const ScheduleOps *registry_schedule(const char *name) {
    FIND(SCHEDULES, name);
}

#define ALL(table)                                                                                 \
    *n = (int)COUNT(table);                                                                        \
    return table
const BackendOps *const *registry_backends(int *n) {
    ALL(BACKENDS);
}
const ExchangeOps *const *registry_exchanges(int *n) {
    ALL(EXCHANGES);
}
const TransportOps *const *registry_transports(int *n) {
    ALL(TRANSPORTS);
}
const ScheduleOps *const *registry_schedules(int *n) {
    ALL(SCHEDULES);
}

static const RegistryUnbuilt UNBUILT[] = {
#ifndef DTBENCH_CUDA_BACKEND
    {"--device cuda", "gpus-per-node,conv-algo,act-layout"}, /* kernels/cuda.c's reads */
#endif
    {NULL, NULL},
};
const RegistryUnbuilt *registry_unbuilt(void) {
    return UNBUILT;
}

const CollOps *registry_coll(const char *name) {
    for (size_t i = 0; COLLS[i]; i++)
        if (!strcmp(COLLS[i]->name, name)) return COLLS[i];
    return NULL;
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
        const CollOps *nccl = registry_coll("nccl"); /* the NCCL version from comm/, if built */
        if (nccl && nccl->version) nccl->version(info->nccl, sizeof info->nccl);
        return;
    }
#endif
    (void)be, (void)ctx;
    cpu_model(info->name, sizeof info->name);
}

#define NAMES(table)                                                                               \
    static char names[256];                                                                        \
    if (!names[0])                                                                                 \
        for (size_t i = 0; i < COUNT(table); i++) {                                                \
            if (i) strcat(names, ",");                                                             \
            strcat(names, table[i]->name);                                                         \
        }                                                                                          \
    return names

const char *registry_backend_names(void) {
    NAMES(BACKENDS);
}
const char *registry_exchange_names(void) {
    NAMES(EXCHANGES);
}
const char *registry_model_names(void) {
    NAMES(MODELS);
}
const char *registry_transport_names(void) {
    NAMES(TRANSPORTS);
}
const char *registry_schedule_names(void) {
    NAMES(SCHEDULES);
}
