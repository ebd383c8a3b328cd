/* cpu_blas.c - OpenBLAS loaded at run time with the core chosen before it initialises (see
 * cpu_blas.h). The one file that names OpenBLAS's symbols; the kernels call through cpu_blas().
 *
 * Load once as the environment says. If the user exported OPENBLAS_CORETYPE, that is the choice.
 * Otherwise, if OpenBLAS reports one of its generic cores while the CPU has AVX, AVX2 or AVX-512
 * (cpu_openblas_core_fix), unload it (dlclose runs its destructor, which stops its threads), check
 * that it is gone (RTLD_NOLOAD), and load it again with OPENBLAS_CORETYPE set for the constructor
 * to read; the variable is removed again afterwards, so the process's environment stays the
 * user's. A library that cannot be unloaded (a program linked against it at load time, as the
 * kernel tests are) keeps its generic core: `better` says what would fit, for the warning. Costs a
 * second initialisation (about 10-20 ms) only on the machines that need it. */
#define _GNU_SOURCE /* RTLD_DEFAULT, RTLD_NOLOAD */
#include "cpu_blas.h"
#include "cpu_cpuid.h" /* defines: CpuFeatures, cpu_openblas_core_fix */
#include "fail.h"      /* defines: check_fail */

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SONAME "libopenblas.so.0"

static CpuBlas blas;
static void *handle;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The soname first (the loader's search path, as a link against -lopenblas would resolve it),
 * then the library directory configure found (pkg-config's libdir, passed by Makefile.am). */
static void *open_library(int flags, char *tried, size_t len) {
    const char *names[] = {SONAME,
#ifdef DTBENCH_OPENBLAS_LIBDIR
                           DTBENCH_OPENBLAS_LIBDIR "/" SONAME,
                           DTBENCH_OPENBLAS_LIBDIR "/libopenblas.so"
#endif
    };
    void *h = NULL;
    size_t used = 0;
    for (size_t i = 0; !h && i < sizeof names / sizeof names[0]; i++) {
        h = dlopen(names[i], flags);
        if (!h && tried && used < len) {
            const char *e = dlerror();
            used += (size_t)snprintf(tried + used, len - used, "%s%s", used ? "; " : "",
                                     e ? e : names[i]);
        }
    }
    return h;
}

static void *symbol(const char *name, int required) {
    void *s = dlsym(handle, name);
    if (!s && required) check_fail(__FILE__, __LINE__, name, "not in the loaded OpenBLAS");
    return s;
}

static void bind_symbols(void) {
    blas.sgemm = (__typeof__(blas.sgemm))(uintptr_t)symbol("cblas_sgemm", 1);
    blas.set_num_threads =
        (__typeof__(blas.set_num_threads))(uintptr_t)symbol("openblas_set_num_threads", 1);
    blas.get_num_threads =
        (__typeof__(blas.get_num_threads))(uintptr_t)symbol("openblas_get_num_threads", 1);
    const char *(*corename)(void) =
        (const char *(*)(void))(uintptr_t)symbol("openblas_get_corename", 1);
    const char *(*config)(void) =
        (const char *(*)(void))(uintptr_t)symbol("openblas_get_config", 1);
    blas.core = corename(), blas.config = config();
    /* a definition the program itself exports wins, as it would at link time (tests feed one) */
    void *sb = dlsym(RTLD_DEFAULT, "cblas_sbgemm");
    blas.sbgemm = (__typeof__(blas.sbgemm))(uintptr_t)(sb ? sb : dlsym(handle, "cblas_sbgemm"));
    Dl_info info;
    if (dladdr((void *)(uintptr_t)blas.sgemm, &info) && info.dli_fname)
        snprintf(blas.path, sizeof blas.path, "%s", info.dli_fname);
}

/* Unload and load again with OPENBLAS_CORETYPE=core; 0 if the library could not be unloaded. */
static int reload_with_core(const char *core) {
    dlclose(handle);
    void *still = open_library(RTLD_NOW | RTLD_NOLOAD, NULL, 0);
    if (still) { /* held by the program's own link: the constructor will not run again */
        handle = still;
        return 0;
    }
    setenv("OPENBLAS_CORETYPE", core, 1);
    char tried[512] = "";
    handle = open_library(RTLD_NOW | RTLD_LOCAL, tried, sizeof tried);
    unsetenv("OPENBLAS_CORETYPE");
    if (!handle) check_fail(__FILE__, __LINE__, "dlopen " SONAME, tried);
    return 1;
}

static void load(void) {
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env && !*env) unsetenv("OPENBLAS_CORETYPE"), env = NULL; /* empty: OpenBLAS fails on it */
    char tried[512] = "";
    handle = open_library(RTLD_NOW | RTLD_LOCAL, tried, sizeof tried);
    if (!handle) check_fail(__FILE__, __LINE__, "dlopen " SONAME, tried);
    bind_symbols();

    CpuFeatures f;
    char cpu[160];
    cpu_features_read(&f);
    cpu_features_describe(&f, cpu, sizeof cpu);
    const char *fix = cpu_openblas_core_fix(&f, blas.core);
    if (env) {
        snprintf(blas.why, sizeof blas.why, "OPENBLAS_CORETYPE=%s exported by the user; CPU %s",
                 env, cpu);
        blas.better = fix;
        return;
    }
    if (!fix) {
        snprintf(blas.why, sizeof blas.why, "OpenBLAS's own detection; CPU %s", cpu);
        return;
    }
    char first[32];
    snprintf(first, sizeof first, "%s", blas.core);
    if (!reload_with_core(fix)) {
        snprintf(blas.why, sizeof blas.why,
                 "OpenBLAS chose its generic %s kernels for CPU %s; %s fits, but the library was "
                 "loaded with the program and could not be reloaded",
                 first, cpu, fix);
        blas.better = fix;
        return;
    }
    bind_symbols();
    const int took = !strcasecmp(blas.core, fix);
    snprintf(blas.why, sizeof blas.why,
             "chosen by dtbench: OpenBLAS chose its generic %s kernels for CPU %s; reloaded with "
             "OPENBLAS_CORETYPE=%s%s",
             first, cpu, fix, took ? "" : ", which this OpenBLAS did not take");
    if (!took) blas.better = fix;
}

const CpuBlas *cpu_blas(void) {
    pthread_once(&once, load);
    return &blas;
}
