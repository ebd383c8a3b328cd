/* cuda_bn16_kernels.cu - batch normalisation on NHWC 16-bit activations, with the ReLU and the
 * residual add that follow it in ResNets optionally fused in, and the per-channel sums of a
 * bias gradient (launchers in cuda_kernels16.h).
 *
 * A channel's values are strided by c in NHWC, so the reductions give each block a tile of
 * DT16_LANES consecutive channels over a slice of the rows (cuda_plan.c's nhwc_grid): a warp reads
 * consecutive channels of one row, each thread sums its channel over every DT16_ROWLANES-th row of
 * the slice in double (cuda_elem16.h's dt16_bn_sums: shifted by the channel's first value for the
 * statistics), the block's row lanes are added in a fixed order, and each block leaves one pair
 * of partial sums per channel. A one-thread-per-channel kernel then combines a channel's blocks in
 * split order (deterministic) into its factors (cuda_elem.h's dt_bn_stats, dt_bn_coeffs,
 * dt_bn_back_factors: the CPU's definitions), saves the statistics and updates the running ones;
 * an element-wise pass applies them, 8 values (16 bytes) per load where the channels and the
 * buffers allow it. Training forward reads x twice, backward reads x and dy twice: statistics in
 * fp32/double, storage 16-bit, as PyTorch's autocast keeps batch norm. No atomics. */
#include "cuda_elem16.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels16.h"

#define SUM_THREADS (DT16_LANES * DT16_ROWLANES)

/* ---- per-block sums -------------------------------------------------------------------------- */

/* MODE 0: shifted sums of x; 1: sums of g and g (x - mean); 2: sums of dy (ACT: masked by act_y) */
template <int HALF, int MODE, int ACT>
__global__ void sums_kernel(NhwcGrid g, const dt16 *__restrict__ x, const dt16 *__restrict__ dy,
                            const dt16 *__restrict__ act_y, const float *__restrict__ mean_c,
                            double *__restrict__ part)
{
    __shared__ double sh[2][DT16_ROWLANES][DT16_LANES];
    const int tx = (int)threadIdx.x % DT16_LANES, ty = (int)threadIdx.x / DT16_LANES;
    const int ch = (int)blockIdx.y * DT16_LANES + tx;
    const int r0 = (int)blockIdx.x * g.chunk;
    const int r1 = r0 + g.chunk < g.rows ? r0 + g.chunk : g.rows;
    double a = 0.0, b = 0.0;
    if (ch < g.c) {
        const double shift = MODE == 0 ? (double)dt16_f(x[ch], HALF) : 0.0;
        const float mean = MODE == 1 ? mean_c[ch] : 0.0f;
        dt16_bn_sums(MODE, x, dy, ACT ? act_y : NULL, (size_t)g.c, (size_t)ch, r0, r1, ty, shift,
                     mean, HALF, &a, &b);
    }
    sh[0][ty][tx] = a, sh[1][ty][tx] = b;
    __syncthreads();
    if (ty == 0 && ch < g.c) {
        double s1 = 0.0, s2 = 0.0;
        for (int k = 0; k < DT16_ROWLANES; k++)
            s1 += sh[0][k][tx], s2 += sh[1][k][tx];
        part[2 * ((size_t)ch * g.splits + blockIdx.x)] = s1;
        part[2 * ((size_t)ch * g.splits + blockIdx.x) + 1] = s2;
    }
}

/* channel ch's partial sums combined in split order */
__device__ static inline void combine(const double *part, int ch, int splits, double *a, double *b)
{
    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < splits; i++) {
        s1 += part[2 * ((size_t)ch * splits + i)];
        s2 += part[2 * ((size_t)ch * splits + i) + 1];
    }
    *a = s1, *b = s2;
}

template <int HALF, int MODE, int ACT>
static void launch_sums(cudaStream_t st, const NhwcGrid *g, const void *x, const void *dy,
                        const void *act_y, const float *mean, double *part)
{
    const dim3 grid((unsigned)g->splits, (unsigned)g->tiles);
    sums_kernel<HALF, MODE, ACT><<<grid, SUM_THREADS, 0, st>>>(
        *g, (const dt16 *)x, (const dt16 *)dy, (const dt16 *)act_y, mean, part);
}

/* ---- per-channel factors --------------------------------------------------------------------- */

