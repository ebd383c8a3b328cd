/* cuda_transformer.h - what the CUDA backend's transformer kernels
 * (kernels/cuda_transformer*.{c,cu}, backend.h's "transformer" group) compute per thread, written
 * once and compiled twice: as
 * __host__ __device__ functions by nvcc (cuda_transformer_kernels.cu calls them) and as plain
 * static inline C by tests/test_device_transformer.c, which plays every block and thread of each
 * launch on the CPU with them. Also the plain-C plans the host side follows
 * (cuda_transformer_plan.c): the grid of layer norm's parameter gradients and the strided batched
 * GEMMs of the attention.
 *
 * A warp takes a row (layer norm, the attention's softmax): lane l of the warp's W = 32 visits
 * the row's elements l, l + W, ... in order and keeps one partial (dt_lane_*), and the warp
 * combines the 32 partials with the xor butterfly (v += shfl_xor(v, off), off = 16, 8, 4, 2, 1),
 * which leaves the same bits in every lane (a + b = b + a at each level); dt_lanes_sum and
 * dt_lanes_max play it on the host. Rules as kernels/cuda/cuda_elem.h: only +, -, *, /, sqrtf and
 * dt_expf (kernels/common/elem_math.h), correctly rounded or defined bit for bit on both sides, and
 * the .cu files are built with -fmad=false. Plain C11 and C++17. */
#ifndef DTBENCH_CUDA_TRANSFORMER_H
#define DTBENCH_CUDA_TRANSFORMER_H

#include "backend.h"
#include "cuda_elem.h" /* defines: DT_HD, dt_expf (elem_math.h), dt_token */
#include "cuda_plan.h" /* defines: ColGemm, rowmajor_gemm */

#include <math.h>
#include <stddef.h>

#define DT_LANES     32 /* a warp */
#define DT_WARPS     8  /* warps (rows) per block of the row kernels: 256 threads */
#define LN_COLS      32 /* layer norm's parameter gradients: columns of a block ... */
#define LN_LANES     8  /* ... and its row lanes (LN_COLS * LN_LANES = 256 threads) */
#define TOKPOS_VROWS 64 /* rows of dwte a block of the tokpos backward owns */

/* ---- a warp's partials ------------------------------------------------------------------------
 */
/* lane `lane` of W: the sum of x[j] over j = lane, lane + W, ... < n, in that order */
DT_HD float dt_lane_sum(const float *x, int n, int lane, int W) {
    float s = 0.0f;
    for (int j = lane; j < n; j += W)
        s += x[j];
    return s;
}
/* the same for (x[j] - m)^2 */
DT_HD float dt_lane_sqdev(const float *x, int n, int lane, int W, float m) {
    float s = 0.0f;
    for (int j = lane; j < n; j += W) {
        const float d = x[j] - m;
        s += d * d;
    }
    return s;
}
/* the largest of x[j] over the lane's j (-inf for none) */
DT_HD float dt_lane_max(const float *x, int n, int lane, int W) {
    float m = -INFINITY;
    for (int j = lane; j < n; j += W)
        m = x[j] > m ? x[j] : m;
    return m;
}
/* the sum of a[j] * b[j] over the lane's j */
DT_HD float dt_lane_dot(const float *a, const float *b, int n, int lane, int W) {
    float s = 0.0f;
    for (int j = lane; j < n; j += W)
        s += a[j] * b[j];
    return s;
}

#ifndef __CUDACC__
/* The device's xor butterfly over v[DT_LANES] (lane l adds lane l ^ off's value, off = 16 ... 1):
 * every lane ends with the value returned. */
static inline float dt_lanes_sum(const float *v0) {
    float v[DT_LANES], t[DT_LANES];
    for (int l = 0; l < DT_LANES; l++)
        v[l] = v0[l];
    for (int off = DT_LANES / 2; off > 0; off /= 2) {
        for (int l = 0; l < DT_LANES; l++)
            t[l] = v[l] + v[l ^ off];
        for (int l = 0; l < DT_LANES; l++)
            v[l] = t[l];
    }
    for (int l = 1; l < DT_LANES; l++)
        if (memcmp(&v[l], &v[0], sizeof v[0]) != 0) return NAN; /* never: a + b = b + a */
    return v[0];
}
static inline float dt_lanes_max(const float *v0) {
    float m = -INFINITY;
    for (int l = 0; l < DT_LANES; l++)
        m = v0[l] > m ? v0[l] : m;
    return m;
}
#endif

/* ---- layer norm (backend.h's LayerNormShape), one warp per row --------------------------------
 */
