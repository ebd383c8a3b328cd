/* cuda_act16_kernels.cu - the NHWC 16-bit kernels other than batch norm (launchers in
 * cuda_kernels16.h): conversions of the input, the filters and the fc's flattened input,
 * element-wise layers, pooling and LRN. Grid-stride loops, consecutive threads on consecutive
 * channels (coalesced): one thread per element, but pooling and LRN, where a thread takes a unit
 * of up to 8 channels of one pixel (16-byte accesses, 32-bit index arithmetic, the LRN window's
 * values computed once per unit). What a thread computes is cuda_elem16.h's, checked on the CPU
 * by tests/test_device_nhwc.c. No atomics: deterministic.
 *
 * Memory passes (one read or write of the pooled tensor's size each; argmax and the LRN's scale
 * are 32-bit: two passes of 16-bit values): max pooling forward reads x, writes y and argmax;
 * its backward reads argmax and dy once (gathered per input: 3x3 stride-2 windows overlap, each
 * input reads up to 4 outputs, from cache after the first) and writes dx. LRN forward reads x,
 * writes y and scale (4 passes); backward reads x, y, scale, dy, writes dx (6 passes). */
#include "cuda_elem16.h"
#include "cuda_grid.h" /* defines: THREADS, blocks_for, GRID_LOOP */
#include "cuda_kernels16.h"

/* kernel<HALF><<<blocks_for(n), THREADS, 0, st>>>(...) for the run-time half, then the status */
#define LAUNCH16(kernel, n, st, ...)                                                               \
    do {                                                                                           \
        if ((n) == 0) return cudaSuccess;                                                          \
        if (half)                                                                                  \
            kernel<1><<<blocks_for(n), THREADS, 0, st>>>(__VA_ARGS__);                            \
        else                                                                                       \
            kernel<0><<<blocks_for(n), THREADS, 0, st>>>(__VA_ARGS__);                            \
        return cudaGetLastError();                                                                 \
    } while (0)

/* The most channels a unit takes (8, 4 or 1) that c allows and every buffer's alignment (NULL:
 * none) allows for 16-bit values (a .. d) and for 32-bit ones (`wide`: argmax, the LRN's scale). */
static int unit_vec(int c, const void *a, const void *b, const void *d, const void *e,
                    const void *wide)
{
    const uintptr_t any = (uintptr_t)a | (uintptr_t)b | (uintptr_t)d | (uintptr_t)e;
    const uintptr_t w = (uintptr_t)wide;
    if (c % 8 == 0 && (any & 15) == 0 && (w & 15) == 0) return 8;
    if (c % 4 == 0 && (any & 7) == 0 && (w & 15) == 0) return 4;
    return 1;
}

/* kernel<HALF, V><<<blocks_for(units), THREADS, 0, st>>>(...) for the run-time half and vec */
#define LAUNCH_VEC(kernel, vec, units, st, ...)                                                    \
    do {                                                                                           \
        if ((units) == 0) return cudaSuccess;                                                      \
        const unsigned nb = blocks_for(units);                                                     \
        if (half && (vec) == 8)                                                                    \
            kernel<1, 8><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        else if (half && (vec) == 4)                                                               \
            kernel<1, 4><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        else if (half)                                                                             \
            kernel<1, 1><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        else if ((vec) == 8)                                                                       \
            kernel<0, 8><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        else if ((vec) == 4)                                                                       \
            kernel<0, 4><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        else                                                                                       \
            kernel<0, 1><<<nb, THREADS, 0, st>>>(__VA_ARGS__);                                     \
        return cudaGetLastError();                                                                 \
    } while (0)

/* ---- conversions ----------------------------------------------------------------------------- */

template <int HALF>
__global__ void input_kernel(size_t total, size_t c, size_t hw, const float *__restrict__ x,
                             dt16 *__restrict__ y)
{
    GRID_LOOP(o, total) y[o] = dt16_r(x[dt_nchw_of_nhwc(o, c, hw)], HALF);
}

extern "C" cudaError_t dth_input(cudaStream_t st, int half, size_t n, size_t c, size_t hw,
                                 const float *x, void *y)
{
    const size_t total = n * c * hw;
    LAUNCH16(input_kernel, total, st, total, c, hw, x, (dt16 *)y);
}

