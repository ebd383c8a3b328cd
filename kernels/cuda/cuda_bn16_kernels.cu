/* cuda_bn16_kernels.cu - batch normalisation on NHWC 16-bit activations, with the ReLU and the
 * residual add that follow it in ResNets optionally fused in, and the per-channel sums of a
 * bias gradient (launchers in cuda_kernels16.h).
 *
 * Built for memory bandwidth: a channel's values are strided by c in NHWC, so each block takes
 * a tile of 64 consecutive channels (one 128-byte line of a row) over a slab of rows
 * (cuda_plan.c's nhwc_grid), each thread 8 channels of it with 16-byte loads, DT16_UNROLL rows in
 * flight, and a few blocks per multiprocessor, each thread walking its slab; what one thread
 * does is cuda_elem16.h's (dt16_bn_sums, dt16_bn_apply_rows, dt16_bn_back_rows), played on the
 * CPU by tests/test_device_nhwc.c. A reduction is two launches: per-block partial sums (fp32 over
 * a thread's group of rows, double beyond), then one warp per channel combining its blocks and
 * writing the channel's factors; an element-wise pass follows with the factors in registers.
 *
 * Passes over memory (x, dy, ... one read or write of the tensor each):
 *   training forward:  sums read x; apply reads x (and z), writes y       3 (4 with z)
 *   inference:         apply reads x (and z), writes y                    2 (3 with z)
 *   backward:          sums read x, dy; apply reads x, dy, writes dx      5
 *     with a fused ReLU: both read act_y too                              7
 *     and a residual add: sums read x, dy, act_y and write the masked
 *     gradient to dz; apply reads x and dz, writes dx                     7 (8 unfused: dz is
 *                                                                         written anyway)
 * The minimum for the statistics is two reads of x (the tensors exceed L2); the element-wise
 * passes walk their rows backwards, so the part the sums read last is still in L2. No atomics. */
#include "cuda_bn16.h"
#include "cuda_grid.h" /* defines: THREADS, GRID_LOOP */
#include "cuda_kernels16.h"

/* ---- per-block sums -------------------------------------------------------------------------- */

/* the channel references of dt16_bn_sums: row 0's values (statistics) or the means (backward) */
template <int HALF, int V, int MODE>
__device__ static inline void refs(const dt16 *x, const float *mean_c, int ch, float *ref)
{
    if (MODE == DT16_STATS) {
        const Dt16x8 q = dt16_ld(x, (size_t)ch, V);
#pragma unroll
        for (int j = 0; j < V; j++)
            ref[j] = dt16_f(q.v[j], HALF);
    } else if (MODE == DT16_BACK) {
#pragma unroll
        for (int j = 0; j < V; j++)
            ref[j] = mean_c[ch + j];
    }
}

/* MODE: what dt16_bn_sums adds; ACT: act_y read (a fused ReLU); OUT: the masked gradient stored
 * in g_out (may alias dy) */
template <int HALF, int V, int MODE, int ACT, int OUT>
__global__ void __launch_bounds__(DT16_THREADS, DT16_PER_SM)
    sums_kernel(NhwcGrid g, const dt16 *__restrict__ x, const dt16 *dy,
                const dt16 *__restrict__ act_y, dt16 *g_out, const float *__restrict__ mean_c,
                double *__restrict__ part)
{
    __shared__ double sh[DT16_THREADS * V];
    int ch, r0, r1, lane;
    double s1[V], s2[V];
#pragma unroll
    for (int j = 0; j < V; j++)
        s1[j] = s2[j] = 0.0;
    if (dt16_slot(&g, (int)blockIdx.x, (int)blockIdx.y, (int)threadIdx.x, &ch, &r0, &r1, &lane)) {
        float ref[V];
        refs<HALF, V, MODE>(x, mean_c, ch, ref);
        dt16_bn_sums(&g, MODE, V, dt16_unroll(MODE, HALF), HALF, x, dy, ACT ? act_y : NULL,
                     OUT ? g_out : NULL, ch, r0, r1, lane, ref, s1, s2);
    }
    const int slots = g.width * V, first = (int)blockIdx.y * slots; /* the tile's channels */
    for (int k = 0; k < (MODE == DT16_COLSUM ? 1 : 2); k++) {
#pragma unroll
        for (int j = 0; j < V; j++)
            sh[threadIdx.x * V + j] = k ? s2[j] : s1[j];
        __syncthreads();
        const int j = (int)threadIdx.x, c = first + j;
        if (j < slots && c < g.c) part[dt16_part_at(&g, c, (int)blockIdx.x, k)] = dt16_lane_sum(sh, &g, j);
        __syncthreads();
    }
}

