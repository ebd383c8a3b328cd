/* cuda_kernels16.h - launchers of the CUDA backend's kernels on NHWC 16-bit activations (the
 * activation format NHWC bf16/fp16 of --act-layout nhwc, backend.h's ActFormat): conversions and
 * element-wise kernels, pooling and LRN (cuda_act16_kernels.cu), batch norm and bias gradients
 * (cuda_bn16_kernels.cu). What each thread computes is cuda_elem16.h's. Each queues on `st` and
 * returns the launch status; nothing here waits or allocates. `half`: IEEE half, else bf16.
 * Activations are `void *` of dt16 values [n][hw][c]; parameters and statistics are fp32.
 * Callable from C (the host operations in cuda_act16.c, cuda_conv.c, cuda_gemm.c,
 * cuda_precision.c call them through CUDA_CHECK). */
#ifndef DTBENCH_CUDA_KERNELS16_H
#define DTBENCH_CUDA_KERNELS16_H

#include "backend.h"
#include "cuda_plan.h" /* defines: NhwcGrid */

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A convolution's parameters as weights_ready copies them: the filter at w_src of the fp32
 * parameters (KCRS [k][c][khw]) to w_dst of the 16-bit copies (KRSC [k][khw][c]), its bias [k]
 * from b_src to b_dst (b_src SIZE_MAX: none); offsets in values. */
typedef struct {
    size_t w_src, w_dst, b_src, b_dst;
    int k, c, khw;
} ConvW16;

/* ---- conversions (cuda_act16_kernels.cu) ----------------------------------------------------- */
/* y[n][hw][c] (16-bit) = x[n][c][hw] (fp32, the model's input as uploaded) */
cudaError_t dth_input(cudaStream_t st, int half, size_t n, size_t c, size_t hw, const float *x,
                      void *y);
/* 16-bit transposes of [n][c][hw] <-> [n][hw][c] (a flattened fc's input and its gradient) */
cudaError_t dth_to_nchw(cudaStream_t st, size_t n, size_t c, size_t hw, const void *x, void *y);
cudaError_t dth_to_nhwc(cudaStream_t st, size_t n, size_t c, size_t hw, const void *x, void *y);
/* the convolutions' filters (KRSC) and biases of params, rounded into w16 (table: device memory,
 * nconv entries; largest: the most values of one filter) */
cudaError_t dth_filters(cudaStream_t st, int half, const ConvW16 *table, int nconv, size_t largest,
                        const float *params, void *w16);
/* dw[k][c][khw] (fp32) = the 16-bit KRSC gradient dw16[k][khw][c] */
cudaError_t dth_filter_grad(cudaStream_t st, int half, int k, int c, int khw, const void *dw16,
                            float *dw);

/* ---- element-wise ---------------------------------------------------------------------------- */
cudaError_t dth_relu(cudaStream_t st, int half, size_t n, const void *x, void *y);
cudaError_t dth_relu_back(cudaStream_t st, int half, size_t n, const void *y, const void *dy,
                          void *dx);
/* y = a + b (y may alias a or b) */
cudaError_t dth_add(cudaStream_t st, int half, size_t n, const void *a, const void *b, void *y);
/* y[rows][c] = y + b[c] (fp32 bias) */
cudaError_t dth_bias(cudaStream_t st, int half, size_t rows, int c, const float *b, void *y);
/* y[rows][c] = acc + b[c] rounded (acc fp32; b NULL: none) */
cudaError_t dth_round_bias(cudaStream_t st, int half, size_t rows, int c, const float *acc,
                           const float *b, void *y);
cudaError_t dth_dropout(cudaStream_t st, int half, const DropoutShape *s, const void *x, void *y,
                        uint8_t *mask);
cudaError_t dth_dropout_back(cudaStream_t st, int half, const DropoutShape *s, const uint8_t *mask,
                             const void *dy, void *dx);

/* ---- pooling and LRN ------------------------------------------------------------------------- */
cudaError_t dth_maxpool(cudaStream_t st, int half, const PoolShape *s, const void *x, void *y,
                        int32_t *argmax);
cudaError_t dth_maxpool_back(cudaStream_t st, int half, const PoolShape *s, const int32_t *argmax,
                             const void *dy, void *dx);
cudaError_t dth_avgpool(cudaStream_t st, int half, const PoolShape *s, const void *x, void *y);
cudaError_t dth_avgpool_back(cudaStream_t st, int half, const PoolShape *s, const void *dy,
                             void *dx);
cudaError_t dth_gap(cudaStream_t st, int half, size_t n, size_t c, size_t plane, const void *x,
                    void *y);
cudaError_t dth_gap_back(cudaStream_t st, int half, size_t n, size_t c, size_t plane,
                         const void *dy, void *dx);
cudaError_t dth_lrn(cudaStream_t st, int half, const LrnShape *s, const void *x, void *y,
                    float *scale);
cudaError_t dth_lrn_back(cudaStream_t st, int half, const LrnShape *s, const void *x, const void *y,
                         const float *scale, const void *dy, void *dx);

/* ---- batch norm and channel sums (cuda_bn16_kernels.cu) -------------------------------------
 * On the grid g of nhwc_grid (DT16_THREADS threads, DT16_PER_SM blocks per multiprocessor; vec 8
 * only where every buffer passed is 16-byte aligned), partials: 2 * g->splits * g->c doubles of
 * scratch, coef: 4 * g->c floats of scratch. Forward: y = relu(BN(x) + z), the add when z is not
 * NULL, the ReLU when relu is set. Backward: the gradient reaching the batch norm is dy, or where
 * act_y (a fused ReLU's output) is not > 0, zero; with dz (not NULL; may alias dy) it is also
 * written there. dx, dgamma, dbeta overwritten. */
cudaError_t dth_bn_train(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                         double *partials, float *coef, const void *x, const float *gamma,
                         const float *beta, const void *z, int relu, void *y, float *save_mean,
                         float *save_invstd, float *running_mean, float *running_var);
cudaError_t dth_bn_infer(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                         float *coef, const void *x, const float *gamma, const float *beta,
                         const float *running_mean, const float *running_var, const void *z,
                         int relu, void *y);
cudaError_t dth_bn_back(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                        double *partials, float *coef, const void *x, const float *gamma,
                        const float *save_mean, const float *save_invstd, const void *act_y,
                        const void *dy, void *dx, void *dz, float *dgamma, float *dbeta);
/* out[c] = the sum of the rows of dy[rows][c] (a bias gradient) */
cudaError_t dth_colsum(cudaStream_t st, int half, const NhwcGrid *g, double *partials,
                       const void *dy, float *out);

#ifdef __cplusplus
}
#endif

#endif