__global__ void to_nchw_kernel(size_t total, size_t c, size_t hw, const dt16 *__restrict__ x,
                               dt16 *__restrict__ y)
{
    GRID_LOOP(i, total) y[i] = x[dt_nhwc_of_nchw(i, c, hw)];
}
__global__ void to_nhwc_kernel(size_t total, size_t c, size_t hw, const dt16 *__restrict__ x,
                               dt16 *__restrict__ y)
{
    GRID_LOOP(o, total) y[o] = x[dt_nchw_of_nhwc(o, c, hw)];
}

extern "C" cudaError_t dth_to_nchw(cudaStream_t st, size_t n, size_t c, size_t hw, const void *x,
                                   void *y)
{
    const size_t total = n * c * hw;
    if (!total) return cudaSuccess;
    to_nchw_kernel<<<blocks_for(total), THREADS, 0, st>>>(total, c, hw, (const dt16 *)x,
                                                           (dt16 *)y);
    return cudaGetLastError();
}

extern "C" cudaError_t dth_to_nhwc(cudaStream_t st, size_t n, size_t c, size_t hw, const void *x,
                                   void *y)
{
    const size_t total = n * c * hw;
    if (!total) return cudaSuccess;
    to_nhwc_kernel<<<blocks_for(total), THREADS, 0, st>>>(total, c, hw, (const dt16 *)x,
                                                           (dt16 *)y);
    return cudaGetLastError();
}

/* block row blockIdx.y: convolution blockIdx.y's filter and bias */
template <int HALF>
__global__ void filters_kernel(const ConvW16 *__restrict__ table, const float *__restrict__ p,
                               dt16 *__restrict__ w16)
{
    const ConvW16 t = table[blockIdx.y];
    const size_t count = (size_t)t.k * t.c * t.khw;
    GRID_LOOP(o, count) {
        w16[t.w_dst + o] = dt16_r(p[t.w_src + dt_nchw_of_nhwc(o, (size_t)t.c, (size_t)t.khw)], HALF);
        if (t.b_src != SIZE_MAX && o < (size_t)t.k) w16[t.b_dst + o] = dt16_r(p[t.b_src + o], HALF);
    }
}

extern "C" cudaError_t dth_filters(cudaStream_t st, int half, const ConvW16 *table, int nconv,
                                   size_t largest, const float *params, void *w16)
{
    if (nconv <= 0 || largest == 0) return cudaSuccess;
    const dim3 grid(blocks_for(largest), (unsigned)nconv);
    if (half)
        filters_kernel<1><<<grid, THREADS, 0, st>>>(table, params, (dt16 *)w16);
    else
        filters_kernel<0><<<grid, THREADS, 0, st>>>(table, params, (dt16 *)w16);
    return cudaGetLastError();
}

template <int HALF>
__global__ void filter_grad_kernel(size_t total, size_t c, size_t khw, const dt16 *__restrict__ g,
                                   float *__restrict__ dw)
{
    GRID_LOOP(i, total) dw[i] = dt16_f(g[dt_nhwc_of_nchw(i, c, khw)], HALF);
}

extern "C" cudaError_t dth_filter_grad(cudaStream_t st, int half, int k, int c, int khw,
                                       const void *dw16, float *dw)
{
    const size_t total = (size_t)k * c * khw;
    LAUNCH16(filter_grad_kernel, total, st, total, (size_t)c, (size_t)khw, (const dt16 *)dw16, dw);
}

/* ---- element-wise ---------------------------------------------------------------------------- */

/* units of vec values (8: 16-byte accesses) where n and the buffers allow; in place allowed (y ==
 * x, dx == dy or y): a thread reads its unit whole before it writes it */
template <int HALF, int V> __global__ void relu_kernel(size_t units, const dt16 *x, dt16 *y)
{
    GRID_LOOP(u, units) dt16_relu_unit(x, y, u, V, HALF);
}
template <int HALF, int V>
__global__ void relu_back_kernel(size_t units, const dt16 *y, const dt16 *dy, dt16 *dx)
{
    GRID_LOOP(u, units) dt16_relu_back_unit(y, dy, dx, u, V, HALF);
}
template <int HALF, int V>
__global__ void add_kernel(size_t units, const dt16 *a, const dt16 *b, dt16 *y)
{
    GRID_LOOP(u, units) dt16_add_unit(a, b, y, u, V, HALF);
}