template <int HALF, int V, int MODE, int ACT, int OUT>
static void launch_sums(cudaStream_t st, const NhwcGrid *g, const void *x, const void *dy,
                        const void *act_y, void *g_out, const float *mean, double *part)
{
    const dim3 grid((unsigned)g->splits, (unsigned)g->tiles);
    sums_kernel<HALF, V, MODE, ACT, OUT><<<grid, DT16_THREADS, 0, st>>>(
        *g, (const dt16 *)x, (const dt16 *)dy, (const dt16 *)act_y, (dt16 *)g_out, mean, part);
}

/* sums_kernel for the run-time vec (8, 4 or 1; the backward's at most 4: cuda_act16.c) */
template <int HALF, int MODE, int ACT, int OUT>
static void sums_any(cudaStream_t st, const NhwcGrid *g, const void *x, const void *dy,
                     const void *act_y, void *g_out, const float *mean, double *part)
{
    if constexpr (MODE != DT16_BACK) {
        if (g->vec == 8) {
            launch_sums<HALF, 8, MODE, ACT, OUT>(st, g, x, dy, act_y, g_out, mean, part);
            return;
        }
    }
    if (g->vec == 4)
        launch_sums<HALF, 4, MODE, ACT, OUT>(st, g, x, dy, act_y, g_out, mean, part);
    else
        launch_sums<HALF, 1, MODE, ACT, OUT>(st, g, x, dy, act_y, g_out, mean, part);
}

/* ---- per-channel factors: one warp per channel ----------------------------------------------- */

#define CHAN_PER_BLOCK (DT16_THREADS / 32)

/* the warp's channel (-1: beyond c) and its two sums in lane 0 */
__device__ static inline int warp_combine(const NhwcGrid &g, const double *part, double *a,
                                          double *b)
{
    const int ch = (int)blockIdx.x * CHAN_PER_BLOCK + (int)threadIdx.x / 32;
    if (ch >= g.c) return -1;
    dt16_part_lane(part, &g, ch, (int)threadIdx.x % 32, a, b);
    for (int o = 16; o > 0; o >>= 1) {
        *a += __shfl_down_sync(0xffffffffu, *a, o);
        *b += __shfl_down_sync(0xffffffffu, *b, o);
    }
    return threadIdx.x % 32 == 0 ? ch : -1;
}

static unsigned warp_blocks(int c)
{
    return (unsigned)((c + CHAN_PER_BLOCK - 1) / CHAN_PER_BLOCK);
}

/* coef[c] = mul, coef[c + C] = add; the statistics saved, the running ones updated */
template <int HALF>
__global__ void finalize_train_kernel(BnShape s, NhwcGrid g, const double *__restrict__ part,
                                      const dt16 *__restrict__ x, const float *__restrict__ gamma,
                                      const float *__restrict__ beta, float *__restrict__ coef,
                                      float *__restrict__ save_mean, float *__restrict__ save_invstd,
                                      float *__restrict__ running_mean,
                                      float *__restrict__ running_var)
{
    double s1, s2;
    const int c = warp_combine(g, part, &s1, &s2);
    if (c < 0) return;
    float mean, invstd, unbiased, mul, add;
    dt_bn_stats(s1, s2, (double)s.batch * (double)s.spatial, dt16_f(x[c], HALF), s.eps, &mean,
                &invstd, &unbiased);
    dt_bn_coeffs(gamma[c], beta[c], mean, invstd, &mul, &add);
    coef[c] = mul, coef[c + g.c] = add;
    save_mean[c] = mean, save_invstd[c] = invstd;
    running_mean[c] = dt_bn_running(running_mean[c], s.momentum, mean);
    running_var[c] = dt_bn_running(running_var[c], s.momentum, unbiased);
}