/* coef[2c] = mul, coef[2c + 1] = add; the statistics saved, the running ones updated */
template <int HALF>
__global__ void finalize_train_kernel(BnShape s, NhwcGrid g, const double *__restrict__ part,
                                      const dt16 *__restrict__ x, const float *__restrict__ gamma,
                                      const float *__restrict__ beta, float *__restrict__ coef,
                                      float *__restrict__ save_mean, float *__restrict__ save_invstd,
                                      float *__restrict__ running_mean,
                                      float *__restrict__ running_var)
{
    GRID_LOOP(c, (size_t)g.c) {
        double s1, s2;
        combine(part, (int)c, g.splits, &s1, &s2);
        float mean, invstd, unbiased, mul, add;
        dt_bn_stats(s1, s2, (double)s.batch * (double)s.spatial, dt16_f(x[c], HALF), s.eps, &mean,
                    &invstd, &unbiased);
        dt_bn_coeffs(gamma[c], beta[c], mean, invstd, &mul, &add);
        coef[2 * c] = mul, coef[2 * c + 1] = add;
        save_mean[c] = mean, save_invstd[c] = invstd;
        running_mean[c] = dt_bn_running(running_mean[c], s.momentum, mean);
        running_var[c] = dt_bn_running(running_var[c], s.momentum, unbiased);
    }
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
        coef[2 * c] = mul, coef[2 * c + 1] = add;
    }
}

/* coef[4c ..] = k, m_dy, m_xdy, mean; dgamma, dbeta */
__global__ void finalize_back_kernel(BnShape s, NhwcGrid g, const double *__restrict__ part,
                                     const float *__restrict__ gamma,
                                     const float *__restrict__ save_mean,
                                     const float *__restrict__ save_invstd,
                                     float *__restrict__ coef, float *__restrict__ dgamma,
                                     float *__restrict__ dbeta)
{
    GRID_LOOP(c, (size_t)g.c) {
        double sum_dy, sum_dy_dev;
        combine(part, (int)c, g.splits, &sum_dy, &sum_dy_dev);
        float dg, db, k, m_dy, m_xdy;
        dt_bn_back_factors(sum_dy, sum_dy_dev, (double)s.batch * (double)s.spatial, gamma[c],
                           save_invstd[c], &dg, &db, &k, &m_dy, &m_xdy);
        dgamma[c] = dg, dbeta[c] = db;
        coef[4 * c] = k, coef[4 * c + 1] = m_dy, coef[4 * c + 2] = m_xdy;
        coef[4 * c + 3] = save_mean[c];
    }
}

__global__ void finalize_sum_kernel(NhwcGrid g, const double *__restrict__ part,
                                    float *__restrict__ out)
{
    GRID_LOOP(c, (size_t)g.c) {
        double s1, s2;
        combine(part, (int)c, g.splits, &s1, &s2);
        out[c] = (float)s1;
    }
}

/* ---- element-wise passes: V values (one unit) per thread and load ---------------------------- */

template <int V> struct __align__(2 * V) Pack16 {
    dt16 v[V];
};
template <int V> __device__ static inline Pack16<V> ld(const dt16 *p, size_t u)
{
    return reinterpret_cast<const Pack16<V> *>(p)[u];
}
template <int V> __device__ static inline void st16(dt16 *p, size_t u, const Pack16<V> &v)
{
    reinterpret_cast<Pack16<V> *>(p)[u] = v;
}

template <int HALF, int V, int ADD, int RELU>
__global__ void apply_kernel(size_t units, int c, const float *__restrict__ coef,
                             const dt16 *__restrict__ x, const dt16 *__restrict__ z,
                             dt16 *__restrict__ y)
{
    GRID_LOOP(u, units) {
        const int c0 = (int)(u * V % (size_t)c);
        const Pack16<V> px = ld<V>(x, u);
        Pack16<V> pz = {}, out;
        if (ADD) pz = ld<V>(z, u);
        for (int j = 0; j < V; j++)
            out.v[j] = dt16_bn_apply(px.v[j], pz.v[j], ADD, RELU, coef[2 * (c0 + j)],
                                     coef[2 * (c0 + j) + 1], HALF);
        st16<V>(y, u, out);
    }
}

