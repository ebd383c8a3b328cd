/* ref_kernels.h - naive reference kernels for the backend tests (tests/test_cpu_*.c, the bf16,
 * CUDA and model tests), one file per concern as in kernels/: ref_gemm.c (fully connected),
 * ref_conv.c, ref_pool.c, ref_elementwise.c (ReLU, concatenation, add, dropout), ref_optim.c
 * (softmax cross-entropy, SGD, AdamW), ref_norm.c (LRN, batch norm), ref_recurrent.c (embedding,
 * LSTM), ref_transformer.c (layer norm, GELU, token and position embedding, causal self-attention).
 *
 * Written independently of the backends and as plainly as possible: direct nested loops over the
 * definitions, double accumulators, no BLAS, no im2col. Slow on purpose; only for small shapes.
 * Same shape structs and layouts as backend.h (float32, NCHW, row-major). Outputs are overwritten.
 */
#ifndef DTBENCH_REF_KERNELS_H
#define DTBENCH_REF_KERNELS_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

/* y[n,out] = x[n,in] W[out,in]^T + b[out] */
void ref_fc_forward(const FcShape *s, const float *x, const float *w, const float *b, float *y);
/* dw[out,in] = dy^T x, db[out] = sum over n of dy, dx[n,in] = dy W (dx may be NULL) */
void ref_fc_backward(const FcShape *s, const float *x, const float *w, const float *dy, float *dx,
                     float *dw, float *db);

/* y[n,co,oh,ow] = b[co] + sum_{ci,ki,kj} W[co,ci,ki,kj] x[n,ci,oh*stride-pad+ki,ow*stride-pad+kj]
 * (terms outside the image are zero) */
void ref_conv_forward(const ConvShape *s, const float *x, const float *w, const float *b, float *y);
/* dw[co,ci,ki,kj], db[co], dx[n,ci,h,w] (dx may be NULL) of the convolution above */
void ref_conv_backward(const ConvShape *s, const float *x, const float *w, const float *dy,
                       float *dx, float *dw, float *db);

/* y = max over the part of each window inside the image (padding never wins; a window entirely
 * in the padding: y = 0, argmax -1); argmax = ih*w_in + iw of the first maximum in row-major
 * window order */
void ref_maxpool_forward(const PoolShape *s, const float *x, float *y, int32_t *argmax);
/* dx[n,c,h_in,w_in]: each dy goes to the position of its window's maximum, found again from x */
void ref_maxpool_backward(const PoolShape *s, const float *x, const float *dy, float *dx);

void ref_relu_forward(size_t n, const float *x, float *y);
/* dx = dy where x > 0 (x: the forward input), else 0 */
void ref_relu_backward(size_t n, const float *x, const float *dy, float *dx);

/* mean over rows of -log softmax(logits)[label]; dlogits = (softmax - onehot)/n (may be NULL);
 * *correct = rows whose first maximum is at the label */
double ref_softmax_xent(int n, int c, const float *logits, const int32_t *labels, float *dlogits,
                        int *correct);

/* one PyTorch SGD step: g' = g + wd p; v = momentum v + g'; p = p - lr v
 * (momentum == 0: p = p - lr g', v untouched and may be NULL) */
void ref_sgd_update(size_t n, float *p, const float *g, float *v, float lr, float momentum,
                    float weight_decay);

/* one AdamW step t >= 1 (Loshchilov & Hutter's algorithm, eps where PyTorch adds it), in double:
 * p = p (1 - lr wd); m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 * p = p - lr mhat / (sqrt(vhat) + eps), mhat = m / (1 - beta1^t), vhat = v / (1 - beta2^t) */
void ref_adamw_update(size_t n, float *p, const float *g, float *m, float *v, int t, float lr,
                      float beta1, float beta2, float eps, float weight_decay);

/* ---- model-zoo layers (backend.h, "appended for the model zoo") ---- */

