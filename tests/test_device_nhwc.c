/* test_device_nhwc.c - the CUDA backend's NHWC 16-bit kernels (kernels/cuda_act16_kernels.cu,
 * cuda_bn16_kernels.cu) run on the CPU, no GPU needed: every thread of a launch is played with
 * the functions it runs (kernels/cuda_elem16.h, shared with the device code) over the same grid,
 * on random bf16 and fp16 values, and the result is compared with the CPU backend run on the
 * widened values in NCHW (kernels/layout.h's maps), rounded once:
 *   - the index maps NCHW <-> NHWC against layout.h, the input conversion, the 16-bit transposes
 *     of a flattened fc's input, the filters' KRSC copies with their biases (weights_ready) and
 *     the filter gradient widened back, bit for bit;
 *   - ReLU, its backward, the residual add, a bias over rows, dropout (the NCHW mask of an NHWC
 *     image, DropoutShape.c/hw), max pooling with and without padding (argmax too), average
 *     pooling, global average pooling, LRN, forward and backward: bit for bit the CPU's result of
 *     the same 16-bit inputs, rounded;
 *   - nhwc_grid covers every row of every channel once for ResNet-50's and GoogLeNet's shapes and
 *     odd ones; batch norm (training, inference, backward; plain, with its ReLU, with a residual
 *     add and ReLU) and a bias gradient against the CPU's unfused rows: statistics and parameter
 *     gradients within 1e-5, 16-bit outputs within one rounding of the CPU's value (2^-8 bf16,
 *     2^-11 fp16, relative, plus 1e-6).
 * Device indexing of the launches, 16-byte loads and the libraries are left to
 * tests/test_cuda_nhwc.c on a GPU. */
#include "harness.h"
#include "backend.h"
#include "cuda_elem16.h"
#include "cuda_plan.h"
#include "layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int HALF; /* the type of the current pass: 0 bf16, 1 fp16 */

/* ---- 16-bit buffers ---------------------------------------------------------------------- */

static dt16 *rand16(size_t n, float lo, float hi) {
    dt16 *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = dt16_r(rand_uniform(lo, hi), HALF);
    return h;
}
static dt16 *poison16(size_t n) {
    dt16 *h = malloc((n ? n : 1) * sizeof *h);
    memset(h, 0xa5, (n ? n : 1) * sizeof *h);
    return h;
}
/* NHWC 16-bit [n][hw][c] -> NCHW fp32 [n][c][hw] (widened), and NCHW fp32 -> NHWC rounded */
static float *widen_nchw(const dt16 *x, size_t n, size_t c, size_t hw) {
    float *t = malloc((n * c * hw + 1) * sizeof *t), *u = malloc((n * c * hw + 1) * sizeof *u);
    for (size_t i = 0; i < n * c * hw; i++)
        t[i] = dt16_f(x[i], HALF);
    layout_to_nchw(n, c, hw, t, u);
    free(t);
    return u;
}
static dt16 *round_nhwc(const float *x, size_t n, size_t c, size_t hw) {
    float *t = malloc((n * c * hw + 1) * sizeof *t);
    dt16 *h = malloc((n * c * hw + 1) * sizeof *h);
    layout_to_nhwc(n, c, hw, x, t);
    for (size_t i = 0; i < n * c * hw; i++)
        h[i] = dt16_r(t[i], HALF);
    free(t);
    return h;
}
static int same16(const dt16 *a, const dt16 *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("  [%zu]: %#06x (%.6g) vs %#06x (%.6g)\n", i, a[i], dt16_f(a[i], HALF), b[i],
                   dt16_f(b[i], HALF));
            return 0;
        }
    return 1;
}
/* 16-bit values within one rounding of fp32 references */
static int close16(const dt16 *a, const float *ref, size_t n) {
    const double u = HALF ? 0x1p-11 : 0x1p-8;
    for (size_t i = 0; i < n; i++) {
        const double v = dt16_f(a[i], HALF), r = ref[i];
        if (!(fabs(v - r) <= u * fabs(r) + 1e-6)) {
            printf("  [%zu]: %.8g vs %.8g\n", i, v, r);
            return 0;
        }
    }
    return 1;
}
static float *copy_floats(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, x, n * sizeof *p);
    return p;
}
static const char *type_name(void) {
    return HALF ? "fp16" : "bf16";
}

/* ---- maps and conversions -------------------------------------------------------------------- */

static void test_maps(void) {
    const size_t shapes[][3] = {{2, 3, 5}, {1, 1, 7}, {3, 8, 1}, {2, 16, 49}};
    int bad = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        const size_t n = shapes[k][0], c = shapes[k][1], hw = shapes[k][2];
        for (size_t i = 0; i < n; i++)
            for (size_t q = 0; q < c; q++)
                for (size_t p = 0; p < hw; p++) {
                    const size_t a = layout_nchw(c, hw, i, q, p), b = layout_nhwc(c, hw, i, q, p);
                    bad += dt_nhwc_of_nchw(a, c, hw) != b || dt_nchw_of_nhwc(b, c, hw) != a;
                }
    }
    EXPECT(!bad, "dt_nhwc_of_nchw and dt_nchw_of_nhwc are layout.h's maps (%d wrong)", bad);
}