/* dz may alias dy: each unit is read before it is written, by the same thread */
template <int HALF, int V, int ACT, int DZ>
__global__ void back_apply_kernel(size_t units, int c, const float *__restrict__ coef,
                                  const dt16 *__restrict__ x, const dt16 *__restrict__ act_y,
                                  const dt16 *dy, dt16 *__restrict__ dx, dt16 *dz)
{
    GRID_LOOP(u, units) {
        const int c0 = (int)(u * V % (size_t)c);
        const Pack16<V> px = ld<V>(x, u), pg = ld<V>(dy, u);
        Pack16<V> pa = {}, out, gz;
        if (ACT) pa = ld<V>(act_y, u);
        for (int j = 0; j < V; j++) {
            const float *f = coef + 4 * (c0 + j);
            dt16_bn_back(px.v[j], pg.v[j], pa.v[j], ACT, f[0], f[1], f[3], f[2], HALF, &out.v[j],
                         &gz.v[j]);
        }
        if (DZ) st16<V>(dz, u, gz);
        st16<V>(dx, u, out);
    }
}

/* 8 values per load when the channels come in eights and every buffer is 16-byte aligned */
static int vec8(int c, const void *a, const void *b, const void *d, const void *e, const void *f)
{
    const uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)d | (uintptr_t)e | (uintptr_t)f;
    return c % 8 == 0 && (any & 15) == 0;
}

/* apply_kernel<HALF, V, add, relu> on n values */
template <int HALF, int V>
static void launch_apply(cudaStream_t st, size_t n, int c, const float *coef, const void *x,
                         const void *z, int relu, void *y)
{
    const size_t units = n / V;
    const dt16 *xx = (const dt16 *)x, *zz = (const dt16 *)z;
    dt16 *yy = (dt16 *)y;
    if (z && relu)
        apply_kernel<HALF, V, 1, 1><<<blocks_for(units), THREADS, 0, st>>>(units, c, coef, xx, zz, yy);
    else if (z)
        apply_kernel<HALF, V, 1, 0><<<blocks_for(units), THREADS, 0, st>>>(units, c, coef, xx, zz, yy);
    else if (relu)
        apply_kernel<HALF, V, 0, 1><<<blocks_for(units), THREADS, 0, st>>>(units, c, coef, xx, zz, yy);
    else
        apply_kernel<HALF, V, 0, 0><<<blocks_for(units), THREADS, 0, st>>>(units, c, coef, xx, zz, yy);
}

template <int HALF>
static void apply_any(cudaStream_t st, size_t n, int c, const float *coef, const void *x,
                      const void *z, int relu, void *y)
{
    if (vec8(c, x, z, y, NULL, NULL))
        launch_apply<HALF, 8>(st, n, c, coef, x, z, relu, y);
    else
        launch_apply<HALF, 1>(st, n, c, coef, x, z, relu, y);
}

template <int HALF, int V>
static void launch_back_apply(cudaStream_t st, size_t n, int c, const float *coef, const void *x,
                              const void *act_y, const void *dy, void *dx, void *dz)
{
    const size_t units = n / V;
    const dt16 *xx = (const dt16 *)x, *aa = (const dt16 *)act_y, *gg = (const dt16 *)dy;
    dt16 *dxx = (dt16 *)dx, *dzz = (dt16 *)dz;
    const unsigned b = blocks_for(units);
    if (act_y && dz)
        back_apply_kernel<HALF, V, 1, 1><<<b, THREADS, 0, st>>>(units, c, coef, xx, aa, gg, dxx, dzz);
    else if (act_y)
        back_apply_kernel<HALF, V, 1, 0><<<b, THREADS, 0, st>>>(units, c, coef, xx, aa, gg, dxx, dzz);
    else if (dz)
        back_apply_kernel<HALF, V, 0, 1><<<b, THREADS, 0, st>>>(units, c, coef, xx, aa, gg, dxx, dzz);
    else
        back_apply_kernel<HALF, V, 0, 0><<<b, THREADS, 0, st>>>(units, c, coef, xx, aa, gg, dxx, dzz);
}

/* ---- launchers ------------------------------------------------------------------------------- */

static size_t bn_count(const BnShape *s)
{
    return (size_t)s->batch * s->c * s->spatial;
}
static unsigned chan_blocks(int c)
{
    return (unsigned)((c + THREADS - 1) / THREADS);
}

