/* gemm_bf16.c - bf16 GEMM (kernels/cpu/cpu_bf16.c, the engine --precision bf16 uses) against
 * OpenBLAS sgemm on the same shapes, in the same run: rounds alternate between the two, each timing
 * is the median of the rounds, and the ratio is what to read (bench/README.md). One thread each
 * (the bf16 engine is created with 1 thread; OpenBLAS is set to 1 thread).
 *   bench/gemm_bf16 [rounds]          prints: shape, GFLOP/s of each, bf16/fp32 ratio */
#define _POSIX_C_SOURCE 200809L
#include "cpu_bf16.h"
#include "cpu_blas.h" /* defines: cpu_blas, OpenBLAS with the core that fits the CPU */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 7;
    char why[256];
    const char *engine = cpu_bf16_engine(why, sizeof why);
    if (!engine) {
        printf("no bf16 engine: %s\n", why);
        return 77;
    }
    const CpuBlas *blas = cpu_blas();
    blas->set_num_threads(1);
    CpuBf16 *g = cpu_bf16_create(1);
    /* m, n, k, ta, tb, what */
    static const struct {
        int m, n, k, ta, tb;
        const char *what;
    } S[] = {
        {64, 500, 800, 0, 1, "LeNet fc1 forward (batch 64)"},
        {50, 384, 500, 0, 0, "LeNet conv2 forward (6 images)"},
        {64, 2048, 2048, 0, 1, "FCN-5 hidden forward (batch 64)"},
        {2048, 2048, 64, 1, 0, "FCN-5 hidden weight gradient"},
        {128, 3136, 1152, 0, 0, "conv 128x3x3 on 56x56 (im2col)"},
        {1024, 1024, 1024, 0, 0, "square 1024"},
    };
    printf("engine %s; %d alternating rounds, median of each\n", engine, rounds);
    printf("%-34s %10s %10s %8s\n", "shape (m x n x k)", "fp32 GF/s", "bf16 GF/s", "ratio");
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        const int m = S[s].m, n = S[s].n, k = S[s].k;
        const int lda = S[s].ta ? m : k, ldb = S[s].tb ? k : n;
        float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
        float *c = malloc(sizeof(float) * m * n);
        for (long i = 0; i < (long)m * k; i++)
            a[i] = (float)(i % 17) / 17.0f - 0.5f;
        for (long i = 0; i < (long)k * n; i++)
            b[i] = (float)(i % 13) / 13.0f - 0.5f;
        double t32[64], t16[64];
        const double flop = 2.0 * m * n * k;
        int reps = (int)(2e9 / flop) + 1; /* ~0.1-0.5 s per timing */
        for (int r = 0; r < rounds && r < 64; r++) {
            double t = now();
            for (int i = 0; i < reps; i++)
                blas->sgemm(CPU_BLAS_ROW_MAJOR, S[s].ta ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS,
                            S[s].tb ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS, m, n, k, 1.0f, a, lda, b,
                            ldb, 0.0f, c, n);
            t32[r] = (now() - t) / reps;
            t = now();
            for (int i = 0; i < reps; i++)
                cpu_bf16_gemm(g, CPU_BF16_NO_WEIGHT, S[s].ta, S[s].tb, m, n, k, 1.0f, a, lda, b,
                              ldb, 0.0f, c, n);
            t16[r] = (now() - t) / reps;
        }
        qsort(t32, rounds, sizeof(double), cmp), qsort(t16, rounds, sizeof(double), cmp);
        char shape[80];
        snprintf(shape, sizeof shape, "%s %dx%dx%d", S[s].what, m, n, k);
        printf("%-34s %10.1f %10.1f %8.2f\n", shape, flop / t32[rounds / 2] / 1e9,
               flop / t16[rounds / 2] / 1e9, t32[rounds / 2] / t16[rounds / 2]);
        free(a), free(b), free(c);
    }
    cpu_bf16_free(g);
    return 0;
}
