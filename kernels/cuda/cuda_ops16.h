/* cuda_ops16.h - the CUDA backend's operations on NHWC 16-bit activations (--act-layout nhwc
 * under --precision bf16/fp16: ctx->act16), which the operations of cuda_ops.h hand over to when
 * the context stores activations so; and the activation format itself (backend.h's ActFormat:
 * act_format_for, activation_format, input_to_act, act_add, weights_layout). Host side in
 * cuda_act16.c (layers other than convolution and fc) and cuda_conv16.c (convolution); fc in
 * cuda_gemm.c. Each queues on the rank's compute stream; nothing waits or allocates but
 * weights_layout (when the model is built). Private to the CUDA backend; CUDA-only header. */
#ifndef DTBENCH_CUDA_OPS16_H
#define DTBENCH_CUDA_OPS16_H

#include "backend.h"
#include "cuda_ctx.h" /* defines: struct BackendCtx, ConvPlan */

#include <stddef.h>
#include <stdint.h>

/* ---- the format (cuda_act16.c) --------------------------------------------------------------- */
int cuda_act_format_for(Precision p, ActLayout layout, ActFormat *f, char *why, size_t len);
void cuda_act_init(BackendCtx *ctx, Precision p, ActLayout layout); /* at init */
void cuda_act_free(BackendCtx *ctx);
void cuda_activation_format(BackendCtx *ctx, ActFormat *f);
void cuda_input_to_act(BackendCtx *ctx, int n, int c, int h, int w, const float *x, float *x_act);
void cuda_act_add(BackendCtx *ctx, size_t n, const float *x, float *y);
void cuda_weights_layout(BackendCtx *ctx, const ConvWeights *convs, int n);
/* The 16-bit KRSC filter and bias (NULL: none) weights_ready made for the convolution of shape s
 * whose fp32 filter is w; a filter weights_layout did not declare is a mistake (reported). */
void cuda16_conv_weights(BackendCtx *ctx, const ConvShape *s, const float *w, const void **w16,
                         const void **b16);
/* out[c] = the sum of the rows of dy[rows][c] (16-bit): a bias gradient */
void cuda16_colsum(BackendCtx *ctx, size_t rows, int c, const void *dy, float *out);

/* ---- layers (cuda_act16.c): backend.h's members on 16-bit NHWC activations ------------------ */
void cuda16_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y);
void cuda16_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx);
void cuda16_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
void cuda16_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                            uint8_t *mask);
void cuda16_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                             const float *dy, float *dx);
void cuda16_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                            int32_t *argmax);
void cuda16_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                             const float *dy, float *dx);
void cuda16_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y);
void cuda16_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx);
void cuda16_gap_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                        float *y);
void cuda16_gap_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *dy,
                         float *dx);
void cuda16_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale);
void cuda16_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                         const float *scale, const float *dy, float *dx);
/* batch norm: relu and z as bn_act_* (backend.h); act_y NULL: no fused ReLU */
void cuda16_bn_train(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                     const float *beta, const float *z, int relu, float *y, float *save_mean,
                     float *save_invstd, float *running_mean, float *running_var);
void cuda16_bn_infer(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                     const float *beta, const float *running_mean, const float *running_var,
                     const float *z, int relu, float *y);
void cuda16_bn_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                        const float *save_mean, const float *save_invstd, const float *act_y,
                        const float *dy, float *dx, float *dz, float *dgamma, float *dbeta);

/* ---- convolution (cuda_conv16.c), on plan p (NHWC 16-bit descriptors) ------------------------ */
void cuda16_conv_forward(BackendCtx *ctx, ConvPlan *p, const float *x, const float *w,
                         const float *b, int relu, float *y, void *work, size_t conv_ws);
void cuda16_conv_backward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db, void *work,
                          size_t conv_ws);

#endif