DT_HD float dt_ln_mean(float sum, int n) {
    return sum / (float)n;
}
/* 1 / sqrt(var + eps), var = (sum of squared deviations) / n, the biased variance */
DT_HD float dt_ln_rstd(float sqdev, int n, float eps) {
    return 1.0f / sqrtf(sqdev / (float)n + eps);
}
DT_HD float dt_ln_y(float x, float m, float r, float gamma, float beta) {
    return (x - m) * r * gamma + beta;
}
/* the lane's partial sums of g = dy * gamma and of g * xhat, xhat = (x - m) * r */
DT_HD void dt_ln_lane_back(const float *x, const float *dy, const float *gamma, int n, int lane,
                           int W, float m, float r, float *sg, float *sgx) {
    float a = 0.0f, b = 0.0f;
    for (int j = lane; j < n; j += W) {
        const float g = dy[j] * gamma[j];
        a += g;
        b += g * ((x[j] - m) * r);
    }
    *sg = a, *sgx = b;
}
/* dx = r (g - mean(g) - xhat mean(g xhat)); a = mean(g), b = mean(g xhat) */
DT_HD float dt_ln_dx(float x, float dy, float gamma, float m, float r, float a, float b) {
    return r * (dy * gamma - a - (x - m) * r * b);
}

/* Layer norm's dgamma[c] = sum over rows of dy * xhat and dbeta[c] = sum of dy, without atomics:
 * a grid of (colblocks, splits) blocks of LN_COLS x LN_LANES threads; block (cb, s) takes columns
 * cb*LN_COLS + [0, LN_COLS) and rows [s*chunk, min((s+1)*chunk, rows)); its thread (col, lane) sums
 * rows r0 + lane, r0 + lane + LN_LANES, ... in double (dt_ln_col_thread), the block adds its lanes
 * in lane order into partials[s][c] (dgamma) and partials[splits + s][c] (dbeta), and a second
 * kernel adds a column's splits in split order (dt_ln_col_finish). The same bits on every run. */
typedef struct {
    int colblocks; /* ceil(dim / LN_COLS) */
    int splits;    /* blocks down the rows, >= 1 */
    int chunk;     /* rows per split (the last may have fewer, none has none) */
} LnColGrid;
/* Enough blocks for 4 per multiprocessor of `sms`, at least 4 rows per row lane, splits * dim <=
 * cap (the partials: 2 * cap doubles). 0 when rows or dim <= 0, or dim > cap. */
#ifdef __cplusplus
extern "C" {
#endif
int ln_col_grid(int rows, int dim, int sms, long long cap, LnColGrid *g);
#ifdef __cplusplus
}
#endif

DT_HD void dt_ln_col_thread(const float *x, const float *dy, const float *mean, const float *rstd,
                            int dim, int col, int r0, int r1, int lane, double *sg, double *sb) {
    double a = 0.0, b = 0.0;
    for (int r = r0 + lane; r < r1; r += LN_LANES) {
        const size_t e = (size_t)r * dim + col;
        const float d = dy[e];
        a += (double)(d * ((x[e] - mean[r]) * rstd[r]));
        b += (double)d;
    }
    *sg = a, *sb = b;
}
/* v[LN_LANES] (stride `stride` apart) added in lane order */
DT_HD double dt_ln_col_lanes(const double *v, int stride) {
    double s = 0.0;
    for (int l = 0; l < LN_LANES; l++)
        s += v[l * stride];
    return s;
}
/* column c's sum over the splits of part[splits][dim], in split order */
DT_HD float dt_ln_col_finish(const double *part, int splits, int dim, int c) {
    double s = 0.0;
    for (int k = 0; k < splits; k++)
        s += part[(size_t)k * dim + c];
    return (float)s;
}

/* ---- GELU, tanh approximation: y = 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3) -----
 * computed as x * sigmoid(2u) (1 + tanh u = 2 sigmoid(2u)): no cancellation where tanh u is near
 * -1, one dt_expf; dy/dx = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2), s =
 * sigmoid(2u). The expressions of the CPU backend's kernel (kernels/cpu/cpu_transformer.c), term
 * for term. */
#define DT_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define DT_GELU_C 0.044715f
DT_HD float dt_gelu(float x) {
    return x / (1.0f + dt_expf(-2.0f * DT_GELU_K * (x + DT_GELU_C * x * x * x)));
}
DT_HD float dt_gelu_grad(float x) {
    const float s = 1.0f / (1.0f + dt_expf(-2.0f * DT_GELU_K * (x + DT_GELU_C * x * x * x)));
    return s + x * 2.0f * s * (1.0f - s) * DT_GELU_K * (1.0f + 3.0f * DT_GELU_C * x * x);
}

