/* cpu_cpuid.c - this CPU's instruction sets and the OpenBLAS core that fits them (cpu_cpuid.h).
 * x86-64 only: elsewhere every feature reads as absent and no core is ever proposed. */
#include "cpu_cpuid.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__)
#include <cpuid.h>

/* XCR0: the register states the OS saves on a context switch. */
static unsigned long long xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

void cpu_features_read(CpuFeatures *f) {
    memset(f, 0, sizeof *f);
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    const unsigned max_leaf = a;
    memcpy(f->vendor, &b, 4), memcpy(f->vendor + 4, &d, 4), memcpy(f->vendor + 8, &c, 4);
    __get_cpuid(1, &a, &b, &c, &d);
    const unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
    f->family = (int)(base_family + (base_family == 0xf ? (a >> 20) & 0xff : 0));
    f->model =
        (int)(base_model + (base_family == 6 || base_family == 0xf ? ((a >> 16) & 0xf) << 4 : 0));
    const int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1;
    const unsigned long long x = osxsave ? xcr0() : 0;
    const int ymm = (x & 0x6) == 0x6, zmm = (x & 0xe6) == 0xe6, tiles = (x & 0x60000) == 0x60000;
    f->avx = ((c >> 28) & 1) && ymm;
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned sub_leaves = a;
    f->avx2_fma = f->avx && ((b >> 5) & 1) && fma;
    const unsigned avx512_skx = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);
    f->avx512 = zmm && (b & avx512_skx) == avx512_skx;         /* F, DQ, CD, BW, VL */
    f->amx_bf16 = tiles && ((d >> 22) & 1) && ((d >> 24) & 1); /* AMX-BF16, AMX-TILE */
    if (sub_leaves >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx512bf16 = f->avx512 && ((a >> 5) & 1);
    }
}
#else
void cpu_features_read(CpuFeatures *f) {
    memset(f, 0, sizeof *f);
}
#endif

void cpu_features_describe(const CpuFeatures *f, char *buf, size_t len) {
    if (!f->vendor[0]) {
        snprintf(buf, len, "not an x86-64 CPU");
        return;
    }
    snprintf(buf, len, "%s family %d model %d (%s%s%s)", f->vendor, f->family, f->model,
             f->avx512     ? "AVX-512"
             : f->avx2_fma ? "AVX2"
             : f->avx      ? "AVX"
                           : "SSE",
             f->avx512bf16 ? ", AVX512-BF16" : "", f->amx_bf16 ? ", AMX-BF16" : "");
}

const char *cpu_openblas_core_for(const CpuFeatures *f) {
    return f->avx512 ? "SkylakeX" : f->avx2_fma ? "Haswell" : f->avx ? "Sandybridge" : NULL;
}

/* OpenBLAS's x86-64 core names (driver/others/dynamic.c) by the instructions their kernels use. */
static const struct {
    const char *name;
    int level;
} CORES[] = {
    {"Unknown", 0},     {"Katmai", 0},       {"Coppermine", 0},     {"Northwood", 0},
    {"Prescott", 0},    {"Banias", 0},       {"Atom", 0},           {"Core2", 0},
    {"Penryn", 0},      {"Dunnington", 0},   {"Nehalem", 0},        {"Athlon", 0},
    {"Opteron", 0},     {"Opteron_SSE3", 0}, {"Barcelona", 0},      {"Nano", 0},
    {"Bobcat", 0},      {"Sandybridge", 1},  {"Bulldozer", 1},      {"Piledriver", 1},
    {"Steamroller", 2}, {"Excavator", 2},    {"Haswell", 2},        {"Zen", 2},
    {"SkylakeX", 3},    {"Cooperlake", 3},   {"SapphireRapids", 3},
};

int cpu_openblas_core_level(const char *core) {
    for (size_t i = 0; core && i < sizeof CORES / sizeof CORES[0]; i++)
        if (!strcasecmp(core, CORES[i].name)) return CORES[i].level;
    return -1;
}

const char *cpu_openblas_core_fix(const CpuFeatures *f, const char *reported) {
    const char *fit = cpu_openblas_core_for(f);
    if (!fit || cpu_openblas_core_level(reported) != 0) return NULL;
    return fit;
}
