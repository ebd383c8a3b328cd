/* gpt_ref.h - float64 references of backend.h's transformer members and AdamW, for the CUDA
 * backend's tests (tests/test_device_transformer.c plays the kernels' threads on the CPU,
 * tests/test_cuda_transformer.c runs them on a GPU): written from backend.h's text alone, direct
 * loops, sums in double, outputs rounded once to float. Slow on purpose; small shapes only. */
#ifndef DTBENCH_TESTS_GPT_REF_H
#define DTBENCH_TESTS_GPT_REF_H

#include "backend.h"

#include <stddef.h>

void gref_tokpos_forward(const TokPosShape *s, const float *ids, const float *wte, const float *wpe,
                         float *y);
/* dwte [vocab, dim] and dwpe [seq, dim] overwritten; *repeats = the most positions of one id */
void gref_tokpos_backward(const TokPosShape *s, const float *ids, const float *dy, float *dwte,
                          float *dwpe, int *repeats);
/* dwte as the CPU backend defines its sum: zero, then each position's dy row added in float, in
 * position order (the order the CUDA kernel keeps: bit for bit) */
void gref_tokpos_dwte_float(const TokPosShape *s, const float *ids, const float *dy, float *dwte);

void gref_layernorm_forward(const LayerNormShape *s, const float *x, const float *gamma,
                            const float *beta, float *y, float *mean, float *rstd);
void gref_layernorm_backward(const LayerNormShape *s, const float *x, const float *gamma,
                             const float *dy, float *dx, float *dgamma, float *dbeta);

double gref_gelu(double x);      /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
double gref_gelu_grad(double x); /* its derivative */

/* y [batch, seq, heads*head_dim] from qkv; p (may be NULL): P [batch, heads, seq, seq] with zeros
 * above the diagonal */
void gref_attention_forward(const AttentionShape *s, const float *qkv, float *y, float *p);
void gref_attention_backward(const AttentionShape *s, const float *qkv, const float *dy,
                             float *dqkv);

/* AdamW as backend.h writes it, in float and in its order (PyTorch's), n elements */
void gref_adamw_float(size_t n, float *p, const float *g, float *m, float *v, const AdamWStep *a);
/* the textbook form in double: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
 * p' = p (1 - lr wd) - lr mhat / (sqrt(vhat) + eps), mhat = m'/bias1, vhat = v'/bias2 */
void gref_adamw_double(size_t n, double *p, const float *g, double *m, double *v,
                       const AdamWStep *a);

#endif
