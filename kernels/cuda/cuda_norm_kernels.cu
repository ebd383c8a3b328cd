/* cuda_norm_kernels.cu - the normalisation kernels (launchers in cuda_kernels.h): LRN, and the
 * simple batch normalisation that tensors of 2^31 elements or more fall back to (the fast one:
 * cuda_batchnorm_kernels.cu). The simple batch norm follows the CPU backend's definitions
 * exactly (backend.h's BnShape, kernels/cpu/cpu_norm.c): two passes for the statistics (mean, then
 * squared deviations: no cancellation), biased variance to normalise, UNBIASED variance into the
 * running statistics, PyTorch's momentum; inference from the running statistics. One block per
 * channel, 64-bit indices; each thread sums its elements in double, the block adds the threads'
 * sums in double in a fixed tree (deterministic, but in another order than the CPU's lanes: the
 * GPU test compares with a tolerance). LRN: the CPU backend's window and formula exactly (cuDNN's
 * LRN is not used: its window for even sizes and its scaling are its own). Per-element
 * arithmetic: cuda_elem.h. */
#include "cuda_elem.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

#define BN_THREADS 256

/* Block-wide sum of v in double (every thread gets the result). */
__device__ static double block_sum(double v, double *shared)
{
    const int tid = threadIdx.x;
    shared[tid] = v;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (tid < half) shared[tid] += shared[tid + half];
        __syncthreads();
    }
    const double r = shared[0];
    __syncthreads();
    return r;
}

/* Element e of channel c: sample e / sp, pixel e % sp. */
__device__ static inline size_t bn_index(const BnShape &s, int c, size_t e)
{
    const size_t sp = (size_t)s.spatial;
    return (e / sp) * (size_t)s.c * sp + (size_t)c * sp + e % sp;
}

__global__ void bn_train_kernel(BnShape s, const float *__restrict__ x,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                float *__restrict__ y, float *__restrict__ save_mean,
                                float *__restrict__ save_invstd, float *__restrict__ running_mean,
                                float *__restrict__ running_var)
{
    __shared__ double sh[BN_THREADS];
    const int c = blockIdx.x;
    const size_t count = (size_t)s.batch * s.spatial;
    double part = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) part += x[bn_index(s, c, e)];
    const double sum = block_sum(part, sh);
    const float mean = (float)(sum / (double)count);
    part = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const float d = x[bn_index(s, c, e)] - mean;
        part += d * d;
    }
    const double sq = block_sum(part, sh);
    const double var = sq / (double)count;
    const float invstd = (float)(1.0 / sqrt(var + (double)s.eps));
    if (threadIdx.x == 0) {
        save_mean[c] = mean;
        save_invstd[c] = invstd;
        const double unbiased = count > 1 ? sq / (double)(count - 1) : var;
        running_mean[c] = dt_bn_running(running_mean[c], s.momentum, mean);
        running_var[c] = dt_bn_running(running_var[c], s.momentum, (float)unbiased);
    }
    float mul, add;
    dt_bn_coeffs(gamma[c], beta[c], mean, invstd, &mul, &add);
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t i = bn_index(s, c, e);
        y[i] = dt_bn_affine(x[i], mul, add);
    }
}

__global__ void bn_infer_kernel(BnShape s, const float *__restrict__ x,
                                const float *__restrict__ gamma, const float *__restrict__ beta,
                                const float *__restrict__ running_mean,
                                const float *__restrict__ running_var, float *__restrict__ y)
{
    const size_t sp = (size_t)s.spatial, total = (size_t)s.batch * s.c * sp;
    GRID_LOOP(i, total) {
        const int c = (int)(i / sp % (size_t)s.c);
        float mul, add;
        dt_bn_coeffs(gamma[c], beta[c], running_mean[c], dt_bn_infer_invstd(running_var[c], s.eps),
                     &mul, &add);
        y[i] = dt_bn_affine(x[i], mul, add);
    }
}

/* dbeta = sum dy, dgamma = sum dy (x - mean) * invstd, dx = k (dy - m_dy - (x - mean) m_xdy) */
__global__ void bn_backward_kernel(BnShape s, const float *__restrict__ x,
                                   const float *__restrict__ gamma,
                                   const float *__restrict__ save_mean,
                                   const float *__restrict__ save_invstd,
                                   const float *__restrict__ dy, float *__restrict__ dx,
                                   float *__restrict__ dgamma, float *__restrict__ dbeta)
{
    __shared__ double sh[BN_THREADS];
    const int c = blockIdx.x;
    const size_t count = (size_t)s.batch * s.spatial;
    const float mean = save_mean[c], invstd = save_invstd[c];
    double pa = 0.0, pd = 0.0;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t i = bn_index(s, c, e);
        pa += dy[i];
        pd += dy[i] * (x[i] - mean);
    }
    const double sum_dy = block_sum(pa, sh);
    const double sum_dy_dev = block_sum(pd, sh);
    if (threadIdx.x == 0) {
        dbeta[c] = (float)sum_dy;
        dgamma[c] = (float)(sum_dy_dev * invstd);
    }
    const float k = gamma[c] * invstd;
    const float m_dy = (float)(sum_dy / (double)count);
    const float m_xdy = (float)(sum_dy_dev / (double)count) * invstd * invstd;
    for (size_t e = threadIdx.x; e < count; e += blockDim.x) {
        const size_t i = bn_index(s, c, e);
        dx[i] = dt_bn_back(k, dy[i], m_dy, x[i], mean, m_xdy);
    }
}

