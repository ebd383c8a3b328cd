/* as_device.c - the CPU backend posing as a device (see as_device.h): two configurations of the
 * fake device (kernels/fake/fake_device.h) over the CPU backend, whose hook counts the bytes
 * moved. */
#include "as_device.h"
#include "fake_device.h" /* defines: FakeDevice, FAKE_ARGS */

#include <stdint.h>

static double up_bytes, down_bytes;

static int traffic(FakeCall *k) {
    if (k->member == BM_upload) up_bytes += (double)FAKE_ARGS(k, upload)->bytes;
    if (k->member == BM_download) down_bytes += (double)FAKE_ARGS(k, download)->bytes;
    return 1;
}

/* Sealed: floats byte-swapped on the device side. */
static void swap_copy(void *dst, const void *src, size_t bytes) {
    const uint32_t *s = src;
    uint32_t *d = dst;
    for (size_t i = 0; i < bytes / 4; i++)
        d[i] = __builtin_bswap32(s[i]);
}
static void sealed_copy(BackendCtx *c, void *dst, const void *src, size_t bytes) {
    (void)c, swap_copy(dst, src, bytes);
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

static void sealed_adamw(BackendCtx *c, size_t n, float *p, const float *g, float *m, float *v,
                         const AdamWStep *a) {
    size_t bytes = n * sizeof(float);
    float *hp = cpu_backend.alloc(c, bytes), *hg = cpu_backend.alloc(c, bytes);
    float *hm = cpu_backend.alloc(c, bytes), *hv = cpu_backend.alloc(c, bytes);
    swap_copy(hp, p, bytes), swap_copy(hg, g, bytes), swap_copy(hm, m, bytes);
    swap_copy(hv, v, bytes);
    cpu_backend.adamw_update(c, n, hp, hg, hm, hv, a);
    swap_copy(p, hp, bytes), swap_copy(m, hm, bytes), swap_copy(v, hv, bytes);
    cpu_backend.free(c, hp), cpu_backend.free(c, hg), cpu_backend.free(c, hm);
    cpu_backend.free(c, hv);
}

static const FakeDevice PLAIN = {
    .inner = &cpu_backend, .before = traffic, .over = {.device_memory = 1}};
static const FakeDevice SEALED = {.inner = &cpu_backend,
                                  .before = traffic,
                                  .over = {.device_memory = 1,
                                           .upload = sealed_copy,
                                           .download = sealed_copy,
                                           .sgd_update = sealed_sgd,
                                           .adamw_update = sealed_adamw}};

const BackendOps *as_device_backend(int sealed) {
    static BackendOps plain, closed;
    if (!sealed) {
        if (!plain.name) fake_device_table(&PLAIN, &plain);
        return &plain;
    }
    if (!closed.name) { /* only the memory operations and the optimizer steps */
        BackendOps t;
        fake_device_table(&SEALED, &t);
        closed = (BackendOps){.name = t.name,
                              .device_memory = 1,
                              .init = t.init,
                              .finalize = t.finalize,
                              .alloc = t.alloc,
                              .free = t.free,
                              .upload = t.upload,
                              .download = t.download,
                              .zero = t.zero,
                              .synchronize = t.synchronize,
                              .sgd_update = t.sgd_update,
                              .adamw_update = t.adamw_update};
    }
    return &closed;
}

void as_device_traffic(double *uploaded, double *downloaded) {
    *uploaded = up_bytes, *downloaded = down_bytes;
}