/* ---- the attention's causal softmax, one warp per row of P [count, T, T] ---------------------
 * Row R is query position i = R % T: its first n = i + 1 scores are kept, the rest masked.
 * Forward, in place on the scores (scale already applied by the GEMM's alpha): m = max, e_j =
 * exp(s_j - m) written over s_j with the lane's sum (dt_lane_exp), then p_j = e_j * (1 / sum) for
 * j < n and 0 for n <= j < T (dt_att_lane_scale). Backward, in place on dP:
 * dS_j = p_j (dP_j - sum_k dP_k p_k) scale for j < n, 0 above (dt_att_lane_grad). */
DT_HD float dt_lane_exp(float *p, int n, int lane, int W, float m) {
    float s = 0.0f;
    for (int j = lane; j < n; j += W) {
        const float e = dt_expf(p[j] - m);
        p[j] = e;
        s += e;
    }
    return s;
}
DT_HD void dt_att_lane_scale(float *p, int n, int width, int lane, int W, float inv) {
    for (int j = lane; j < width; j += W)
        p[j] = j < n ? p[j] * inv : 0.0f;
}
DT_HD void dt_att_lane_grad(float *d, const float *p, int n, int width, int lane, int W, float dot,
                            float scale) {
    for (int j = lane; j < width; j += W)
        d[j] = j < n ? p[j] * (d[j] - dot) * scale : 0.0f;
}

/* ---- token and position embedding (backend.h's TokPosShape) -----------------------------------
 */
/* y = wte[id] + wpe[t], or wpe[t] itself for an id outside the vocabulary (id < 0: wte unread) */
DT_HD float dt_tokpos_y(int id, float wte, float wpe) {
    return id >= 0 ? wte + wpe : wpe;
}
/* The backward's dwte without atomics: block k owns rows [k*TOKPOS_VROWS, ...) of dwte, zeroes
 * them and adds to each, in position order, the dy rows whose id it owns: it scans all the ids, a
 * chunk of `threads` at a time, and lists its positions in order (a warp's by ballot and popcount,
 * the warps' counts before it, dt_tokpos_slot); every thread then walks the list for its own
 * columns. So element (id, c) is written by one thread, its terms in position order: the CPU
 * backend's sum (zero, then the rows in order). */
DT_HD int dt_tokpos_owned(float id, int vocab, int v0, int v1) {
    const int t = dt_token(id, vocab);
    return t >= v0 && t < v1;
}
/* where lane `lane` of warp `warp` puts its position in the block's list: the positions owned by
 * the warps before it (counts[0 .. warp)) and by the lanes below it in its warp's ballot */
DT_HD int dt_tokpos_slot(const int *counts, int warp, unsigned ballot, int lane) {
    int before = 0;
    for (int k = 0; k < warp; k++)
        before += counts[k];
    const unsigned below = ballot & ((1u << lane) - 1u);
    int c = 0;
    for (unsigned b = below; b; b &= b - 1u)
        c++; /* popcount */
    return before + c;
}

/* ---- the attention's products (cuda_transformer_plan.c) ---------------------------------------
 */
/* Per sample b, each product is one strided batched GEMM over the heads (count = heads): the q, k,
 * v of head h are the columns [h*D, (h+1)*D) of qkv's rows (stride 3C, C = heads*D), k at + C and
 * v at + 2C; y and dy rows of stride C; P the reserve [batch, heads, T, T]; the workspace one
 * sample's dP / dS [heads, T, T]; dqkv as qkv. Row-major products (rowmajor_gemm):
 *   ATT_S   P  = scale Q K^T     ATT_Y   y  = P V
 *   ATT_DP  dS = dY V^T          ATT_DQ  dq = dS K     ATT_DK  dk = dS^T Q     ATT_DV  dv = P^T dY
 * beta 0 everywhere: each output element is written once and nothing needs zeroing. */
typedef enum { ATT_S = 0, ATT_Y, ATT_DP, ATT_DQ, ATT_DK, ATT_DV, ATT_PRODUCTS } AttProduct;
typedef enum { ATT_QKV = 0, ATT_P, ATT_OUT, ATT_WORK, ATT_DQKV, ATT_BUFS } AttBuf; /* OUT: y, dy */
typedef struct {
    AttBuf buf;
    size_t off;       /* floats from the buffer's start to head 0's matrix */
    long long stride; /* floats from one head's matrix to the next */
} AttOperand;
typedef struct {
    ColGemm g; /* column-major: C = alpha op(a) op(b) */
    float alpha;
    AttOperand a, b, c;
    int count; /* heads */
} AttGemm;
#ifdef __cplusplus
extern "C" {
#endif
AttGemm att_gemm(const AttentionShape *s, AttProduct p, int sample);
/* floats of the reserve (P) and of the workspace (one sample's dS) */
size_t att_reserve_floats(const AttentionShape *s);
size_t att_work_floats(const AttentionShape *s);
/* 1 / sqrt(head_dim), as the CPU backend computes it */
float att_scale(const AttentionShape *s);
#ifdef __cplusplus
}
#endif

#endif
