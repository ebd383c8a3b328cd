/* dev16.c - the 16-bit buffers of the tests that play the NHWC 16-bit kernels on the CPU (see
 * dev16.h). */
#include "dev16.h"
#include "harness.h" /* defines: rand_uniform */
#include "layout.h"  /* defines: layout_to_nchw, layout_to_nhwc */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int HALF;

dt16 *rand16(size_t n, float lo, float hi) {
    dt16 *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = dt16_r(rand_uniform(lo, hi), HALF);
    return h;
}
dt16 *poison16(size_t n) {
    dt16 *h = malloc((n ? n : 1) * sizeof *h);
    memset(h, 0xa5, (n ? n : 1) * sizeof *h);
    return h;
}
/* NHWC 16-bit [n][hw][c] -> NCHW fp32 [n][c][hw] (widened), and NCHW fp32 -> NHWC rounded */
float *widen_nchw(const dt16 *x, size_t n, size_t c, size_t hw) {
    float *t = malloc((n * c * hw + 1) * sizeof *t), *u = malloc((n * c * hw + 1) * sizeof *u);
    for (size_t i = 0; i < n * c * hw; i++)
        t[i] = dt16_f(x[i], HALF);
    layout_to_nchw(n, c, hw, t, u);
    free(t);
    return u;
}
dt16 *round_nhwc(const float *x, size_t n, size_t c, size_t hw) {
    float *t = malloc((n * c * hw + 1) * sizeof *t);
    dt16 *h = malloc((n * c * hw + 1) * sizeof *h);
    layout_to_nhwc(n, c, hw, x, t);
    for (size_t i = 0; i < n * c * hw; i++)
        h[i] = dt16_r(t[i], HALF);
    free(t);
    return h;
}
int same16(const dt16 *a, const dt16 *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("  [%zu]: %#06x (%.6g) vs %#06x (%.6g)\n", i, a[i], dt16_f(a[i], HALF), b[i],
                   dt16_f(b[i], HALF));
            return 0;
        }
    return 1;
}
/* 16-bit values within one rounding of fp32 references */
int close16(const dt16 *a, const float *ref, size_t n) {
    const double u = HALF ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < n; i++) {
        const double v = dt16_f(a[i], HALF), r = ref[i];
        if (!(fabs(v - r) <= u * fabs(r) + 1e-6)) {
            printf("  [%zu]: %.8g vs %.8g\n", i, v, r);
            return 0;
        }
    }
    return 1;
}
float *copy_floats(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, x, n * sizeof *p);
    return p;
}
const char *type_name(void) {
    return HALF ? "fp16" : "bf16";
}