static void test_conversions(void) {
    const size_t n = 3, c = 5, hw = 7, total = n * c * hw;
    /* the input: input_kernel, o over NHWC */
    float *x = rand_floats(total, -3, 3), *t = malloc(total * sizeof *t);
    dt16 *y = poison16(total), *ref = malloc(total * sizeof *ref);
    for (size_t o = 0; o < total; o++)
        y[o] = dt16_r(x[dt_nchw_of_nhwc(o, c, hw)], HALF);
    layout_to_nhwc(n, c, hw, x, t);
    for (size_t i = 0; i < total; i++)
        ref[i] = dt16_r(t[i], HALF);
    EXPECT(same16(y, ref, total), "%s: input_to_act = the input in NHWC, rounded", type_name());
    /* the transposes: to_nchw_kernel then to_nhwc_kernel */
    dt16 *a = poison16(total), *b = poison16(total);
    for (size_t i = 0; i < total; i++)
        a[i] = y[dt_nhwc_of_nchw(i, c, hw)];
    int ok = 1;
    for (size_t q = 0; q < c && ok; q++)
        for (size_t p = 0; p < hw; p++) /* sample 1: a holds [c][hw] */
            ok &= a[layout_nchw(c, hw, 1, q, p)] == y[layout_nhwc(c, hw, 1, q, p)];
    for (size_t o = 0; o < total; o++)
        b[o] = a[dt_nchw_of_nhwc(o, c, hw)];
    EXPECT(ok && same16(b, y, total), "%s: the fc's 16-bit transposes to NCHW order and back",
           type_name());
    free(x), free(t), free(y), free(ref), free(a), free(b);
}

/* weights_ready's filters_kernel over a table of two convolutions, and filter_grad_kernel */
static void test_filters(void) {
    enum { K0 = 4, C0 = 3, R0 = 9, K1 = 6, C1 = 5, R1 = 1 };
    const size_t n0 = K0 * C0 * R0, n1 = K1 * C1 * R1;
    const size_t nparams = n0 + K0 + n1 + 7; /* conv0 (bias), conv1 (none), other parameters */
    float *params = rand_floats(nparams, -1, 1);
    const struct {
        size_t w_src, w_dst, b_src, b_dst;
        int k, c, khw;
    } table[2] = {{0, 0, n0, 128, K0, C0, R0}, {n0 + K0, 256, SIZE_MAX, SIZE_MAX, K1, C1, R1}};
    dt16 *w16 = poison16(512);
    for (int b = 0; b < 2; b++) { /* block row b, every thread of it */
        const size_t count = (size_t)table[b].k * table[b].c * table[b].khw;
        for (size_t o = 0; o < count; o++) {
            w16[table[b].w_dst + o] =
                dt16_r(params[table[b].w_src +
                              dt_nchw_of_nhwc(o, (size_t)table[b].c, (size_t)table[b].khw)],
                       HALF);
            if (table[b].b_src != SIZE_MAX && o < (size_t)table[b].k)
                w16[table[b].b_dst + o] = dt16_r(params[table[b].b_src + o], HALF);
        }
    }
    float *krsc = malloc(n0 * sizeof *krsc);
    filter_to_krsc(K0, C0, R0, params, krsc);
    int ok = 1;
    for (size_t i = 0; i < n0; i++)
        ok &= w16[i] == dt16_r(krsc[i], HALF);
    for (size_t i = 0; i < K0; i++)
        ok &= w16[128 + i] == dt16_r(params[n0 + i], HALF);
    filter_to_krsc(K1, C1, R1, params + n0 + K0, krsc);
    for (size_t i = 0; i < n1; i++)
        ok &= w16[256 + i] == dt16_r(krsc[i], HALF);
    ok &= w16[128 + K0] == 0xa5a5 && w16[256 + n1] == 0xa5a5; /* nothing else written */
    /* the gradient back: dw[k][c][r] = widened dw16[k][r][c] */
    float *dw = malloc(n0 * sizeof *dw), *back = malloc(n0 * sizeof *back), *ref = malloc(n0 * 4);
    for (size_t i = 0; i < n0; i++)
        dw[i] = dt16_f(w16[dt_nhwc_of_nchw(i, C0, R0)], HALF);
    for (size_t i = 0; i < n0; i++)
        back[i] = dt16_f(w16[i], HALF);
    filter_from_krsc(K0, C0, R0, back, ref);
    ok &= memcmp(dw, ref, n0 * sizeof *dw) == 0;
    EXPECT(ok,
           "%s: the filters' KRSC copies and biases where the table puts them, nothing else "
           "written; the filter gradient widened back to KCRS",
           type_name());
    free(params), free(w16), free(krsc), free(dw), free(back), free(ref);
}

