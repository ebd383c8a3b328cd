/* cpu_cpuid.h - what this x86-64 CPU can run (cpuid, and xgetbv for what the operating system
 * saves), and which of OpenBLAS's kernel sets ("cores") fits it: dtbench's answer when OpenBLAS's
 * own detection does not know the CPU and falls back to its generic SSE kernels (OpenBLAS 0.3.21
 * on Sapphire and Emerald Rapids picks Prescott). Used by cpu_blas.c before OpenBLAS initialises.
 */
#ifndef DTBENCH_CPU_CPUID_H
#define DTBENCH_CPU_CPUID_H

#include <stddef.h>

typedef struct {
    char vendor[13];   /* "GenuineIntel", "AuthenticAMD", ...; "" off x86-64 */
    int family, model; /* with the extended fields folded in (Emerald Rapids: 6, 207) */
    /* usable: the CPU has it and the OS saves its registers */
    int avx, avx2_fma, avx512, avx512bf16, amx_bf16;
} CpuFeatures;

/* This CPU (all zeros off x86-64). */
void cpu_features_read(CpuFeatures *f);

/* "GenuineIntel family 6 model 207 (AVX-512, AVX512-BF16, AMX-BF16)" */
void cpu_features_describe(const CpuFeatures *f, char *buf, size_t len);

/* The OpenBLAS core whose kernels fit a CPU with f: "SkylakeX" (AVX-512 F, CD, BW, DQ, VL),
 * "Haswell" (AVX2 and FMA), "Sandybridge" (AVX); NULL: nothing beyond the generic SSE kernels.
 * Names every OpenBLAS with DYNAMIC_ARCH since 0.3.0 accepts in OPENBLAS_CORETYPE. */
const char *cpu_openblas_core_for(const CpuFeatures *f);

/* The instruction level of an OpenBLAS core name (case-insensitive): 0 the generic SSE kernels
 * (Prescott, Nehalem, Core2, Unknown, ...), 1 AVX, 2 AVX2, 3 AVX-512; -1 a name not listed. */
int cpu_openblas_core_level(const char *core);

/* The core dtbench sets for a CPU with f when OpenBLAS chose `reported` itself: a fit of a higher
 * level when `reported` is one of the generic cores, else NULL (OpenBLAS's choice stands: it knows
 * the CPU, or names a core this table does not). */
const char *cpu_openblas_core_fix(const CpuFeatures *f, const char *reported);

#endif
