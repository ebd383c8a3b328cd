/* conv_check.h - a convolution measured against its exact value, for the tests of strict fp32
 * (kernels/cuda/cuda_plan.h): the float64 reference of each direction with the bound of every
 * output, threaded over the cores; the two input sets; the worst error and error/bound of a result.
 * Used by the GPU tests (tests/test_cuda_kernels.c, tests/test_cuda_algos.c) and, on the CPU
 * backend's convolutions, by tests/test_cuda_plan.c, so that the measurement itself runs in CI. */
#ifndef DTBENCH_CONV_CHECK_H
#define DTBENCH_CONV_CHECK_H

#include "backend.h"
#include "cuda_plan.h" /* defines: ConvDir, conv_fp32_bound */

#include <stddef.h>
#include <stdint.h>

/* Elements of the direction's result: y (fwd), dx (bwd_data), dw (bwd_filter). */
size_t conv_result_count(ConvDir dir, const ConvShape *s);

/* exact[i]: the result in float64 (every product exact, summed in double); bound[i]: the strict
 * fp32 bound of element i, conv_fp32_bound(K_i, sum of |products|), K_i its number of products.
 * fwd reads x and w, bwd_data w and dy, bwd_filter x and dy. No bias. */
void conv_exact(ConvDir dir, const ConvShape *s, const float *x, const float *w, const float *dy,
                double *exact, double *bound);

/* Inputs x, w, dy of shape s, uniform in [-1, 1) from `seed`. graded = 1: x and dy keep that
 * size only in every p-th image column (p the smallest prime above k) and are 2^-24 times
 * smaller elsewhere, so that next to outputs made of large products lie outputs made only of
 * tiny ones: a direct sum keeps each output's error relative to its own products, a transform
 * (FFT, Winograd) spreads the large ones' rounding over its whole tile or plane. */
void conv_inputs(const ConvShape *s, int graded, uint64_t seed, float *x, float *w, float *dy);

typedef struct {
    double max_err;   /* largest |got - exact| */
    double max_ratio; /* largest |got - exact| / bound (the result passes when <= 1) */
    double max_rel;   /* largest |got - exact| / max(|exact| over the result) */
    size_t nonfinite; /* elements that are NaN or infinite */
} ConvErr;
ConvErr conv_measure(const float *got, const double *exact, const double *bound, size_t n);

#endif
