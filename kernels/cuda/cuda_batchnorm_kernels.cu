/* cuda_batchnorm_kernels.cu - batch normalisation at memory speed (launchers in cuda_kernels.h),
 * with the ReLU and the residual add that follow it in ResNets optionally fused in.
 *
 * Training forward: two kernels, x read twice. The first gives every block of a (splits, C) grid
 * (cuda_plan.c's bn_grid) a slice of one channel and leaves two partial sums of it in `partials`:
 * sum (x - shift) and sum (x - shift)^2 in double, shift being the channel's first element (no
 * cancellation whatever the mean). The second combines a channel's partials in a fixed order in
 * every block of it (deterministic, the same in each block), takes the statistics (cuda_elem.h's
 * dt_bn_stats: biased variance to normalise, unbiased into the running variance, PyTorch's
 * momentum, as kernels/cpu/cpu_norm.c), lets its block 0 save them and update the running ones, and
 * normalises its slice: y = x*mul + add (dt_bn_coeffs, dt_bn_affine: the CPU's bits given the same
 * statistics), then + z and ReLU when fused. Backward: the same two kernels over dy and
 * dy*(x - mean) (through the fused ReLU's mask), then dx = dt_bn_back(...), dgamma and dbeta.
 * Passes over memory: forward 3 (x twice, y; +1 for z), backward 5 (x, dy twice, dx; +2 for a
 * fused ReLU's output read twice); fused with the add, the first kernel stores the masked gradient
 * in dz (written anyway) and the second reads it instead of dy and act_y: 7 instead of 8.
 *
 * Blocks walk their slice with cuda_elem.h's DtWalk (32-bit indices, no division per element),
 * 4 floats per load where the planes allow it (bn_grid's vec). Many blocks per channel fill the
 * GPU where one block per channel (cuda_norm_kernels.cu's simple kernels, kept for tensors of
 * 2^31 elements or more) left most of it idle on ResNet's 64-channel layers. No atomics. */
#include "cuda_elem.h"
#include "cuda_kernels.h"

/* V consecutive floats of one plane, loaded or stored at unit i (of V floats) */
template <int V> struct Pack {
    float v[V];
};
template <int V> __device__ static inline Pack<V> load(const float *p, int i);
template <> __device__ inline Pack<1> load<1>(const float *p, int i)
{
    Pack<1> r = {{p[i]}};
    return r;
}
template <> __device__ inline Pack<4> load<4>(const float *p, int i)
{
    const float4 q = reinterpret_cast<const float4 *>(p)[i];
    Pack<4> r = {{q.x, q.y, q.z, q.w}};
    return r;
}
template <int V> __device__ static inline void store(float *p, int i, const Pack<V> &r);
template <> __device__ inline void store<1>(float *p, int i, const Pack<1> &r)
{
    p[i] = r.v[0];
}
template <> __device__ inline void store<4>(float *p, int i, const Pack<4> &r)
{
    reinterpret_cast<float4 *>(p)[i] = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
}

/* Sums a and b over the block (blockDim.x a multiple of 32, at most 1024): warps by shuffles,
 * then the warps' sums by the first warp, always in the same order. Valid in thread 0. */
__device__ static void block_sum2(double &a, double &b)
{
    __shared__ double sh[2][32];
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, o);
        b += __shfl_down_sync(0xffffffffu, b, o);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) sh[0][warp] = a, sh[1][warp] = b;
    __syncthreads();
    if (warp == 0) {
        const int nw = (int)(blockDim.x >> 5);
        a = lane < nw ? sh[0][lane] : 0.0;
        b = lane < nw ? sh[1][lane] : 0.0;
        for (int o = 16; o > 0; o >>= 1) {
            a += __shfl_down_sync(0xffffffffu, a, o);
            b += __shfl_down_sync(0xffffffffu, b, o);
        }
    }
}

/* This block's walk over its slice of channel blockIdx.y. */
__device__ static inline DtWalk slice(const BnGrid &g, int C)
{
    const int e0 = (int)blockIdx.x * g.chunk;
    const int e1 = e0 + g.chunk < g.units ? e0 + g.chunk : g.units;
    DtWalk w;
    dt_walk_init(&w, g.sp, C * g.sp, (int)blockIdx.y, e0, e1, (int)threadIdx.x, (int)blockDim.x);
    return w;
}