extern "C" cudaError_t dtk_bn_forward_train_simple(cudaStream_t st, const BnShape *s,
                                                   const float *x, const float *gamma,
                                                   const float *beta, float *y, float *save_mean,
                                                   float *save_invstd, float *running_mean,
                                                   float *running_var)
{
    if (s->c <= 0 || s->batch <= 0 || s->spatial <= 0) return cudaSuccess;
    bn_train_kernel<<<s->c, BN_THREADS, 0, st>>>(*s, x, gamma, beta, y, save_mean, save_invstd,
                                                 running_mean, running_var);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_bn_forward_infer_simple(cudaStream_t st, const BnShape *s,
                                                   const float *x, const float *gamma,
                                                   const float *beta, const float *running_mean,
                                                   const float *running_var, float *y)
{
    size_t total = (size_t)s->batch * s->c * s->spatial;
    if (total == 0) return cudaSuccess;
    size_t blocks = (total + BN_THREADS - 1) / BN_THREADS;
    if (blocks > 65535u * 8u) blocks = 65535u * 8u;
    bn_infer_kernel<<<(unsigned)blocks, BN_THREADS, 0, st>>>(*s, x, gamma, beta, running_mean,
                                                             running_var, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_bn_backward_simple(cudaStream_t st, const BnShape *s, const float *x,
                                              const float *gamma, const float *save_mean,
                                              const float *save_invstd, const float *dy, float *dx,
                                              float *dgamma, float *dbeta)
{
    if (s->c <= 0) return cudaSuccess;
    bn_backward_kernel<<<s->c, BN_THREADS, 0, st>>>(*s, x, gamma, save_mean, save_invstd, dy, dx,
                                                    dgamma, dbeta);
    return cudaGetLastError();
}

/* ---- LRN ------------------------------------------------------------------------------------- */

__global__ void lrn_fwd_kernel(LrnShape s, const float *__restrict__ x, float *__restrict__ y,
                               float *__restrict__ scale)
{
    const size_t hw = (size_t)s.h * s.w, chw = (size_t)s.c * hw, total = (size_t)s.batch * chw;
    const int before = s.size / 2, after = (s.size - 1) / 2;
    const float a = s.alpha / (float)s.size;
    GRID_LOOP(i, total) {
        const size_t n = i / chw, px = i % hw;
        const int c = (int)(i % chw / hw);
        const int c0 = c - before < 0 ? 0 : c - before;
        const int c1 = c + after >= s.c ? s.c - 1 : c + after;
        float sum = 0.0f;
        for (int cc = c0; cc <= c1; cc++) {
            const float v = x[n * chw + cc * hw + px];
            sum += v * v;
        }
        const float sv = dt_lrn_scale(s.bias, a, sum);
        scale[i] = sv;
        y[i] = x[i] * dt_pow_neg_beta(sv, s.beta);
    }
}

__global__ void lrn_bwd_kernel(LrnShape s, const float *__restrict__ x, const float *__restrict__ y,
                               const float *__restrict__ scale, const float *__restrict__ dy,
                               float *__restrict__ dx)
{
    const size_t hw = (size_t)s.h * s.w, chw = (size_t)s.c * hw, total = (size_t)s.batch * chw;
    const int before = s.size / 2, after = (s.size - 1) / 2;
    const float k = 2.0f * s.alpha * s.beta / (float)s.size;
    GRID_LOOP(i, total) {
        const size_t n = i / chw, px = i % hw;
        const int c = (int)(i % chw / hw);
        const int c0 = c - after < 0 ? 0 : c - after;
        const int c1 = c + before >= s.c ? s.c - 1 : c + before;
        float sum = 0.0f;
        for (int cc = c0; cc <= c1; cc++) {
            const size_t j = n * chw + cc * hw + px;
            sum += dt_lrn_back_term(dy[j], y[j], scale[j]);
        }
        dx[i] = dt_lrn_back(dy[i], scale[i], x[i], sum, k, s.beta);
    }
}

extern "C" cudaError_t dtk_lrn_forward(cudaStream_t st, const LrnShape *s, const float *x, float *y,
                                       float *scale)
{
    size_t total = (size_t)s->batch * s->c * s->h * s->w;
    if (total == 0) return cudaSuccess;
    lrn_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_lrn_backward(cudaStream_t st, const LrnShape *s, const float *x,
                                        const float *y, const float *scale, const float *dy,
                                        float *dx)
{
    size_t total = (size_t)s->batch * s->c * s->h * s->w;
    if (total == 0) return cudaSuccess;
    lrn_bwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, scale, dy, dx);
    return cudaGetLastError();
}
