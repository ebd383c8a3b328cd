/* cuda_optim_kernels.cu - the loss and optimizer kernels (launchers in cuda_kernels.h): softmax
 * cross-entropy with its loss and accuracy, the SGD step and the AdamW step. Each mirrors the CPU
 * backend's arithmetic (kernels/cpu/cpu_optim.c) closely enough for the tolerances of
 * tests/test_cuda_kernels.c: double accumulators where the CPU uses them (softmax sums, the loss);
 * the SGD and AdamW steps per element are cuda_elem.h's, checked bit for bit on the host by
 * tests/test_device_arith.c. */
#include "cuda_elem.h" /* per-element arithmetic shared with tests/test_device_arith.c */
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

#include <math.h>

/* ---- softmax cross-entropy ------------------------------------------------------------------ */

/* The first maximum wins, as in the CPU backend's left-to-right scan: (v, j) beats (m, best)
 * when v > m, or v == m at a smaller index. */
__device__ static void argmax_merge(float &m, int &best, float v, int j)
{
    if (v > m || (v == m && j < best)) {
        m = v;
        best = j;
    }
}

/* Rows i = blockIdx.x, blockIdx.x + gridDim.x, ... of logits[n,c], one at a time per block:
 *   m = max_j z, S = sum_j exp(z_j - m) (double), loss_i = log S - (z_label - m),
 *   dlogits_j = exp(z_j - m) * (inv_n / S) - [j == label] * inv_n,
 *   hit_i = (first argmax == label).
 * The block's rows' losses are added in row order into row_loss[blockIdx.x] (double) and their
 * hits into row_hit[blockIdx.x]: a grid of min(n, scratch) blocks takes any number of rows
 * (a language model's batch * seq) with the scratch made at init, and the sums' order is fixed
 * by n and the scratch (one row per block, as before, up to the scratch's rows).
 * dlogits may be logits (in place, backend.h): every read of a row's logits happens before the
 * barriers that precede its first write (the label's logit is read at the row's start), and each
 * thread then writes only the elements it reads; hence no __restrict__ on the two.
 * A label outside [0, c) gives a NaN loss and no one-hot term. */
__global__ void xent_rows_kernel(int n, int c, const float *logits,
                                 const int32_t *__restrict__ labels, float *dlogits, float inv_n,
                                 double *__restrict__ row_loss, int *__restrict__ row_hit)
{
    __shared__ float s_max[THREADS];
    __shared__ int s_arg[THREADS];
    __shared__ double s_sum[THREADS];
    const int tid = threadIdx.x;
    double block_loss = 0.0;
    int block_hits = 0;
    for (int row = blockIdx.x; row < n; row += gridDim.x) {
        const float *z = logits + (size_t)row * c;
        const int label = labels[row];
        const int valid = label >= 0 && label < c;
        const float z_label = valid && tid == 0 ? z[label] : 0.0f; /* before any write */

        float m = -INFINITY;
        int best = 0x7fffffff;
        for (int j = tid; j < c; j += blockDim.x) argmax_merge(m, best, z[j], j);
        s_max[tid] = m, s_arg[tid] = best;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (tid < half) {
                float v = s_max[tid];
                int a = s_arg[tid];
                argmax_merge(v, a, s_max[tid + half], s_arg[tid + half]);
                s_max[tid] = v, s_arg[tid] = a;
            }
            __syncthreads();
        }
        m = s_max[0];
        best = s_arg[0];
        __syncthreads();

        double sum = 0.0;
        for (int j = tid; j < c; j += blockDim.x) sum += (double)expf(z[j] - m);
        s_sum[tid] = sum;
        __syncthreads();
        for (int half = blockDim.x / 2; half > 0; half /= 2) {
            if (tid < half) s_sum[tid] += s_sum[tid + half];
            __syncthreads();
        }
        sum = s_sum[0];

        if (dlogits) { /* each thread overwrites only the z[j] it reads here */
            float *d = dlogits + (size_t)row * c;
            const float scale = (float)(inv_n / sum);
            for (int j = tid; j < c; j += blockDim.x)
                d[j] = dt_xent_grad(expf(z[j] - m), scale, valid && j == label, inv_n);
        }
        if (tid == 0) {
            block_loss += valid ? log(sum) - (double)(z_label - m) : (double)NAN;
            block_hits += best == label;
        }
        __syncthreads(); /* the shared arrays are the next row's */
    }
    if (tid == 0) {
        row_loss[blockIdx.x] = block_loss;
        row_hit[blockIdx.x] = block_hits;
    }
}