/* ---- element-wise ---------------------------------------------------------------------------- */

static void test_elementwise(void) {
    const size_t n = 4, c = 6, hw = 5, total = n * c * hw;
    dt16 *x = rand16(total, -2, 2), *z = rand16(total, -2, 2), *g = rand16(total, -1, 1);
    float *xf = malloc(total * 4), *zf = malloc(total * 4), *gf = malloc(total * 4);
    for (size_t i = 0; i < total; i++)
        xf[i] = dt16_f(x[i], HALF), zf[i] = dt16_f(z[i], HALF), gf[i] = dt16_f(g[i], HALF);
    float *r = malloc(total * 4), *r2 = malloc(total * 4);
    dt16 *y = poison16(total), *ref = malloc(total * sizeof *ref);
    int ok;
    /* ReLU and its backward */
    cpu_backend.relu_forward(NULL, total, xf, r);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_relu(x[i], HALF), ref[i] = dt16_r(r[i], HALF);
    ok = same16(y, ref, total);
    cpu_backend.relu_backward(NULL, total, r, gf, r2);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_relu_grad(y[i], g[i], HALF), ref[i] = dt16_r(r2[i], HALF);
    ok &= same16(y, ref, total);
    /* the residual add, a bias over rows of c channels */
    cpu_backend.add_forward(NULL, total, xf, zf, r);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_add(x[i], z[i], HALF), ref[i] = dt16_r(r[i], HALF);
    ok &= same16(y, ref, total);
    float *b = rand_floats(c, -1, 1);
    for (size_t i = 0; i < total; i++)
        y[i] = dt16_bias(x[i], b[i % c], HALF), ref[i] = dt16_r(xf[i] + b[i % c], HALF);
    ok &= same16(y, ref, total);
    EXPECT(ok, "%s: ReLU, its backward, the residual add, the bias = the CPU's, rounded",
           type_name());
    /* dropout on an NHWC image: the CPU's NCHW mask and values */
    DropoutShape s = {(int)n, c * hw, 0.35f, 0xd20bULL, 77, (int)c, (int)hw};
    DropoutShape sc = s;
    sc.c = sc.hw = 0;
    float *xn = widen_nchw(x, n, c, hw);
    uint8_t *mask = malloc(total), *cmask = malloc(total);
    cpu_backend.dropout_forward(NULL, &sc, xn, r, cmask);
    dt16 *yref = round_nhwc(r, n, c, hw);
    const float keep_scale = dt_dropout_scale(s.rate);
    for (size_t e = 0; e < total; e++) { /* dropout_kernel */
        const size_t i = e / s.size, q = e % s.size;
        const uint64_t key = dt_dropout_key(s.seed, s.first_sample + (uint64_t)i);
        const int keep = dt_dropout_keep(key, dt16_dropout_j(q, s.c, s.hw), s.rate);
        mask[e] = (uint8_t)keep;
        y[e] = dt16_dropout(x[e], keep, keep_scale, HALF);
    }
    ok = same16(y, yref, total);
    for (size_t i = 0; i < n; i++) /* the same element kept in both layouts */
        for (size_t q = 0; q < c; q++)
            for (size_t p = 0; p < hw; p++)
                ok &= mask[layout_nhwc(c, hw, i, q, p)] == cmask[layout_nchw(c, hw, i, q, p)];
    EXPECT(ok,
           "%s: dropout of an NHWC image drops the elements the CPU drops in NCHW, scaled "
           "and rounded",
           type_name());
    free(x), free(z), free(g), free(xf), free(zf), free(gf), free(r), free(r2), free(y), free(ref);
    free(b), free(xn), free(mask), free(cmask), free(yref);
}

/* ---- pooling and LRN ------------------------------------------------------------------------- */