/* the most values a unit takes that n and the buffers allow */
static int flat_vec(size_t n, const void *a, const void *b, const void *c)
{
    const int vec = unit_vec(8, a, b, c, NULL, NULL);
    return n % (size_t)vec == 0 ? vec : n % 4 == 0 && vec >= 4 ? 4 : 1;
}

extern "C" cudaError_t dth_relu(cudaStream_t st, int half, size_t n, const void *x, void *y)
{
    const int vec = flat_vec(n, x, y, NULL);
    const size_t units = n / (size_t)vec;
    LAUNCH_VEC(relu_kernel, vec, units, st, units, (const dt16 *)x, (dt16 *)y);
}
extern "C" cudaError_t dth_relu_back(cudaStream_t st, int half, size_t n, const void *y,
                                     const void *dy, void *dx)
{
    const int vec = flat_vec(n, y, dy, dx);
    const size_t units = n / (size_t)vec;
    LAUNCH_VEC(relu_back_kernel, vec, units, st, units, (const dt16 *)y, (const dt16 *)dy,
               (dt16 *)dx);
}
extern "C" cudaError_t dth_add(cudaStream_t st, int half, size_t n, const void *a, const void *b,
                               void *y)
{
    const int vec = flat_vec(n, a, b, y);
    const size_t units = n / (size_t)vec;
    LAUNCH_VEC(add_kernel, vec, units, st, units, (const dt16 *)a, (const dt16 *)b, (dt16 *)y);
}

template <int HALF>
__global__ void bias_kernel(size_t total, int c, const float *__restrict__ b, dt16 *__restrict__ y)
{
    GRID_LOOP(i, total) {
        size_t ch;
        (void)dt16_divmod(i, (size_t)c, &ch);
        y[i] = dt16_bias(y[i], b[ch], HALF);
    }
}
template <int HALF>
__global__ void round_bias_kernel(size_t total, int c, const float *__restrict__ acc,
                                  const float *__restrict__ b, dt16 *__restrict__ y)
{
    GRID_LOOP(i, total) {
        size_t ch = 0;
        if (b) (void)dt16_divmod(i, (size_t)c, &ch);
        y[i] = dt16_r(b ? acc[i] + b[ch] : acc[i], HALF);
    }
}

extern "C" cudaError_t dth_bias(cudaStream_t st, int half, size_t rows, int c, const float *b,
                                void *y)
{
    const size_t total = rows * (size_t)c;
    LAUNCH16(bias_kernel, total, st, total, c, b, (dt16 *)y);
}
extern "C" cudaError_t dth_round_bias(cudaStream_t st, int half, size_t rows, int c,
                                      const float *acc, const float *b, void *y)
{
    const size_t total = rows * (size_t)c;
    LAUNCH16(round_bias_kernel, total, st, total, c, acc, b, (dt16 *)y);
}

template <int HALF>
__global__ void dropout_kernel(DropoutShape s, const dt16 *__restrict__ x, dt16 *__restrict__ y,
                               uint8_t *__restrict__ mask)
{
    const float keep_scale = dt_dropout_scale(s.rate);
    const uint64_t first = s.first_sample + (s.origin ? *s.origin : 0); /* this step's */
    GRID_LOOP(e, (size_t)s.batch * s.size) {
        const int keep = dt16_dropout_keep_at(&s, first, e);
        mask[e] = (uint8_t)keep;
        y[e] = dt16_dropout(x[e], keep, keep_scale, HALF);
    }
}
template <int HALF>
__global__ void dropout_back_kernel(DropoutShape s, const uint8_t *__restrict__ mask,
                                    const dt16 *__restrict__ dy, dt16 *__restrict__ dx)
{
    const float keep_scale = dt_dropout_scale(s.rate);
    GRID_LOOP(e, (size_t)s.batch * s.size) dx[e] = dt16_dropout(dy[e], mask[e], keep_scale, HALF);
}