template <int HALF>
static cudaError_t bn_train(cudaStream_t st, const BnShape *s, const NhwcGrid *g, double *part,
                            float *coef, const void *x, const float *gamma, const float *beta,
                            const void *z, int relu, void *y, float *save_mean, float *save_invstd,
                            float *running_mean, float *running_var)
{
    launch_sums<HALF, 0, 0>(st, g, x, NULL, NULL, NULL, part);
    finalize_train_kernel<HALF><<<chan_blocks(s->c), THREADS, 0, st>>>(
        *s, *g, part, (const dt16 *)x, gamma, beta, coef, save_mean, save_invstd, running_mean,
        running_var);
    apply_any<HALF>(st, bn_count(s), s->c, coef, x, z, relu, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dth_bn_train(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                                    double *partials, float *coef, const void *x,
                                    const float *gamma, const float *beta, const void *z, int relu,
                                    void *y, float *save_mean, float *save_invstd,
                                    float *running_mean, float *running_var)
{
    if (bn_count(s) == 0) return cudaSuccess;
    return half ? bn_train<1>(st, s, g, partials, coef, x, gamma, beta, z, relu, y, save_mean,
                              save_invstd, running_mean, running_var)
                : bn_train<0>(st, s, g, partials, coef, x, gamma, beta, z, relu, y, save_mean,
                              save_invstd, running_mean, running_var);
}

extern "C" cudaError_t dth_bn_infer(cudaStream_t st, int half, const BnShape *s, float *coef,
                                    const void *x, const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var,
                                    const void *z, int relu, void *y)
{
    if (bn_count(s) == 0) return cudaSuccess;
    finalize_infer_kernel<<<chan_blocks(s->c), THREADS, 0, st>>>(*s, gamma, beta, running_mean,
                                                                 running_var, coef);
    if (half)
        apply_any<1>(st, bn_count(s), s->c, coef, x, z, relu, y);
    else
        apply_any<0>(st, bn_count(s), s->c, coef, x, z, relu, y);
    return cudaGetLastError();
}

template <int HALF>
static cudaError_t bn_back(cudaStream_t st, const BnShape *s, const NhwcGrid *g, double *part,
                           float *coef, const void *x, const float *gamma, const float *save_mean,
                           const float *save_invstd, const void *act_y, const void *dy, void *dx,
                           void *dz, float *dgamma, float *dbeta)
{
    if (act_y)
        launch_sums<HALF, 1, 1>(st, g, x, dy, act_y, save_mean, part);
    else
        launch_sums<HALF, 1, 0>(st, g, x, dy, NULL, save_mean, part);
    finalize_back_kernel<<<chan_blocks(s->c), THREADS, 0, st>>>(*s, *g, part, gamma, save_mean,
                                                                save_invstd, coef, dgamma, dbeta);
    const size_t n = bn_count(s);
    if (vec8(s->c, x, act_y, dy, dx, dz))
        launch_back_apply<HALF, 8>(st, n, s->c, coef, x, act_y, dy, dx, dz);
    else
        launch_back_apply<HALF, 1>(st, n, s->c, coef, x, act_y, dy, dx, dz);
    return cudaGetLastError();
}

extern "C" cudaError_t dth_bn_back(cudaStream_t st, int half, const BnShape *s, const NhwcGrid *g,
                                   double *partials, float *coef, const void *x,
                                   const float *gamma, const float *save_mean,
                                   const float *save_invstd, const void *act_y, const void *dy,
                                   void *dx, void *dz, float *dgamma, float *dbeta)
{
    if (bn_count(s) == 0) return cudaSuccess;
    return half ? bn_back<1>(st, s, g, partials, coef, x, gamma, save_mean, save_invstd, act_y,
                             dy, dx, dz, dgamma, dbeta)
                : bn_back<0>(st, s, g, partials, coef, x, gamma, save_mean, save_invstd, act_y,
                             dy, dx, dz, dgamma, dbeta);
}

extern "C" cudaError_t dth_colsum(cudaStream_t st, int half, const NhwcGrid *g, double *partials,
                                  const void *dy, float *out)
{
    if (half)
        launch_sums<1, 2, 0>(st, g, NULL, dy, NULL, NULL, partials);
    else
        launch_sums<0, 2, 0>(st, g, NULL, dy, NULL, NULL, partials);
    finalize_sum_kernel<<<chan_blocks(g->c), THREADS, 0, st>>>(*g, partials, out);
    return cudaGetLastError();
}