static void test_pool_shape(const PoolShape *s) {
    const size_t hi = (size_t)s->h_in * s->w_in, ho = (size_t)s->h_out * s->w_out;
    const size_t nin = (size_t)s->batch * s->c * hi, nout = (size_t)s->batch * s->c * ho;
    const size_t N = (size_t)s->batch, C = (size_t)s->c;
    dt16 *x = rand16(nin, -2, 2), *dy = rand16(nout, -1, 1), *y = poison16(nout);
    dt16 *dx = poison16(nin);
    int32_t *am = malloc(nout * 4), *cam = malloc(nout * 4), *am_nchw = malloc(nout * 4);
    float *xn = widen_nchw(x, N, C, hi), *dyn = widen_nchw(dy, N, C, ho);
    float *yr = malloc(nout * 4), *dxr = malloc(nin * 4);
    /* max pooling */
    cpu_backend.maxpool_forward(NULL, s, xn, yr, cam);
    for (size_t o = 0; o < nout; o++)
        dt16_maxpool_fwd(s, x, o, HALF, y, am);
    dt16 *ref = round_nhwc(yr, N, C, ho);
    int ok = same16(y, ref, nout);
    for (size_t o = 0; o < nout; o++) /* argmax: the plane index, in NHWC order */
        am_nchw[dt_nchw_of_nhwc(o, C, ho)] = am[o];
    ok &= memcmp(am_nchw, cam, nout * 4) == 0;
    cpu_backend.maxpool_backward(NULL, s, cam, dyn, dxr);
    for (size_t i = 0; i < nin; i++)
        dx[i] = dt16_maxpool_bwd(s, am, dy, i, HALF);
    dt16 *dref = round_nhwc(dxr, N, C, hi);
    ok &= same16(dx, dref, nin);
    free(ref), free(dref);
    /* average pooling */
    cpu_backend.avgpool_forward(NULL, s, xn, yr);
    for (size_t o = 0; o < nout; o++)
        y[o] = dt16_avgpool_fwd(s, x, o, HALF);
    ref = round_nhwc(yr, N, C, ho);
    ok &= same16(y, ref, nout);
    cpu_backend.avgpool_backward(NULL, s, dyn, dxr);
    for (size_t i = 0; i < nin; i++)
        dx[i] = dt16_avgpool_bwd(s, dy, i, HALF);
    dref = round_nhwc(dxr, N, C, hi);
    ok &= same16(dx, dref, nin);
    EXPECT(ok,
           "%s: max pooling (argmax too) and average pooling [%d,%d,%d,%d] k%d s%d p%d, forward "
           "and backward = the CPU's, rounded",
           type_name(), s->batch, s->c, s->h_in, s->w_in, s->k, s->stride, s->pad);
    free(x), free(dy), free(y), free(dx), free(am), free(cam), free(am_nchw), free(xn), free(dyn);
    free(yr), free(dxr), free(ref), free(dref);
}

static void test_gap(size_t n, size_t c, size_t plane) {
    dt16 *x = rand16(n * c * plane, -2, 2), *dy = rand16(n * c, -1, 1);
    dt16 *y = poison16(n * c), *dx = poison16(n * c * plane), *ref = malloc(n * c * 2);
    float *xn = widen_nchw(x, n, c, plane), *yr = malloc(n * c * 4), *dyf = malloc(n * c * 4);
    float *dxr = malloc(n * c * plane * 4);
    cpu_backend.global_avgpool_forward(NULL, n, c, plane, xn, yr);
    for (size_t o = 0; o < n * c; o++)
        y[o] = dt16_gap_fwd(x, o, c, plane, HALF), ref[o] = dt16_r(yr[o], HALF);
    int ok = same16(y, ref, n * c);
    for (size_t i = 0; i < n * c; i++)
        dyf[i] = dt16_f(dy[i], HALF);
    cpu_backend.global_avgpool_backward(NULL, n, c, plane, dyf, dxr);
    for (size_t i = 0; i < n * c * plane; i++)
        dx[i] = dt16_gap_bwd(dy, i, c, plane, HALF);
    dt16 *dref = round_nhwc(dxr, n, c, plane);
    ok &= same16(dx, dref, n * c * plane);
    EXPECT(ok,
           "%s: global average pooling [%zu,%zu,%zu] forward and backward = the CPU's, "
           "rounded",
           type_name(), n, c, plane);
    free(x), free(dy), free(y), free(dx), free(ref), free(xn), free(yr), free(dyf), free(dxr);
    free(dref);
}

static void test_lrn(float beta) {
    LrnShape s = {
        .batch = 2, .c = 11, .h = 3, .w = 5, .size = 5, .alpha = 5e-3f, .beta = beta, .bias = 2.0f};
    const size_t hw = 15, n = 2 * 11 * hw, C = 11;
    dt16 *x = rand16(n, -2, 2), *dy = rand16(n, -1, 1), *y = poison16(n), *dx = poison16(n);
    float *sc = malloc(n * 4), *scn = malloc(n * 4), *csc = malloc(n * 4), *yr = malloc(n * 4);
    float *dxr = malloc(n * 4);
    for (size_t i = 0; i < n; i++)
        y[i] = dt16_lrn_fwd(&s, x, i, HALF, sc);
    float *xn = widen_nchw(x, 2, C, hw), *dyn = widen_nchw(dy, 2, C, hw);
    cpu_backend.lrn_forward(NULL, &s, xn, yr, csc);
    dt16 *ref = round_nhwc(yr, 2, C, hw);
    layout_to_nchw(2, C, hw, sc, scn);
    int ok = same16(y, ref, n) && memcmp(scn, csc, n * 4) == 0;
    /* backward on the stored (rounded) output, as the kernel reads it */
    for (size_t i = 0; i < n; i++)
        dx[i] = dt16_lrn_bwd(&s, x, y, sc, dy, i, HALF);
    float *yn = widen_nchw(y, 2, C, hw);
    cpu_backend.lrn_backward(NULL, &s, xn, yn, csc, dyn, dxr);
    dt16 *dref = round_nhwc(dxr, 2, C, hw);
    ok &= same16(dx, dref, n);
    EXPECT(ok, "%s: LRN (beta %g) forward (with its fp32 scale) and backward = the CPU's, rounded",
           type_name(), (double)beta);
    free(x), free(dy), free(y), free(dx), free(sc), free(scn), free(csc), free(yr), free(dxr);
    free(xn), free(dyn), free(ref), free(yn), free(dref);
}

