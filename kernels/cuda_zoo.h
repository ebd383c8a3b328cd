/* cuda_zoo.h - launchers of dtbench's CUDA kernels for the model-zoo layers (cuda_zoo_kernels.cu,
 * cuda_norm.cu, cuda_lstm_kernels.cu). Each queues its kernel(s) on `stream` and returns the launch
 * status; nothing here waits. Semantics and shapes: backend.h. Callable from C. */
#ifndef DTBENCH_CUDA_ZOO_H
#define DTBENCH_CUDA_ZOO_H

#include "backend.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

cudaError_t dtz_axpy(cudaStream_t st, size_t n, float alpha, const float *x, float *y);

/* Max pooling with padding (pad 0: the unpadded layer), argmax = ih*w_in + iw of the first
 * maximum in row-major window order, -1 (and y = 0) for a window wholly in the padding. The
 * backward reads only argmax and dy, never the forward output: a ReLU run in place on y is
 * harmless. dx overwritten. */
cudaError_t dtz_maxpool_forward(cudaStream_t st, const PoolShape *s, const float *x, float *y,
                                int32_t *argmax);
cudaError_t dtz_maxpool_backward(cudaStream_t st, const PoolShape *s, const int32_t *argmax,
                                 const float *dy, float *dx);
cudaError_t dtz_avgpool_forward(cudaStream_t st, const PoolShape *s, const float *x, float *y);
cudaError_t dtz_avgpool_backward(cudaStream_t st, const PoolShape *s, const float *dy, float *dx);
cudaError_t dtz_global_avgpool_forward(cudaStream_t st, size_t planes, size_t plane, const float *x,
                                       float *y);
cudaError_t dtz_global_avgpool_backward(cudaStream_t st, size_t planes, size_t plane,
                                        const float *dy, float *dx);
cudaError_t dtz_lrn_forward(cudaStream_t st, const LrnShape *s, const float *x, float *y,
                            float *scale);
cudaError_t dtz_lrn_backward(cudaStream_t st, const LrnShape *s, const float *x, const float *y,
                             const float *scale, const float *dy, float *dx);
cudaError_t dtz_bn_forward_train(cudaStream_t st, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var);
cudaError_t dtz_bn_forward_infer(cudaStream_t st, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float *y);
cudaError_t dtz_bn_backward(cudaStream_t st, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *dy,
                            float *dx, float *dgamma, float *dbeta);
cudaError_t dtz_add(cudaStream_t st, size_t n, const float *a, const float *b, float *y);
cudaError_t dtz_dropout_forward(cudaStream_t st, const DropoutShape *s, const float *x, float *y,
                                uint8_t *mask);
cudaError_t dtz_dropout_backward(cudaStream_t st, const DropoutShape *s, const uint8_t *mask,
                                 const float *dy, float *dx);
cudaError_t dtz_embedding_forward(cudaStream_t st, const EmbeddingShape *s, const float *ids,
                                  const float *w, float *y);
/* zeroes dW, then adds the dy rows of each id in row order */
cudaError_t dtz_embedding_backward(cudaStream_t st, const EmbeddingShape *s, const float *ids,
                                   const float *dy, float *dw);

/* LSTM pointwise parts (cuda_lstm_kernels.cu): gates[r, :] = b; step t forward (gates to
 * activations, cell, y); step t backward (dgates of step t, dcell carried). */
cudaError_t dtl_rows_set(cudaStream_t st, size_t rows, int g, const float *b, float *gates);
cudaError_t dtl_cell_forward(cudaStream_t st, const LstmShape *s, int t, float *gates, float *cell,
                             float *y);
cudaError_t dtl_cell_backward(cudaStream_t st, const LstmShape *s, int t, const float *gates,
                              const float *cell, const float *dy, const float *dh_rec, float *dcell,
                              float *dgates);

/* ---- the BackendOps entries built on them (cuda_zoo.c, cuda_lstm.c), for cuda.c's table ---- */
void cuda_zoo_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y);
void cuda_zoo_scale(BackendCtx *ctx, size_t n, float alpha, float *x);
void cuda_zoo_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes);
void cuda_zoo_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y);
void cuda_zoo_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx);
void cuda_zoo_global_avgpool_forward(BackendCtx *ctx, size_t planes, size_t plane, const float *x,
                                     float *y);
void cuda_zoo_global_avgpool_backward(BackendCtx *ctx, size_t planes, size_t plane, const float *dy,
                                      float *dx);
void cuda_zoo_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y,
                          float *scale);
void cuda_zoo_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                           const float *scale, const float *dy, float *dx);
void cuda_zoo_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                      const float *gamma, const float *beta, float *y,
                                      float *save_mean, float *save_invstd, float *running_mean,
                                      float *running_var);
void cuda_zoo_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                      const float *gamma, const float *beta,
                                      const float *running_mean, const float *running_var,
                                      float *y);
void cuda_zoo_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *save_mean,
                                 const float *save_invstd, const float *dy, float *dx,
                                 float *dgamma, float *dbeta);
void cuda_zoo_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                             const size_t *sizes, float *y);
void cuda_zoo_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                              const float *dy, float *const *dxs);
void cuda_zoo_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
void cuda_zoo_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db);
void cuda_zoo_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                              uint8_t *mask);
void cuda_zoo_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                               const float *dy, float *dx);
void cuda_zoo_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                                const float *w, float *y);
void cuda_zoo_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                                 const float *dy, float *dw);
size_t cuda_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s);
size_t cuda_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s);
void cuda_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *b, float *y, void *reserve, void *work);
void cuda_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                        const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                        float *db, void *work);

#ifdef __cplusplus
}
#endif

#endif