extern "C" cudaError_t dth_dropout(cudaStream_t st, int half, const DropoutShape *s, const void *x,
                                   void *y, uint8_t *mask)
{
    const size_t n = (size_t)s->batch * s->size;
    LAUNCH16(dropout_kernel, n, st, *s, (const dt16 *)x, (dt16 *)y, mask);
}
extern "C" cudaError_t dth_dropout_back(cudaStream_t st, int half, const DropoutShape *s,
                                        const uint8_t *mask, const void *dy, void *dx)
{
    const size_t n = (size_t)s->batch * s->size;
    LAUNCH16(dropout_back_kernel, n, st, *s, mask, (const dt16 *)dy, (dt16 *)dx);
}

/* ---- pooling and LRN: one thread per unit of vec channels of one pixel ---------------------- */

template <int HALF, int V>
__global__ void maxpool_kernel(PoolShape s, size_t units, const dt16 *__restrict__ x,
                               dt16 *__restrict__ y, int32_t *__restrict__ argmax)
{
    GRID_LOOP(u, units) dt16_maxpool_unit(&s, V, HALF, x, (uint32_t)u, y, argmax);
}
template <int HALF, int V>
__global__ void maxpool_back_kernel(PoolShape s, size_t units, const int32_t *__restrict__ am,
                                    const dt16 *__restrict__ dy, dt16 *__restrict__ dx)
{
    GRID_LOOP(u, units) dt16_maxpool_back_unit(&s, V, HALF, am, dy, (uint32_t)u, dx);
}
template <int HALF, int V>
__global__ void avgpool_kernel(PoolShape s, size_t units, const dt16 *__restrict__ x,
                               dt16 *__restrict__ y)
{
    GRID_LOOP(u, units) dt16_avgpool_unit(&s, V, HALF, x, (uint32_t)u, y);
}
template <int HALF, int V>
__global__ void avgpool_back_kernel(PoolShape s, size_t units, const dt16 *__restrict__ dy,
                                    dt16 *__restrict__ dx)
{
    GRID_LOOP(u, units) dt16_avgpool_back_unit(&s, V, HALF, dy, (uint32_t)u, dx);
}

static size_t pool_out(const PoolShape *s)
{
    return (size_t)s->batch * s->c * s->h_out * s->w_out;
}
static size_t pool_in(const PoolShape *s)
{
    return (size_t)s->batch * s->c * s->h_in * s->w_in;
}

extern "C" cudaError_t dth_maxpool(cudaStream_t st, int half, const PoolShape *s, const void *x,
                                   void *y, int32_t *argmax)
{
    const int vec = unit_vec(s->c, x, y, NULL, NULL, argmax);
    const size_t units = pool_out(s) / (size_t)vec;
    if (units > UINT32_MAX) return cudaErrorInvalidValue; /* 32-bit positions */
    LAUNCH_VEC(maxpool_kernel, vec, units, st, *s, units, (const dt16 *)x, (dt16 *)y, argmax);
}
extern "C" cudaError_t dth_maxpool_back(cudaStream_t st, int half, const PoolShape *s,
                                        const int32_t *argmax, const void *dy, void *dx)
{
    const int vec = unit_vec(s->c, dy, dx, NULL, NULL, argmax);
    const size_t units = pool_in(s) / (size_t)vec;
    if (units > UINT32_MAX) return cudaErrorInvalidValue;
    LAUNCH_VEC(maxpool_back_kernel, vec, units, st, *s, units, argmax, (const dt16 *)dy,
                 (dt16 *)dx);
}
extern "C" cudaError_t dth_avgpool(cudaStream_t st, int half, const PoolShape *s, const void *x,
                                   void *y)
{
    const int vec = unit_vec(s->c, x, y, NULL, NULL, NULL);
    const size_t units = pool_out(s) / (size_t)vec;
    if (units > UINT32_MAX) return cudaErrorInvalidValue;
    LAUNCH_VEC(avgpool_kernel, vec, units, st, *s, units, (const dt16 *)x, (dt16 *)y);
}
extern "C" cudaError_t dth_avgpool_back(cudaStream_t st, int half, const PoolShape *s,
                                        const void *dy, void *dx)
{
    const int vec = unit_vec(s->c, dy, dx, NULL, NULL, NULL);
    const size_t units = pool_in(s) / (size_t)vec;
    if (units > UINT32_MAX) return cudaErrorInvalidValue;
    LAUNCH_VEC(avgpool_back_kernel, vec, units, st, *s, units, (const dt16 *)dy, (dt16 *)dx);
}