/* ---- batch norm: the grid, the sums, the factors, the passes ---------------------------------
 * cuda_bn16_kernels.cu's launches played block by block and thread by thread with the functions
 * they run; the grids as cuda_act16.c makes them (vec up to 8 forward, 4 backward). */

#define SMS 3 /* a small GPU, so that the tests' small tensors still take several blocks */

static int grid_for(long long rows, int c, int vec, int sms, NhwcGrid *g) {
    return nhwc_grid(rows, c, vec, DT16_THREADS, sms, DT16_PER_SM, 65536, g);
}

static void test_grid(void) {
    const long long shapes[][2] = {{256LL * 112 * 112, 64}, {256LL * 7 * 7, 2048},
                                   {256LL * 56 * 56, 256},  {8LL * 28 * 28, 16},
                                   {3, 40},                 {1000, 3},
                                   {64, 4096},              {777, 200},
                                   {50, 12}};
    int ok = 1;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int vmax = 1; vmax <= 8; vmax *= 2) {
            if (vmax == 2) continue;
            NhwcGrid g;
            const int c = (int)shapes[k][1];
            if (!grid_for(shapes[k][0], c, vmax, 132, &g)) {
                ok = 0;
                continue;
            }
            const int want = vmax >= 8 && c % 8 == 0 ? 8 : vmax >= 4 && c % 4 == 0 ? 4 : 1;
            /* a row's tile is 64 channels (128 bytes) or the whole row; blocks fill 132
             * multiprocessors twice over unless each row lane would get fewer than 4 rows */
            const long long blocks = (long long)g.splits * g.tiles;
            ok &= g.vec == want && g.units * g.vec == c && g.width * g.vec == (c < 64 ? c : 64) &&
                  g.lanes == DT16_THREADS / g.width && g.splits >= 1 &&
                  (long long)g.splits * g.chunk >= g.rows &&
                  (long long)(g.splits - 1) * g.chunk < g.rows && (long long)g.splits * c <= 65536 &&
                  g.tiles * g.width >= g.units && (g.tiles - 1) * g.width < g.units &&
                  (blocks >= 132 * DT16_PER_SM || g.chunk <= 4 * g.lanes + 4 * g.lanes);
            if (!ok) {
                printf("  [%lld rows, %d] vec %d: width %d lanes %d tiles %d splits %d chunk %d\n",
                       shapes[k][0], c, g.vec, g.width, g.lanes, g.tiles, g.splits, g.chunk);
                break;
            }
        }
    NhwcGrid g;
    ok &= !grid_for(1LL << 30, 8, 8, 132, &g) && !grid_for(10, 70000, 8, 132, &g) &&
          !grid_for(0, 8, 8, 132, &g);
    EXPECT(ok, "nhwc_grid: 8, 4 or 1 channels a thread as c and the caller allow, 64-channel "
               "tiles, every row in one block, within the scratch, the GPU filled; refuses 2^30 "
               "rows, more channels than the scratch, nothing");
}

typedef struct {
    NhwcGrid g;
    double *part; /* [c][splits][2] */
} Launch16;

/* sums_kernel<MODE>: each thread's sums (dt16_bn_sums), the block's in row-lane order
 * (dt16_lane_sum) into part */
