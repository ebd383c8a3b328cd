/* test_device_bn16.c - the CUDA backend's NHWC 16-bit batch-norm and channel-sum kernels
 * (kernels/cuda/cuda_bn16_kernels.cu) run on the CPU, no GPU needed: every block and thread of each
 * launch is played with the functions it runs (kernels/cuda/cuda_bn16.h, shared with the device
 * code) over the grid cuda_act16.c makes (nhwc_grid: up to 8 channels a thread forward, 4
 * backward), on random bf16 and fp16 values, against the CPU backend's unfused rows on the widened values:
 *   - nhwc_grid: the channels a thread takes as c and the caller allow, 64-channel tiles, every
 *     row in one block, within the scratch, the GPU filled; ResNet-50's and GoogLeNet's shapes and
 *     odd ones; its refusals;
 *   - training forward, inference and backward, plain, with the ReLU, with a residual add and
 *     ReLU (the masked gradient stored in dz, apart from dy and over it): statistics, running
 *     statistics and parameter gradients within 1e-5, 16-bit outputs within one rounding of the
 *     CPU's value (2^-8 bf16, 2^-11 fp16, relative, plus 1e-6), dz exactly the masked gradient;
 *   - the bias gradient (the rows' sums), and on a tensor of ones every row of every channel
 *     counted exactly once by both grids;
 *   - shapes for 8, 4 and 1 channels a thread, several tiles (the last partial), several blocks
 *     per tile and long slabs (many unrolled row groups per thread).
 * What the GPU alone decides (the launches' indexing on the device, the shuffle order, speed) is
 * left to tests/test_cuda_nhwc.c and bench/gpu_kernels.sh on a GPU. */
#include "harness.h"
#include "dev16.h"
#include "backend.h"
#include "cuda_bn16.h"
#include "cuda_plan.h"
#include "layout.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMS 3 /* a small GPU, so that the tests' small tensors still take several blocks */

static int grid_for(long long rows, int c, int vec, int sms, NhwcGrid *g) {
    return nhwc_grid(rows, c, vec, DT16_THREADS, sms, DT16_PER_SM, 65536, g);
}

