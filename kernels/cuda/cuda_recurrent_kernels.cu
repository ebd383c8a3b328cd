/* cuda_recurrent_kernels.cu - the language-model layers' own kernels (launchers in
 * cuda_kernels.h): the embedding lookup and its gradient (summed per column in row order, no
 * atomics), and the pointwise parts of the LSTM layer; the GEMMs are cuBLAS calls in
 * kernels/cuda/cuda_recurrent.c. Layouts are the CPU backend's (kernels/cpu/cpu_recurrent.c):
 * gates[B, T, 4H] in gate order i, f, g, o; cell[B, T, H]; rows n*T + t. The cell arithmetic is
 * cuda_elem.h's dt_lstm_cell / dt_lstm_cell_back, which the CPU-only test checks bit for bit
 * against the CPU backend's cell. */
#include "cuda_elem.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

/* ---- embedding ------------------------------------------------------------------------------- */

__global__ void embed_fwd_kernel(EmbeddingShape s, const float *__restrict__ ids,
                                 const float *__restrict__ w, float *__restrict__ y)
{
    GRID_LOOP(e, (size_t)s.rows * s.dim) {
        const size_t r = e / s.dim, d = e % s.dim;
        const int t = dt_token(ids[r], s.vocab);
        y[e] = t >= 0 ? w[(size_t)t * s.dim + d] : 0.0f;
    }
}

/* One thread per column d of dW: the rows in order, as the CPU adds them (no atomics). dW was
 * zeroed by the caller. */
__global__ void embed_bwd_kernel(EmbeddingShape s, const float *__restrict__ ids,
                                 const float *__restrict__ dy, float *__restrict__ dw)
{
    GRID_LOOP(d, (size_t)s.dim) {
        for (int r = 0; r < s.rows; r++) {
            const int t = dt_token(ids[r], s.vocab);
            if (t >= 0) dw[(size_t)t * s.dim + d] += dy[(size_t)r * s.dim + d];
        }
    }
}

extern "C" cudaError_t dtk_embedding_forward(cudaStream_t st, const EmbeddingShape *s,
                                             const float *ids, const float *w, float *y)
{
    size_t n = (size_t)s->rows * s->dim;
    if (n == 0) return cudaSuccess;
    embed_fwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, ids, w, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_embedding_backward(cudaStream_t st, const EmbeddingShape *s,
                                              const float *ids, const float *dy, float *dw)
{
    cudaError_t e = cudaMemsetAsync(dw, 0, (size_t)s->vocab * s->dim * sizeof(float), st);
    if (e != cudaSuccess || s->rows <= 0 || s->dim <= 0) return e;
    embed_bwd_kernel<<<blocks_for((size_t)s->dim), THREADS, 0, st>>>(*s, ids, dy, dw);
    return cudaGetLastError();
}

/* ---- LSTM cell ------------------------------------------------------------------------------- */

/* gates[r, :] = b for every row r < rows */
__global__ void rows_set_kernel(size_t rows, int g, const float *__restrict__ b,
                                float *__restrict__ gates)
{
    GRID_LOOP(i, rows * (size_t)g) gates[i] = b[i % (size_t)g];
}

extern "C" cudaError_t dtk_lstm_rows_set(cudaStream_t st, size_t rows, int g, const float *b,
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
    GRID_LOOP(e, (size_t)s.batch * H) {
        const size_t n = e / H, j = e % H, row = n * T + t;
        float *g = gates + row * G;
        const float c_prev = t > 0 ? cell[(row - 1) * H + j] : 0.0f;
        float h;
        cell[row * H + j] =
            dt_lstm_cell(&g[j], &g[H + j], &g[2 * H + j], &g[3 * H + j], c_prev, &h);
        y[row * H + j] = h;
    }
}

extern "C" cudaError_t dtk_lstm_cell_forward(cudaStream_t st, const LstmShape *s, int t,
                                             float *gates, float *cell, float *y)
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
    GRID_LOOP(e, (size_t)s.batch * H) {
        const size_t n = e / H, j = e % H, row = n * T + t;
        const float *a = gates + row * G;
        float *dg = dgates + row * G;
        const float c_prev = t > 0 ? cell[(row - 1) * H + j] : 0.0f;
        const float dh = dy[row * H + j] + (t < T - 1 ? dh_rec[n * H + j] : 0.0f);
        dcell[e] =
            dt_lstm_cell_back(a[j], a[H + j], a[2 * H + j], a[3 * H + j], cell[row * H + j], c_prev,
                              dh, dcell[e], &dg[j], &dg[H + j], &dg[2 * H + j], &dg[3 * H + j]);
    }
}

extern "C" cudaError_t dtk_lstm_cell_backward(cudaStream_t st, const LstmShape *s, int t,
                                              const float *gates, const float *cell,
                                              const float *dy, const float *dh_rec, float *dcell,
                                              float *dgates)
{
    size_t n = (size_t)s->batch * s->hidden;
    if (n == 0) return cudaSuccess;
    cell_bwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, t, gates, cell, dy, dh_rec, dcell,
                                                       dgates);
    return cudaGetLastError();
}
