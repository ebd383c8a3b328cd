/* dev_transformer.h - the CUDA transformer kernels' launches played on the CPU
 * (tests/dev_transformer.c), for tests/test_device_transformer.c. Same arguments as the launchers
 * of kernels/cuda/cuda_kernels.h; outputs overwritten. */
#ifndef DTBENCH_TESTS_DEV_TRANSFORMER_H
#define DTBENCH_TESTS_DEV_TRANSFORMER_H

#include "backend.h"
#include "cuda_transformer.h"

#include <stddef.h>

/* ln_forward_kernel, ln_dx_kernel, ln_cols_kernel + ln_cols_finish_kernel on the grid g */
void play_ln_forward(const LayerNormShape *s, const float *x, const float *gamma, const float *beta,
                     float *y, float *mean, float *rstd);
void play_ln_dx(const LayerNormShape *s, const float *x, const float *gamma, const float *mean,
                const float *rstd, const float *dy, float *dx);
void play_ln_cols(const LayerNormShape *s, const LnColGrid *g, const float *x, const float *dy,
                  const float *mean, const float *rstd, float *dgamma, float *dbeta);
/* att_softmax_kernel, att_softmax_back_kernel over rows of [rows, T] */
void play_softmax(size_t rows, int T, float *p);
void play_softmax_back(size_t rows, int T, const float *p, float *d, float scale);
/* one att_gemm product of sample b, as cublasSgemmStridedBatched takes it */
void play_gemm(const AttentionShape *s, AttProduct p, int b, float *const base[ATT_BUFS]);
/* cuda_attention_forward then cuda_attention_backward */
void play_attention(const AttentionShape *s, const float *qkv, float *y, float *P, const float *dy,
                    float *dqkv);
/* tokpos_forward_kernel, tokpos_dwpe_kernel, tokpos_dwte_kernel */
void play_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                         float *y);
void play_dwpe(const TokPosShape *s, const float *dy, float *dwpe);
void play_dwte(const TokPosShape *s, const float *ids, const float *dy, float *dwte);

#endif
