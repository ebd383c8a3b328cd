/* dev16.h - 16-bit buffers for the tests that play the CUDA backend's NHWC 16-bit kernels on the
 * CPU (tests/test_device_nhwc.c, tests/test_device_bn16.c): random, poisoned, widened to NCHW fp32
 * and rounded back, compared bit for bit or within one rounding. HALF is the type of the current
 * pass (0 bf16, 1 fp16), set by the test. */
#ifndef DTBENCH_TESTS_DEV16_H
#define DTBENCH_TESTS_DEV16_H

#include "cuda_elem16.h" /* defines: dt16 */

#include <stddef.h>

extern int HALF;

dt16 *rand16(size_t n, float lo, float hi); /* uniform in [lo, hi), rounded */
dt16 *poison16(size_t n);                   /* 0xa5a5 everywhere */
/* NHWC 16-bit [n][hw][c] -> NCHW fp32 [n][c][hw] (widened), and NCHW fp32 -> NHWC rounded */
float *widen_nchw(const dt16 *x, size_t n, size_t c, size_t hw);
dt16 *round_nhwc(const float *x, size_t n, size_t c, size_t hw);
int same16(const dt16 *a, const dt16 *b, size_t n);     /* bit for bit, the first difference */
int close16(const dt16 *a, const float *ref, size_t n); /* within one rounding of ref */
float *copy_floats(const float *x, size_t n);
const char *type_name(void); /* "bf16" or "fp16" */

#endif
