/* cuda_gemm_kernels.cu - the fully connected layer's own kernels (launchers in cuda_kernels.h):
 * bias broadcast and bias gradient; the products are cuBLAS calls (kernels/cuda/cuda_gemm.c). The
 * bias gradient sums rows in the CPU backend's order, so it is the CPU's bit for bit. */
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

/* ---- fully connected bias ------------------------------------------------------------------- */

__global__ void bias_add_kernel(size_t total, int out, const float *__restrict__ b,
                                float *__restrict__ y)
{
    GRID_LOOP(i, total) y[i] += b[i % (size_t)out];
}

extern "C" cudaError_t dtk_bias_add(cudaStream_t st, int n, int out, const float *b, float *y)
{
    size_t total = (size_t)n * (size_t)out;
    if (total == 0) return cudaSuccess;
    bias_add_kernel<<<blocks_for(total), THREADS, 0, st>>>(total, out, b, y);
    return cudaGetLastError();
}

/* One thread per output feature; consecutive threads read consecutive columns (coalesced). */
__global__ void bias_grad_kernel(int n, int out, const float *__restrict__ dy,
                                 float *__restrict__ db)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    float acc = 0.0f;
    if (n > 0) acc = dy[o];
    for (int i = 1; i < n; i++) acc += dy[(size_t)i * out + o];
    db[o] = acc;
}

extern "C" cudaError_t dtk_bias_grad(cudaStream_t st, int n, int out, const float *dy, float *db)
{
    if (out <= 0) return cudaSuccess;
    bias_grad_kernel<<<(out + THREADS - 1) / THREADS, THREADS, 0, st>>>(n, out, dy, db);
    return cudaGetLastError();
}
