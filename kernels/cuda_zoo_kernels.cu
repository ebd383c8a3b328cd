/* cuda_zoo_kernels.cu - dtbench's own CUDA kernels for the model-zoo layers (launchers in cuda_zoo.h):
 * max pooling with argmax (padded or not), average and global-average pooling, LRN, batch
 * normalisation, residual add, dropout, embedding, axpy.
 *
 * Each element's arithmetic is a function of cuda_elem.h, shared with the CPU-only test
 * tests/test_device_arith.c. Wherever the CPU backend (kernels/cpu_pool.c, cpu_norm.c, ...) adds terms one after
 * the other, the kernel adds the same terms in the same order (pooling windows, the LRN channel
 * window, the gathering backward passes, the embedding gradient), so those results are the CPU's
 * bit for bit; only the batch-norm statistics and the global average are reductions in another
 * order (double accumulators). No atomics: every result is deterministic. */
#include "cuda_elem.h"
#include "cuda_zoo.h"

#define THREADS 256

static unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return b ? (unsigned)b : 1u;
}

#define GRID_LOOP(i, n)                                                                           \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (size_t)gridDim.x * blockDim.x)

/* ---- axpy ----------------------------------------------------------------------------------- */

__global__ void axpy_kernel(size_t n, float alpha, const float *__restrict__ x,
                            float *__restrict__ y)
{
    GRID_LOOP(i, n) y[i] += alpha * x[i];
}

extern "C" cudaError_t dtz_axpy(cudaStream_t st, size_t n, float alpha, const float *x, float *y)
{
    if (n == 0) return cudaSuccess;
    axpy_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, alpha, x, y);
    return cudaGetLastError();
}

/* ---- max pooling with argmax ------------------------------------------------------------------ */

/* One thread per output: the window's positions in row-major order, strict > (the first maximum
 * stays), padding never wins; a window wholly in the padding gives 0 and argmax -1. */
__global__ void maxpool_fwd_kernel(PoolShape s, const float *__restrict__ x,
                                   float *__restrict__ y, int32_t *__restrict__ argmax)
{
    const size_t out_plane = (size_t)s.h_out * s.w_out, in_plane = (size_t)s.h_in * s.w_in;
    const size_t total = (size_t)s.batch * s.c * out_plane;
    GRID_LOOP(o, total) {
        const size_t pl = o / out_plane;
        const int oh = (int)(o % out_plane / s.w_out), ow = (int)(o % s.w_out);
        const float *xp = x + pl * in_plane;
        float m = -INFINITY;
        int32_t a = -1;
        for (int kh = 0; kh < s.k; kh++) {
            const int ih = oh * s.stride - s.pad + kh;
            if (ih < 0 || ih >= s.h_in) continue;
            for (int kw = 0; kw < s.k; kw++) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= s.w_in) continue;
                const float v = xp[(size_t)ih * s.w_in + iw];
                if (v > m) m = v, a = ih * s.w_in + iw;
            }
        }
        y[o] = a < 0 ? 0.0f : m;
        argmax[o] = a;
    }
}

/* One thread per input: the dy of every output whose maximum it is, in output order (the CPU
 * scatters in that order, so the sums agree bit for bit). */
__global__ void maxpool_bwd_kernel(PoolShape s, const int32_t *__restrict__ argmax,
                                   const float *__restrict__ dy, float *__restrict__ dx)
{
    const size_t out_plane = (size_t)s.h_out * s.w_out, in_plane = (size_t)s.h_in * s.w_in;
    const size_t total = (size_t)s.batch * s.c * in_plane;
    GRID_LOOP(i, total) {
        const size_t pl = i / in_plane;
        const int ih = (int)(i % in_plane / s.w_in), iw = (int)(i % s.w_in);
        const int32_t me = ih * s.w_in + iw;
        int h0, h1, w0, w1;
        dt_outputs_of(ih, s.stride, s.pad, s.k, s.h_out, &h0, &h1);
        dt_outputs_of(iw, s.stride, s.pad, s.k, s.w_out, &w0, &w1);
        float acc = 0.0f;
        for (int oh = h0; oh < h1; oh++)
            for (int ow = w0; ow < w1; ow++) {
                const size_t o = pl * out_plane + (size_t)oh * s.w_out + ow;
                if (argmax[o] == me) acc += dy[o];
            }
        dx[i] = acc;
    }
}

