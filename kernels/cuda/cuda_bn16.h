/* cuda_bn16.h - what one thread of the CUDA backend's NHWC 16-bit batch-norm and channel-sum
 * kernels (kernels/cuda/cuda_bn16_kernels.cu) computes, written once and compiled twice, as
 * cuda_elem16.h is: by nvcc as __host__ __device__ functions, and as plain C by
 * tests/test_device_bn16.c, which plays every block and thread of a launch on the CPU against the
 * CPU backend. Plain C11 and C++17. */
#ifndef DTBENCH_CUDA_BN16_H
#define DTBENCH_CUDA_BN16_H

#include "cuda_elem16.h" /* defines: dt16, Dt16x8, dt16_ld, dt16_st, DT16_UNROLL_LOOP */
#include "cuda_plan.h"   /* defines: NhwcGrid */

#include <stddef.h>

/* ---- batch norm and channel sums over the rows of an NHWC tensor [rows][c] (rows = n*hw) ----
 * On cuda_plan.h's NhwcGrid (nhwc_grid with DT16_THREADS threads and DT16_PER_SM blocks per
 * multiprocessor): thread t of block (split, tile) takes one unit (g->vec channels) of the tile
 * and the rows of its slab on its row lane (dt16_slot). A pass is three launches:
 *   1. sums: each thread sums its channels over its rows, `unroll` rows loaded before they are
 *      used (dt16_unroll), their terms added in fp32 and each group's sum into double
 *      (dt16_bn_sums); the block adds its row lanes in lane order (dt16_lane_sum) and leaves one
 *      pair per channel and block in part[c][splits][2];
 *   2. one warp per channel adds its blocks' pairs (lane l: blocks l, l + 32, ... in order,
 *      dt16_part_lane; then the lanes in the fixed tree of dt16_tree32) and turns them into the
 *      channel's factors (cuda_elem.h's dt_bn_stats, dt_bn_coeffs, dt_bn_back_factors: the CPU's
 *      definitions);
 *   3. an element-wise pass on the same grid, each thread with its channels' factors in
 *      registers, walking its rows backwards (and the kernels take the slabs in reverse block
 *      order): what the sums read last is what L2 still holds.
 * The backward's kernels, which read up to three tensors, take 4 channels a thread (8-byte
 * accesses; cuda_act16.c), the others 8: the loads in flight then fit in 128 registers, for two
 * blocks per multiprocessor (checked with ptxas -v: no spills). Deterministic (no atomics, every
 * order fixed). */
#define DT16_THREADS 256 /* threads per block */
#define DT16_PER_SM                                                                                \
    2                     /* blocks per multiprocessor the grid is sized for (and the              \
                           * registers allow: at most 128 a thread) */
#define DT16_UNROLL_MAX 8 /* rows a thread loads before it uses them, at most */
#define DT16_UNROLL     4 /* ... in the element-wise passes */

/* Thread t of block (split, tile): the first channel *ch of its unit, its slab [*r0, *r1) and its
 * row lane *lane; 0 for an idle thread (beyond the tile's units or the block's row lanes). */
DT_HD int dt16_slot(const NhwcGrid *g, int split, int tile, int t, int *ch, int *r0, int *r1,
                    int *lane) {
    const int unit = tile * g->width + t % g->width;
    *lane = t / g->width;
    *r0 = split * g->chunk;
    *r1 = *r0 + g->chunk < g->rows ? *r0 + g->chunk : g->rows;
    *ch = unit * g->vec;
    return *lane < g->lanes && unit < g->units;
}

/* What dt16_bn_sums adds up */
enum {
    DT16_STATS = 0, /* s1 = sum (x - ref), s2 = sum (x - ref)^2; ref: the channel's row-0 value */
    DT16_BACK = 1,  /* s1 = sum gr, s2 = sum gr (x - ref); ref: the mean; gr: the gradient
                     * reaching the batch norm, dy or (act_y not NULL: a fused ReLU's output) 0
                     * where act_y is not > 0 */
    DT16_COLSUM = 2 /* s1 = sum dy (a bias gradient) */
};

/* rows a thread of the sums loads at once: 8 where it reads one tensor of bf16 values, else 4
 * (fp16's conversions take registers too) */
DT_HD int dt16_unroll(int mode, int half) {
    return mode == DT16_BACK || half ? 4 : 8;
}

