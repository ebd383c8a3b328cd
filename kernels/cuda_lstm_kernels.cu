/* cuda_lstm_kernels.cu - the pointwise kernels of the LSTM layer on the GPU (launchers in cuda_zoo.h);
 * the GEMMs are cuBLAS calls in kernels/cuda_lstm.c. Layouts are the CPU backend's
 * (kernels/cpu_recurrent.c): gates[B, T, 4H] in gate order i, f, g, o; cell[B, T, H]; rows n*T + t.
 * The cell arithmetic is cuda_elem.h's dt_lstm_cell / dt_lstm_cell_back, which the CPU-only test
 * checks bit for bit against the CPU backend's cell. */
#include "cuda_elem.h"
#include "cuda_zoo.h"

#define THREADS 256

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return b ? (unsigned)b : 1u;
}

/* gates[r, :] = b for every row r < rows */
__global__ void rows_set_kernel(size_t rows, int g, const float *__restrict__ b,
                                float *__restrict__ gates)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * (size_t)g;
         i += (size_t)gridDim.x * blockDim.x)
        gates[i] = b[i % (size_t)g];
}

extern "C" cudaError_t dtl_rows_set(cudaStream_t st, size_t rows, int g, const float *b,
                                    float *gates)
{
    if (rows == 0 || g <= 0) return cudaSuccess;
    rows_set_kernel<<<blocks_for(rows * (size_t)g), THREADS, 0, st>>>(rows, g, b, gates);
    return cudaGetLastError();
}

/* Step t of every sample: one thread per (n, j). */
__global__ void cell_fwd_kernel(LstmShape s, int t, float *__restrict__ gates,
                                float *__restrict__ cell, float *__restrict__ y)
{
    const int H = s.hidden, T = s.seq, G = 4 * H;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (size_t)s.batch * H;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t n = e / H, j = e % H, row = n * T + t;
        float *g = gates + row * G;
        const float c_prev = t > 0 ? cell[(row - 1) * H + j] : 0.0f;
        float h;
        cell[row * H + j] = dt_lstm_cell(&g[j], &g[H + j], &g[2 * H + j], &g[3 * H + j], c_prev, &h);
        y[row * H + j] = h;
    }
}

extern "C" cudaError_t dtl_cell_forward(cudaStream_t st, const LstmShape *s, int t, float *gates,
                                        float *cell, float *y)
{
    size_t n = (size_t)s->batch * s->hidden;
    if (n == 0) return cudaSuccess;
    cell_fwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, t, gates, cell, y);
    return cudaGetLastError();
}

/* Step t back: dh = dy + dh_rec (dh_rec absent at the last step), dcell carried in place. */
__global__ void cell_bwd_kernel(LstmShape s, int t, const float *__restrict__ gates,
                                const float *__restrict__ cell, const float *__restrict__ dy,
                                const float *__restrict__ dh_rec, float *__restrict__ dcell,
                                float *__restrict__ dgates)
{
    const int H = s.hidden, T = s.seq, G = 4 * H;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < (size_t)s.batch * H;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t n = e / H, j = e % H, row = n * T + t;
        const float *a = gates + row * G;
        float *dg = dgates + row * G;
        const float c_prev = t > 0 ? cell[(row - 1) * H + j] : 0.0f;
        const float dh = dy[row * H + j] + (t < T - 1 ? dh_rec[n * H + j] : 0.0f);
        dcell[e] = dt_lstm_cell_back(a[j], a[H + j], a[2 * H + j], a[3 * H + j],
                                     cell[row * H + j], c_prev, dh, dcell[e], &dg[j], &dg[H + j],
                                     &dg[2 * H + j], &dg[3 * H + j]);
    }
}

extern "C" cudaError_t dtl_cell_backward(cudaStream_t st, const LstmShape *s, int t,
                                         const float *gates, const float *cell, const float *dy,
                                         const float *dh_rec, float *dcell, float *dgates)
{
    size_t n = (size_t)s->batch * s->hidden;
    if (n == 0) return cudaSuccess;
    cell_bwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, t, gates, cell, dy, dh_rec, dcell,
                                                       dgates);
    return cudaGetLastError();
}
