/* test_cpu_backend.c - the CPU backend's table and lifetime (kernels/cpu/cpu.c): its name, memory
 * (64-byte aligned and zeroed, sizes 0 to 1 MiB), upload/download round trip, zero, the phase timer
 * (positive, antisymmetric) and describe() naming OpenBLAS. The kernels are checked per file by
 * tests/test_cpu_*.c. */
#include "kernel_test.h"

#include <stdio.h>
#include <string.h>

static void test_misc(void) {
    int ok = 1;
    size_t sizes[] = {0, 1, 63, 64, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = B->alloc(ctx, sizes[i]);
        if (!p || ((uintptr_t)p & 63)) ok = 0;
        for (size_t j = 0; p && j < sizes[i]; j++)
            if (p[j]) ok = 0;
        B->free(ctx, p);
    }
    EXPECT(ok, "alloc: 64-byte aligned and zeroed");

    float host[100], back[100];
    fill_uniform(host, 100, -1, 1);
    float *dev = falloc(100);
    B->upload(ctx, dev, host, sizeof host);
    B->synchronize(ctx);
    B->download(ctx, back, dev, sizeof back);
    EXPECT(memcmp(host, back, sizeof host) == 0, "upload/download round trip");
    B->zero(ctx, dev, sizeof host);
    B->download(ctx, back, dev, sizeof back);
    ok = 1;
    for (int i = 0; i < 100; i++)
        if (back[i] != 0.0f) ok = 0;
    EXPECT(ok, "zero");
    B->free(ctx, dev);

    B->timer_record(ctx, 0);
    volatile double sink = 0;
    for (int i = 0; i < 1000000; i++)
        sink += i;
    B->timer_record(ctx, BACKEND_TIMER_SLOTS - 1);
    double t = B->timer_elapsed(ctx, 0, BACKEND_TIMER_SLOTS - 1);
    printf("timer: busy loop (sum %.0f) took %.3g s\n", sink, t);
    EXPECT(t > 0 && t < 10, "timer: elapsed(a,b) > 0 and < 10 s");
    EXPECT(B->timer_elapsed(ctx, BACKEND_TIMER_SLOTS - 1, 0) == -t,
           "timer: elapsed(b,a) == -elapsed(a,b)");

    char buf[512] = "";
    B->describe(ctx, buf, sizeof buf);
    printf("describe: %s\n", buf);
    EXPECT(strstr(buf, "OpenBLAS") != NULL, "describe mentions OpenBLAS");
}

int main(void) {
    kernel_test_init(0xbac4);
    EXPECT(strcmp(B->name, "cpu") == 0, "backend name is \"cpu\"");
    test_misc();
    return kernel_test_finish();
}