extern "C" cudaError_t dtz_maxpool_forward(cudaStream_t st, const PoolShape *s, const float *x,
                                           float *y, int32_t *argmax)
{
    size_t total = (size_t)s->batch * s->c * s->h_out * s->w_out;
    if (total == 0) return cudaSuccess;
    maxpool_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, argmax);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_maxpool_backward(cudaStream_t st, const PoolShape *s,
                                            const int32_t *argmax, const float *dy, float *dx)
{
    size_t total = (size_t)s->batch * s->c * s->h_in * s->w_in;
    if (total == 0) return cudaSuccess;
    maxpool_bwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, argmax, dy, dx);
    return cudaGetLastError();
}

/* ---- average pooling (padding counts as zeros) ----------------------------------------------- */

__global__ void avgpool_fwd_kernel(PoolShape s, const float *__restrict__ x,
                                   float *__restrict__ y)
{
    const size_t out_plane = (size_t)s.h_out * s.w_out, in_plane = (size_t)s.h_in * s.w_in;
    const size_t total = (size_t)s.batch * s.c * out_plane;
    const float inv = dt_avgpool_inv(s.k);
    GRID_LOOP(o, total) {
        const size_t pl = o / out_plane;
        const int oh = (int)(o % out_plane / s.w_out), ow = (int)(o % s.w_out);
        const float *xp = x + pl * in_plane;
        int h0, h1, w0, w1;
        dt_window(oh, s.stride, s.pad, s.k, s.h_in, &h0, &h1);
        dt_window(ow, s.stride, s.pad, s.k, s.w_in, &w0, &w1);
        float sum = 0.0f;
        for (int ih = h0; ih < h1; ih++)
            for (int iw = w0; iw < w1; iw++)
                sum += xp[(size_t)ih * s.w_in + iw];
        y[o] = sum * inv;
    }
}

__global__ void avgpool_bwd_kernel(PoolShape s, const float *__restrict__ dy,
                                   float *__restrict__ dx)
{
    const size_t out_plane = (size_t)s.h_out * s.w_out, in_plane = (size_t)s.h_in * s.w_in;
    const size_t total = (size_t)s.batch * s.c * in_plane;
    const float inv = dt_avgpool_inv(s.k);
    GRID_LOOP(i, total) {
        const size_t pl = i / in_plane;
        const int ih = (int)(i % in_plane / s.w_in), iw = (int)(i % s.w_in);
        int h0, h1, w0, w1;
        dt_outputs_of(ih, s.stride, s.pad, s.k, s.h_out, &h0, &h1);
        dt_outputs_of(iw, s.stride, s.pad, s.k, s.w_out, &w0, &w1);
        float acc = 0.0f;
        for (int oh = h0; oh < h1; oh++)
            for (int ow = w0; ow < w1; ow++)
                acc += dy[pl * out_plane + (size_t)oh * s.w_out + ow] * inv;
        dx[i] = acc;
    }
}

extern "C" cudaError_t dtz_avgpool_forward(cudaStream_t st, const PoolShape *s, const float *x,
                                           float *y)
{
    size_t total = (size_t)s->batch * s->c * s->h_out * s->w_out;
    if (total == 0) return cudaSuccess;
    avgpool_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_avgpool_backward(cudaStream_t st, const PoolShape *s,
                                            const float *dy, float *dx)
{
    size_t total = (size_t)s->batch * s->c * s->h_in * s->w_in;
    if (total == 0) return cudaSuccess;
    avgpool_bwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, dy, dx);
    return cudaGetLastError();
}

/* ---- global average pooling ------------------------------------------------------------------ */

/* One thread per plane, the CPU's 8 interleaved partial sums (cpu_vsum), so the mean is the
 * CPU's bit for bit; planes are small (7x7 in ResNet-50, 1x1..7x7 in GoogLeNet). */
__global__ void gap_fwd_kernel(size_t planes, size_t plane, const float *__restrict__ x,
                               float *__restrict__ y)
{
    const float inv = 1.0f / (float)plane;
    GRID_LOOP(pl, planes) {
        const float *p = x + pl * plane;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        size_t i = 0;
        for (; i + 8 <= plane; i += 8)
            for (int j = 0; j < 8; j++) acc[j] += p[i + j];
        float sum = 0.0f;
        for (int j = 0; j < 8; j++) sum += acc[j];
        for (; i < plane; i++) sum += p[i];
        y[pl] = sum * inv;
    }
}

__global__ void gap_bwd_kernel(size_t planes, size_t plane, const float *__restrict__ dy,
                               float *__restrict__ dx)
{
    const float inv = 1.0f / (float)plane;
    GRID_LOOP(i, planes * plane) dx[i] = dy[i / plane] * inv;
}