__global__ void finalize_infer_kernel(BnShape s, const float *__restrict__ gamma,
                                      const float *__restrict__ beta,
                                      const float *__restrict__ running_mean,
                                      const float *__restrict__ running_var,
                                      float *__restrict__ coef)
{
    GRID_LOOP(c, (size_t)s.c) {
        float mul, add;
        dt_bn_coeffs(gamma[c], beta[c], running_mean[c], dt_bn_infer_invstd(running_var[c], s.eps),
                     &mul, &add);
        coef[c] = mul, coef[c + s.c] = add;
    }
}

/* coef[c + {0, 1, 2, 3} C] = k, m_dy, m_xdy, mean; dgamma, dbeta */
__global__ void finalize_back_kernel(BnShape s, NhwcGrid g, const double *__restrict__ part,
                                     const float *__restrict__ gamma,
                                     const float *__restrict__ save_mean,
                                     const float *__restrict__ save_invstd,
                                     float *__restrict__ coef, float *__restrict__ dgamma,
                                     float *__restrict__ dbeta)
{
    double sum_dy, sum_dy_dev;
    const int c = warp_combine(g, part, &sum_dy, &sum_dy_dev);
    if (c < 0) return;
    float dg, db, k, m_dy, m_xdy;
    dt_bn_back_factors(sum_dy, sum_dy_dev, (double)s.batch * (double)s.spatial, gamma[c],
                       save_invstd[c], &dg, &db, &k, &m_dy, &m_xdy);
    dgamma[c] = dg, dbeta[c] = db;
    coef[c] = k, coef[c + g.c] = m_dy, coef[c + 2 * g.c] = m_xdy, coef[c + 3 * g.c] = save_mean[c];
}

__global__ void finalize_sum_kernel(NhwcGrid g, const double *__restrict__ part,
                                    float *__restrict__ out)
{
    double s1, s2;
    const int c = warp_combine(g, part, &s1, &s2);
    if (c >= 0) out[c] = (float)s1;
}

/* ---- element-wise passes --------------------------------------------------------------------- */

/* The slab of this block of an element-wise pass: the last first, as the sums' last blocks read
 * last (what of them L2 holds is read again first). */
__device__ static inline int last_first()
{
    return (int)(gridDim.x - 1 - blockIdx.x);
}

/* f[j] = coef[at + ch + j], j < V */
template <int V>
__device__ static inline void factors(const float *coef, size_t at, int ch, float *f)
{
#pragma unroll
    for (int j = 0; j < V; j++)
        f[j] = coef[at + (size_t)ch + j];
}

template <int HALF, int V, int ADD, int RELU>
__global__ void __launch_bounds__(DT16_THREADS, DT16_PER_SM)
    apply_kernel(NhwcGrid g, const float *__restrict__ coef, const dt16 *__restrict__ x,
                 const dt16 *__restrict__ z, dt16 *__restrict__ y)
{
    int ch, r0, r1, lane;
    if (!dt16_slot(&g, last_first(), (int)blockIdx.y, (int)threadIdx.x, &ch, &r0, &r1, &lane))
        return;
    float mul[V], add[V];
    factors<V>(coef, 0, ch, mul);
    factors<V>(coef, (size_t)g.c, ch, add);
    dt16_bn_apply_rows(&g, V, DT16_UNROLL, HALF, x, ADD ? z : NULL, RELU, y, ch, r0, r1, lane, mul,
                       add);
}