/* The sums of one thread (dt16_slot) over its rows, per channel j < vec of its unit, into s1[j],
 * s2[j]. DT16_BACK with g_out (not NULL; may alias dy): gr is also stored there, so that the
 * element-wise pass reads it instead of dy and act_y. */
DT_HD void dt16_bn_sums(const NhwcGrid *g, int mode, int vec, int unroll, int half, const dt16 *x,
                        const dt16 *dy, const dt16 *act_y, dt16 *g_out, int ch, int r0, int r1,
                        int lane, const float *ref, double *s1, double *s2) {
    const size_t c = (size_t)g->c;
    const int step = g->lanes;
    for (int j = 0; j < vec; j++)
        s1[j] = s2[j] = 0.0;
    for (int r = r0 + lane; r < r1; r += unroll * step) {
        Dt16x8 xv[DT16_UNROLL_MAX], gv[DT16_UNROLL_MAX], av[DT16_UNROLL_MAX];
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            const int rr = r + k * step;
            if (rr >= r1) continue;
            const size_t i = (size_t)rr * c + (size_t)ch;
            if (mode != DT16_COLSUM) xv[k] = dt16_ld(x, i, vec);
            if (mode != DT16_STATS) gv[k] = dt16_ld(dy, i, vec);
            if (mode == DT16_BACK && act_y) av[k] = dt16_ld(act_y, i, vec);
        }
        float a[8], b[8]; /* the group's sums, rows in order */
        DT16_UNROLL_LOOP
        for (int j = 0; j < vec; j++)
            a[j] = b[j] = 0.0f;
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            if (r + k * step >= r1) continue;
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++) {
                if (mode == DT16_STATS) {
                    const float d = dt16_f(xv[k].v[j], half) - ref[j];
                    a[j] += d, b[j] += d * d;
                } else {
                    if (mode == DT16_BACK && act_y)
                        gv[k].v[j] = dt16_relu_grad(av[k].v[j], gv[k].v[j], half);
                    const float gr = dt16_f(gv[k].v[j], half);
                    a[j] += gr;
                    if (mode == DT16_BACK) b[j] += gr * (dt16_f(xv[k].v[j], half) - ref[j]);
                }
            }
            if (mode == DT16_BACK && g_out)
                dt16_st(g_out, (size_t)(r + k * step) * c + (size_t)ch, vec, gv[k]);
        }
        DT16_UNROLL_LOOP
        for (int j = 0; j < vec; j++)
            s1[j] += (double)a[j], s2[j] += (double)b[j];
    }
}

/* The block's sum for channel slot j (< width * vec: unit j / vec of the tile, its channel
 * j % vec) over its row lanes, in lane order, from sh[t * vec + channel] of every thread t. */
DT_HD double dt16_lane_sum(const double *sh, const NhwcGrid *g, int j) {
    const int u = j / g->vec, k = j % g->vec;
    double s = 0.0;
    for (int l = 0; l < g->lanes; l++)
        s += sh[(l * g->width + u) * g->vec + k];
    return s;
}
/* where block `split` leaves sum k (0, 1) of channel ch */
DT_HD size_t dt16_part_at(const NhwcGrid *g, int ch, int split, int k) {
    return 2 * ((size_t)ch * (size_t)g->splits + (size_t)split) + (size_t)k;
}
/* lane `lane` of the warp combining channel ch: its blocks lane, lane + 32, ... in order */
DT_HD void dt16_part_lane(const double *part, const NhwcGrid *g, int ch, int lane, double *a,
                          double *b) {
    double s1 = 0.0, s2 = 0.0;
    for (int i = lane; i < g->splits; i += 32)
        s1 += part[dt16_part_at(g, ch, i, 0)], s2 += part[dt16_part_at(g, ch, i, 1)];
    *a = s1, *b = s2;
}
/* What __shfl_down_sync by 16, 8, 4, 2, 1 leaves in lane 0 of a warp holding v[32] (the device
 * kernels shuffle; this is its order, for playing them on the CPU). */
DT_HD double dt16_tree32(const double *v) {
    double t[32];
    for (int l = 0; l < 32; l++)
        t[l] = v[l];
    for (int o = 16; o > 0; o >>= 1)
        for (int l = 0; l < o; l++)
            t[l] += t[l + o];
    return t[0];
}