static void test_grid(void) {
    const long long shapes[][2] = {{256LL * 112 * 112, 64},
                                   {256LL * 7 * 7, 2048},
                                   {256LL * 56 * 56, 256},
                                   {8LL * 28 * 28, 16},
                                   {3, 40},
                                   {1000, 3},
                                   {64, 4096},
                                   {777, 200},
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
                  (long long)(g.splits - 1) * g.chunk < g.rows &&
                  (long long)g.splits * c <= 65536 && g.tiles * g.width >= g.units &&
                  (g.tiles - 1) * g.width < g.units &&
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
static void play_apply(const NhwcGrid *g, const float *coef, const dt16 *x, const dt16 *z, int relu,
                       dt16 *y) {
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
static void play_back_apply(const NhwcGrid *g, const float *coef, const dt16 *x, const dt16 *act_y,
                            const dt16 *gin, dt16 *dx) {
    const int C = g->c;
    for (int b = 0; b < g->splits; b++)
        for (int t = 0; t < g->tiles; t++)
            for (int th = 0; th < DT16_THREADS; th++) {
                int ch, r0, r1, lane;
                if (!dt16_slot(g, b, t, th, &ch, &r0, &r1, &lane)) continue;
                dt16_bn_back_rows(g, g->vec, DT16_UNROLL, HALF, x, gin, act_y, dx, ch, r0, r1, lane,
                                  coef + ch, coef + C + ch, coef + 3 * C + ch, coef + 2 * C + ch);
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
        dt_bn_stats(s1, s2, (double)L->g.rows, dt16_f(x[ch], HALF), s->eps, &mean[ch], &invstd[ch],
                    &unbiased);
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

/* One shape's inputs, on both grids (forward and backward), and their widened NCHW copies. */
typedef struct {
    BnShape s;
    size_t rows, n, C;
    Launch16 F, B;
    dt16 *x, *z, *dy;
    float *gamma, *beta, *xn, *zn, *dyn;
} BnCase;

static int bn_case(BnCase *k, int batch, int c, int spatial) {
    k->s = (BnShape){batch, c, spatial, 1e-5f, 0.1f};
    k->rows = (size_t)batch * spatial, k->n = k->rows * c, k->C = (size_t)c;
    k->F = launch_for(k->rows, c, 8), k->B = launch_for(k->rows, c, 4);
    if (!k->F.part || !k->B.part) return 0;
    k->x = rand16(k->n, -3, 5), k->z = rand16(k->n, -1, 1), k->dy = rand16(k->n, -1, 1);
    k->gamma = rand_floats(k->C, 0.5f, 1.5f), k->beta = rand_floats(k->C, -0.5f, 0.5f);
    k->xn = widen_nchw(k->x, batch, k->C, spatial), k->zn = widen_nchw(k->z, batch, k->C, spatial);
    k->dyn = widen_nchw(k->dy, batch, k->C, spatial);
    return 1;
}
static void bn_case_free(BnCase *k) {
    free(k->F.part), free(k->B.part), free(k->x), free(k->z), free(k->dy), free(k->gamma);
    free(k->beta), free(k->xn), free(k->zn), free(k->dyn);
}

/* mode 0 plain, 1 + ReLU, 2 + add + ReLU: the played forward and backward against the CPU's
 * unfused rows (batch norm, add, ReLU in place; their backward, the add's gradient copied) */
static void test_bn_mode(const BnCase *k, int mode) {
    const BnShape *s = &k->s;
    const size_t n = k->n, C = k->C, N = (size_t)s->batch, P = (size_t)s->spatial;
    const int relu = mode > 0, add = mode == 2;
    Launch16 F = k->F, B = k->B;
    float *y = malloc(n * 4), *mean = malloc(C * 4), *inv = malloc(C * 4);
    float *rm = calloc(C, 4), *rv = malloc(C * 4), *rm2 = calloc(C, 4), *rv2 = malloc(C * 4);
    for (size_t i = 0; i < C; i++)
        rv[i] = rv2[i] = 1.0f;
    cpu_backend.batchnorm_forward_train(NULL, s, k->xn, k->gamma, k->beta, y, mean, inv, rm, rv);
    if (add) cpu_backend.add_forward(NULL, n, y, k->zn, y);
    if (relu) cpu_backend.relu_forward(NULL, n, y, y);
    float *mean2 = malloc(C * 4), *inv2 = malloc(C * 4), *yn = malloc(n * 4);
    dt16 *y16 = poison16(n);
    play_train(&F, s, k->x, k->gamma, k->beta, add ? k->z : NULL, relu, y16, mean2, inv2, rm2, rv2);
    layout_to_nhwc(N, C, P, y, yn);
    int ok = close_f(mean2, mean, C, 1e-5f, "mean") && close_f(inv2, inv, C, 1e-5f, "invstd") &&
             close_f(rm2, rm, C, 1e-5f, "running mean") &&
             close_f(rv2, rv, C, 1e-5f, "running var") && close16(y16, yn, n);
    float *g = copy_floats(k->dyn, n), *dx = malloc(n * 4), *dg = malloc(C * 4);
    float *db = malloc(C * 4), *dg2 = malloc(C * 4), *db2 = malloc(C * 4);
    float *act = widen_nchw(y16, N, C, P); /* the stored output, as the GPU's */
    if (relu) cpu_backend.relu_backward(NULL, n, act, g, g);
    cpu_backend.batchnorm_backward(NULL, s, k->xn, k->gamma, mean2, inv2, g, dx, dg, db);
    dt16 *dx16 = poison16(n), *dz16 = poison16(n);
    play_back(&B, s, k->x, k->gamma, mean2, inv2, relu ? y16 : NULL, k->dy, dx16, add ? dz16 : NULL,
              dg2, db2);
    float *dxn = malloc(n * 4), *gz = malloc(n * 4);
    layout_to_nhwc(N, C, P, dx, dxn);
    layout_to_nhwc(N, C, P, g, gz);
    ok &= close_f(dg2, dg, C, 1e-5f, "dgamma") && close_f(db2, db, C, 1e-5f, "dbeta") &&
          close16(dx16, dxn, n);
    for (size_t i = 0; add && i < n; i++) /* dz: the masked gradient, exactly */
        ok &= dt16_f(dz16[i], HALF) == gz[i];
    if (add) { /* dz may alias dy: the same dx, and the masked gradient left in dy */
        dt16 *d2 = malloc(n * sizeof *d2), *dx2 = poison16(n);
        memcpy(d2, k->dy, n * sizeof *d2);
        play_back(&B, s, k->x, k->gamma, mean2, inv2, y16, d2, dx2, d2, dg2, db2);
        ok &= same16(dx2, dx16, n) && same16(d2, dz16, n);
        free(d2), free(dx2);
    }
    EXPECT(ok,
           "%s: batch norm [%d,%d,%d] %s (vec %d forward, %d backward), training forward and "
           "backward (dz too) = the CPU's rows (statistics and parameter gradients 1e-5, outputs "
           "within one rounding)",
           type_name(), s->batch, s->c, s->spatial,
           mode == 0   ? "plain"
           : mode == 1 ? "+ReLU"
                       : "+add+ReLU (dz apart and over dy)",
           F.g.vec, B.g.vec);
    free(y), free(mean), free(inv), free(rm), free(rv), free(rm2), free(rv2), free(mean2);
    free(inv2), free(y16), free(yn), free(g), free(dx), free(dg), free(db), free(act);
    free(dg2), free(db2), free(dx16), free(dz16), free(dxn), free(gz);
}

/* inference: finalize_infer_kernel's factors through the same apply_kernel, + add + ReLU */
static void test_bn_infer(const BnCase *k) {
    const BnShape *s = &k->s;
    const size_t n = k->n, C = k->C;
    float *rmean = rand_floats(C, -1, 1), *rvar = rand_floats(C, 0.5f, 2), *coef = malloc(8 * C);
    float *yi = malloc(n * 4), *yin = malloc(n * 4);
    dt16 *y16 = poison16(n);
    for (size_t ch = 0; ch < C; ch++)
        dt_bn_coeffs(k->gamma[ch], k->beta[ch], rmean[ch], dt_bn_infer_invstd(rvar[ch], s->eps),
                     &coef[ch], &coef[C + ch]);
    play_apply(&k->F.g, coef, k->x, k->z, 1, y16);
    cpu_backend.batchnorm_forward_infer(NULL, s, k->xn, k->gamma, k->beta, rmean, rvar, yi);
    cpu_backend.add_forward(NULL, n, yi, k->zn, yi);
    cpu_backend.relu_forward(NULL, n, yi, yi);
    layout_to_nhwc((size_t)s->batch, C, (size_t)s->spatial, yi, yin);
    EXPECT(close16(y16, yin, n), "%s: batch norm [%d,%d,%d] inference +add+ReLU = the CPU's rows",
           type_name(), s->batch, s->c, s->spatial);
    free(rmean), free(rvar), free(coef), free(yi), free(yin), free(y16);
}

/* the bias gradient: sums of dy's rows (DT16_COLSUM); and on ones, each row counted once */
static void test_colsum(BnCase *k) {
    const size_t n = k->n, C = k->C;
    play_sums(&k->F, DT16_COLSUM, NULL, k->dy, NULL, NULL, NULL);
    float *sum = malloc(C * 4), *ref = calloc(C, 4);
    for (size_t ch = 0; ch < C; ch++) {
        double a, b;
        combine(&k->F, (int)ch, &a, &b);
        sum[ch] = (float)a;
    }
    for (size_t i = 0; i < n; i++)
        ref[i % C] += dt16_f(k->dy[i], HALF);
    int ok = close_f(sum, ref, C, 1e-5f, "bias gradient");
    dt16 *ones = malloc(n * sizeof *ones);
    for (size_t i = 0; i < n; i++)
        ones[i] = dt16_r(1.0f, HALF);
    for (int b = 0; b < 2; b++) {
        Launch16 *L = b ? &k->B : &k->F;
        play_sums(L, DT16_COLSUM, NULL, ones, NULL, NULL, NULL);
        for (size_t ch = 0; ch < C; ch++) {
            double a, q;
            combine(L, (int)ch, &a, &q);
            ok &= a == (double)k->rows;
        }
    }
    EXPECT(ok,
           "%s: the bias gradient of [%zu rows, %zu] = the rows' sums; every row of every "
           "channel summed once (both grids)",
           type_name(), k->rows, C);
    free(sum), free(ref), free(ones);
}

static void test_bn(int batch, int c, int spatial) {
    BnCase k;
    if (!bn_case(&k, batch, c, spatial)) {
        EXPECT(0, "nhwc_grid takes [%d,%d,%d]", batch, c, spatial);
        return;
    }
    for (int mode = 0; mode < 3; mode++)
        test_bn_mode(&k, mode);
    test_bn_infer(&k);
    test_colsum(&k);
    bn_case_free(&k);
}

int main(void) {
    rand_seed(16);
    test_grid();
    for (HALF = 0; HALF <= 1; HALF++) {
        test_bn(4, 8, 9);    /* rows across row lanes */
        test_bn(2, 40, 25);  /* vec 8 forward, 4 backward */
        test_bn(3, 200, 37); /* four channel tiles, the last partial; several blocks a tile */
        test_bn(5, 12, 31);  /* vec 4 both ways */
        test_bn(16, 3, 1);   /* after an fc: one pixel, vec 1 */
        test_bn(2, 64, 600); /* long slabs: every row lane walks many unrolled groups */
    }
    return check_summary();
}
