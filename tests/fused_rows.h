/* fused_rows.h - the fused operations of BackendOps (bn_act_*, conv_relu_forward) made of a
 * table's unfused calls in the unfused rows' order: batch norm, the residual add, the ReLU;
 * backward the ReLU in place, the add's gradient, batch norm; the convolution, then its ReLU. They
 * are what a backend's fused kernels must give bit for bit (tests/test_fusion.c), and the fused
 * rows of the activation-format fake (tests/act_fake.c: over its converting members). */
#ifndef DTBENCH_FUSED_ROWS_H
#define DTBENCH_FUSED_ROWS_H

#include "backend.h"

extern int fused_rows_calls; /* fused operations run */

/* Sets t's fused members to those made of `unfused`'s members (one table per program);
 * conv_relu: conv_relu_forward too, else NULL. */
void fused_rows_install(BackendOps *t, const BackendOps *unfused, int conv_relu);

#endif