/* the fused forward epilogue of element i: y = relu(x*mul + add + z), as cuda_elem.h's (z: the
 * residual add's other input, when has_z) */
DT_HD dt16 dt16_bn_apply(dt16 x, dt16 z, int has_z, int relu, float mul, float add, int half) {
    return dt16_r(
        dt_bn_epilogue(dt_bn_affine(dt16_f(x, half), mul, add), dt16_f(z, half), has_z, relu),
        half);
}
/* the backward of element i: *dz (the gradient reaching the batch norm: dy, or 0 where a fused
 * ReLU's output act_y is not > 0) and *dx */
DT_HD void dt16_bn_back(dt16 x, dt16 dy, dt16 act_y, int has_act, float k, float m_dy, float mean,
                        float m_xdy, int half, dt16 *dx, dt16 *dz) {
    const dt16 gb = has_act ? dt16_relu_grad(act_y, dy, half) : dy;
    *dz = gb;
    *dx = dt16_r(dt_bn_back(k, dt16_f(gb, half), m_dy, dt16_f(x, half), mean, m_xdy), half);
}

/* The forward's element-wise pass of one thread: y = relu(x*mul + add + z) over its rows, last
 * row first (z: the residual add's other input, or NULL; mul, add: its channels' factors). */
DT_HD void dt16_bn_apply_rows(const NhwcGrid *g, int vec, int unroll, int half, const dt16 *x,
                              const dt16 *z, int relu, dt16 *y, int ch, int r0, int r1, int lane,
                              const float *mul, const float *add) {
    const size_t c = (size_t)g->c;
    const int step = g->lanes;
    for (int r = r1 - 1 - lane; r >= r0; r -= unroll * step) {
        Dt16x8 xv[DT16_UNROLL_MAX], zv[DT16_UNROLL_MAX];
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            const int rr = r - k * step;
            if (rr < r0) continue;
            const size_t i = (size_t)rr * c + (size_t)ch;
            xv[k] = dt16_ld(x, i, vec);
            if (z) zv[k] = dt16_ld(z, i, vec);
        }
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            const int rr = r - k * step;
            if (rr < r0) continue;
            Dt16x8 out;
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++)
                out.v[j] = dt16_bn_apply(xv[k].v[j], z ? zv[k].v[j] : (dt16)0, z != NULL, relu,
                                         mul[j], add[j], half);
            dt16_st(y, (size_t)rr * c + (size_t)ch, vec, out);
        }
    }
}

/* The backward's element-wise pass of one thread, last row first: dx from x and the gradient gin
 * (masked where a fused ReLU's output act_y, not NULL, is not > 0; NULL when gin is already the
 * masked gradient the sums stored), with its channels' factors k, m_dy, mean, m_xdy. */
DT_HD void dt16_bn_back_rows(const NhwcGrid *g, int vec, int unroll, int half, const dt16 *x,
                             const dt16 *gin, const dt16 *act_y, dt16 *dx, int ch, int r0, int r1,
                             int lane, const float *k_, const float *m_dy, const float *mean,
                             const float *m_xdy) {
    const size_t c = (size_t)g->c;
    const int step = g->lanes;
    for (int r = r1 - 1 - lane; r >= r0; r -= unroll * step) {
        Dt16x8 xv[DT16_UNROLL_MAX], gv[DT16_UNROLL_MAX], av[DT16_UNROLL_MAX];
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            const int rr = r - k * step;
            if (rr < r0) continue;
            const size_t i = (size_t)rr * c + (size_t)ch;
            xv[k] = dt16_ld(x, i, vec);
            gv[k] = dt16_ld(gin, i, vec);
            if (act_y) av[k] = dt16_ld(act_y, i, vec);
        }
        DT16_UNROLL_LOOP
        for (int k = 0; k < unroll; k++) {
            const int rr = r - k * step;
            if (rr < r0) continue;
            Dt16x8 out;
            DT16_UNROLL_LOOP
            for (int j = 0; j < vec; j++) {
                dt16 unused;
                dt16_bn_back(xv[k].v[j], gv[k].v[j], act_y ? av[k].v[j] : (dt16)0, act_y != NULL,
                             k_[j], m_dy[j], mean[j], m_xdy[j], half, &out.v[j], &unused);
            }
            dt16_st(dx, (size_t)rr * c + (size_t)ch, vec, out);
        }
    }
}

#endif
