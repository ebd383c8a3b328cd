/* gpt_ref.h - what the CUDA backend's transformer tests (tests/test_device_transformer.c plays
 * the kernels' threads on the CPU, tests/test_cuda_transformer.c runs them on a GPU) compare with
 * beyond the naive references of tests/ref_transformer.c: the token table's gradient summed in
 * float in position order, and AdamW in float in PyTorch's order and in double. */
#ifndef DTBENCH_TESTS_GPT_REF_H
#define DTBENCH_TESTS_GPT_REF_H

#include "backend.h"

#include <stddef.h>

/* the most positions any one id of ids [batch, seq] holds (how far dwte's float sums may drift) */
int gref_id_repeats(const TokPosShape *s, const float *ids);
/* dwte as the CPU backend defines its sum: zero, then each position's dy row added in float, in
 * position order (the order the CUDA kernel keeps: bit for bit) */
void gref_tokpos_dwte_float(const TokPosShape *s, const float *ids, const float *dy, float *dwte);

/* AdamW as backend.h writes it, in float and in its order (PyTorch's), n elements */
void gref_adamw_float(size_t n, float *p, const float *g, float *m, float *v, const AdamWStep *a);
/* the textbook form in double: m' = b1 m + (1-b1) g, v' = b2 v + (1-b2) g^2,
 * p' = p (1 - lr wd) - lr mhat / (sqrt(vhat) + eps), mhat = m'/bias1, vhat = v'/bias2 */
void gref_adamw_double(size_t n, double *p, const float *g, double *m, double *v,
                       const AdamWStep *a);

#endif
