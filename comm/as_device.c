/* as_device.c - the CPU backend posing as a device (see as_device.h). */
#include "as_device.h"

#include <stdint.h>
#include <string.h>

static double up_bytes, down_bytes;

static void plain_upload(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    cpu_backend.upload(c, dst, src, bytes);
    up_bytes += (double)bytes;
}
static void plain_download(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    cpu_backend.download(c, dst, src, bytes);
    down_bytes += (double)bytes;
}

/* Sealed: floats byte-swapped on the device side. */
static void swap_copy(void *dst, const void *src, size_t bytes) {
    const uint32_t *s = src;
    uint32_t *d = dst;
    for (size_t i = 0; i < bytes / 4; i++)
        d[i] = __builtin_bswap32(s[i]);
}
static void sealed_upload(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    (void)c, swap_copy(dst, src, bytes), up_bytes += (double)bytes;
}
static void sealed_download(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    (void)c, swap_copy(dst, src, bytes), down_bytes += (double)bytes;
}
static void sealed_sgd(BackendCtx *c, size_t n, float *p, const float *g, float *v, float lr,
                       float momentum, float weight_decay) {
    size_t bytes = n * sizeof(float);
    float *hp = cpu_backend.alloc(c, bytes), *hg = cpu_backend.alloc(c, bytes);
    float *hv = cpu_backend.alloc(c, bytes);
    swap_copy(hp, p, bytes), swap_copy(hg, g, bytes), swap_copy(hv, v, bytes);
    cpu_backend.sgd_update(c, n, hp, hg, hv, lr, momentum, weight_decay);
    swap_copy(p, hp, bytes), swap_copy(v, hv, bytes);
    cpu_backend.free(c, hp), cpu_backend.free(c, hg), cpu_backend.free(c, hv);
}

const BackendOps *as_device_backend(int sealed) {
    static BackendOps plain, closed;
    if (!plain.name) {
        plain = cpu_backend;
        plain.device_memory = 1;
        plain.upload = plain_upload, plain.download = plain_download;
        closed = (BackendOps){.name = cpu_backend.name,
                              .device_memory = 1,
                              .init = cpu_backend.init,
                              .finalize = cpu_backend.finalize,
                              .alloc = cpu_backend.alloc,
                              .free = cpu_backend.free,
                              .upload = sealed_upload,
                              .download = sealed_download,
                              .zero = cpu_backend.zero,
                              .synchronize = cpu_backend.synchronize,
                              .sgd_update = sealed_sgd};
    }
    return sealed ? &closed : &plain;
}

void as_device_traffic(double *uploaded, double *downloaded) {
    *uploaded = up_bytes, *downloaded = down_bytes;
}
