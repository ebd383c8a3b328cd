/* parts.c - the tables of compute backends, exchange strategies, transports and collectives (see
 * parts.h). The only place that knows which optional parts were built: the CUDA backend and NCCL's
 * transport and collectives are added to these tables under #ifdef HAVE_CUDA / HAVE_NCCL, here
 * and nowhere else. They live in the GPU module (comm/gpu_module.h), a shared object loaded with
 * dlopen the first time one of them is looked up: until then their rows hold only what the
 * resolver reads of every registered part (name, the options it reads, device memory), and the
 * program has loaded no GPU library. */
#define _GNU_SOURCE
#include <config.h>
#include "parts.h"
#include "as_device.h"
#include "gpu_module.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif
#ifndef DTBENCH_PKGLIBDIR
#define DTBENCH_PKGLIBDIR "/usr/local/lib/dtbench"
#endif

/* kernels/cuda/cuda.c's reads: the module is refused when they differ */
#define CUDA_READS "gpus-per-node,conv-algo,act-layout"

/* The GPU module's rows before it is loaded: no functions (init, create NULL); what the resolver
 * reads of them must equal the module's own tables (checked when it is loaded). */
#if defined(HAVE_CUDA) && defined(HAVE_CUDNN)
#define DTBENCH_CUDA_BACKEND 1
static const BackendOps cuda_row = {.name = "cuda", .device_memory = 1, .reads = CUDA_READS};
#if defined(HAVE_NCCL)
#define DTBENCH_NCCL 1
static const TransportOps nccl_row = {.name = "nccl", .device_only = 1};
#endif
#endif

extern const ExchangeOps sync_exchange;  /* comm/sync.c */
extern const ExchangeOps ssp_exchange;   /* comm/ssp.c */
extern const ExchangeOps async_exchange; /* comm/async_ps.c */
extern const ExchangeOps mixed_exchange; /* comm/mixed.c */
extern const ExchangeOps zero1_exchange; /* comm/zero.c */
extern const ExchangeOps zero2_exchange; /* comm/zero.c */
extern const ExchangeOps zero3_exchange; /* comm/zero3.c */

static const BackendOps *const BACKENDS[] = {
    &cpu_backend,
#ifdef DTBENCH_CUDA_BACKEND
    &cuda_row,
#endif
};
static const ExchangeOps *const EXCHANGES[] = {&sync_exchange,  &async_exchange, &ssp_exchange,
                                               &mixed_exchange, &zero1_exchange, &zero2_exchange,
                                               &zero3_exchange};
static const TransportOps *const TRANSPORTS[] = {
    &mpi_transport,
#ifdef DTBENCH_NCCL
    &nccl_row,
#endif
    &hier_transport,
};

/* ---- the GPU module ------------------------------------------------------------------------ */
static struct {
    int tried;
    const GpuModule *m;
    char why[1024]; /* why it could not be loaded */
} gpu;

/* Where the module is: DTBENCH_GPU_MODULE, else next to the program, else the installed libdir. */
static int module_path(char *path, size_t len) {
    const char *env = getenv("DTBENCH_GPU_MODULE");
    if (env && *env) return snprintf(path, len, "%s", env), 1;
    char exe[4096] = "";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) {
        *slash = '\0';
        const int w = snprintf(path, len, "%s/%s", exe, GPU_MODULE_FILE);
        if (w > 0 && (size_t)w < len && access(path, F_OK) == 0) return 1;
    }
    snprintf(path, len, "%s/%s", DTBENCH_PKGLIBDIR, GPU_MODULE_FILE);
    if (access(path, F_OK) == 0) return 1;
    snprintf(gpu.why, sizeof gpu.why,
             "this dtbench has no GPU module: no %s next to the program (%.400s) nor in %.400s "
             "(DTBENCH_GPU_MODULE may name it)",
             GPU_MODULE_FILE, exe[0] ? exe : "?", DTBENCH_PKGLIBDIR);
    return 0;
}

static int same_text(const char *a, const char *b) {
    return !strcmp(a ? a : "", b ? b : "");
}

