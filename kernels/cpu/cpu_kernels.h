/* cpu_kernels.h - the CPU backend's kernels, one file per concern (kernels/cpu/cpu_*.c), entered
 * into cpu_backend's function table by kernels/cpu/cpu.c (and called directly by the kernel tests).
 * Semantics, shapes and layouts: backend.h. */
#ifndef DTBENCH_CPU_KERNELS_H
#define DTBENCH_CPU_KERNELS_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

/* cpu.c: the one matrix product every layer calls. Row-major C[m,n] = alpha op(A) op(B) + beta C
 * (ta, tb: transpose A, B), as cblas_sgemm(CblasRowMajor, ...); with --precision bf16 through
 * cpu_bf16_gemm (bf16 inputs, fp32 accumulation), told which operand is a parameter (weight:
 * CPU_BF16_WEIGHT_A/_B, or CPU_BF16_NO_WEIGHT; cpu_bf16.h). ctx may be NULL: fp32. */
void cpu_gemm(BackendCtx *ctx, int weight, int ta, int tb, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* With --precision bf16 its engine's state (cpu_bf16.h), else NULL. */
struct CpuBf16 *cpu_ctx_bf16(const BackendCtx *ctx);
/* The threads a kernel of ctx may run on: --threads (cfg->threads), or OpenBLAS's count when none
 * was set; 1 for a NULL ctx. */
int cpu_ctx_threads(const BackendCtx *ctx);

/* cpu_gemm.c */
void cpu_fc_forward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                    const float *b, float *y);
void cpu_fc_backward(BackendCtx *ctx, const FcShape *s, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, float *db);

/* cpu_conv.c */
size_t cpu_conv_workspace_bytes(BackendCtx *ctx, const ConvShape *s);
void cpu_conv_forward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                      const float *b, float *y, void *work);
void cpu_conv_backward(BackendCtx *ctx, const ConvShape *s, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db, void *work);

/* cpu_pool.c */
void cpu_maxpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y,
                         int32_t *argmax);
void cpu_maxpool_backward(BackendCtx *ctx, const PoolShape *s, const int32_t *argmax,
                          const float *dy, float *dx);
void cpu_avgpool_forward(BackendCtx *ctx, const PoolShape *s, const float *x, float *y);
void cpu_avgpool_backward(BackendCtx *ctx, const PoolShape *s, const float *dy, float *dx);
void cpu_global_avgpool_forward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *x,
                                float *y);
void cpu_global_avgpool_backward(BackendCtx *ctx, size_t n, size_t c, size_t plane, const float *dy,
                                 float *dx);

/* cpu_norm.c */
void cpu_lrn_forward(BackendCtx *ctx, const LrnShape *s, const float *x, float *y, float *scale);
void cpu_lrn_backward(BackendCtx *ctx, const LrnShape *s, const float *x, const float *y,
                      const float *scale, const float *dy, float *dx);

void cpu_batchnorm_forward_train(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, float *y, float *save_mean,
                                 float *save_invstd, float *running_mean, float *running_var);
void cpu_batchnorm_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x,
                                 const float *gamma, const float *beta, const float *running_mean,
                                 const float *running_var, float *y);
void cpu_batchnorm_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                            const float *save_mean, const float *save_invstd, const float *dy,
                            float *dx, float *dgamma, float *dbeta);
/* batch norm -> (residual add ->) ReLU in one pass, bit for bit the unfused rows (backend.h) */
void cpu_bn_act_forward_train(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                              const float *beta, const float *z, float *y, float *save_mean,
                              float *save_invstd, float *running_mean, float *running_var);
void cpu_bn_act_forward_infer(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                              const float *beta, const float *running_mean,
                              const float *running_var, const float *z, float *y);
void cpu_bn_act_backward(BackendCtx *ctx, const BnShape *s, const float *x, const float *gamma,
                         const float *save_mean, const float *save_invstd, const float *y,
                         float *dy, float *dx, float *dz, float *dgamma, float *dbeta);