/* average over the k*k window, padding counted as zeros; backward as a gather */
void ref_avgpool_forward(const PoolShape *s, const float *x, float *y);
void ref_avgpool_backward(const PoolShape *s, const float *dy, float *dx);
void ref_global_avgpool_forward(size_t planes, size_t plane, const float *x, float *y);
void ref_global_avgpool_backward(size_t planes, size_t plane, const float *dy, float *dx);

/* LRN from its definition; the backward sums dy[c'] * dy[c']/dx[c] over every c' */
void ref_lrn_forward(const LrnShape *s, const float *x, float *y);
void ref_lrn_backward(const LrnShape *s, const float *x, const float *dy, float *dx);

/* batch normalisation in double; the training forward also returns the batch mean and
 * 1/sqrt(var + eps) and updates running_mean/running_var like the backend */
void ref_batchnorm_forward_train(const BnShape *s, const float *x, const float *gamma,
                                 const float *beta, float *y, float *mean, float *invstd,
                                 float *running_mean, float *running_var);
void ref_batchnorm_forward_infer(const BnShape *s, const float *x, const float *gamma,
                                 const float *beta, const float *running_mean,
                                 const float *running_var, float *y);
/* the backward recomputes the batch statistics from x */
void ref_batchnorm_backward(const BnShape *s, const float *x, const float *gamma, const float *dy,
                            float *dx, float *dgamma, float *dbeta);

void ref_concat_forward(int batch, int ninputs, const float *const *xs, const size_t *sizes,
                        float *y);
void ref_concat_backward(int batch, int ninputs, const size_t *sizes, const float *dy,
                         float *const *dxs);
void ref_add_forward(size_t n, const float *a, const float *b, float *y);

/* dropout with the mask defined in backend.h (DropoutShape), reimplemented from that text */
void ref_dropout_forward(const DropoutShape *s, const float *x, float *y, uint8_t *mask);
void ref_dropout_backward(const DropoutShape *s, const uint8_t *mask, const float *dy, float *dx);

void ref_embedding_forward(const EmbeddingShape *s, const float *ids, const float *w, float *y);
void ref_embedding_backward(const EmbeddingShape *s, const float *ids, const float *dy, float *dw);

/* the LSTM cell of backend.h step by step in double; the backward is back-propagation through
 * time over states recomputed from x */
void ref_lstm_forward(const LstmShape *s, const float *x, const float *w, const float *b, float *y);
void ref_lstm_backward(const LstmShape *s, const float *x, const float *w, const float *b,
                       const float *dy, float *dx, float *dw, float *db);

/* ---- transformer layers (ref_transformer.c) ---- */

/* layer norm in double; the forward also returns each row's mean and 1/sqrt(var + eps); the
 * backward recomputes them from x and writes dx, dgamma, dbeta */
void ref_layernorm_forward(const LayerNormShape *s, const float *x, const float *gamma,
                           const float *beta, float *y, float *mean, float *rstd);
void ref_layernorm_backward(const LayerNormShape *s, const float *x, const float *gamma,
                            const float *dy, float *dx, float *dgamma, float *dbeta);
/* GELU, tanh approximation, with libm's tanh in double */
void ref_gelu_forward(size_t n, const float *x, float *y);
void ref_gelu_backward(size_t n, const float *x, const float *dy, float *dx);
/* wte gather + wpe; ids outside [0, vocab) (NaN too) contribute nothing */
void ref_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                        float *y);
void ref_tokpos_backward(const TokPosShape *s, const float *ids, const float *dy, float *dwte,
                         float *dwpe);
/* causal attention per sample and head from its definition; the backward recomputes the
 * probabilities and writes every element of dqkv */
void ref_attention_forward(const AttentionShape *s, const float *qkv, float *y);
/* the probabilities P [batch, heads, seq, seq] (zeros above the diagonal) */
void ref_attention_probs(const AttentionShape *s, const float *qkv, float *p);
void ref_attention_backward(const AttentionShape *s, const float *qkv, const float *dy,
                            float *dqkv);

#endif
