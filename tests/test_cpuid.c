/* test_cpuid.c - the CPU's features and OpenBLAS's core (kernels/cpu/cpu_cpuid.c,
 * kernels/cpu/cpu_blas.c):
 *   1. the table: which core fits which features, and when OpenBLAS's own choice is replaced;
 *   2. cpuid on this machine agrees with the kernel's /proc/cpuinfo flags;
 *   3. the loader, each case in a child process (OpenBLAS is loaded once per process, and this
 *      program does not link it): without OPENBLAS_CORETYPE the kernels that run fit the CPU
 *      (OpenBLAS 0.3.21 on an AVX-512 CPU it does not know: SkylakeX instead of Prescott) and the
 *      environment is left as it was; a core the user exported is kept, and the warning's `better`
 *      names what would fit; an empty OPENBLAS_CORETYPE counts as unset.
 * Each check prints what it expected and got, counted by tests/harness.h; exit 1 on any
 * failure. */
#define _GNU_SOURCE
#include "cpu_blas.h"
#include "cpu_cpuid.h"
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Both print one line in the table's columns and count the check; they return it (1: passed). */
static int expect_str(const char *what, const char *got, const char *want) {
    int ok = (!got && !want) || (got && want && !strcmp(got, want));
    printf("%-62s got %-12s expected %-12s %s\n", what, got ? got : "(none)",
           want ? want : "(none)", ok ? "ok" : "FAIL");
    return check_count(ok);
}

static int expect_int(const char *what, int got, int want) {
    printf("%-62s got %-12d expected %-12d %s\n", what, got, want, got == want ? "ok" : "FAIL");
    return check_count(got == want);
}

static void table(void) {
    const CpuFeatures emr = {"GenuineIntel", 6, 207, 1, 1, 1, 1, 1};
    const CpuFeatures hsw = {"GenuineIntel", 6, 63, 1, 1, 0, 0, 0};
    const CpuFeatures snb = {"GenuineIntel", 6, 42, 1, 0, 0, 0, 0};
    const CpuFeatures sse = {"GenuineIntel", 6, 26, 0, 0, 0, 0, 0};
    const CpuFeatures zen5 = {"AuthenticAMD", 26, 2, 1, 1, 1, 1, 0};
    expect_str("AVX-512 + BF16 + AMX fits", cpu_openblas_core_for(&emr), "SkylakeX");
    expect_str("AVX2 + FMA fits", cpu_openblas_core_for(&hsw), "Haswell");
    expect_str("AVX fits", cpu_openblas_core_for(&snb), "Sandybridge");
    expect_str("SSE only fits", cpu_openblas_core_for(&sse), NULL);
    expect_str("Emerald Rapids, OpenBLAS chose Prescott -> fix",
               cpu_openblas_core_fix(&emr, "Prescott"), "SkylakeX");
    expect_str("AVX-512 AMD, OpenBLAS chose Prescott -> fix",
               cpu_openblas_core_fix(&zen5, "Prescott"), "SkylakeX");
    expect_str("AVX2, OpenBLAS chose Nehalem -> fix", cpu_openblas_core_fix(&hsw, "Nehalem"),
               "Haswell");
    expect_str("AVX2, OpenBLAS chose 'Unknown' -> fix", cpu_openblas_core_fix(&hsw, "Unknown"),
               "Haswell");
    expect_str("OpenBLAS chose Cooperlake: kept", cpu_openblas_core_fix(&emr, "Cooperlake"), NULL);
    expect_str("OpenBLAS chose Haswell (not generic): kept", cpu_openblas_core_fix(&emr, "Haswell"),
               NULL);
    expect_str("a core name not in the table: kept", cpu_openblas_core_fix(&emr, "GraniteRapids"),
               NULL);
    expect_str("SSE-only CPU on Prescott: nothing better", cpu_openblas_core_fix(&sse, "Prescott"),
               NULL);
    expect_int("level of 'prescott' (any case)", cpu_openblas_core_level("prescott"), 0);
    expect_int("level of SKYLAKEX", cpu_openblas_core_level("SKYLAKEX"), 3);
    expect_int("level of Zen", cpu_openblas_core_level("Zen"), 2);
    expect_int("level of an unknown name", cpu_openblas_core_level("Foo"), -1);
}