/* The loaded module's tables must say what the rows above say; else 0 and why. */
static int module_agrees(const GpuModule *m) {
    for (size_t i = 0; i < REGISTRY_COUNT(BACKENDS); i++) {
        const BackendOps *row = BACKENDS[i], *b = m->backend;
        if (row->init) continue; /* built into the program */
        if (strcmp(b->name, row->name) || !same_text(b->reads, row->reads) ||
            b->device_memory != row->device_memory) {
            snprintf(gpu.why, sizeof gpu.why,
                     "the GPU module's backend %s (reads '%s') differs from the program's row %s "
                     "(reads '%s', comm/parts.c)",
                     b->name, b->reads ? b->reads : "", row->name, row->reads ? row->reads : "");
            return 0;
        }
    }
    for (size_t i = 0; i < REGISTRY_COUNT(TRANSPORTS); i++) {
        const TransportOps *row = TRANSPORTS[i], *t = m->nccl_transport;
        if (row->create) continue;
        if (!t || strcmp(t->name, row->name) || !same_text(t->reads, row->reads) ||
            t->device_only != row->device_only || t->mpi_levels != row->mpi_levels) {
            snprintf(gpu.why, sizeof gpu.why,
                     "the GPU module's transport %s differs from the program's row %s "
                     "(comm/parts.c)",
                     t ? t->name : "(none)", row->name);
            return 0;
        }
    }
    return 1;
}

/* Loads the module once; NULL (the reason in gpu.why) when it cannot be. */
static const GpuModule *gpu_module(void) {
    if (gpu.tried) return gpu.m;
    gpu.tried = 1;
    char path[4096];
    if (!module_path(path, sizeof path)) return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(gpu.why, sizeof gpu.why, "cannot load the GPU module: %.900s", e ? e : path);
        return NULL;
    }
    GpuModuleEntry entry;
    *(void **)&entry = dlsym(h, GPU_MODULE_ENTRY);
    if (!entry) {
        snprintf(gpu.why, sizeof gpu.why, "%.900s is not a dtbench GPU module (no %s)", path,
                 GPU_MODULE_ENTRY);
        return NULL;
    }
    const GpuModule *m = entry();
    const char *build = PACKAGE_VERSION " " DTBENCH_GIT_COMMIT;
    if (m->abi != GPU_MODULE_ABI || strcmp(m->build, build)) {
        snprintf(gpu.why, sizeof gpu.why,
                 "the GPU module %.600s was built from other sources (dtbench %.80s) than this "
                 "program (dtbench %s): install both from one build",
                 path, m->build, build);
        return NULL;
    }
    return module_agrees(m) ? (gpu.m = m) : NULL;
}

const char *registry_load_error(void) {
    return gpu.why;
}

int registry_device_count(const BackendOps *be) {
    return gpu.m && be == gpu.m->backend ? gpu.m->device_count() : -1;
}

/* A row of the module (no functions) as the loaded module's table; NULL if it cannot be loaded. */
static const BackendOps *loaded_backend(const BackendOps *be) {
    if (be->init) return be;
    const GpuModule *m = gpu_module();
    return m ? m->backend : NULL;
}
static const TransportOps *loaded_transport(const TransportOps *t) {
    if (t->create) return t;
    const GpuModule *m = gpu_module();
    return m ? m->nccl_transport : NULL;
}

const BackendOps *registry_host_backend(void) {
    return &cpu_backend;
}

/* Tests only: DTBENCH_CPU_AS_DEVICE=1 makes the CPU backend declare device memory (as_device.h),
 * so that every host-staging path of the GPU backend runs, and is checked, on a CPU. */
const BackendOps *registry_backend(const char *name) {
    const char *e = getenv("DTBENCH_CPU_AS_DEVICE");
    for (size_t i = 0; i < REGISTRY_COUNT(BACKENDS); i++)
        if (!strcmp(BACKENDS[i]->name, name)) {
            const BackendOps *be = loaded_backend(BACKENDS[i]);
            return be == &cpu_backend && e && !strcmp(e, "1") ? as_device_backend(0) : be;
        }
    return NULL;
}
const ExchangeOps *registry_exchange(const char *name) {
    REGISTRY_FIND(EXCHANGES, name);
}
const TransportOps *registry_transport(const char *name) {
    for (size_t i = 0; i < REGISTRY_COUNT(TRANSPORTS); i++)
        if (!strcmp(TRANSPORTS[i]->name, name)) return loaded_transport(TRANSPORTS[i]);
    return NULL;
}
const CollOps *registry_coll(const char *name) {
    const CollOps *c = gpu.m ? gpu.m->nccl_coll : NULL;
    return c && !strcmp(c->name, name) ? c : NULL;
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
    {"--device cuda", CUDA_READS},
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
    if (gpu.m && be == gpu.m->backend) {
        gpu.m->device_info(ctx, info);
        const CollOps *nccl = gpu.m->nccl_coll; /* the NCCL version from comm/, if built */
        if (nccl && nccl->version) nccl->version(info->nccl, sizeof info->nccl);
        return;
    }
    (void)ctx;
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
