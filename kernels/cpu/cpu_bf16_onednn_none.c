/* cpu_bf16_onednn_none.c - the oneDNN engine of --precision bf16 where dtbench was built without
 * oneDNN (configure found no oneapi/dnnl/dnnl.h, or --without-onednn): never available, so
 * cpu_bf16.c picks another engine or refuses bf16 with the reason below. */
#include "cpu_bf16_onednn.h"
#include "fail.h" /* defines: check_fail */

#include <stdio.h>

int cpu_dnnl_available(char *why, size_t len, const char **isa) {
    if (isa) *isa = NULL;
    if (why) snprintf(why, len, "dtbench was built without oneDNN (Debian: libdnnl-dev)");
    return 0;
}

CpuDnnl *cpu_dnnl_create(int threads) {
    (void)threads;
    return NULL;
}

void cpu_dnnl_free(CpuDnnl *d) {
    (void)d;
}

void cpu_dnnl_weights_ready(CpuDnnl *d) {
    (void)d;
}

/* Never reached: no context has a CpuDnnl. */
void cpu_dnnl_gemm(CpuDnnl *d, int weight, int ta, int tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
    (void)d, (void)weight, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a;
    (void)lda, (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    check_fail(__FILE__, __LINE__, "cpu_dnnl_gemm", "dtbench was built without oneDNN");
}

int cpu_dnnl_conv_forward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                          const float *b, float *y) {
    (void)d, (void)s, (void)x, (void)w, (void)b, (void)y;
    return 0;
}

int cpu_dnnl_conv_backward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db) {
    (void)d, (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db;
    return 0;
}
