/* cuda_plan.h - the arithmetic of the CUDA backend that needs no GPU, kept apart so the CPU-only
 * test suite can check it (tests/test_cuda_plan.c):
 *   - the column-major GEMMs (cuBLAS's convention) that compute the fully connected layer on
 *     dtbench's row-major tensors; the test runs each through cblas_sgemm(CblasColMajor, ...),
 *     which takes exactly cuBLAS's arguments, against the naive reference;
 *   - the choice among cuDNN's ranked convolution algorithms under a workspace limit, and the
 *     rules of what strict fp32 and the 16-bit precisions admit (with the error bounds the GPU
 *     tests hold them to);
 *   - how the batch-norm kernels split a tensor into blocks (bn_grid, nhwc_grid).
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
 * B as its FIRST operand and A as its second (the LSTM's products,
 * kernels/cuda/cuda_recurrent.c). */
ColGemm rowmajor_gemm(int trans_a, int trans_b, int m, int n, int k, int lda, int ldb, int ldc);

/* The three directions of a convolution, each with its own numbering of cuDNN's legacy
 * algorithms (cudnnConvolutionFwdAlgo_t, ...BwdDataAlgo_t, ...BwdFilterAlgo_t; cudnn_ops.h). */
typedef enum { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 } ConvDir;
#define CONV_DIRS 3

/* How an algorithm forms each output. DIRECT_SUM: as a sum of products of the inputs' own values
 * (implicit / explicit GEMM, direct, atomically added partial sums). TRANSFORM: through a
 * transform of whole tiles or planes (FFT, FFT_TILING, WINOGRAD, WINOGRAD_NONFUSED), where every
 * output is a linear combination of transformed values and its rounding error follows the size
 * of the tile or plane, not of its own products. UNKNOWN: a number this table does not know. */
typedef enum { ALGO_DIRECT_SUM, ALGO_TRANSFORM, ALGO_UNKNOWN } AlgoFamily;

AlgoFamily conv_algo_family(ConvDir dir, int algo);
/* cuDNN's name without its prefix ("IMPLICIT_PRECOMP_GEMM", "WINOGRAD_NONFUSED", "ALGO_1"), or
 * "unknown"; and the direction's ("fwd", "bwd_data", "bwd_filter"). */
const char *conv_algo_name(ConvDir dir, int algo);
const char *conv_dir_name(ConvDir dir);

/* What strict fp32 (--precision fp32) admits; docs/gpu.md "Which convolution algorithms strict
 * fp32 admits". An algorithm is admitted when BOTH
 *   - it runs under CUDNN_FMA_MATH (fma_math): fp32 multiply-adds only; CUDNN_DEFAULT_MATH and
 *     CUDNN_TENSOR_OP_MATH allow TF32 tensor cores on sm_80+;
 *   - its family is ALGO_DIRECT_SUM: every output is an fp32 sum, in some order, of the K
 *     products that define it, so that against the exact value
 *         |error| <= gamma(K) * sum |products|,   gamma(K) = K u / (1 - K u),  u = 2^-24
 *     (conv_fp32_bound) holds for any summation order, blocking or split-K: the error bound of
 *     direct summation, the one the CPU backend's GEMMs have.
 * FFT and Winograd algorithms are refused whatever they measure on one input: their error is
 * relative to the transformed tile or plane, so an output whose own products are small (a
 * gradient far from the activations that dominate its tile) can be wrong in every digit. LeNet's
 * second convolution (64x20x12x12, 5x5 -> 50) got a weight gradient 0.114 off this way on an
 * H100 under cuDNN 9.19, the first time it ran. Unknown algorithm numbers are refused too. */
int conv_algo_strict_fp32(ConvDir dir, int algo, int fma_math);

/* The bound above for an output of K products whose absolute values add up to sum_abs. */
double conv_fp32_bound(double k, double sum_abs);

/* One entry of cuDNN's ranked algorithm list (cudnnGet*Algorithm_v7, or cudnnFind*Algorithm*),
 * reduced to what the choice needs. ok: status == CUDNN_STATUS_SUCCESS; fma_math: its math type
 * is CUDNN_FMA_MATH; deterministic: its determinism field is CUDNN_DETERMINISTIC (cuDNN's word
 * for this result: shape, math type and all). */
typedef struct {
    int algo;
    int ok;
    int fma_math;
    size_t memory;
    int deterministic;
} AlgoPerf;

/* What bf16 and fp16 admit (docs/gpu.md "Which convolution algorithms the 16-bit precisions
 * admit"): a direct sum (ALGO_DIRECT_SUM) whose cuDNN result says CUDNN_DETERMINISTIC
 * (`deterministic`: cuDNN's determinism field of that result, not a table of algorithm numbers),
 * under any math type (tensor cores): typically forward IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM,
 * GEMM, DIRECT; backward-data and backward-filter ALGO_1. Refused:
 *   - FFT and Winograd: their error follows the transformed tile or plane, not an output's own
 *     products. fp16's 1x28x28 5x5 -> 20 input gradient on an H200 (cuDNN 9.19, timed choice)
 *     was 5.5 u of its own |products| off (u = 2^-11), beyond any direct sum: its 16-bit
 *     products summed in fp32 and rounded once are 0.35 u off on the same inputs, summed in
 *     fp16 2.1 to 2.7 u; an FFT computed in fp16 is 4.2 u off (tests/test_prec16.c);
 *   - any result cuDNN reports CUDNN_NON_DETERMINISTIC (the atomic ones: backward-data ALGO_0,
 *     backward-filter ALGO_0 and ALGO_3): partial sums added in an order that changes from run
 *     to run round a 16-bit result differently, by up to a whole 16-bit unit (2^-8 of a value
 *     in bf16) where the partial sums themselves are 16-bit. LeNet's bf16 step replayed from
 *     graphs ended 0.00193 from the eager one after 6 steps on an H200: the size of +-1 bf16
 *     unit in half of one step's convolution weight gradients (a CPU model gives 0.0019), 100
 *     times what differences of fp32's size give (1.4e-5).
 * An admitted algorithm's output then obeys prec16_bound, and two runs that chose the same
 * algorithms (--conv-algo heuristic: every run) give the same bits. */
