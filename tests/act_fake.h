/* act_fake.h - a fake backend storing activations in any ActFormat (backend.h) on the CPU, for the
 * tests of the model's side of the format seam (tests/test_act_format.c, test_act_observe.c): it
 * runs each layer by converting its inputs to NCHW fp32, calling the CPU backend and converting
 * its outputs back, as a real NHWC or 16-bit backend must behave: a fully connected layer on a
 * flattened NHWC input multiplies the NHWC features with the weights mapped by
 * kernels/common/layout.h, dropout on an NHWC image maps its elements to the NCHW mask
 * (DropoutShape.c, hw), global average pooling reads NHWC with its channel count. Optionally it
 * also has the fused operations (bn_act_*, conv_relu_forward) made of its unfused calls in the
 * unfused order (tests/fused_rows.h), so that the model fuses rows on it as on the GPU. */
#ifndef DTBENCH_ACT_FAKE_H
#define DTBENCH_ACT_FAKE_H

#include "fused_rows.h" /* defines: fused_rows_calls */
#include "model.h"

#include <stddef.h>

/* The format the fake declares (act_format_for gives it for NHWC, NCHW fp32 for NCHW). */
extern ActFormat act_fake_format;
/* 1: fp32 storage holding values rounded as bf16 (the reference of bf16 storage, same sums) */
extern int act_fake_round;
/* The model's gradients [n] (fp32 in every format: axpy does not round them) */
extern const float *act_fake_grads;
extern size_t act_fake_ngrads;
/* weights_ready calls and the buffer last given; convolutions whose filter was not where
 * weights_layout said (the model's declaration checked at every call). Fused calls run:
 * fused_rows_calls (tests/fused_rows.h). */
extern int act_fake_weights_calls, act_fake_bad_filters;
extern const float *act_fake_weights_seen;

/* The fake's table: without (fused 0) or with (1) the fused operations. */
const BackendOps *act_fake_backend(int fused);

/* A small model with every join and most layer kinds: batch norm (fusing with a ReLU, and with a
 * residual add and a ReLU), an output read by two layers, padded max pooling, LRN, a convolution
 * fusing with its ReLU, channel concatenation, dropout on an image, a flattened fc. */
extern const ModelDesc act_fake_joins;

#endif
