/* cpu_winograd.h - 3x3, stride-1, pad-1 convolutions of the CPU backend by Winograd's minimal
 * filtering F(2x2, 3x3) (Lavin & Gray 2016): 16 multiplications per 2x2 output tile and channel
 * pair instead of 36, so 2.25x fewer than the im2col GEMM. Used by kernels/cpu/cpu_conv.c for
 * VGG16's and ResNet's 3x3 layers (see cpu_winograd.c for the method and its layouts). */
#ifndef DTBENCH_CPU_WINOGRAD_H
#define DTBENCH_CPU_WINOGRAD_H

#include "backend.h"

/* 1 when the Winograd path takes this convolution's forward and input gradient: k = 3, stride 1,
 * pad 1, at least 16 input and output channels and an image of at least WINO_MIN_PIXELS (smaller
 * ones make the transforms and the 16 small GEMMs cost more than they save). */
int cpu_wino_applies(const ConvShape *s);
/* 1 when it also takes the weight gradient (at least 128 channels each way). */
int cpu_wino_weights_apply(const ConvShape *s);
/* Scratch for the forward and the backward of shape s. */
size_t cpu_wino_workspace_bytes(const ConvShape *s);

/* Same contract as conv_forward / conv_backward (backend.h); b, db, dx may be NULL. */
void cpu_wino_forward(const ConvShape *s, const float *x, const float *w, const float *b, float *y,
                      void *work);
void cpu_wino_backward(const ConvShape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db, void *work);
/* The input gradient alone (dx overwritten). */
void cpu_wino_backward_data(const ConvShape *s, const float *w, const float *dy, float *dx,
                            void *work);

#endif
