/* cuda_kernels.h - launchers of dtbench's own CUDA kernels, what cuBLAS and cuDNN lack, grouped by
 * the kernels/cuda/cuda_*_kernels.cu file that holds them. Each queues its kernel(s) on `st` and
 * returns the launch status; nothing here waits or allocates. Semantics and shapes: backend.h
 * (row-major, NCHW). Callable from C (the host operations in kernels/cuda/cuda_*.c call them
 * through CUDA_CHECK). */
#ifndef DTBENCH_CUDA_KERNELS_H
#define DTBENCH_CUDA_KERNELS_H

#include "backend.h"
#include "cuda_elem.h"        /* defines: DtConcat */
#include "cuda_plan.h"        /* defines: BnGrid */
#include "cuda_transformer.h" /* defines: LnColGrid */

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fully connected bias (cuda_gemm_kernels.cu) ------------------------------------------- */
/* y[n,out] += b[out] (broadcast over the batch) */
cudaError_t dtk_bias_add(cudaStream_t st, int n, int out, const float *b, float *y);
/* db[out] = sum over i of dy[i,out], summed in row order i = 0..n-1 as the CPU backend does */
cudaError_t dtk_bias_grad(cudaStream_t st, int n, int out, const float *dy, float *db);

/* ---- loss and optimizer (cuda_optim_kernels.cu) -------------------------------------------- */
/* Softmax cross-entropy over logits[n,c] (backend.h): dlogits[n,c] (skipped when NULL; may be
 * logits, in place), stats[0] = mean loss, stats[1] = correct predictions. Scratch: row_loss
 * (double) and row_hit (int) of `scratch` entries of device memory, any n (min(n, scratch)
 * blocks, each summing its rows in order). */
cudaError_t dtk_softmax_xent(cudaStream_t st, int n, int c, const float *logits,
                             const int32_t *labels, float *dlogits, float *stats, double *row_loss,
                             int *row_hit, int scratch);
/* PyTorch SGD over n parameters (backend.h): g' = g + wd*p; v = momentum*v + g'; p -= lr*v
 * (momentum == 0: p -= lr*g', v untouched) */
cudaError_t dtk_sgd_update(cudaStream_t st, size_t n, float *p, const float *g, float *v, float lr,
                           float momentum, float weight_decay);
/* PyTorch AdamW over n parameters (backend.h's AdamWStep; a is read on the host at launch) */
cudaError_t dtk_adamw_update(cudaStream_t st, size_t n, float *p, const float *g, float *m,
                             float *v, const AdamWStep *a);

/* ---- element-wise (cuda_elementwise_kernels.cu) -------------------------------------------- */
cudaError_t dtk_image_check(void); /* do our kernels run on the current device? */
cudaError_t dtk_scale(cudaStream_t st, size_t n, float *x, float s); /* x[n] *= s */
/* x[n] *= s * f[0], f device memory read when the kernel runs */
cudaError_t dtk_scale_by(cudaStream_t st, size_t n, float *x, float s, const float *f);
cudaError_t dtk_axpy(cudaStream_t st, size_t n, float alpha, const float *x, float *y);
cudaError_t dtk_add(cudaStream_t st, size_t n, const float *a, const float *b, float *y);
cudaError_t dtk_dropout_forward(cudaStream_t st, const DropoutShape *s, const float *x, float *y,
                                uint8_t *mask);
cudaError_t dtk_dropout_backward(cudaStream_t st, const DropoutShape *s, const uint8_t *mask,
                                 const float *dy, float *dx);
/* Concatenation in one launch (cuda_elem.h's DtConcat, dt_concat_plan): forward y[u] = its
 * input's unit; backward (dy = y) each input's unit = dy[u], inputs without a gradient skipped.
 * units: rows x c->units; unit: 16, 8, 4 or 2 bytes. */
cudaError_t dtk_concat(cudaStream_t st, const DtConcat *c, size_t unit, size_t units, void *y,
                       int backward);

/* ---- pooling (cuda_pool_kernels.cu) -------------------------------------------------------- */
/* Max pooling with padding (pad 0: the unpadded layer), argmax = ih*w_in + iw of the first
 * maximum in row-major window order, -1 (and y = 0) for a window wholly in the padding. The
 * backward reads only argmax and dy, never the forward output: a ReLU run in place on y is
 * harmless. dx overwritten. */
cudaError_t dtk_maxpool_forward(cudaStream_t st, const PoolShape *s, const float *x, float *y,
                                int32_t *argmax);
cudaError_t dtk_maxpool_backward(cudaStream_t st, const PoolShape *s, const int32_t *argmax,
                                 const float *dy, float *dx);
cudaError_t dtk_avgpool_forward(cudaStream_t st, const PoolShape *s, const float *x, float *y);
cudaError_t dtk_avgpool_backward(cudaStream_t st, const PoolShape *s, const float *dy, float *dx);
cudaError_t dtk_global_avgpool_forward(cudaStream_t st, size_t planes, size_t plane, const float *x,
                                       float *y);
cudaError_t dtk_global_avgpool_backward(cudaStream_t st, size_t planes, size_t plane,
                                        const float *dy, float *dx);

/* ---- normalisation (cuda_norm_kernels.cu) -------------------------------------------------- */
cudaError_t dtk_lrn_forward(cudaStream_t st, const LrnShape *s, const float *x, float *y,
                            float *scale);
