/* cuda_ops.h - the CUDA backend's operations (backend.h's BackendOps members), one group per file
 * of kernels/cuda/cuda_*.c, which kernels/cuda/cuda.c collects into the `cuda_backend` table. Each
 * checks every library call and launch (cuda_check.h) and queues on the rank's compute stream; none
 * waits or allocates unless its comment says so. Private to the CUDA backend; CUDA-only header. */
#ifndef DTBENCH_CUDA_OPS_H
#define DTBENCH_CUDA_OPS_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

/* ---- fully connected (cuda_gemm.c) ---------------------------------------------------------- */
void cuda_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                     const float *b, float *y);
void cuda_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                      const float *dy, float *dx, float *dw, float *db);

/* ---- convolution (cuda_conv.c) -------------------------------------------------------------- */
size_t cuda_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s);
void cuda_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                       const float *b, float *y, void *work);
void cuda_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                        const float *dy, float *dx, float *dw, float *db, void *work);
void cuda_conv_relu_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                            const float *b, float *y, void *work);
void cuda_conv_plans_free(BackendCtx *ctx); /* at finalize */

/* ---- pooling (cuda_pool.c) ------------------------------------------------------------------ */
void cuda_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                          int32_t *argmax);
void cuda_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                           const float *dy, float *dx);
void cuda_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y);
void cuda_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx);
void cuda_global_avgpool_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                                 float *y);
void cuda_global_avgpool_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane,
                                  const float *dy, float *dx);

/* ---- normalisation (cuda_norm.c) ------------------------------------------------------------ */
void cuda_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale);
void cuda_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                       const float *scale, const float *dy, float *dx);
void cuda_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, float *y, float *save_mean,
                                  float *save_invstd, float *running_mean, float *running_var);
void cuda_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                  const float *gamma, const float *beta, const float *running_mean,
                                  const float *running_var, float *y);
void cuda_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                             const float *save_mean, const float *save_invstd, const float *dy,
                             float *dx, float *dgamma, float *dbeta);
void cuda_bn_act_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                               const float *gamma, const float *beta, const float *z, float *y,
                               float *save_mean, float *save_invstd, float *running_mean,
                               float *running_var);
void cuda_bn_act_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                               const float *gamma, const float *beta, const float *running_mean,
                               const float *running_var, const float *z, float *y);
/* Falls back (tensors of 2^31 elements or more) to the unfused kernels, masking dy in place. */
void cuda_bn_act_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                          const float *save_mean, const float *save_invstd, const float *y,
                          float *dy, float *dx, float *dz, float *dgamma, float *dbeta);

/* ---- element-wise, joins, copies (cuda_elementwise.c) --------------------------------------- */
void cuda_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y);
void cuda_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx);
void cuda_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y);
void cuda_scale(BackendCtx *ctx, size_t n, float alpha, float *x);
void cuda_scale_by(BackendCtx *ctx, size_t n, float alpha, const float *factor, float *x);
void cuda_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes);
void cuda_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                         const size_t *sizes, float *y);
void cuda_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                          const float *dy, float *const *dxs);
void cuda_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
void cuda_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db);
void cuda_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                          uint8_t *mask);
void cuda_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                           const float *dy, float *dx);

/* ---- loss and optimizer (cuda_optim.c) ------------------------------------------------------ */
/* Any number of rows on the scratch made at init (XENT_ROWS0); dlogits may be logits. */
void cuda_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                       float *dlogits, float *stats);
void cuda_sgd_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                     float momentum, float weight_decay);
void cuda_adamw_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *m, float *v,
                       const AdamWStep *a);

/* ---- embedding and LSTM (cuda_recurrent.c) -------------------------------------------------- */
void cuda_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *w, float *y);
void cuda_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                             const float *dy, float *dw);
size_t cuda_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s);
size_t cuda_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s);
void cuda_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *b, float *y, void *reserve, void *work);
void cuda_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                        const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                        float *db, void *work);

/* ---- transformer (cuda_transformer.c) ------------------------------------------------------- */
/* fp32 activations only (not the NHWC 16-bit format); the attention's products in the precision
 * of --precision; nothing allocated (layer norm's partial sums in the batch-norm scratch) */
void cuda_tokpos_forward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *wte,
                         const float *wpe, float *y);
void cuda_tokpos_backward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *dy,
                          float *dwte, float *dwpe);
void cuda_layernorm_forward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                            const float *gamma, const float *beta, float *y, float *mean,
                            float *rstd);
void cuda_layernorm_backward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                             const float *gamma, const float *mean, const float *rstd,
                             const float *dy, float *dx, float *dgamma, float *dbeta);
void cuda_gelu_forward(BackendCtx *ctx, size_t n, const float *x, float *y);
void cuda_gelu_backward(BackendCtx *ctx, size_t n, const float *x, const float *dy, float *dx);
size_t cuda_attention_reserve_bytes(BackendCtx *ctx, const AttentionShape *s);
size_t cuda_attention_workspace_bytes(BackendCtx *ctx, const AttentionShape *s);
void cuda_attention_forward(BackendCtx *ctx, const AttentionShape *s, const float *qkv, float *y,
                            void *reserve, void *work);
void cuda_attention_backward(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                             const float *y, const void *reserve, const float *dy, float *dqkv,
                             void *work);

/* ---- the copy stream and step replay (cuda_stream.c) ---------------------------------------- */
/* Made at init and freed at finalize (cuda.c): the copy stream, its events, cuBLAS's workspace. */
void cuda_stream_init(BackendCtx *ctx);
void cuda_stream_free(BackendCtx *ctx);
void *cuda_host_alloc(BackendCtx *ctx, size_t bytes); /* cudaHostAlloc: allocates (not in a step) */
void cuda_host_free(BackendCtx *ctx, void *p);
void cuda_prefetch_upload(BackendCtx *ctx, int slot, void *dst_dev, const void *src_host,
                          size_t bytes);
void cuda_prefetch_wait(BackendCtx *ctx, int slot);
void cuda_prefetch_release(BackendCtx *ctx, int slot);
void cuda_prefetch_fence(BackendCtx *ctx, int slot); /* waits (on the host) for the slot's copies */
void *cuda_graph_capture(BackendCtx *ctx, void (*work)(void *arg), void *arg);
void cuda_graph_launch(BackendCtx *ctx, void *graph);
void cuda_graph_free(BackendCtx *ctx, void *graph);

#endif
