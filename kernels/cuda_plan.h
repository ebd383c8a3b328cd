/* cuda_plan.h - the arithmetic of the CUDA backend that needs no GPU, kept apart so the CPU-only
 * test suite can check it (tests/test_cuda_plan.c):
 *   - the column-major GEMMs (cuBLAS's convention) that compute the fully connected layer on
 *     dtbench's row-major tensors; the test runs each through cblas_sgemm(CblasColMajor, ...),
 *     which takes exactly cuBLAS's arguments, against the naive reference;
 *   - the choice among cuDNN's ranked convolution algorithms under a workspace limit;
 *   - how the batch-norm kernels split a tensor into blocks (bn_grid).
 * Plain C, no CUDA. */
#ifndef DTBENCH_CUDA_PLAN_H
#define DTBENCH_CUDA_PLAN_H

#include "backend.h"

#include <stddef.h>

/* C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C, all column-major; trans_x = 1 for op = ^T.
 * lda, ldb, ldc are the leading dimensions as cuBLAS takes them. */
typedef struct {
    int trans_a, trans_b;
    int m, n, k;
    int lda, ldb, ldc;
} ColGemm;

/* The three GEMMs of a fully connected layer (derivations in cuda_plan.c). Operands: forward A = W,
 * B = x, C = y; weight gradient A = x, B = dy, C = dW; input gradient A = W, B = dy, C = dx. */
ColGemm fc_forward_gemm(const FcShape *s);
ColGemm fc_dweight_gemm(const FcShape *s);
ColGemm fc_dinput_gemm(const FcShape *s);

/* A row-major product C[m,n] = op(A)[m,k] op(B)[k,n] (+ beta C), with the arguments
 * cblas_sgemm(CblasRowMajor, ...) takes, as one column-major (cuBLAS) call: a row-major matrix is
 * its transpose to a column-major library, and C^T = op(B)^T op(A)^T, so the returned call takes
 * B as its FIRST operand and A as its second (the LSTM's products, kernels/cuda_recurrent.c). */
ColGemm rowmajor_gemm(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, int ldc);

/* One entry of cuDNN's ranked algorithm list (cudnnGet*Algorithm_v7), reduced to what the choice
 * needs. ok: status == CUDNN_STATUS_SUCCESS; strict_fp32: its math type is CUDNN_FMA_MATH. */
typedef struct {
    int algo;
    int ok;
    int strict_fp32;
    size_t memory;
} AlgoPerf;

/* Index into perf[count] of the algorithm to use: the best-ranked usable one that fits in
 * `limit` bytes of workspace and computes in strict fp32 (CUDNN_FMA_MATH; never
 * CUDNN_DEFAULT_MATH, which allows TF32 on sm_80+: the benchmark is fp32 and is compared with a
 * CPU reference); -1 when none does (the caller then takes the algorithm that needs no workspace,
 * under CUDNN_FMA_MATH). */
int pick_algo(const AlgoPerf *perf, int count, size_t limit);

/* How the batch-norm kernels (kernels/cuda_norm_kernels.cu) cover x[n, c, spatial] (NCHW): a grid
 * of `splits` blocks per channel (gridDim = (splits, c)), block b of channel c walking units
 * [b*chunk, min((b+1)*chunk, units)) of that channel (cuda_elem.h's DtWalk), a unit being `vec`
 * consecutive elements of one plane. Each block leaves two partial sums in a scratch of `cap`
 * pairs. */
typedef struct {
    int vec;    /* elements per load: 4 (spatial % 4 == 0 and 16-byte aligned tensors) or 1 */
    int sp;     /* units per plane: spatial / vec */
    int units;  /* units per channel: n * sp */
    int splits; /* blocks per channel, >= 1 */
    int chunk;  /* units per block (the last may have fewer, none has none) */
} BnGrid;

/* Blocks enough to fill `sms` multiprocessors with 8 blocks of `threads` each, spread over the
 * channels, but at least 4 units per thread and at most `cap` blocks in all. Returns 0 (and the
 * caller runs the simple one-block-per-channel kernels) when the tensor is empty, has 2^31
 * elements or more (the walk indexes in 32 bits), or has more channels than `cap` or than a grid's
 * second dimension takes (65535). */
int bn_grid(const BnShape *s, int aligned16, int sms, int threads, int cap, BnGrid *g);

#endif