/* cpu_elementwise.c */
void cpu_relu_forward(BackendCtx *ctx, size_t n, const float *x, float *y);
void cpu_relu_backward(BackendCtx *ctx, size_t n, const float *y, const float *dy, float *dx);
void cpu_axpy(BackendCtx *ctx, size_t n, float alpha, const float *x, float *y);
void cpu_scale(BackendCtx *ctx, size_t n, float alpha, float *x);
void cpu_scale_by(BackendCtx *ctx, size_t n, float alpha, const float *factor, float *x);
void cpu_copy(BackendCtx *ctx, void *dst, const void *src, size_t bytes);
void cpu_concat_forward(BackendCtx *ctx, int batch, int ninputs, const float *const *xs,
                        const size_t *sizes, float *y);
void cpu_concat_backward(BackendCtx *ctx, int batch, int ninputs, const size_t *sizes,
                         const float *dy, float *const *dxs);
void cpu_add_forward(BackendCtx *ctx, size_t n, const float *a, const float *b, float *y);
void cpu_add_backward(BackendCtx *ctx, size_t n, const float *dy, float *da, float *db);
void cpu_dropout_forward(BackendCtx *ctx, const DropoutShape *s, const float *x, float *y,
                         uint8_t *mask);
void cpu_dropout_backward(BackendCtx *ctx, const DropoutShape *s, const uint8_t *mask,
                          const float *dy, float *dx);

/* cpu_optim.c */
void cpu_softmax_xent(BackendCtx *ctx, int n, int c, const float *logits, const int32_t *labels,
                      float *dlogits, float *stats);
void cpu_sgd_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *v, float lr,
                    float momentum, float weight_decay);
void cpu_adamw_update(BackendCtx *ctx, size_t n, float *p, const float *g, float *m, float *v,
                      const AdamWStep *a);
int cpu_all_finite(BackendCtx *ctx, size_t n, const float *x);

/* cpu_recurrent.c */
void cpu_embedding_forward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                           const float *w, float *y);
void cpu_embedding_backward(BackendCtx *ctx, const EmbeddingShape *s, const float *ids,
                            const float *dy, float *dw);

size_t cpu_lstm_reserve_bytes(BackendCtx *ctx, const LstmShape *s);
size_t cpu_lstm_workspace_bytes(BackendCtx *ctx, const LstmShape *s);
void cpu_lstm_forward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                      const float *b, float *y, void *reserve, void *work);
void cpu_lstm_backward(BackendCtx *ctx, const LstmShape *s, const float *x, const float *w,
                       const float *y, const void *reserve, const float *dy, float *dx, float *dw,
                       float *db, void *work);

/* cpu_transformer.c (split over cpu_ctx_threads() threads) */
void cpu_tokpos_forward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *wte,
                        const float *wpe, float *y);
void cpu_tokpos_backward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *dy,
                         float *dwte, float *dwpe);
void cpu_layernorm_forward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                           const float *gamma, const float *beta, float *y, float *mean,
                           float *rstd);
void cpu_layernorm_backward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                            const float *gamma, const float *mean, const float *rstd,
                            const float *dy, float *dx, float *dgamma, float *dbeta);
/* in place allowed: y == x, dx == dy */
void cpu_gelu_forward(BackendCtx *ctx, size_t n, const float *x, float *y);
void cpu_gelu_backward(BackendCtx *ctx, size_t n, const float *x, const float *dy, float *dx);
/* reserve: the probabilities [batch, heads, seq, seq]; work: a [seq, seq] per thread */
size_t cpu_attention_reserve_bytes(BackendCtx *ctx, const AttentionShape *s);
size_t cpu_attention_workspace_bytes(BackendCtx *ctx, const AttentionShape *s);
void cpu_attention_forward(BackendCtx *ctx, const AttentionShape *s, const float *qkv, float *y,
                           void *reserve, void *work);
void cpu_attention_backward(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                            const float *y, const void *reserve, const float *dy, float *dqkv,
                            void *work);

#endif
