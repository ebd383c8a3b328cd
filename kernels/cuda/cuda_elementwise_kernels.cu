/* cuda_elementwise_kernels.cu - the element-wise kernels (launchers in cuda_kernels.h): scale,
 * axpy, residual add and dropout (backend.h's counter-based mask: the GPU drops the units the CPU
 * drops). Per-element arithmetic: cuda_elem.h, checked on the host by tests/test_device_arith.c. */
#include "cuda_elem.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels.h"

/* ---- scale, axpy ----------------------------------------------------------------------------- */

__global__ void scale_kernel(size_t n, float *x, float s)
{
    GRID_LOOP(i, n) x[i] *= s;
}

/* cudaErrorInvalidDeviceFunction or cudaErrorNoKernelImageForDevice when none of the
 * architectures this file was compiled for (CUDA_ARCHS) runs on the current device. */
extern "C" cudaError_t dtk_image_check(void)
{
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, scale_kernel);
}

extern "C" cudaError_t dtk_scale(cudaStream_t st, size_t n, float *x, float s)
{
    if (n == 0) return cudaSuccess;
    scale_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, x, s);
    return cudaGetLastError();
}

__global__ void scale_by_kernel(size_t n, float *x, float s, const float *f)
{
    const float t = s * *f; /* the product the host would pass to scale_kernel */
    GRID_LOOP(i, n) x[i] *= t;
}

extern "C" cudaError_t dtk_scale_by(cudaStream_t st, size_t n, float *x, float s, const float *f)
{
    if (n == 0) return cudaSuccess;
    scale_by_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, x, s, f);
    return cudaGetLastError();
}

__global__ void axpy_kernel(size_t n, float alpha, const float *__restrict__ x,
                            float *__restrict__ y)
{
    GRID_LOOP(i, n) y[i] += alpha * x[i];
}

extern "C" cudaError_t dtk_axpy(cudaStream_t st, size_t n, float alpha, const float *x, float *y)
{
    if (n == 0) return cudaSuccess;
    axpy_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, alpha, x, y);
    return cudaGetLastError();
}

/* ---- residual add, dropout ------------------------------------------------------------------ */

__global__ void add_kernel(size_t n, const float *a, const float *b, float *y)
{
    GRID_LOOP(i, n) y[i] = a[i] + b[i]; /* y may alias a or b: each element read before written */
}

extern "C" cudaError_t dtk_add(cudaStream_t st, size_t n, const float *a, const float *b, float *y)
{
    if (n == 0) return cudaSuccess;
    add_kernel<<<blocks_for(n), THREADS, 0, st>>>(n, a, b, y);
    return cudaGetLastError();
}

__global__ void dropout_fwd_kernel(DropoutShape s, const float *__restrict__ x,
                                   float *__restrict__ y, uint8_t *__restrict__ mask)
{
    const float keep_scale = dt_dropout_scale(s.rate);
    const uint64_t first = s.first_sample + (s.origin ? *s.origin : 0); /* this step's */
    GRID_LOOP(e, (size_t)s.batch * s.size) {
        const size_t i = e / s.size, j = e % s.size;
        const uint64_t key = dt_dropout_key(s.seed, first + (uint64_t)i);
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

extern "C" cudaError_t dtk_dropout_forward(cudaStream_t st, const DropoutShape *s, const float *x,
                                           float *y, uint8_t *mask)
{
    size_t n = (size_t)s->batch * s->size;
    if (n == 0) return cudaSuccess;
    dropout_fwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, x, y, mask);
    return cudaGetLastError();
}

extern "C" cudaError_t dtk_dropout_backward(cudaStream_t st, const DropoutShape *s,
                                            const uint8_t *mask, const float *dy, float *dx)
{
    size_t n = (size_t)s->batch * s->size;
    if (n == 0) return cudaSuccess;
    dropout_bwd_kernel<<<blocks_for(n), THREADS, 0, st>>>(*s, mask, dy, dx);
    return cudaGetLastError();
}

/* ---- concatenation: a thread per unit of y (cuda_elem.h's dt_concat_at) ------------------- */

template <typename U>
__global__ void concat_kernel(DtConcat c, uint32_t n, U *__restrict__ y)
{
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < n; u += gridDim.x * blockDim.x) {
        int i;
        const size_t k = dt_concat_at(&c, u, &i);
        y[u] = ((const U *)c.part[i])[k];
    }
}
template <typename U>
__global__ void concat_back_kernel(DtConcat c, uint32_t n, const U *__restrict__ dy)
{
    for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < n; u += gridDim.x * blockDim.x) {
        int i;
        const size_t k = dt_concat_at(&c, u, &i);
        if (c.part[i]) ((U *)c.part[i])[k] = dy[u];
    }
}
template <typename U>
static void concat_launch(cudaStream_t st, const DtConcat *c, uint32_t n, void *y, int backward)
{
    if (backward)
        concat_back_kernel<U><<<blocks_for(n), THREADS, 0, st>>>(*c, n, (const U *)y);
    else
        concat_kernel<U><<<blocks_for(n), THREADS, 0, st>>>(*c, n, (U *)y);
}

extern "C" cudaError_t dtk_concat(cudaStream_t st, const DtConcat *c, size_t unit, size_t units,
                                  void *y, int backward)
{
    if (units == 0) return cudaSuccess;
    if (units > 0x7fffffffu) return cudaErrorInvalidValue; /* dt_concat_plan refuses those */
    const uint32_t n = (uint32_t)units;
    switch (unit) {
    case 16: concat_launch<uint4>(st, c, n, y, backward); break;
    case 8: concat_launch<uint2>(st, c, n, y, backward); break;
    case 4: concat_launch<uint32_t>(st, c, n, y, backward); break;
    case 2: concat_launch<uint16_t>(st, c, n, y, backward); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
