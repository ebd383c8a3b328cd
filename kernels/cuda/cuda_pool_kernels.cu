/* cuda_pool_kernels.cu - the pooling kernels (launchers in cuda_kernels.h): max pooling with
 * argmax (padded or not), average and global-average pooling. Each window's terms are added in the
 * CPU backend's order (kernels/cpu/cpu_pool.c), in the gathering backward passes too, so the
 * results are the CPU's bit for bit; per-element arithmetic is cuda_elem.h's. No atomics:
 * deterministic. */
#include "cuda_elem.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

/* ---- max pooling with argmax --------------------------------------------------------------- */

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

extern "C" cudaError_t dtk_maxpool_forward(cudaStream_t st, const PoolShape *s, const float *x,
                                           float *y, int32_t *argmax)
{
    size_t total = (size_t)s->batch * s->c * s->h_out * s->w_out;
    if (total == 0) return cudaSuccess;
    maxpool_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y, argmax);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_maxpool_backward(cudaStream_t st, const PoolShape *s,
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
            for (int iw = w0; iw < w1; iw++) sum += xp[(size_t)ih * s.w_in + iw];
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

extern "C" cudaError_t dtk_avgpool_forward(cudaStream_t st, const PoolShape *s, const float *x,
                                           float *y)
{
    size_t total = (size_t)s->batch * s->c * s->h_out * s->w_out;
    if (total == 0) return cudaSuccess;
    avgpool_fwd_kernel<<<blocks_for(total), THREADS, 0, st>>>(*s, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_avgpool_backward(cudaStream_t st, const PoolShape *s, const float *dy,
                                            float *dx)
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

extern "C" cudaError_t dtk_global_avgpool_forward(cudaStream_t st, size_t planes, size_t plane,
                                                  const float *x, float *y)
{
    if (planes == 0 || plane == 0) return cudaSuccess;
    gap_fwd_kernel<<<blocks_for(planes), THREADS, 0, st>>>(planes, plane, x, y);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_global_avgpool_backward(cudaStream_t st, size_t planes, size_t plane,
                                                   const float *dy, float *dx)
{
    if (planes == 0 || plane == 0) return cudaSuccess;
    gap_bwd_kernel<<<blocks_for(planes * plane), THREADS, 0, st>>>(planes, plane, dy, dx);
    return cudaGetLastError();
}