template <int HALF>
__global__ void gap_kernel(size_t total, size_t c, size_t plane, const dt16 *__restrict__ x,
                           dt16 *__restrict__ y)
{
    GRID_LOOP(o, total) y[o] = dt16_gap_fwd(x, o, c, plane, HALF);
}
template <int HALF, int V>
__global__ void gap_back_kernel(size_t units, size_t c, size_t plane, const dt16 *__restrict__ dy,
                                dt16 *__restrict__ dx)
{
    GRID_LOOP(u, units) dt16_gap_bwd_unit(dy, dx, u, c, plane, V, HALF);
}

extern "C" cudaError_t dth_gap(cudaStream_t st, int half, size_t n, size_t c, size_t plane,
                               const void *x, void *y)
{
    const size_t total = plane ? n * c : 0;
    LAUNCH16(gap_kernel, total, st, total, c, plane, (const dt16 *)x, (dt16 *)y);
}
extern "C" cudaError_t dth_gap_back(cudaStream_t st, int half, size_t n, size_t c, size_t plane,
                                    const void *dy, void *dx)
{
    const int vec = unit_vec((int)c, dy, dx, NULL, NULL, NULL);
    const size_t units = n * c * plane / (size_t)vec;
    LAUNCH_VEC(gap_back_kernel, vec, units, st, units, c, plane, (const dt16 *)dy, (dt16 *)dx);
}

/* ---- LRN ----------------------------------------------------------------------------------
 * Units of vec channels with the window's size a constant where it is GoogLeNet's and AlexNet's
 * (5, 3: the window's values stay in registers; 0: s.size at run time), or one thread per element
 * where the window is wider than a unit's span (dt16_lrn_fwd, dt16_lrn_bwd). */

template <int HALF, int V, int SIZE>
__global__ void lrn_unit_kernel(LrnShape s, size_t units, const dt16 *__restrict__ x,
                                dt16 *__restrict__ y, float *__restrict__ scale)
{
    GRID_LOOP(u, units)
    dt16_lrn_fwd_unit(&s, SIZE ? SIZE : s.size, V, HALF, x, (uint32_t)u, y, scale);
}
template <int HALF, int V, int SIZE>
__global__ void lrn_back_unit_kernel(LrnShape s, size_t units, const dt16 *__restrict__ x,
                                     const dt16 *__restrict__ y, const float *__restrict__ scale,
                                     const dt16 *__restrict__ dy, dt16 *__restrict__ dx)
{
    GRID_LOOP(u, units)
    dt16_lrn_bwd_unit(&s, SIZE ? SIZE : s.size, V, HALF, x, y, scale, dy, (uint32_t)u, dx);
}
template <int HALF>
__global__ void lrn_kernel(LrnShape s, size_t total, const dt16 *__restrict__ x,
                           dt16 *__restrict__ y, float *__restrict__ scale)
{
    GRID_LOOP(i, total) y[i] = dt16_lrn_fwd(&s, x, i, HALF, scale);
}
template <int HALF>
__global__ void lrn_back_kernel(LrnShape s, size_t total, const dt16 *__restrict__ x,
                                const dt16 *__restrict__ y, const float *__restrict__ scale,
                                const dt16 *__restrict__ dy, dt16 *__restrict__ dx)
{
    GRID_LOOP(i, total) dx[i] = dt16_lrn_bwd(&s, x, y, scale, dy, i, HALF);
}

