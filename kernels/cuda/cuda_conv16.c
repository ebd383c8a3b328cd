/* cuda_conv16.c - the CUDA backend's convolution on NHWC 16-bit activations (cuda_ops16.h):
 * cuDNN's legacy API on CUDNN_TENSOR_NHWC descriptors of the precision's 16-bit type with a
 * float compute type (the plan of cuda_conv.c, whose algorithms were timed on these
 * descriptors), x, y, dy and dx read and written in place, the filter and bias from the 16-bit
 * KRSC copies weights_ready made (cuda_act16.c); the filter gradient computed in 16 bits into
 * the work buffer after cuDNN's workspace and widened into the fp32 KCRS parameters' gradient.
 * Forward with a ReLU (conv_relu_forward): cudnnConvolutionBiasActivationForward where cuDNN
 * takes it for the plan, else the convolution, our bias and ReLU kernels. Each queues on the
 * rank's compute stream; nothing here waits or allocates. */
#include <config.h>
#include "cuda_check.h"     /* defines: CUDA_CHECK, CUDNN_CHECK */
#include "cuda_kernels16.h" /* defines: dth_bias, dth_relu, dth_filter_grad */
#include "cuda_ops16.h"

#include <stdint.h>

static const float ONE = 1.0f, ZERO = 0.0f;

static size_t align256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

static int half_of(const BackendCtx *ctx) {
    return ctx->act.type == ACT_FP16;
}

static size_t out_rows(const ConvShape *s) {
    return (size_t)s->batch * s->h_out * s->w_out;
}

/* relu(conv(x) + b) in one cuDNN call; 0 when cuDNN refuses it for this plan (then recorded in
 * p->fused, and the caller runs the unfused kernels from then on). Its first call is the test:
 * any status but success refuses the plan (recorded for /ranks/kernel_choices); later, a
 * failure is an error. */
static int fused_forward(BackendCtx *ctx, ConvPlan *p, const void *x, const void *w16,
                         const void *b16, void *y, void *work) {
    if (p->fused < 0) return 0;
    const cudnnStatus_t st = cudnnConvolutionBiasActivationForward(
        ctx->cudnn, &ONE, p->x, x, p->w, w16, p->conv, p->fwd, work, p->fwd_ws, &ZERO, p->y, y,
        p->b, b16, ctx->relu, p->y, y);
    if (st == CUDNN_STATUS_SUCCESS) {
        p->fused = 1;
        return 1;
    }
    if (p->fused == 0) {
        p->fused = -(int)st;
        return 0;
    }
    CUDNN_CHECK(st);
    return 0;
}

void cuda16_conv_forward(BackendCtx *ctx, ConvPlan *p, const float *x, const float *w,
                         const float *b, int relu, float *y, void *work, size_t conv_ws) {
    (void)conv_ws;
    const ConvShape *s = &p->s;
    const void *w16 = NULL, *b16 = NULL;
    cuda16_conv_weights(ctx, s, w, &w16, &b16);
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->fwd_math));
    if (relu && b && b16 && fused_forward(ctx, p, x, w16, b16, y, work)) return;
    CUDNN_CHECK(cudnnConvolutionForward(ctx->cudnn, &ONE, p->x, x, p->w, w16, p->conv, p->fwd, work,
                                        p->fwd_ws, &ZERO, p->y, y));
    if (b) CUDA_CHECK(dth_bias(ctx->stream, half_of(ctx), out_rows(s), s->c_out, b, y));
    if (relu) CUDA_CHECK(dth_relu(ctx->stream, half_of(ctx), out_rows(s) * (size_t)s->c_out, y, y));
}

void cuda16_conv_backward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                          const float *dy, float *dx, float *dw, float *db, void *work,
                          size_t conv_ws) {
    const ConvShape *s = &p->s;
    const void *w16 = NULL, *b16 = NULL;
    cuda16_conv_weights(ctx, s, w, &w16, &b16);
    if (db) cuda16_colsum(ctx, out_rows(s), s->c_out, dy, db);
    void *dw16 = (char *)work + align256(conv_ws); /* cuda_prec_conv_extra's share */
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math));
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx->cudnn, &ONE, p->x, x, p->y, dy, p->conv,
                                               p->bwd_filter, work, p->bwd_filter_ws, &ZERO, p->w,
                                               dw16));
    CUDA_CHECK(
        dth_filter_grad(ctx->stream, half_of(ctx), s->c_out, s->c_in, s->k * s->k, dw16, dw));
    if (!dx) return;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_data_math));
    CUDNN_CHECK(cudnnConvolutionBackwardData(ctx->cudnn, &ONE, p->w, w16, p->y, dy, p->conv,
                                             p->bwd_data, work, p->bwd_data_ws, &ZERO, p->x, dx));
}
