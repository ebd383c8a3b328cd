/* test_device_bn.c - the fast batch-norm kernels (kernels/cuda/cuda_batchnorm_kernels.cu) run on
 * the CPU, no GPU needed: what decides their results is plain C shared with the device code, their
 * grid (cuda_plan.c's bn_grid), the walk of each block over its slice of a channel and the
 * statistics and per-element arithmetic (cuda_elem.h's DtWalk, dt_bn_stats, dt_bn_back_factors,
 * dt_bn_coeffs, dt_bn_affine, dt_bn_back). Here every block and thread of a launch is played in
 * turn with those functions, in the kernels' order (per-thread double sums, a block's sum, a
 * channel's blocks combined in split order), and the results are compared with the CPU backend:
 *   - bn_grid covers every unit of every channel once, fills the GPU, respects its scratch;
 *   - the walk visits exactly the NCHW indices of its channel slice, each once, for planes of any
 *     size against any thread count (including planes longer and shorter than a block);
 *   - training forward, inference and backward against cpu_backend (statistics within 1e-6, the
 *     outputs within 1e-5; the normalisation bit for bit given the statistics), and the fused
 *     BN->ReLU and BN->add->ReLU forward and backward against the CPU's unfused rows (batch norm,
 *     residual add, ReLU in place; their backward with the add's gradient copied): the fused
 *     epilogue and the masked residual gradient bit for bit.
 * Indexing on the device itself, 16-byte loads and the shuffle order are left to
 * tests/test_cuda_bn.c on a GPU. */
#include "harness.h"
#include "backend.h"
#include "cuda_elem.h"
#include "cuda_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* one counted check (tests/harness.h), its message already formatted */
static void check(int ok, const char *what) {
    EXPECT(ok, "%s", what);
}

static float *copy_buf(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, x, n * sizeof *p);
    return p;
}
static int close_rel(const float *a, const float *b, size_t n, float tol, const char *what) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(a[i] - b[i]) <= tol * (1.0f + fabsf(b[i])))) {
            printf("  %s[%zu]: %.9g vs %.9g\n", what, i, a[i], b[i]);
            return 0;
        }
    return 1;
}
static int same_bits(const float *a, const float *b, size_t n) {
    return memcmp(a, b, n * sizeof *a) == 0;
}

#define THREADS 256 /* BN_BLOCK_THREADS */

/* ---- the grid and the walk ---------------------------------------------------------------- */

/* Channel c's element indices visited by the whole grid, counted per index of the tensor; 1 if
 * exactly the channel's indices were visited once each. */