/* lrn_unit_kernel<HALF, V, SIZE> with SIZE 5, 3 or 0 (any) */
template <int HALF, int V>
static void lrn_units(cudaStream_t st, const LrnShape *s, size_t units, const dt16 *x, dt16 *y,
                      float *scale)
{
    const unsigned nb = blocks_for(units);
    if (s->size == 5)
        lrn_unit_kernel<HALF, V, 5><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale);
    else if (s->size == 3)
        lrn_unit_kernel<HALF, V, 3><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale);
    else
        lrn_unit_kernel<HALF, V, 0><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale);
}
template <int HALF, int V>
static void lrn_back_units(cudaStream_t st, const LrnShape *s, size_t units, const dt16 *x,
                           const dt16 *y, const float *scale, const dt16 *dy, dt16 *dx)
{
    const unsigned nb = blocks_for(units);
    if (s->size == 5)
        lrn_back_unit_kernel<HALF, V, 5><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale, dy, dx);
    else if (s->size == 3)
        lrn_back_unit_kernel<HALF, V, 3><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale, dy, dx);
    else
        lrn_back_unit_kernel<HALF, V, 0><<<nb, THREADS, 0, st>>>(*s, units, x, y, scale, dy, dx);
}

template <int HALF>
static void lrn_any(cudaStream_t st, const LrnShape *s, int vec, size_t units, const dt16 *x,
                    dt16 *y, float *scale)
{
    if (vec == 8)
        lrn_units<HALF, 8>(st, s, units, x, y, scale);
    else if (vec == 4)
        lrn_units<HALF, 4>(st, s, units, x, y, scale);
    else
        lrn_units<HALF, 1>(st, s, units, x, y, scale);
}
template <int HALF>
static void lrn_back_any(cudaStream_t st, const LrnShape *s, int vec, size_t units, const dt16 *x,
                         const dt16 *y, const float *scale, const dt16 *dy, dt16 *dx)
{
    if (vec == 8)
        lrn_back_units<HALF, 8>(st, s, units, x, y, scale, dy, dx);
    else if (vec == 4)
        lrn_back_units<HALF, 4>(st, s, units, x, y, scale, dy, dx);
    else
        lrn_back_units<HALF, 1>(st, s, units, x, y, scale, dy, dx);
}

/* units of vec channels where the window fits a unit's span (and the units 32-bit indices),
 * else elements (0) */
static int lrn_vec(const LrnShape *s, size_t total, const void *a, const void *b, const void *d,
                   const void *e, const void *scale)
{
    int vec = unit_vec(s->c, a, b, d, e, scale);
    while (vec > 1 && vec + s->size - 1 > DT16_LRN_SPAN)
        vec /= vec == 8 ? 2 : 4;
    return vec + s->size - 1 <= DT16_LRN_SPAN && total / (size_t)vec <= UINT32_MAX ? vec : 0;
}

extern "C" cudaError_t dth_lrn(cudaStream_t st, int half, const LrnShape *s, const void *x,
                               void *y, float *scale)
{
    const size_t total = (size_t)s->batch * s->c * s->h * s->w;
    const int vec = lrn_vec(s, total, x, y, NULL, NULL, scale);
    if (total == 0) return cudaSuccess;
    if (vec == 0) LAUNCH16(lrn_kernel, total, st, *s, total, (const dt16 *)x, (dt16 *)y, scale);
    if (half)
        lrn_any<1>(st, s, vec, total / (size_t)vec, (const dt16 *)x, (dt16 *)y, scale);
    else
        lrn_any<0>(st, s, vec, total / (size_t)vec, (const dt16 *)x, (dt16 *)y, scale);
    return cudaGetLastError();
}
extern "C" cudaError_t dth_lrn_back(cudaStream_t st, int half, const LrnShape *s, const void *x,
                                    const void *y, const float *scale, const void *dy, void *dx)
{
    const size_t total = (size_t)s->batch * s->c * s->h * s->w;
    const int vec = lrn_vec(s, total, x, y, dy, dx, scale);
    const dt16 *xx = (const dt16 *)x, *yy = (const dt16 *)y, *gg = (const dt16 *)dy;
    if (total == 0) return cudaSuccess;
    if (vec == 0) LAUNCH16(lrn_back_kernel, total, st, *s, total, xx, yy, scale, gg, (dt16 *)dx);
    if (half)
        lrn_back_any<1>(st, s, vec, total / (size_t)vec, xx, yy, scale, gg, (dt16 *)dx);
    else
        lrn_back_any<0>(st, s, vec, total / (size_t)vec, xx, yy, scale, gg, (dt16 *)dx);
    return cudaGetLastError();
}
