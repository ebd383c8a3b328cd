/* kernel_test.c - the CPU backend set-up of the kernel tests (see kernel_test.h). */
#include "kernel_test.h"

#include <stdio.h>
#include <stdlib.h>

const BackendOps *B = &cpu_backend;
BackendCtx *ctx;

void kernel_test_init(uint64_t seed) {
    BackendConfig cfg = {.threads = 1, .local_rank = 0, .gpus_per_node = 0};
    if (B->init(&cfg, &ctx) != 0) {
        fprintf(stderr, "cpu_backend init failed\n");
        exit(1);
    }
    rand_seed(seed);
}

int kernel_test_finish(void) {
    B->finalize(ctx);
    return check_summary();
}

float *falloc(size_t n) {
    float *p = B->alloc(ctx, n * sizeof(float));
    if (!p) {
        fprintf(stderr, "alloc of %zu floats failed\n", n);
        exit(2);
    }
    return p;
}