static int walk_covers(const BnShape *s, const BnGrid *g, int c, int threads, unsigned char *seen) {
    const size_t n = (size_t)s->batch * s->c * s->spatial;
    memset(seen, 0, n);
    for (int b = 0; b < g->splits; b++) {
        const int e0 = b * g->chunk, e1 = e0 + g->chunk < g->units ? e0 + g->chunk : g->units;
        if (e0 >= e1) return 0; /* a block without units */
        for (int t = 0; t < threads; t++) {
            DtWalk w;
            dt_walk_init(&w, g->sp, s->c * g->sp, c, e0, e1, t, threads);
            for (; dt_walk_more(&w); dt_walk_next(&w))
                for (int j = 0; j < g->vec; j++)
                    seen[(size_t)dt_walk_index(&w) * g->vec + j]++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const int chan = (int)(i / s->spatial % s->c);
        if (seen[i] != (chan == c)) return 0;
    }
    return 1;
}

static void test_grid_and_walk(void) {
    /* ResNet-50's batch-norm shapes at batch 256 (a 64-channel 112x112 plane, 49-element planes,
     * 2048 channels), odd planes shorter and longer than a block, and tiny tensors */
    const BnShape shapes[] = {
        {256, 64, 112 * 112, 1e-5f, 0.1f},
        {256, 256, 56 * 56, 1e-5f, 0.1f},
        {256, 2048, 49, 1e-5f, 0.1f},
        {3, 5, 9, 1e-5f, 0.1f},
        {7, 3, 300, 1e-5f, 0.1f},
        {2, 4096, 1, 1e-5f, 0.1f},
        {1, 1, 1, 1e-5f, 0.1f},
        {5, 2, 12, 1e-5f, 0.1f},
    };
    int ok = 1;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
        for (int aligned = 0; aligned < 2; aligned++) {
            const BnShape *s = &shapes[k];
            BnGrid g;
            if (!bn_grid(s, aligned, 132, THREADS, 65536, &g)) {
                printf("  bn_grid refused [%d,%d,%d]\n", s->batch, s->c, s->spatial);
                ok = 0;
                continue;
            }
            const int vec_ok = g.vec == (aligned && s->spatial % 4 == 0 ? 4 : 1);
            const int cover = g.splits >= 1 && (long long)g.splits * g.chunk >= g.units &&
                              (long long)(g.splits - 1) * g.chunk < g.units &&
                              g.units == s->batch * (s->spatial / g.vec);
            const int scratch = (long long)g.splits * s->c <= 65536;
            /* enough blocks to fill 132 multiprocessors when there is work for them */
            const long long blocks = (long long)g.splits * s->c,
                            work = (long long)s->batch * s->c * s->spatial;
            const int fills = blocks >= 132 * 8 || work < 132LL * 8 * THREADS * 4 * g.vec ||
                              g.chunk <= 4 * THREADS + 4;
            if (!(vec_ok && cover && scratch && fills)) {
                printf("  [%d,%d,%d] aligned %d: vec %d splits %d chunk %d units %d\n", s->batch,
                       s->c, s->spatial, aligned, g.vec, g.splits, g.chunk, g.units);
                ok = 0;
            }
        }
    check(ok, "bn_grid: every unit of a channel in one block, vec 4 only on aligned planes of "
              "4k, at most 65536 blocks, the GPU filled");
    BnGrid g;
    const BnShape huge = {1 << 16, 64, 1 << 10, 1e-5f, 0.1f}, wide = {2, 70000, 1, 1e-5f, 0.1f};
    check(!bn_grid(&huge, 1, 132, THREADS, 65536, &g) &&
              !bn_grid(&wide, 1, 132, THREADS, 65536, &g),
          "bn_grid refuses 2^31 elements and more channels than its scratch");

    /* the walk: every shape above small enough to enumerate, thread counts around the planes */
    ok = 1;
    const int threads[] = {THREADS, 32, 5, 49, 1};
    for (size_t k = 3; k < sizeof shapes / sizeof shapes[0]; k++)
        for (size_t t = 0; t < sizeof threads / sizeof threads[0]; t++)
            for (int aligned = 0; aligned < 2; aligned++) {
                const BnShape *s = &shapes[k];
                BnGrid gr;
                bn_grid(s, aligned, 2, threads[t], 65536, &gr);
                unsigned char *seen = malloc((size_t)s->batch * s->c * s->spatial);
                for (int c = 0; c < s->c && c < 64; c++)
                    if (!walk_covers(s, &gr, c, threads[t], seen)) {
                        printf("  walk [%d,%d,%d] c %d threads %d vec %d splits %d\n", s->batch,
                               s->c, s->spatial, c, threads[t], gr.vec, gr.splits);
                        ok = 0;
                        break;
                    }
                free(seen);
            }
    check(ok, "DtWalk: each block's threads visit exactly their channel's NCHW indices, once");
}

/* ---- the kernels, played on the CPU --------------------------------------------------------- */

typedef struct {
    const BnShape *s;
    BnGrid g;
    double *part; /* [c][splits][2] */
} Launch;

/* bn_stats_kernel (backward: bn_back_stats_kernel with mean, act_y, and dz where the gradient
 * reaching the batch norm is stored): per thread double sums along its walk, per block their sum,
 * into part */
static void play_stats(Launch *L, const float *x, const float *mean, const float *act_y,
                       const float *dy, float *dz) {
    const BnShape *s = L->s;
    const BnGrid *g = &L->g;
    for (int c = 0; c < s->c; c++)
        for (int b = 0; b < g->splits; b++) {
            const int e0 = b * g->chunk, e1 = e0 + g->chunk < g->units ? e0 + g->chunk : g->units;
            double a = 0, q = 0;
            const double shift = x[c * g->sp * g->vec];
            for (int t = 0; t < THREADS; t++) {
                double ta = 0, tq = 0;
                DtWalk w;
                dt_walk_init(&w, g->sp, s->c * g->sp, c, e0, e1, t, THREADS);
                for (; dt_walk_more(&w); dt_walk_next(&w))
                    for (int j = 0; j < g->vec; j++) {
                        const int i = dt_walk_index(&w) * g->vec + j;
                        if (!dy) {
                            const double d = (double)x[i] - shift;
                            ta += d, tq += d * d;
                        } else {
                            const float gj = act_y ? dt_relu_grad(dy[i], act_y[i]) : dy[i];
                            if (dz) dz[i] = gj;
                            ta += gj, tq += gj * (x[i] - mean[c]);
                        }
                    }
                a += ta, q += tq;
            }
            L->part[2 * ((size_t)c * g->splits + b)] = a;
            L->part[2 * ((size_t)c * g->splits + b) + 1] = q;
        }
}

static void combine(const Launch *L, int c, double *a, double *b) {
    *a = *b = 0;
    for (int i = 0; i < L->g.splits; i++)
        *a += L->part[2 * ((size_t)c * L->g.splits + i)],
            *b += L->part[2 * ((size_t)c * L->g.splits + i) + 1];
}

/* bn_train_apply_kernel<ACT, ADD>: statistics, running statistics, y = relu(affine + z) */
static void play_train(Launch *L, const float *x, const float *gamma, const float *beta,
                       const float *z, int relu, float *y, float *mean, float *invstd, float *rm,
                       float *rv) {
    const BnShape *s = L->s;
    play_stats(L, x, NULL, NULL, NULL, NULL);
    for (int c = 0; c < s->c; c++) {
        double s1, s2;
        combine(L, c, &s1, &s2);
        float unbiased, mul, add;
        dt_bn_stats(s1, s2, (double)s->batch * s->spatial, x[c * s->spatial], s->eps, &mean[c],
                    &invstd[c], &unbiased);
        rm[c] = dt_bn_running(rm[c], s->momentum, mean[c]);
        rv[c] = dt_bn_running(rv[c], s->momentum, unbiased);
        dt_bn_coeffs(gamma[c], beta[c], mean[c], invstd[c], &mul, &add);
        for (int n = 0; n < s->batch; n++)
            for (int p = 0; p < s->spatial; p++) {
                const size_t i = ((size_t)n * s->c + c) * s->spatial + p;
                y[i] =
                    dt_bn_epilogue(dt_bn_affine(x[i], mul, add), z ? z[i] : 0.0f, z != NULL, relu);
            }
    }
}

/* bn_back_stats_kernel<ACT, DZ>, then bn_back_apply_kernel<ACT> on dy, or with dz on the
 * gradient stored there */
static void play_backward(Launch *L, const float *x, const float *gamma, const float *mean,
                          const float *invstd, const float *act_y, const float *dy, float *dx,
                          float *dz, float *dg, float *db) {
    const BnShape *s = L->s;
    play_stats(L, x, mean, act_y, dy, dz);
    const float *gin = dz ? dz : dy;
    if (dz) act_y = NULL;
    for (int c = 0; c < s->c; c++) {
        double a, b;
        combine(L, c, &a, &b);
        float k, m_dy, m_xdy;
        dt_bn_back_factors(a, b, (double)s->batch * s->spatial, gamma[c], invstd[c], &dg[c], &db[c],
                           &k, &m_dy, &m_xdy);
        for (int n = 0; n < s->batch; n++)
            for (int p = 0; p < s->spatial; p++) {
                const size_t i = ((size_t)n * s->c + c) * s->spatial + p;
                const float gi = act_y ? dt_relu_grad(gin[i], act_y[i]) : gin[i];
                dx[i] = dt_bn_back(k, gi, m_dy, x[i], mean[c], m_xdy);
            }
    }
}

/* One shape: plain, +ReLU and +add+ReLU, training forward and backward against the CPU rows. */
static void test_shape(const BnShape *s) {
    const size_t n = (size_t)s->batch * s->c * s->spatial, C = (size_t)s->c;
    Launch L = {s, {0}, NULL};
    if (!bn_grid(s, 1, 2, THREADS, 65536, &L.g)) {
        check(0, "bn_grid takes the test shape");
        return;
    }
    L.part = malloc(2 * C * L.g.splits * sizeof(double));
    float *x = rand_floats(n, -3, 5), *z = rand_floats(n, -1, 1), *dy = rand_floats(n, -1, 1);
    float *gamma = rand_floats(C, 0.5f, 1.5f), *beta = rand_floats(C, -0.5f, 0.5f);
    float *rm0 = rand_floats(C, -1, 1), *rv0 = rand_floats(C, 0.5f, 2);
    char what[160];
    for (int mode = 0; mode < 3; mode++) { /* 0: plain, 1: ReLU, 2: add + ReLU */
        const int relu = mode > 0;
        const float *zz = mode == 2 ? z : NULL;
        /* the CPU's unfused rows: batch norm, then add, then ReLU in place */
        float *y = malloc(n * 4), *mean = malloc(C * 4), *invstd = malloc(C * 4);
        float *rm = copy_buf(rm0, C), *rv = copy_buf(rv0, C);
        cpu_backend.batchnorm_forward_train(NULL, s, x, gamma, beta, y, mean, invstd, rm, rv);
        float *bn_out = copy_buf(y, n);
        if (zz) cpu_backend.add_forward(NULL, n, y, zz, y);
        if (relu) cpu_backend.relu_forward(NULL, n, y, y);
        /* the fused kernel, played */
        float *y2 = malloc(n * 4), *mean2 = malloc(C * 4), *invstd2 = malloc(C * 4);
        float *rm2 = copy_buf(rm0, C), *rv2 = copy_buf(rv0, C);
        play_train(&L, x, gamma, beta, zz, relu, y2, mean2, invstd2, rm2, rv2);
        int ok = close_rel(mean2, mean, C, 1e-6f, "mean") &&
                 close_rel(invstd2, invstd, C, 1e-6f, "invstd") &&
                 close_rel(rm2, rm, C, 1e-6f, "running_mean") &&
                 close_rel(rv2, rv, C, 1e-5f, "running_var") && close_rel(y2, y, n, 1e-5f, "y");
        /* the epilogue bit for bit: the CPU's rows on the played statistics */
        float *y3 = malloc(n * 4), *rm3 = copy_buf(rm0, C), *rv3 = copy_buf(rv0, C);
        for (size_t c = 0; c < C; c++) {
            float mul, add;
            dt_bn_coeffs(gamma[c], beta[c], mean2[c], invstd2[c], &mul, &add);
            for (int b = 0; b < s->batch; b++)
                for (int p = 0; p < s->spatial; p++) {
                    const size_t i = ((size_t)b * C + c) * s->spatial + p;
                    y3[i] = dt_bn_affine(x[i], mul, add);
                }
        }
        if (zz) cpu_backend.add_forward(NULL, n, y3, zz, y3);
        if (relu) cpu_backend.relu_forward(NULL, n, y3, y3);
        ok &= same_bits(y2, y3, n);
        snprintf(what, sizeof what,
                 "[%d,%d,%d] %s: training forward = CPU (statistics 1e-6, y 1e-5; the epilogue "
                 "bit for bit)",
                 s->batch, s->c, s->spatial,
                 mode == 0   ? "bn"
                 : mode == 1 ? "bn+relu"
                             : "bn+add+relu");
        check(ok, what);

        /* backward: CPU ReLU backward in place, the add's gradient copied, batch-norm backward */
        float *g = copy_buf(dy, n), *dx = malloc(n * 4), *dg = malloc(C * 4), *db = malloc(C * 4);
        if (relu) cpu_backend.relu_backward(NULL, n, y, g, g);
        float *gz = copy_buf(g, n); /* what the add's backward gives its other input */
        cpu_backend.batchnorm_backward(NULL, s, x, gamma, mean, invstd, g, dx, dg, db);
        float *dx2 = malloc(n * 4), *dz2 = malloc(n * 4), *dg2 = malloc(C * 4),
              *db2 = malloc(C * 4);
        play_backward(&L, x, gamma, mean, invstd, relu ? y : NULL, dy, dx2, zz ? dz2 : NULL, dg2,
                      db2);
        ok = close_rel(dx2, dx, n, 1e-5f, "dx") && close_rel(dg2, dg, C, 1e-5f, "dgamma") &&
             close_rel(db2, db, C, 1e-5f, "dbeta") && (!zz || same_bits(dz2, gz, n));
        if (zz) { /* dz over dy (backend.h allows it): the same dx, the residual gradient there */
            float *d = copy_buf(dy, n), *dx3 = malloc(n * 4);
            play_backward(&L, x, gamma, mean, invstd, y, d, dx3, d, dg2, db2);
            ok &= same_bits(dx3, dx2, n) && same_bits(d, gz, n);
            free(d), free(dx3);
        }
        snprintf(what, sizeof what,
                 "[%d,%d,%d] %s: backward = CPU (1e-5; the residual gradient bit for bit, apart "
                 "and over dy)",
                 s->batch, s->c, s->spatial,
                 mode == 0   ? "bn"
                 : mode == 1 ? "bn+relu"
                             : "bn+add+relu");
        check(ok, what);
        (void)bn_out;
        free(y), free(mean), free(invstd), free(rm), free(rv), free(bn_out), free(y2), free(mean2),
            free(invstd2), free(rm2), free(rv2), free(y3), free(rm3), free(rv3), free(g), free(dx),
            free(dg), free(db), free(gz), free(dx2), free(dz2), free(dg2), free(db2);
    }
    free(L.part), free(x), free(z), free(dy), free(gamma), free(beta), free(rm0), free(rv0);
}

/* dt_bn_stats keeps a channel whose mean dwarfs its spread: the shifted sums in double give the
 * variance that a float two-pass gives, where sum x^2 - (sum x)^2/n in float would give noise. */
static void test_stats_shift(void) {
    const int n = 4096;
    double s1 = 0, s2 = 0, ref_m = 0, ref_v = 0;
    float *x = rand_floats(n, 1000.0f, 1000.01f);
    const float shift = x[0];
    for (int i = 0; i < n; i++)
        ref_m += x[i];
    ref_m /= n;
    for (int i = 0; i < n; i++) {
        const double d = (double)x[i] - shift;
        s1 += d, s2 += d * d;
        ref_v += ((double)x[i] - ref_m) * ((double)x[i] - ref_m);
    }
    ref_v /= n;
    float mean, invstd, unb;
    dt_bn_stats(s1, s2, n, shift, 1e-5f, &mean, &invstd, &unb);
    const double want = 1.0 / sqrt(ref_v + 1e-5);
    check(fabs(mean - ref_m) <= 1e-4 && fabs(invstd - want) <= 1e-5 * want &&
              fabs(unb - ref_v * n / (n - 1)) <= 1e-4 * ref_v,
          "dt_bn_stats: mean 1000, spread 0.01: mean, invstd and unbiased variance exact to "
          "float");
    free(x);
}

int main(void) {
    rand_seed(24);
    test_grid_and_walk();
    test_stats_shift();
    const BnShape shapes[] = {{4, 5, 9, 1e-5f, 0.1f},
                              {3, 7, 64, 1e-5f, 0.1f},
                              {2, 3, 700, 1e-3f, 0.2f},
                              {16, 8, 1, 1e-5f, 0.1f},
                              {1, 2, 1, 1e-5f, 0.1f}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        test_shape(&shapes[i]);
    return check_summary();
}