/* One block: stats = {sum of row_loss[parts] / n, sum of row_hit[parts]}, in a fixed order
 * (deterministic). */
__global__ void xent_finish_kernel(int parts, int n, const double *__restrict__ row_loss,
                                   const int *__restrict__ row_hit, float *__restrict__ stats)
{
    __shared__ double s_loss[THREADS];
    __shared__ int s_hit[THREADS];
    const int tid = threadIdx.x;
    double l = 0.0;
    int h = 0;
    for (int i = tid; i < parts; i += blockDim.x) l += row_loss[i], h += row_hit[i];
    s_loss[tid] = l, s_hit[tid] = h;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (tid < half) s_loss[tid] += s_loss[tid + half], s_hit[tid] += s_hit[tid + half];
        __syncthreads();
    }
    if (tid == 0) {
        stats[0] = n > 0 ? (float)(s_loss[0] / n) : 0.0f;
        stats[1] = (float)s_hit[0];
    }
}

extern "C" cudaError_t dtk_softmax_xent(cudaStream_t st, int n, int c, const float *logits,
                                        const int32_t *labels, float *dlogits, float *stats,
                                        double *row_loss, int *row_hit, int scratch)
{
    const int parts = n < scratch ? n : scratch; /* blocks, each leaving one partial sum */
    if (n > 0 && c > 0 && parts > 0) {
        xent_rows_kernel<<<parts, THREADS, 0, st>>>(n, c, logits, labels, dlogits,
                                                    1.0f / (float)n, row_loss, row_hit);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    xent_finish_kernel<<<1, THREADS, 0, st>>>(c > 0 && parts > 0 ? parts : 0, n, row_loss,
                                              row_hit, stats);
    return cudaGetLastError();
}

/* ---- SGD -------------------------------------------------------------------------- */

__global__ void sgd_momentum_kernel(size_t n, float *__restrict__ p, const float *__restrict__ g,
                                    float *__restrict__ v, float lr, float momentum, float wd)
{
    GRID_LOOP(i, n) {
        float pi = p[i], vi = v[i];
        dt_sgd_momentum(&pi, g[i], &vi, lr, momentum, wd);
        v[i] = vi;
        p[i] = pi;
    }
}

__global__ void sgd_plain_kernel(size_t n, float *__restrict__ p, const float *__restrict__ g,
                                 float lr, float wd)
{
    GRID_LOOP(i, n) p[i] = dt_sgd_plain(p[i], g[i], lr, wd);
}

extern "C" cudaError_t dtk_sgd_update(cudaStream_t st, size_t n, float *p, const float *g, float *v,
                                      float lr, float momentum, float weight_decay)
{
    if (n == 0) return cudaSuccess;
    if (momentum != 0.0f)
        sgd_momentum_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, p, g, v, lr, momentum,
                                                               weight_decay);
    else
        sgd_plain_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, p, g, lr, weight_decay);
    return cudaGetLastError();
}

/* ---- AdamW ------------------------------------------------------------------------ */

__global__ void adamw_kernel(size_t n, float *__restrict__ p, const float *__restrict__ g,
                             float *__restrict__ m, float *__restrict__ v, float decay, float c1,
                             float b2, float c2, float step, float root2, float eps)
{
    GRID_LOOP(i, n) {
        float pi = p[i], mi = m[i], vi = v[i];
        dt_adamw(&pi, g[i], &mi, &vi, decay, c1, b2, c2, step, root2, eps);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi;
    }
}

extern "C" cudaError_t dtk_adamw_update(cudaStream_t st, size_t n, float *p, const float *g,
                                        float *m, float *v, const AdamWStep *a)
{
    if (n == 0) return cudaSuccess;
    /* the step's constants, as kernels/cpu/cpu_optim.c derives them (host arithmetic, one rounding
     * each; sqrtf is correctly rounded on both sides) */
    const float decay = 1.0f - a->lr * a->weight_decay, c1 = 1.0f - a->beta1;
    const float c2 = 1.0f - a->beta2, step = a->lr / a->bias1, root2 = sqrtf(a->bias2);
    adamw_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, p, g, m, v, decay, c1, a->beta2, c2, step,
                                                    root2, a->eps);
    return cudaGetLastError();
}