static void play_sums(Launch16 *L, int mode, const dt16 *x, const dt16 *dy, const dt16 *act_y,
                      dt16 *g_out, const float *mean) {
    const NhwcGrid *g = &L->g;
    double *sh1 = malloc(DT16_THREADS * 8 * sizeof(double));
    double *sh2 = malloc(DT16_THREADS * 8 * sizeof(double));
    for (int b = 0; b < g->splits; b++)
        for (int t = 0; t < g->tiles; t++) {
            memset(sh1, 0, DT16_THREADS * 8 * sizeof(double));
            memset(sh2, 0, DT16_THREADS * 8 * sizeof(double));
            for (int th = 0; th < DT16_THREADS; th++) {
                int ch, r0, r1, lane;
                if (!dt16_slot(g, b, t, th, &ch, &r0, &r1, &lane)) continue;
                float ref[8] = {0};
                for (int j = 0; j < g->vec; j++)
                    ref[j] = mode == DT16_STATS  ? dt16_f(x[ch + j], HALF)
                             : mode == DT16_BACK ? mean[ch + j]
                                                 : 0.0f;
                dt16_bn_sums(g, mode, g->vec, dt16_unroll(mode, HALF), HALF, x, dy, act_y, g_out,
                             ch, r0, r1, lane, ref, sh1 + th * g->vec, sh2 + th * g->vec);
            }
            for (int j = 0; j < g->width * g->vec; j++) {
                const int c = t * g->width * g->vec + j;
                if (c >= g->c) continue;
                L->part[dt16_part_at(g, c, b, 0)] = dt16_lane_sum(sh1, g, j);
                L->part[dt16_part_at(g, c, b, 1)] = dt16_lane_sum(sh2, g, j);
            }
        }
    free(sh1), free(sh2);
}
/* a channel's warp (warp_combine): 32 lanes' shares, then the shuffle tree */
static void combine(const Launch16 *L, int ch, double *a, double *b) {
    double va[32], vb[32];
    for (int l = 0; l < 32; l++)
        dt16_part_lane(L->part, &L->g, ch, l, &va[l], &vb[l]);
    *a = dt16_tree32(va), *b = dt16_tree32(vb);
}
/* apply_kernel: every thread of every block, with its channels' factors */
static void play_apply(const NhwcGrid *g, const float *coef, const dt16 *x, const dt16 *z,
                       int relu, dt16 *y) {
    for (int b = 0; b < g->splits; b++)
        for (int t = 0; t < g->tiles; t++)
            for (int th = 0; th < DT16_THREADS; th++) {
                int ch, r0, r1, lane;
                if (!dt16_slot(g, b, t, th, &ch, &r0, &r1, &lane)) continue;
                dt16_bn_apply_rows(g, g->vec, DT16_UNROLL, HALF, x, z, relu, y, ch, r0, r1, lane,
                                   coef + ch, coef + g->c + ch);
            }
}
/* back_apply_kernel */
static void play_back_apply(const NhwcGrid *g, const float *coef, const dt16 *x,
                            const dt16 *act_y, const dt16 *gin, dt16 *dx) {
    const int C = g->c;
    for (int b = 0; b < g->splits; b++)
        for (int t = 0; t < g->tiles; t++)
            for (int th = 0; th < DT16_THREADS; th++) {
                int ch, r0, r1, lane;
                if (!dt16_slot(g, b, t, th, &ch, &r0, &r1, &lane)) continue;
                dt16_bn_back_rows(g, g->vec, DT16_UNROLL, HALF, x, gin, act_y, dx, ch, r0, r1,
                                  lane, coef + ch, coef + C + ch, coef + 3 * C + ch,
                                  coef + 2 * C + ch);
            }
}