/* gin: dy (ACT: masked by act_y here), or the masked gradient the sums stored */
template <int HALF, int V, int ACT>
__global__ void __launch_bounds__(DT16_THREADS, DT16_PER_SM)
    back_apply_kernel(NhwcGrid g, const float *__restrict__ coef, const dt16 *__restrict__ x,
                      const dt16 *__restrict__ act_y, const dt16 *gin,
                      dt16 *__restrict__ dx)
{
    int ch, r0, r1, lane;
    if (!dt16_slot(&g, last_first(), (int)blockIdx.y, (int)threadIdx.x, &ch, &r0, &r1, &lane))
        return;
    float k[V], m_dy[V], m_xdy[V], mean[V];
    const size_t C = (size_t)g.c;
    factors<V>(coef, 0, ch, k);
    factors<V>(coef, C, ch, m_dy);
    factors<V>(coef, 2 * C, ch, m_xdy);
    factors<V>(coef, 3 * C, ch, mean);
    dt16_bn_back_rows(&g, V, DT16_UNROLL, HALF, x, gin, ACT ? act_y : NULL, dx, ch, r0, r1, lane, k,
                      m_dy, mean, m_xdy);
}

template <int HALF, int V>
static void launch_apply(cudaStream_t st, const NhwcGrid *g, const float *coef, const void *x,
                         const void *z, int relu, void *y)
{
    const dim3 grid((unsigned)g->splits, (unsigned)g->tiles);
    const dt16 *xx = (const dt16 *)x, *zz = (const dt16 *)z;
    dt16 *yy = (dt16 *)y;
    if (z && relu)
        apply_kernel<HALF, V, 1, 1><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, zz, yy);
    else if (z)
        apply_kernel<HALF, V, 1, 0><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, zz, yy);
    else if (relu)
        apply_kernel<HALF, V, 0, 1><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, zz, yy);
    else
        apply_kernel<HALF, V, 0, 0><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, zz, yy);
}

template <int HALF>
static void apply_any(cudaStream_t st, const NhwcGrid *g, const float *coef, const void *x,
                      const void *z, int relu, void *y)
{
    if (g->vec == 8)
        launch_apply<HALF, 8>(st, g, coef, x, z, relu, y);
    else if (g->vec == 4)
        launch_apply<HALF, 4>(st, g, coef, x, z, relu, y);
    else
        launch_apply<HALF, 1>(st, g, coef, x, z, relu, y);
}

template <int HALF, int V>
static void launch_back_apply(cudaStream_t st, const NhwcGrid *g, const float *coef,
                              const void *x, const void *act_y, const void *gin, void *dx)
{
    const dim3 grid((unsigned)g->splits, (unsigned)g->tiles);
    const dt16 *xx = (const dt16 *)x, *aa = (const dt16 *)act_y, *gg = (const dt16 *)gin;
    if (act_y)
        back_apply_kernel<HALF, V, 1><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, aa, gg, (dt16 *)dx);
    else
        back_apply_kernel<HALF, V, 0><<<grid, DT16_THREADS, 0, st>>>(*g, coef, xx, aa, gg, (dt16 *)dx);
}

/* ---- launchers ------------------------------------------------------------------------------- */