int conv_algo_16bit(ConvDir dir, int algo, int deterministic);

/* The rules by precision: tf32 admits anything cuDNN runs (CONV_RULE_ANY), fp32
 * conv_algo_strict_fp32, bf16 and fp16 conv_algo_16bit. */
typedef enum { CONV_RULE_ANY = 0, CONV_RULE_STRICT_FP32 = 1, CONV_RULE_16BIT = 2 } ConvRule;
int conv_algo_admitted(ConvRule rule, ConvDir dir, const AlgoPerf *a);

/* The algorithm to take for direction dir when pick_algo finds none: 0 (IMPLICIT_GEMM / ALGO_0, a
 * direct sum without workspace) under fp32 and tf32 and for the forward direction; -1 for the
 * 16-bit backward directions, whose ALGO_0 adds atomically (non-deterministic): the run is then
 * refused in one line (kernels/cuda/cuda_conv.c), never silently run on it. */
int conv_fallback_algo(ConvDir dir, ConvRule rule);

/* The bound on |computed - reference| of an output of K products of inputs rounded to a 16-bit
 * type of unit roundoff u (2^-8 bf16, 2^-11 fp16), summed in fp32 in any order and rounded at the
 * end to unit u_out (u for a 16-bit output, 0 for an fp32 one), against a reference summed in
 * fp32 in any order:
 *     e = (2u + u^2) S + g'(K) (1 + u)^2 S          (inputs rounded; the fp32 sum)
 *     bound = (1 + u_out) e + u_out (R + g(K) S) + g(K) S
 * S = sum_abs, the sum of |products|; R = out_abs, |the reference of the value rounded to u_out|;
 * g(K) = K 2^-24 / (1 - K 2^-24) the reference's sum, g'(K) the same with 2^-23: tensor cores
 * align the addends of a block by truncation, not rounding (Fasi et al., "Numerical behavior of
 * NVIDIA tensor cores", PeerJ CS 2021). Products of two 16-bit values are exact in fp32. */
double prec16_bound(double u, double u_out, double k, double sum_abs, double out_abs);

/* Index into perf[count] of the algorithm to use for direction dir: the best-ranked usable one
 * that fits in `limit` bytes of workspace and that the precision's rule admits; -1 when none is
 * (the caller then takes conv_fallback_algo, under the precision's math type). */
int pick_algo(ConvDir dir, const AlgoPerf *perf, int count, size_t limit, ConvRule rule);

/* How the batch-norm kernels (kernels/cuda/cuda_norm_kernels.cu) cover x[n, c, spatial] (NCHW): a
 * grid of `splits` blocks per channel (gridDim = (splits, c)), block b of channel c walking units
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

/* How the NHWC batch-norm and channel-sum kernels (kernels/cuda/cuda_bn16_kernels.cu; each thread's
 * work in cuda_elem16.h) cover x[rows][c] of 16-bit values. A unit is `vec` consecutive channels
 * of one row, read in one access: the largest of 8, 4 and 1 that divides c and is at most the
 * caller's `vec` (what the buffers' alignment and the kernel's registers allow). A block of
 * `threads` threads takes a tile of `width` consecutive units (64 channels, or a whole row when it
 * has fewer) over a slab of `chunk` rows: thread t takes unit t % width of the tile on row lane t /
 * width (`lanes` of them; threads beyond lanes * width idle) and the rows lane, lane + lanes, ...
 * of the slab. A warp thus reads whole 128-byte lines (one row's tile, or several consecutive rows
 * when a row has fewer channels). The grid is (splits, tiles) blocks: enough to keep
 * `blocks_per_sm` blocks on each of `sms` multiprocessors, at least 4 rows per row lane, at most
 * `cap` partial sums in all (splits * c). */
typedef struct {
    int rows, c;
    int vec, units;   /* channels per unit (8, 4 or 1), units per row (c / vec) */
    int width, lanes; /* units per tile, row lanes per block */
    int tiles;        /* ceil(units / width) */
    int splits;       /* blocks per tile, >= 1 */
    int chunk;        /* rows per block (the last may have fewer, none has none) */
} NhwcGrid;

/* Returns 0 when the tensor is empty, has 2^30 rows or more (the walks index rows in 32 bits), or
 * more channels than `cap` or than a grid's second dimension takes (65535 tiles). */
int nhwc_grid(long long rows, int c, int vec, int threads, int sms, int blocks_per_sm, int cap,
              NhwcGrid *g);

#endif