/* 1 if the flags (" f1 f2 ... ") list every word of `words` (space separated). */
static int has_flags(const char *flags, const char *words) {
    char copy[128], pat[70];
    snprintf(copy, sizeof copy, "%s", words);
    for (char *w = strtok(copy, " "); w; w = strtok(NULL, " ")) {
        snprintf(pat, sizeof pat, " %s ", w);
        if (!strstr(flags, pat)) return 0;
    }
    return 1;
}

static void this_cpu(void) {
    FILE *fp = fopen("/proc/cpuinfo", "r");
    CpuFeatures f;
    cpu_features_read(&f);
    if (!fp || !f.vendor[0]) {
        printf("cpuid against /proc/cpuinfo: skipped (%s)\n",
               fp ? "not x86-64" : "no /proc/cpuinfo");
        if (fp) fclose(fp);
        return;
    }
    char line[8192], flags[8200] = "", vendor[32] = "";
    int family = -1, model = -1;
    while (fgets(line, sizeof line, fp) && !flags[0]) {
        if (!strncmp(line, "vendor_id", 9)) sscanf(strchr(line, ':') + 1, "%31s", vendor);
        if (!strncmp(line, "cpu family", 10)) family = atoi(strchr(line, ':') + 1);
        if (!strncmp(line, "model\t", 6)) model = atoi(strchr(line, ':') + 1);
        if (!strncmp(line, "flags", 5)) {
            snprintf(flags, sizeof flags, " %s", strchr(line, ':') + 1);
            flags[strcspn(flags, "\n")] = ' ';
        }
    }
    fclose(fp);
    char d[160];
    cpu_features_describe(&f, d, sizeof d);
    printf("this CPU: %s\n", d);
    expect_str("vendor", f.vendor, vendor);
    expect_int("family", f.family, family);
    expect_int("model", f.model, model);
    expect_int("AVX", f.avx, has_flags(flags, "avx"));
    expect_int("AVX2 and FMA", f.avx2_fma, has_flags(flags, "avx2 fma"));
    expect_int("AVX-512 F CD BW DQ VL", f.avx512,
               has_flags(flags, "avx512f avx512cd avx512bw avx512dq avx512vl"));
    expect_int("AVX512-BF16", f.avx512bf16, has_flags(flags, "avx512_bf16"));
    expect_int("AMX-BF16", f.amx_bf16, has_flags(flags, "amx_bf16 amx_tile"));
}

/* In a child: OPENBLAS_CORETYPE = env (NULL: unset), load, check; the child's exit status says
 * whether its own checks passed, and the parent counts that as one check. */
static void loader_case(const char *label, const char *env) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (env)
            setenv("OPENBLAS_CORETYPE", env, 1);
        else
            unsetenv("OPENBLAS_CORETYPE");
        CpuFeatures f;
        cpu_features_read(&f);
        const char *fit = cpu_openblas_core_for(&f);
        const CpuBlas *b = cpu_blas();
        int bad = 0;
        printf("%s: core %s, %s\n", label, b->core, b->why);
        if (env && *env) {
            bad += !expect_str("  the user's core is kept", b->core, env);
            bad += !expect_int("  'exported by the user' recorded",
                               strstr(b->why, "exported by the user") != NULL, 1);
            bad += !expect_str("  the warning's better core", b->better,
                               cpu_openblas_core_level(env) == 0 ? fit : NULL);
        } else {
            bad += !expect_int("  the kernels fit the CPU (core level >= the fit's)",
                               cpu_openblas_core_level(b->core) >= cpu_openblas_core_level(fit), 1);
            bad += !expect_str("  no warning", b->better, NULL);
            bad += !expect_str("  OPENBLAS_CORETYPE left unset", getenv("OPENBLAS_CORETYPE"), NULL);
        }
        bad += !expect_int("  cblas_sgemm found", b->sgemm != NULL, 1);
        float a[4] = {1, 2, 3, 4}, x[4] = {1, 0, 0, 1}, c[4] = {0};
        b->sgemm(CPU_BLAS_ROW_MAJOR, CPU_BLAS_NO_TRANS, CPU_BLAS_NO_TRANS, 2, 2, 2, 1.0f, a, 2, x,
                 2, 0.0f, c, 2);
        bad += !expect_int("  a 2x2 product through it",
                           c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4, 1);
        fflush(stdout);
        _exit(bad ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the loader's checks in a child process",
           label);
}

int main(void) {
    table();
    this_cpu();
    loader_case("OPENBLAS_CORETYPE unset", NULL);
    loader_case("OPENBLAS_CORETYPE empty", "");
    loader_case("OPENBLAS_CORETYPE=Prescott exported", "Prescott");
    return check_summary();
}
