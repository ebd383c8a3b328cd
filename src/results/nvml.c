/* nvml.c - NVML through dlopen (see nvml.h). The prototypes below are NVML's documented C API
 * (nvml.h of the CUDA toolkit's NVML development package): nvmlInit_v2, nvmlErrorString,
 * nvmlSystemGetDriverVersion, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetPowerUsage
 * (milliwatts), nvmlDeviceGetMemoryInfo (bytes) and nvmlDeviceGetUtilizationRates (percent).
 * Versioned symbols are looked up by their real names (nvml.h maps nvmlInit to nvmlInit_v2). */
#define _GNU_SOURCE
#include "nvml.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used; /* bytes */
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory; /* percent */
} nvmlUtilization_t;

static struct {
    void *lib;
    nvmlReturn_t (*init)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*by_pci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
    int status; /* 0 not tried, 1 ready, -1 failed */
    char why[256];
} N;

struct NvmlGpu {
    nvmlDevice_t dev;
};

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

static void *sym(const char *name) {
    void *p = dlsym(N.lib, name);
    if (!p && !N.why[0]) snprintf(N.why, sizeof N.why, "libnvidia-ml.so.1 lacks %s", name);
    return p;
}

int nvml_open(char *err, size_t len) {
    pthread_mutex_lock(&open_lock);
    if (N.status == 0) {
        N.status = -1;
        N.lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!N.lib) {
            const char *e = dlerror();
            snprintf(N.why, sizeof N.why, "cannot load libnvidia-ml.so.1 (%s)", e ? e : "?");
        } else {
            N.init = (nvmlReturn_t(*)(void))sym("nvmlInit_v2");
            N.error_string = (const char *(*)(nvmlReturn_t))sym("nvmlErrorString");
            N.driver_version =
                (nvmlReturn_t(*)(char *, unsigned int))sym("nvmlSystemGetDriverVersion");
            N.by_pci = (nvmlReturn_t(*)(const char *, nvmlDevice_t *))sym(
                "nvmlDeviceGetHandleByPciBusId_v2");
            N.power = (nvmlReturn_t(*)(nvmlDevice_t, unsigned int *))sym("nvmlDeviceGetPowerUsage");
            N.memory =
                (nvmlReturn_t(*)(nvmlDevice_t, nvmlMemory_t *))sym("nvmlDeviceGetMemoryInfo");
            N.utilization = (nvmlReturn_t(*)(nvmlDevice_t, nvmlUtilization_t *))sym(
                "nvmlDeviceGetUtilizationRates");
            if (N.init && N.error_string && N.driver_version && N.by_pci && N.power && N.memory &&
                N.utilization) {
                nvmlReturn_t r = N.init();
                if (r == 0)
                    N.status = 1;
                else
                    snprintf(N.why, sizeof N.why, "nvmlInit: %s", N.error_string(r));
            }
        }
    }
    int ok = N.status == 1;
    if (!ok && err && len) snprintf(err, len, "%s", N.why);
    pthread_mutex_unlock(&open_lock);
    return ok ? 0 : -1;
}

NvmlGpu *nvml_gpu(const char *pci_bus_id, char *err, size_t len) {
    if (nvml_open(err, len) != 0) return NULL;
    nvmlDevice_t dev;
    nvmlReturn_t r = N.by_pci(pci_bus_id, &dev);
    if (r != 0) {
        if (err && len)
            snprintf(err, len, "nvmlDeviceGetHandleByPciBusId(%s): %s", pci_bus_id,
                     N.error_string(r));
        return NULL;
    }
    NvmlGpu *g = calloc(1, sizeof *g);
    if (g) g->dev = dev;
    return g;
}

int nvml_read(NvmlGpu *gpu, double *power_w, double *memory_mib, double *utilization) {
    unsigned int mw = 0;
    nvmlMemory_t mem;
    nvmlUtilization_t u;
    int got = 0;
    *power_w = *memory_mib = *utilization = NAN;
    if (N.power(gpu->dev, &mw) == 0) *power_w = mw / 1000.0, got = 1;
    if (N.memory(gpu->dev, &mem) == 0) *memory_mib = (double)mem.used / 1048576.0, got = 1;
    if (N.utilization(gpu->dev, &u) == 0) *utilization = u.gpu, got = 1;
    return got ? 0 : -1;
}

void nvml_driver_version(char *buf, size_t len) {
    char v[96] = "";
    if (len == 0) return;
    buf[0] = '\0';
    if (nvml_open(NULL, 0) == 0 && N.driver_version(v, sizeof v) == 0) snprintf(buf, len, "%s", v);
}