/* The channel's partial sums combined in split order (thread 0 of any block of it). */
__device__ static inline void combine(const double *part, int c, int splits, double *a, double *b)
{
    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < splits; i++) {
        s1 += part[2 * ((size_t)c * splits + i)];
        s2 += part[2 * ((size_t)c * splits + i) + 1];
    }
    *a = s1, *b = s2;
}

/* ---- training forward ------------------------------------------------------------------------ */

template <int V>
__global__ void bn_stats_kernel(BnGrid g, int C, const float *__restrict__ x,
                                double *__restrict__ part)
{
    const int c = blockIdx.y;
    const double shift = (double)x[c * g.sp * V];
    double s1 = 0.0, s2 = 0.0;
    for (DtWalk w = slice(g, C); dt_walk_more(&w); dt_walk_next(&w)) {
        const Pack<V> p = load<V>(x, dt_walk_index(&w));
        for (int j = 0; j < V; j++) {
            const double d = (double)p.v[j] - shift;
            s1 += d;
            s2 += d * d;
        }
    }
    block_sum2(s1, s2);
    if (threadIdx.x == 0) {
        part[2 * ((size_t)c * g.splits + blockIdx.x)] = s1;
        part[2 * ((size_t)c * g.splits + blockIdx.x) + 1] = s2;
    }
}

template <int V, int ACT, int ADD>
__global__ void bn_train_apply_kernel(
    BnGrid g, BnShape s, const float *__restrict__ x, const float *__restrict__ gamma,
    const float *__restrict__ beta, const float *__restrict__ z, float *__restrict__ y,
    const double *__restrict__ part, float *__restrict__ save_mean, float *__restrict__ save_invstd,
    float *__restrict__ running_mean, float *__restrict__ running_var)
{
    __shared__ float coef[2];
    const int c = blockIdx.y;
    if (threadIdx.x == 0) {
        double s1, s2;
        combine(part, c, g.splits, &s1, &s2);
        float mean, invstd, unbiased, mul, add;
        const float shift = x[c * g.sp * V];
        dt_bn_stats(s1, s2, (double)s.batch * (double)s.spatial, shift, s.eps, &mean, &invstd,
                    &unbiased);
        dt_bn_coeffs(gamma[c], beta[c], mean, invstd, &mul, &add);
        coef[0] = mul, coef[1] = add;
        if (blockIdx.x == 0) {
            save_mean[c] = mean;
            save_invstd[c] = invstd;
            running_mean[c] = dt_bn_running(running_mean[c], s.momentum, mean);
            running_var[c] = dt_bn_running(running_var[c], s.momentum, unbiased);
        }
    }
    __syncthreads();
    const float mul = coef[0], add = coef[1];
    for (DtWalk w = slice(g, s.c); dt_walk_more(&w); dt_walk_next(&w)) {
        const int i = dt_walk_index(&w);
        Pack<V> p = load<V>(x, i), q = {};
        if (ADD) q = load<V>(z, i);
        for (int j = 0; j < V; j++)
            p.v[j] = dt_bn_epilogue(dt_bn_affine(p.v[j], mul, add), q.v[j], ADD, ACT);
        store<V>(y, i, p);
    }
}

/* ---- inference ------------------------------------------------------------------------------- */

template <int V, int ACT, int ADD>
__global__ void bn_infer_kernel(BnGrid g, BnShape s, const float *__restrict__ x,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                const float *__restrict__ running_mean,
                                const float *__restrict__ running_var, const float *__restrict__ z,
                                float *__restrict__ y)
{
    const int c = blockIdx.y;
    float mul, add;
    dt_bn_coeffs(gamma[c], beta[c], running_mean[c], dt_bn_infer_invstd(running_var[c], s.eps),
                 &mul, &add);
    for (DtWalk w = slice(g, s.c); dt_walk_more(&w); dt_walk_next(&w)) {
        const int i = dt_walk_index(&w);
        Pack<V> p = load<V>(x, i), q = {};
        if (ADD) q = load<V>(z, i);
        for (int j = 0; j < V; j++)
            p.v[j] = dt_bn_epilogue(dt_bn_affine(p.v[j], mul, add), q.v[j], ADD, ACT);
        store<V>(y, i, p);
    }
}