extern "C" cudaError_t dtz_global_avgpool_forward(cudaStream_t st, size_t planes, size_t plane,
                                                  const float *x, float *y)
{
    if (planes == 0 || plane == 0) return cudaSuccess;
    gap_fwd_kernel<<<blocks_for(planes), THREADS, 0, st>>>(planes, plane, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_global_avgpool_backward(cudaStream_t st, size_t planes, size_t plane,
                                                   const float *dy, float *dx)
{
    if (planes == 0 || plane == 0) return cudaSuccess;
    gap_bwd_kernel<<<blocks_for(planes * plane), THREADS, 0, st>>>(planes, plane, dy, dx);
    return cudaGetLastError();
}

/* ---- LRN (own kernels: the CPU backend's window and formula exactly) ------------------------- */

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

extern "C" cudaError_t dtz_lrn_forward(cudaStream_t st, const LrnShape *s, const float *x,
                                       float *y, float *scale)
{
    size_t total = (size_t)s->batch * s->c * s->h * s->w;
    if (total == 0) return cudaSuccess;
    lrn_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, scale);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_lrn_backward(cudaStream_t st, const LrnShape *s, const float *x,
                                        const float *y, const float *scale, const float *dy,
                                        float *dx)
{
    size_t total = (size_t)s->batch * s->c * s->h * s->w;
    if (total == 0) return cudaSuccess;
    lrn_bwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, scale, dy, dx);
    return cudaGetLastError();
}

/* ---- residual add, dropout, embedding -------------------------------------------------------- */

__global__ void add_kernel(size_t n, const float *a, const float *b, float *y)
{
    GRID_LOOP(i, n) y[i] = a[i] + b[i]; /* y may alias a or b: each element read before written */
}

extern "C" cudaError_t dtz_add(cudaStream_t st, size_t n, const float *a, const float *b, float *y)
{
    if (n == 0) return cudaSuccess;
    add_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, a, b, y);
    return cudaGetLastError();
}

__global__ void dropout_fwd_kernel(DropoutShape s, const float *__restrict__ x,
                                   float *__restrict__ y, uint8_t *__restrict__ mask)
{
    const float keep_scale = dt_dropout_scale(s.rate);
    GRID_LOOP(e, (size_t)s.batch * s.size) {
        const size_t i = e / s.size, j = e % s.size;
        const uint64_t key = dt_dropout_key(s.seed, s.first_sample + (uint64_t)i);
        const int keep = dt_dropout_keep(key, (uint64_t)j, s.rate);
        mask[e] = (uint8_t)keep;
        y[e] = keep ? x[e] * keep_scale : 0.0f;
    }
}

__global__ void dropout_bwd_kernel(DropoutShape s, const uint8_t *__restrict__ mask,
                                   const float *__restrict__ dy, float *__restrict__ dx)
{
    const float keep_scale = dt_dropout_scale(s.rate);
    GRID_LOOP(e, (size_t)s.batch * s.size) dx[e] = mask[e] ? dy[e] * keep_scale : 0.0f;
}

extern "C" cudaError_t dtz_dropout_forward(cudaStream_t st, const DropoutShape *s, const float *x,
                                           float *y, uint8_t *mask)
{
    size_t n = (size_t)s->batch * s->size;
    if (n == 0) return cudaSuccess;
    dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, x, y, mask);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_dropout_backward(cudaStream_t st, const DropoutShape *s,
                                            const uint8_t *mask, const float *dy, float *dx)
{
    size_t n = (size_t)s->batch * s->size;
    if (n == 0) return cudaSuccess;
    dropout_bwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, mask, dy, dx);
    return cudaGetLastError();
}

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

extern "C" cudaError_t dtz_embedding_forward(cudaStream_t st, const EmbeddingShape *s,
                                             const float *ids, const float *w, float *y)
{
    size_t n = (size_t)s->rows * s->dim;
    if (n == 0) return cudaSuccess;
    embed_fwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, ids, w, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtz_embedding_backward(cudaStream_t st, const EmbeddingShape *s,
                                              const float *ids, const float *dy, float *dw)
{
    cudaError_t e = cudaMemsetAsync(dw, 0, (size_t)s->vocab * s->dim * sizeof(float), st);
    if (e != cudaSuccess || s->rows <= 0 || s->dim <= 0) return e;
    embed_bwd_kernel<<<blocks_for((size_t)s->dim), THREADS, 0, st>>>(*s, ids, dy, dw);
    return cudaGetLastError();
}