cudaError_t dtk_lrn_backward(cudaStream_t st, const LrnShape *s, const float *x, const float *y,
                             const float *scale, const float *dy, float *dx);
/* Batch norm, one block per channel and 64-bit indices: for tensors bn_grid does not take. */
cudaError_t dtk_bn_forward_train_simple(cudaStream_t st, const BnShape *s, const float *x,
                                        const float *gamma, const float *beta, float *y,
                                        float *save_mean, float *save_invstd, float *running_mean,
                                        float *running_var);
cudaError_t dtk_bn_forward_infer_simple(cudaStream_t st, const BnShape *s, const float *x,
                                        const float *gamma, const float *beta,
                                        const float *running_mean, const float *running_var,
                                        float *y);
cudaError_t dtk_bn_backward_simple(cudaStream_t st, const BnShape *s, const float *x,
                                   const float *gamma, const float *save_mean,
                                   const float *save_invstd, const float *dy, float *dx,
                                   float *dgamma, float *dbeta);

/* ---- batch norm at memory speed (cuda_batchnorm_kernels.cu) -------------------------------- */
#define BN_BLOCK_THREADS 256 /* threads per block (bn_grid plans with it) */
/* On the grid g of bn_grid (cuda_plan.h), partials: 2 * g->splits * s->c doubles of scratch.
 * Forward: y = relu(BN(x) + z), the add when z is not NULL, the ReLU when relu is set (the
 * CPU's add and ReLU, fused). Backward: the gradient reaching the batch norm is dy, or where
 * act_y (the fused ReLU's output) is not > 0, zero; with dz (not NULL; may alias dy) it is also
 * written there (the fused add's other input's gradient). dx, dgamma, dbeta overwritten. */
cudaError_t dtk_bn_forward_train(cudaStream_t st, const BnShape *s, const BnGrid *g,
                                 double *partials, const float *x, const float *gamma,
                                 const float *beta, const float *z, int relu, float *y,
                                 float *save_mean, float *save_invstd, float *running_mean,
                                 float *running_var);
cudaError_t dtk_bn_forward_infer(cudaStream_t st, const BnShape *s, const BnGrid *g, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, const float *z, int relu, float *y);
cudaError_t dtk_bn_backward(cudaStream_t st, const BnShape *s, const BnGrid *g, double *partials,
                            const float *x, const float *gamma, const float *save_mean,
                            const float *save_invstd, const float *act_y, const float *dy,
                            float *dx, float *dz, float *dgamma, float *dbeta);

/* ---- embedding and LSTM cell (cuda_recurrent_kernels.cu) ----------------------------------- */
cudaError_t dtk_embedding_forward(cudaStream_t st, const EmbeddingShape *s, const float *ids,
                                  const float *w, float *y);
/* zeroes dW, then adds the dy rows of each id in row order */
cudaError_t dtk_embedding_backward(cudaStream_t st, const EmbeddingShape *s, const float *ids,
                                   const float *dy, float *dw);
/* gates[r, :] = b; step t forward (gates to activations, cell, y); step t backward (dgates of
 * step t, dcell carried). */
cudaError_t dtk_lstm_rows_set(cudaStream_t st, size_t rows, int g, const float *b, float *gates);
cudaError_t dtk_lstm_cell_forward(cudaStream_t st, const LstmShape *s, int t, float *gates,
                                  float *cell, float *y);
cudaError_t dtk_lstm_cell_backward(cudaStream_t st, const LstmShape *s, int t, const float *gates,
                                   const float *cell, const float *dy, const float *dh_rec,
                                   float *dcell, float *dgates);

/* ---- transformer (cuda_transformer_kernels.cu; per-thread arithmetic in cuda_transformer.h) -- */
cudaError_t dtk_tokpos_forward(cudaStream_t st, const TokPosShape *s, const float *ids,
                               const float *wte, const float *wpe, float *y);
/* dwpe summed over the samples in order; dwte zeroed and summed per id in position order, each
 * block owning TOKPOS_VROWS of its rows (no atomics) */
cudaError_t dtk_tokpos_backward(cudaStream_t st, const TokPosShape *s, const float *ids,
                                const float *dy, float *dwte, float *dwpe);
cudaError_t dtk_layernorm_forward(cudaStream_t st, const LayerNormShape *s, const float *x,
                                  const float *gamma, const float *beta, float *y, float *mean,
                                  float *rstd);
/* dx per row; dgamma, dbeta through partials [2 * g->splits * s->dim] doubles on the grid g */
cudaError_t dtk_layernorm_backward(cudaStream_t st, const LayerNormShape *s, const LnColGrid *g,
                                   double *partials, const float *x, const float *gamma,
                                   const float *mean, const float *rstd, const float *dy, float *dx,
                                   float *dgamma, float *dbeta);
cudaError_t dtk_gelu_forward(cudaStream_t st, size_t n, const float *x, float *y);
cudaError_t dtk_gelu_backward(cudaStream_t st, size_t n, const float *x, const float *dy,
                              float *dx);
/* rows of P [rows, T] (row R: query R % T), in place: the causal softmax of the scores; and
 * d = the softmax's backward of dP in d, times scale, from P */
cudaError_t dtk_att_softmax(cudaStream_t st, size_t rows, int T, float *p);
cudaError_t dtk_att_softmax_back(cudaStream_t st, size_t rows, int T, const float *p, float *d,
                                 float scale);

#ifdef __cplusplus
}
#endif

#endif
