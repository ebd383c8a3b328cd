/* cuda_transformer_kernels.cu - the transformer's own kernels (launchers in cuda_kernels.h; the
 * attention's products are cuBLAS's, kernels/cuda/cuda_transformer.c): token and position
 * embedding, layer norm, GELU and the attention's causal softmax. What each thread computes is
 * cuda_transformer.h's, which tests/test_device_transformer.c plays on the CPU over the same grids.
 * Nothing here uses atomics: every output element is written by one thread, and every sum is
 * taken in an order fixed by the shapes, so two runs give the same bits. */
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"
#include "cuda_transformer.h" /* per-thread arithmetic shared with the CPU-played test */

#include <math.h>

/* the xor butterfly of cuda_transformer.h: every lane ends with the same bits */
__device__ static float warp_sum(float v)
{
    for (int off = DT_LANES / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ static float warp_max(float v)
{
    for (int off = DT_LANES / 2; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = o > v ? o : v;
    }
    return v;
}

/* blocks of DT_WARPS warps, one row each */
static unsigned row_blocks(size_t rows)
{
    const size_t b = (rows + DT_WARPS - 1) / DT_WARPS;
    return b ? (unsigned)b : 1u;
}

/* ---- token and position embedding ----------------------------------------------------------- */

__global__ void tokpos_forward_kernel(TokPosShape s, const float *__restrict__ ids,
                                      const float *__restrict__ wte,
                                      const float *__restrict__ wpe, float *__restrict__ y)
{
    const size_t dim = (size_t)s.dim, n = (size_t)s.batch * s.seq * dim;
    GRID_LOOP(e, n) {
        const size_t r = e / dim, c = e % dim, t = r % (size_t)s.seq;
        const int id = dt_token(ids[r], s.vocab);
        y[e] = dt_tokpos_y(id, id >= 0 ? wte[(size_t)id * dim + c] : 0.0f, wpe[t * dim + c]);
    }
}

/* dwpe[t, c] = dy[0, t, c] + dy[1, t, c] + ... in sample order (0 without samples) */
__global__ void tokpos_dwpe_kernel(TokPosShape s, const float *__restrict__ dy,
                                   float *__restrict__ dwpe)
{
    const size_t dim = (size_t)s.dim, n = (size_t)s.seq * dim, sample = n;
    GRID_LOOP(e, n) {
        float acc = s.batch > 0 ? dy[e] : 0.0f;
        for (int b = 1; b < s.batch; b++) acc += dy[(size_t)b * sample + e];
        dwpe[e] = acc;
    }
}

/* Block k owns dwte rows [v0, v1) (cuda_transformer.h, dt_tokpos_owned / dt_tokpos_slot). */
__global__ void tokpos_dwte_kernel(TokPosShape s, const float *__restrict__ ids,
                                   const float *__restrict__ dy, float *__restrict__ dwte)
{
    __shared__ int s_list[THREADS];
    __shared__ int s_count[THREADS / DT_LANES];
    const int tid = threadIdx.x, lane = tid % DT_LANES, warp = tid / DT_LANES;
    const int v0 = blockIdx.x * TOKPOS_VROWS;
    const int v1 = v0 + TOKPOS_VROWS < s.vocab ? v0 + TOKPOS_VROWS : s.vocab;
    const size_t dim = (size_t)s.dim;
    const int rows = s.batch * s.seq;
    for (int v = v0; v < v1; v++) /* each thread its own columns, as in the adds below */
        for (size_t c = tid; c < dim; c += blockDim.x) dwte[(size_t)v * dim + c] = 0.0f;
    for (int base = 0; base < rows; base += blockDim.x) {
        const int r = base + tid;
        const int own = r < rows && dt_tokpos_owned(ids[r], s.vocab, v0, v1);
        const unsigned ballot = __ballot_sync(0xffffffffu, own);
        if (lane == 0) s_count[warp] = __popc(ballot);
        __syncthreads();
        if (own) s_list[dt_tokpos_slot(s_count, warp, ballot, lane)] = r;
        int total = 0;
        for (int k = 0; k < (int)(blockDim.x / DT_LANES); k++) total += s_count[k];
        __syncthreads();
        for (int k = 0; k < total; k++) {
            const int rk = s_list[k];
            const size_t id = (size_t)dt_token(ids[rk], s.vocab);
            for (size_t c = tid; c < dim; c += blockDim.x)
                dwte[id * dim + c] += dy[(size_t)rk * dim + c];
        }
        __syncthreads(); /* the list and counts are the next chunk's */
    }
}

extern "C" cudaError_t dtk_tokpos_forward(cudaStream_t st, const TokPosShape *s, const float *ids,
                                          const float *wte, const float *wpe, float *y)
{
    const size_t n = (size_t)s->batch * s->seq * s->dim;
    if (s->batch <= 0 || s->seq <= 0 || s->dim <= 0) return cudaSuccess;
    tokpos_forward_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, ids, wte, wpe, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_tokpos_backward(cudaStream_t st, const TokPosShape *s, const float *ids,
                                           const float *dy, float *dwte, float *dwpe)
{
    if (s->dim <= 0) return cudaSuccess;
    TokPosShape z = *s;
    if (z.batch < 0) z.batch = 0;
    if (z.seq > 0) {
        tokpos_dwpe_kernel<<<blocks_for((size_t)z.seq * z.dim), THREADS, 0, st>>>(z, dy, dwpe);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    } else {
        z.seq = 0;
    }
    if (z.vocab <= 0) return cudaSuccess;
    const unsigned blocks = (unsigned)((z.vocab + TOKPOS_VROWS - 1) / TOKPOS_VROWS);
    tokpos_dwte_kernel<<<blocks, THREADS, 0, st>>>(z, ids, dy, dwte);
    return cudaGetLastError();
}

/* ---- layer norm ------------------------------------------------------------------------------ */

__global__ void ln_forward_kernel(LayerNormShape s, const float *x,
                                  const float *__restrict__ gamma, const float *__restrict__ beta,
                                  float *y, float *__restrict__ mean, float *__restrict__ rstd)
{
    const int lane = threadIdx.x % DT_LANES;
    const size_t row = (size_t)blockIdx.x * DT_WARPS + threadIdx.x / DT_LANES;
    if (row >= (size_t)s.rows) return; /* the whole warp */
    const float *xr = x + row * s.dim;
    float *yr = y + row * s.dim;
    const float m = dt_ln_mean(warp_sum(dt_lane_sum(xr, s.dim, lane, DT_LANES)), s.dim);
    const float r = dt_ln_rstd(warp_sum(dt_lane_sqdev(xr, s.dim, lane, DT_LANES, m)), s.dim, s.eps);
    if (lane == 0) mean[row] = m, rstd[row] = r;
    for (int j = lane; j < s.dim; j += DT_LANES) yr[j] = dt_ln_y(xr[j], m, r, gamma[j], beta[j]);
}

__global__ void ln_dx_kernel(LayerNormShape s, const float *__restrict__ x,
                             const float *__restrict__ gamma, const float *__restrict__ mean,
                             const float *__restrict__ rstd, const float *dy, float *dx)
{
    const int lane = threadIdx.x % DT_LANES;
    const size_t row = (size_t)blockIdx.x * DT_WARPS + threadIdx.x / DT_LANES;
    if (row >= (size_t)s.rows) return;
    const float *xr = x + row * s.dim, *dyr = dy + row * s.dim;
    float *dxr = dx + row * s.dim;
    const float m = mean[row], r = rstd[row];
    float sg, sgx;
    dt_ln_lane_back(xr, dyr, gamma, s.dim, lane, DT_LANES, m, r, &sg, &sgx);
    const float a = warp_sum(sg) / (float)s.dim, b = warp_sum(sgx) / (float)s.dim;
    for (int j = lane; j < s.dim; j += DT_LANES)
        dxr[j] = dt_ln_dx(xr[j], dyr[j], gamma[j], m, r, a, b);
}

/* block (cb, split) of LnColGrid: partials[split][c] and partials[splits + split][c] */
__global__ void ln_cols_kernel(LayerNormShape s, LnColGrid g, const float *__restrict__ x,
                               const float *__restrict__ dy, const float *__restrict__ mean,
                               const float *__restrict__ rstd, double *__restrict__ part)
{
    __shared__ double s_g[LN_LANES][LN_COLS], s_b[LN_LANES][LN_COLS];
    const int tc = threadIdx.x % LN_COLS, lane = threadIdx.x / LN_COLS;
    const int col = blockIdx.x * LN_COLS + tc, split = blockIdx.y;
    const int r0 = split * g.chunk, r1 = r0 + g.chunk < s.rows ? r0 + g.chunk : s.rows;
    double sg = 0.0, sb = 0.0;
    if (col < s.dim) dt_ln_col_thread(x, dy, mean, rstd, s.dim, col, r0, r1, lane, &sg, &sb);
    s_g[lane][tc] = sg, s_b[lane][tc] = sb;
    __syncthreads();
    if (lane == 0 && col < s.dim) {
        part[(size_t)split * s.dim + col] = dt_ln_col_lanes(&s_g[0][tc], LN_COLS);
        part[(size_t)(g.splits + split) * s.dim + col] = dt_ln_col_lanes(&s_b[0][tc], LN_COLS);
    }
}

__global__ void ln_cols_finish_kernel(int dim, int splits, const double *__restrict__ part,
                                      float *__restrict__ dgamma, float *__restrict__ dbeta)
{
    GRID_LOOP(c, (size_t)dim) {
        dgamma[c] = dt_ln_col_finish(part, splits, dim, (int)c);
        dbeta[c] = dt_ln_col_finish(part + (size_t)splits * dim, splits, dim, (int)c);
    }
}

extern "C" cudaError_t dtk_layernorm_forward(cudaStream_t st, const LayerNormShape *s,
                                             const float *x, const float *gamma, const float *beta,
                                             float *y, float *mean, float *rstd)
{
    if (s->rows <= 0 || s->dim <= 0) return cudaSuccess;
    ln_forward_kernel<<<row_blocks((size_t)s->rows), DT_WARPS * DT_LANES, 0, st>>>(
        *s, x, gamma, beta, y, mean, rstd);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_layernorm_backward(cudaStream_t st, const LayerNormShape *s,
                                              const LnColGrid *g, double *partials, const float *x,
                                              const float *gamma, const float *mean,
                                              const float *rstd, const float *dy, float *dx,
                                              float *dgamma, float *dbeta)
{
    if (s->dim <= 0) return cudaSuccess;
    if (s->rows <= 0) { /* no rows: zero gradients */
        cudaError_t e = cudaMemsetAsync(dgamma, 0, (size_t)s->dim * sizeof(float), st);
        return e != cudaSuccess ? e : cudaMemsetAsync(dbeta, 0, (size_t)s->dim * sizeof(float), st);
    }
    ln_dx_kernel<<<row_blocks((size_t)s->rows), DT_WARPS * DT_LANES, 0, st>>>(*s, x, gamma, mean,
                                                                              rstd, dy, dx);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    ln_cols_kernel<<<dim3((unsigned)g->colblocks, (unsigned)g->splits), LN_COLS * LN_LANES, 0,
                     st>>>(*s, *g, x, dy, mean, rstd, partials);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    ln_cols_finish_kernel<<<blocks_for((size_t)s->dim), THREADS, 0, st>>>(s->dim, g->splits,
                                                                          partials, dgamma, dbeta);
    return cudaGetLastError();
}

/* ---- GELU ------------------------------------------------------------------------------------ */

/* in place allowed (y == x, dx == dy): each element is read, then written, by one thread */
__global__ void gelu_forward_kernel(size_t n, const float *x, float *y)
{
    GRID_LOOP(i, n) y[i] = dt_gelu(x[i]);
}

__global__ void gelu_backward_kernel(size_t n, const float *x, const float *dy, float *dx)
{
    GRID_LOOP(i, n) dx[i] = dy[i] * dt_gelu_grad(x[i]);
}

extern "C" cudaError_t dtk_gelu_forward(cudaStream_t st, size_t n, const float *x, float *y)
{
    if (n == 0) return cudaSuccess;
    gelu_forward_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_gelu_backward(cudaStream_t st, size_t n, const float *x,
                                         const float *dy, float *dx)
{
    if (n == 0) return cudaSuccess;
    gelu_backward_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, x, dy, dx);
    return cudaGetLastError();
}

/* ---- the attention's causal softmax ------------------------------------------------------------ */

__global__ void att_softmax_kernel(size_t rows, int T, float *__restrict__ p)
{
    const int lane = threadIdx.x % DT_LANES;
    const size_t row = (size_t)blockIdx.x * DT_WARPS + threadIdx.x / DT_LANES;
    if (row >= rows) return;
    float *pr = p + row * T;
    const int n = (int)(row % (size_t)T) + 1; /* keys t' <= t */
    const float m = warp_max(dt_lane_max(pr, n, lane, DT_LANES));
    const float sum = warp_sum(dt_lane_exp(pr, n, lane, DT_LANES, m));
    dt_att_lane_scale(pr, n, T, lane, DT_LANES, 1.0f / sum);
}

__global__ void att_softmax_back_kernel(size_t rows, int T, const float *__restrict__ p,
                                        float *__restrict__ d, float scale)
{
    const int lane = threadIdx.x % DT_LANES;
    const size_t row = (size_t)blockIdx.x * DT_WARPS + threadIdx.x / DT_LANES;
    if (row >= rows) return;
    const float *pr = p + row * T;
    float *dr = d + row * T;
    const int n = (int)(row % (size_t)T) + 1;
    const float dot = warp_sum(dt_lane_dot(dr, pr, n, lane, DT_LANES));
    dt_att_lane_grad(dr, pr, n, T, lane, DT_LANES, dot, scale);
}

extern "C" cudaError_t dtk_att_softmax(cudaStream_t st, size_t rows, int T, float *p)
{
    if (rows == 0 || T <= 0) return cudaSuccess;
    att_softmax_kernel<<<row_blocks(rows), DT_WARPS * DT_LANES, 0, st>>>(rows, T, p);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_att_softmax_back(cudaStream_t st, size_t rows, int T, const float *p,
                                            float *d, float scale)
{
    if (rows == 0 || T <= 0) return cudaSuccess;
    att_softmax_back_kernel<<<row_blocks(rows), DT_WARPS * DT_LANES, 0, st>>>(rows, T, p, d,
                                                                             scale);
    return cudaGetLastError();
}