/* ---- backward -------------------------------------------------------------------------------- */

/* The gradient reaching the batch norm: dy, or through the fused ReLU dy where its output > 0 */
#define GRAD_IN(ACT, dy, act_y) ((ACT) ? dt_relu_grad(dy, act_y) : (dy))

/* DZ: the gradient reaching the batch norm is also stored in dz (may alias dy: each element is
 * read before it is written, by the same thread), where the apply kernel reads it back instead of
 * dy and act_y: the residual gradient is written once either way, and one read of two tensors is
 * saved. */
template <int V, int ACT, int DZ>
__global__ void bn_back_stats_kernel(BnGrid g, int C, const float *__restrict__ x,
                                     const float *__restrict__ save_mean,
                                     const float *__restrict__ act_y, const float *dy, float *dz,
                                     double *__restrict__ part)
{
    const int c = blockIdx.y;
    const float mean = save_mean[c];
    double a = 0.0, b = 0.0;
    for (DtWalk w = slice(g, C); dt_walk_more(&w); dt_walk_next(&w)) {
        const int i = dt_walk_index(&w);
        const Pack<V> px = load<V>(x, i), pg = load<V>(dy, i);
        Pack<V> pa = {}, gz;
        if (ACT) pa = load<V>(act_y, i);
        for (int j = 0; j < V; j++) {
            const float gj = GRAD_IN(ACT, pg.v[j], pa.v[j]);
            gz.v[j] = gj;
            a += gj;
            b += gj * (px.v[j] - mean);
        }
        if (DZ) store<V>(dz, i, gz);
    }
    block_sum2(a, b);
    if (threadIdx.x == 0) {
        part[2 * ((size_t)c * g.splits + blockIdx.x)] = a;
        part[2 * ((size_t)c * g.splits + blockIdx.x) + 1] = b;
    }
}

/* gin: dy (ACT: masked here by act_y), or the masked gradient the stats kernel stored in dz */
template <int V, int ACT>
__global__ void
bn_back_apply_kernel(BnGrid g, BnShape s, const float *__restrict__ x,
                     const float *__restrict__ gamma, const float *__restrict__ save_mean,
                     const float *__restrict__ save_invstd, const float *__restrict__ act_y,
                     const float *__restrict__ gin, const double *__restrict__ part,
                     float *__restrict__ dx, float *__restrict__ dgamma, float *__restrict__ dbeta)
{
    __shared__ float f[3];
    const int c = blockIdx.y;
    const float mean = save_mean[c];
    if (threadIdx.x == 0) {
        double sum_dy, sum_dy_dev;
        combine(part, c, g.splits, &sum_dy, &sum_dy_dev);
        float dg, db, k, m_dy, m_xdy;
        dt_bn_back_factors(sum_dy, sum_dy_dev, (double)s.batch * (double)s.spatial, gamma[c],
                           save_invstd[c], &dg, &db, &k, &m_dy, &m_xdy);
        f[0] = k, f[1] = m_dy, f[2] = m_xdy;
        if (blockIdx.x == 0) dgamma[c] = dg, dbeta[c] = db;
    }
    __syncthreads();
    const float k = f[0], m_dy = f[1], m_xdy = f[2];
    for (DtWalk w = slice(g, s.c); dt_walk_more(&w); dt_walk_next(&w)) {
        const int i = dt_walk_index(&w);
        const Pack<V> px = load<V>(x, i), pg = load<V>(gin, i);
        Pack<V> pa = {}, out;
        if (ACT) pa = load<V>(act_y, i);
        for (int j = 0; j < V; j++)
            out.v[j] = dt_bn_back(k, GRAD_IN(ACT, pg.v[j], pa.v[j]), m_dy, px.v[j], mean, m_xdy);
        store<V>(dx, i, out);
    }
}

/* ---- launchers ------------------------------------------------------------------------------- */