template <int HALF>
static cudaError_t bn_train(cudaStream_t st, const BnShape *s, const NhwcGrid *g, double *part,
                            float *coef, const void *x, const float *gamma, const float *beta,
                            const void *z, int relu, void *y, float *save_mean, float *save_invstd,
                            float *running_mean, float *running_var)
{
    sums_any<HALF, DT16_STATS, 0, 0>(st, g, x, NULL, NULL, NULL, NULL, part);
    finalize_train_kernel<HALF><<<warp_blocks(g->c), DT16_THREADS, 0, st>>>(
        *s, *g, part, (const dt16 *)x, gamma, beta, coef, save_mean, save_invstd, running_mean,
        running_var);
    apply_any<HALF>(st, g, coef, x, z, relu, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dth_bn_train(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                                    double *partials, float *coef, const void *x,
                                    const float *gamma, const float *beta, const void *z, int relu,
                                    void *y, float *save_mean, float *save_invstd,
                                    float *running_mean, float *running_var)
{
    return half ? bn_train<1>(st, s, g, partials, coef, x, gamma, beta, z, relu, y, save_mean,
                              save_invstd, running_mean, running_var)
                : bn_train<0>(st, s, g, partials, coef, x, gamma, beta, z, relu, y, save_mean,
                              save_invstd, running_mean, running_var);
}

extern "C" cudaError_t dth_bn_infer(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                                    float *coef, const void *x, const float *gamma,
                                    const float *beta, const float *running_mean,
                                    const float *running_var, const void *z, int relu, void *y)
{
    finalize_infer_kernel<<<(unsigned)((s->c + THREADS - 1) / THREADS), THREADS, 0, st>>>(
        *s, gamma, beta, running_mean, running_var, coef);
    if (half)
        apply_any<1>(st, g, coef, x, z, relu, y);
    else
        apply_any<0>(st, g, coef, x, z, relu, y);
    return cudaGetLastError();
}

template <int HALF>
static cudaError_t bn_back(cudaStream_t st, const BnShape *s, const NhwcGrid *g, double *part,
                           float *coef, const void *x, const float *gamma, const float *save_mean,
                           const float *save_invstd, const void *act_y, const void *dy, void *dx,
                           void *dz, float *dgamma, float *dbeta)
{
    if (act_y && dz)
        sums_any<HALF, DT16_BACK, 1, 1>(st, g, x, dy, act_y, dz, save_mean, part);
    else if (act_y)
        sums_any<HALF, DT16_BACK, 1, 0>(st, g, x, dy, act_y, NULL, save_mean, part);
    else if (dz)
        sums_any<HALF, DT16_BACK, 0, 1>(st, g, x, dy, NULL, dz, save_mean, part);
    else
        sums_any<HALF, DT16_BACK, 0, 0>(st, g, x, dy, NULL, NULL, save_mean, part);
    finalize_back_kernel<<<warp_blocks(g->c), DT16_THREADS, 0, st>>>(
        *s, *g, part, gamma, save_mean, save_invstd, coef, dgamma, dbeta);
    if (dz) /* the masked gradient is in dz now: read it instead of dy and act_y */
        act_y = NULL, dy = dz;
    if (g->vec == 4)
        launch_back_apply<HALF, 4>(st, g, coef, x, act_y, dy, dx);
    else
        launch_back_apply<HALF, 1>(st, g, coef, x, act_y, dy, dx);
    return cudaGetLastError();
}

extern "C" cudaError_t dth_bn_back(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                                   double *partials, float *coef, const void *x,
                                   const float *gamma, const float *save_mean,
                                   const float *save_invstd, const void *act_y, const void *dy,
                                   void *dx, void *dz, float *dgamma, float *dbeta)
{
    if (g->vec > 4) return cudaErrorInvalidValue; /* its kernels take 4 channels a thread */
    return half ? bn_back<1>(st, s, g, partials, coef, x, gamma, save_mean, save_invstd, act_y,
                             dy, dx, dz, dgamma, dbeta)
                : bn_back<0>(st, s, g, partials, coef, x, gamma, save_mean, save_invstd, act_y,
                             dy, dx, dz, dgamma, dbeta);
}

extern "C" cudaError_t dth_colsum(cudaStream_t st, int half, const NhwcGrid *g, double *partials,
                                  const void *dy, float *out)
{
    if (half)
        sums_any<1, DT16_COLSUM, 0, 0>(st, g, NULL, dy, NULL, NULL, NULL, partials);
    else
        sums_any<0, DT16_COLSUM, 0, 0>(st, g, NULL, dy, NULL, NULL, NULL, partials);
    finalize_sum_kernel<<<warp_blocks(g->c), DT16_THREADS, 0, st>>>(*g, partials, out);
    return cudaGetLastError();
}