static int close_f(const float *a, const float *b, size_t n, float tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])))) {
            printf("  %s[%zu]: %.9g vs %.9g\n", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}

static Launch16 launch_for(size_t rows, int c, int vec) {
    Launch16 L = {{0}, NULL};
    if (grid_for((long long)rows, c, vec, SMS, &L.g))
        L.part = malloc(2 * (size_t)c * L.g.splits * sizeof(double));
    return L;
}

/* the played training forward (sums, finalize_train_kernel, apply_kernel) */
static void play_train(Launch16 *L, const BnShape *s, const dt16 *x, const float *gamma,
                       const float *beta, const dt16 *z, int relu, dt16 *y, float *mean,
                       float *invstd, float *rm, float *rv) {
    const int c = s->c;
    float *coef = malloc(2 * (size_t)c * sizeof *coef);
    play_sums(L, DT16_STATS, x, NULL, NULL, NULL, NULL);
    for (int ch = 0; ch < c; ch++) {
        double s1, s2;
        float unbiased;
        combine(L, ch, &s1, &s2);
        dt_bn_stats(s1, s2, (double)L->g.rows, dt16_f(x[ch], HALF), s->eps, &mean[ch],
                    &invstd[ch], &unbiased);
        dt_bn_coeffs(gamma[ch], beta[ch], mean[ch], invstd[ch], &coef[ch], &coef[c + ch]);
        rm[ch] = dt_bn_running(rm[ch], s->momentum, mean[ch]);
        rv[ch] = dt_bn_running(rv[ch], s->momentum, unbiased);
    }
    play_apply(&L->g, coef, x, z, relu, y);
    free(coef);
}

/* the played backward (sums, finalize_back_kernel, back_apply_kernel), as dth_bn_back runs it */
static void play_back(Launch16 *L, const BnShape *s, const dt16 *x, const float *gamma,
                      const float *mean, const float *invstd, const dt16 *act_y, const dt16 *dy,
                      dt16 *dx, dt16 *dz, float *dg, float *db) {
    const int c = s->c;
    float *coef = malloc(4 * (size_t)c * sizeof *coef);
    play_sums(L, DT16_BACK, x, dy, act_y, dz, mean);
    for (int ch = 0; ch < c; ch++) {
        double a, b;
        combine(L, ch, &a, &b);
        dt_bn_back_factors(a, b, (double)L->g.rows, gamma[ch], invstd[ch], &dg[ch], &db[ch],
                           &coef[ch], &coef[c + ch], &coef[2 * c + ch]);
        coef[3 * c + ch] = mean[ch];
    }
    if (dz) /* the masked gradient is in dz */
        play_back_apply(&L->g, coef, x, NULL, dz, dx);
    else
        play_back_apply(&L->g, coef, x, act_y, dy, dx);
    free(coef);
}

/* One shape, in the three fused modes: played kernels against the CPU's unfused rows. */
static void test_bn(int batch, int c, int spatial) {
    const BnShape s = {batch, c, spatial, 1e-5f, 0.1f};
    const size_t rows = (size_t)batch * spatial, n = rows * c, C = (size_t)c;
    Launch16 F = launch_for(rows, c, 8), B = launch_for(rows, c, 4);
    if (!F.part || !B.part) {
        EXPECT(0, "nhwc_grid takes [%d,%d,%d]", batch, c, spatial);
        return;
    }
    dt16 *x = rand16(n, -3, 5), *z = rand16(n, -1, 1), *dy = rand16(n, -1, 1);
    float *gamma = rand_floats(C, 0.5f, 1.5f), *beta = rand_floats(C, -0.5f, 0.5f);
    float *xn = widen_nchw(x, batch, C, spatial), *zn = widen_nchw(z, batch, C, spatial);
    float *dyn = widen_nchw(dy, batch, C, spatial);
    for (int mode = 0; mode < 3; mode++) {
        const int relu = mode > 0, add = mode == 2;
        /* the CPU's rows on the widened values */
        float *y = malloc(n * 4), *mean = malloc(C * 4), *inv = malloc(C * 4);
        float *rm = calloc(C, 4), *rv = malloc(C * 4), *rm2 = calloc(C, 4), *rv2 = malloc(C * 4);
        for (size_t i = 0; i < C; i++)
            rv[i] = rv2[i] = 1.0f;
        cpu_backend.batchnorm_forward_train(NULL, &s, xn, gamma, beta, y, mean, inv, rm, rv);
        if (add) cpu_backend.add_forward(NULL, n, y, zn, y);
        if (relu) cpu_backend.relu_forward(NULL, n, y, y);
        float *mean2 = malloc(C * 4), *inv2 = malloc(C * 4);
        dt16 *y16 = poison16(n);
        play_train(&F, &s, x, gamma, beta, add ? z : NULL, relu, y16, mean2, inv2, rm2, rv2);
        float *yn = malloc(n * 4);
        layout_to_nhwc(batch, C, spatial, y, yn);
        int ok = close_f(mean2, mean, C, 1e-5f, "mean") && close_f(inv2, inv, C, 1e-5f, "invstd") &&
                 close_f(rm2, rm, C, 1e-5f, "running mean") &&
                 close_f(rv2, rv, C, 1e-5f, "running var") && close16(y16, yn, n);
        /* backward: the CPU's ReLU in place, the add's gradient, batch norm; played against it */
        float *g = copy_floats(dyn, n), *dx = malloc(n * 4), *dg = malloc(C * 4),
              *db = malloc(C * 4);
        float *act = widen_nchw(y16, batch, C, spatial); /* the stored output, as the GPU's */
        if (relu) cpu_backend.relu_backward(NULL, n, act, g, g);
        cpu_backend.batchnorm_backward(NULL, &s, xn, gamma, mean2, inv2, g, dx, dg, db);
        float *dg2 = malloc(C * 4), *db2 = malloc(C * 4);
        dt16 *dx16 = poison16(n), *dz16 = poison16(n);
        play_back(&B, &s, x, gamma, mean2, inv2, relu ? y16 : NULL, dy, dx16, add ? dz16 : NULL,
                  dg2, db2);
        float *dxn = malloc(n * 4), *gz = malloc(n * 4);
        layout_to_nhwc(batch, C, spatial, dx, dxn);
        layout_to_nhwc(batch, C, spatial, g, gz);
        ok &= close_f(dg2, dg, C, 1e-5f, "dgamma") && close_f(db2, db, C, 1e-5f, "dbeta") &&
              close16(dx16, dxn, n);
        for (size_t i = 0; add && i < n; i++) /* dz: the masked gradient, exactly */
            ok &= dt16_f(dz16[i], HALF) == gz[i];
        if (add) { /* dz may alias dy: the same dx, and the masked gradient left in dy */
            dt16 *d2 = malloc(n * sizeof *d2), *dx2 = poison16(n);
            memcpy(d2, dy, n * sizeof *d2);
            play_back(&B, &s, x, gamma, mean2, inv2, y16, d2, dx2, d2, dg2, db2);
            ok &= same16(dx2, dx16, n) && same16(d2, dz16, n);
            free(d2), free(dx2);
        }
        EXPECT(ok,
               "%s: batch norm [%d,%d,%d] %s (vec %d forward, %d backward), training forward and "
               "backward (dz too) = the CPU's rows (statistics and parameter gradients 1e-5, "
               "outputs within one rounding)",
               type_name(), batch, c, spatial,
               mode == 0   ? "plain"
               : mode == 1 ? "+ReLU"
                           : "+add+ReLU (dz apart and over dy)",
               F.g.vec, B.g.vec);
        free(y), free(mean), free(inv), free(rm), free(rv), free(rm2), free(rv2), free(mean2);
        free(inv2), free(y16), free(yn), free(g), free(dx), free(dg), free(db), free(act);
        free(dg2), free(db2), free(dx16), free(dz16), free(dxn), free(gz);
    }
    /* inference: finalize_infer_kernel's factors through the same apply_kernel */
    float *rmean = rand_floats(C, -1, 1), *rvar = rand_floats(C, 0.5f, 2), *coef = malloc(8 * C);
    float *yi = malloc(n * 4), *yin = malloc(n * 4);
    dt16 *y16 = poison16(n);
    for (size_t ch = 0; ch < C; ch++)
        dt_bn_coeffs(gamma[ch], beta[ch], rmean[ch], dt_bn_infer_invstd(rvar[ch], s.eps),
                     &coef[ch], &coef[C + ch]);
    play_apply(&F.g, coef, x, z, 1, y16);
    cpu_backend.batchnorm_forward_infer(NULL, &s, xn, gamma, beta, rmean, rvar, yi);
    cpu_backend.add_forward(NULL, n, yi, zn, yi);
    cpu_backend.relu_forward(NULL, n, yi, yi);
    layout_to_nhwc(batch, C, spatial, yi, yin);
    EXPECT(close16(y16, yin, n), "%s: batch norm [%d,%d,%d] inference +add+ReLU = the CPU's rows",
           type_name(), batch, c, spatial);
    /* the bias gradient: sums of dy's rows (DT16_COLSUM); and on ones, each row counted once */
    play_sums(&F, DT16_COLSUM, NULL, dy, NULL, NULL, NULL);
    float *sum = malloc(C * 4), *ref = calloc(C, 4);
    for (int ch = 0; ch < c; ch++) {
        double a, b;
        combine(&F, ch, &a, &b);
        sum[ch] = (float)a;
    }
    for (size_t i = 0; i < n; i++)
        ref[i % C] += dt16_f(dy[i], HALF);
    int ok = close_f(sum, ref, C, 1e-5f, "bias gradient");
    dt16 *ones = malloc(n * sizeof *ones);
    for (size_t i = 0; i < n; i++)
        ones[i] = dt16_r(1.0f, HALF);
    for (int k = 0; k < 2; k++) {
        Launch16 *L = k ? &B : &F;
        play_sums(L, DT16_COLSUM, NULL, ones, NULL, NULL, NULL);
        for (int ch = 0; ch < c; ch++) {
            double a, b;
            combine(L, ch, &a, &b);
            ok &= a == (double)rows;
        }
    }
    EXPECT(ok, "%s: the bias gradient of [%zu rows, %d] = the rows' sums; every row of every "
               "channel summed once (both grids)",
           type_name(), rows, c);
    free(sum), free(ref), free(ones), free(F.part), free(B.part), free(x), free(z), free(dy);
    free(gamma), free(beta), free(xn), free(zn), free(dyn), free(rmean), free(rvar), free(coef);
    free(yi), free(yin), free(y16);
}

int main(void) {
    test_maps();
    test_grid();
    for (HALF = 0; HALF <= 1; HALF++) {
        test_conversions();
        test_filters();
        test_elementwise();
        const PoolShape pools[] = {{2, 5, 9, 9, 3, 2, 1, 5, 5}, /* ResNet's stem pooling, padded */
                                   {2, 3, 8, 8, 2, 2, 0, 4, 4}, /* LeNet / VGG, no padding */
                                   {1, 4, 7, 7, 3, 1, 1, 7, 7}, /* GoogLeNet's inception pooling */
                                   {3, 2, 13, 13, 3, 2, 0, 6, 6} /* AlexNet */};
        for (size_t i = 0; i < sizeof pools / sizeof pools[0]; i++)
            test_pool_shape(&pools[i]);
        test_gap(3, 10, 49);
        test_gap(2, 7, 5);
        test_lrn(0.75f);
        test_lrn(0.6f);
        test_bn(4, 8, 9);    /* rows across row lanes */
        test_bn(2, 40, 25);  /* vec 8 forward, 4 backward */
        test_bn(3, 200, 37); /* four channel tiles, the last partial; several blocks a tile */
        test_bn(5, 12, 31);  /* vec 4 both ways */
        test_bn(16, 3, 1);   /* after an fc: one pixel, vec 1 */
        test_bn(2, 64, 600); /* long slabs: every row lane walks many unrolled groups */
    }
    return check_summary();
}