/* kernel<V, A, B><<<grid, BN_BLOCK_THREADS, 0, st>>>(...) for the run-time vec (1 or 4) and flags
 * a, b */
#define BN_LAUNCH(kernel, vec, a, b, grid, st, ...)                                                \
    do {                                                                                           \
        if ((vec) == 4) {                                                                          \
            if ((a) && (b))                                                                        \
                kernel<4, 1, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else if (a)                                                                            \
                kernel<4, 1, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else if (b)                                                                            \
                kernel<4, 0, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else                                                                                   \
                kernel<4, 0, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
        } else {                                                                                   \
            if ((a) && (b))                                                                        \
                kernel<1, 1, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else if (a)                                                                            \
                kernel<1, 1, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else if (b)                                                                            \
                kernel<1, 0, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
            else                                                                                   \
                kernel<1, 0, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                   \
        }                                                                                          \
    } while (0)

extern "C" cudaError_t dtk_bn_forward_train(cudaStream_t st, const BnShape *s, const BnGrid *g,
                                            double *partials, const float *x, const float *gamma,
                                            const float *beta, const float *z, int relu, float *y,
                                            float *save_mean, float *save_invstd,
                                            float *running_mean, float *running_var)
{
    const dim3 grid((unsigned)g->splits, (unsigned)s->c);
    if (g->vec == 4)
        bn_stats_kernel<4><<<grid, BN_BLOCK_THREADS, 0, st>>>(*g, s->c, x, partials);
    else
        bn_stats_kernel<1><<<grid, BN_BLOCK_THREADS, 0, st>>>(*g, s->c, x, partials);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    const int add = z != NULL;
    BN_LAUNCH(bn_train_apply_kernel, g->vec, relu, add, grid, st, *g, *s, x, gamma, beta, z, y,
              partials, save_mean, save_invstd, running_mean, running_var);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_bn_forward_infer(cudaStream_t st, const BnShape *s, const BnGrid *g,
                                            const float *x, const float *gamma, const float *beta,
                                            const float *running_mean, const float *running_var,
                                            const float *z, int relu, float *y)
{
    const dim3 grid((unsigned)g->splits, (unsigned)s->c);
    const int add = z != NULL;
    BN_LAUNCH(bn_infer_kernel, g->vec, relu, add, grid, st, *g, *s, x, gamma, beta, running_mean,
              running_var, z, y);
    return cudaGetLastError();
}

/* kernel<vec, a><<<grid, BN_BLOCK_THREADS, 0, st>>>(...) for the run-time vec and flag a */
#define BN_LAUNCH2(kernel, vec, a, grid, st, ...)                                                  \
    do {                                                                                           \
        if ((vec) == 4 && (a))                                                                     \
            kernel<4, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                          \
        else if ((vec) == 4)                                                                       \
            kernel<4, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                          \
        else if (a)                                                                                \
            kernel<1, 1><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                          \
        else                                                                                       \
            kernel<1, 0><<<grid, BN_BLOCK_THREADS, 0, st>>>(__VA_ARGS__);                          \
    } while (0)

extern "C" cudaError_t dtk_bn_backward(cudaStream_t st, const BnShape *s, const BnGrid *g,
                                       double *partials, const float *x, const float *gamma,
                                       const float *save_mean, const float *save_invstd,
                                       const float *act_y, const float *dy, float *dx, float *dz,
                                       float *dgamma, float *dbeta)
{
    const dim3 grid((unsigned)g->splits, (unsigned)s->c);
    const int act = act_y != NULL, has_dz = dz != NULL;
    BN_LAUNCH(bn_back_stats_kernel, g->vec, act, has_dz, grid, st, *g, s->c, x, save_mean, act_y,
              dy, dz, partials);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    /* with dz, the masked gradient is there: read it instead of dy and act_y */
    const float *gin = has_dz ? dz : dy;
    BN_LAUNCH2(bn_back_apply_kernel, g->vec, act && !has_dz, grid, st, *g, *s, x, gamma,
               save_mean, save_invstd, act_y, gin, partials, dx, dgamma, dbeta);
    return cudaGetLastError();
}
