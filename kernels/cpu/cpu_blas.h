/* cpu_blas.h - the CPU backend's BLAS: OpenBLAS, loaded at run time (dlopen) on first use, so that
 * its kernel set ("core") is chosen before the library initialises. OpenBLAS picks its core in a
 * constructor that runs when it is loaded, from OPENBLAS_CORETYPE or its own cpuid table; a
 * version older than the CPU falls back to its generic SSE kernels (0.3.21 on Sapphire/Emerald
 * Rapids: Prescott, 3x slower). Then, unless the user exported OPENBLAS_CORETYPE, the library is
 * unloaded and loaded again with OPENBLAS_CORETYPE set to the core that fits the CPU
 * (cpu_cpuid.h), in every process: mpirun, srun or a single one. How the core was chosen is kept
 * for the result file (CpuBlas.why). */
#ifndef DTBENCH_CPU_BLAS_H
#define DTBENCH_CPU_BLAS_H

#include <stdint.h>

/* cblas enum values (OpenBLAS's cblas.h) */
enum { CPU_BLAS_ROW_MAJOR = 101, CPU_BLAS_NO_TRANS = 111, CPU_BLAS_TRANS = 112 };

typedef struct {
    /* cblas_sgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) */
    void (*sgemm)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                  float, float *, int);
    /* cblas_sbgemm (bf16 inputs as uint16_t, fp32 C), NULL when the library is built without it */
    void (*sbgemm)(int, int, int, int, int, int, float, const uint16_t *, int, const uint16_t *,
                   int, float, float *, int);
    void (*set_num_threads)(int);
    int (*get_num_threads)(void);
    const char *core;   /* openblas_get_corename(): the kernels that run */
    const char *config; /* openblas_get_config() */
    char path[256];     /* the library file loaded */
    char why[384];      /* one line: how `core` was chosen */
    /* set when the kernels are generic although the CPU has better ones and dtbench could not
     * change that: the core that would fit (for the warning) */
    const char *better;
} CpuBlas;

/* The library, loaded by the first call (thread-safe); a process without a loadable OpenBLAS ends
 * through check_fail naming what it tried. */
const CpuBlas *cpu_blas(void);

#endif
