/* test_device_transformer.c - the CUDA backend's transformer kernels and AdamW played on the CPU,
 * no GPU needed: every block, warp and lane of each launch of kernels/cuda_transformer_kernels.cu
 * (and of adamw_update's grid) runs the functions it runs on the device
 * (kernels/cuda_transformer.h, cuda_elem.h: compiled here as plain C), and the attention's cuBLAS
 * calls (att_gemm, kernels/cuda_transformer_plan.c) run through cblas_sgemm(CblasColMajor), which
 * takes cuBLAS's arguments, against the float64 references of tests/gpt_ref.c. Tolerances (|got -
 * ref| <= max(atol, rtol |ref|), fp32 against float64): layer norm: mean, rstd 1e-5; y 1e-5 (1 +
 * |y|) (1 + |mean| rstd), dx 2e-5 rstd (1 + |mean| rstd): a float mean is off by half an ulp of
 * |mean|, which xhat carries times rstd; dgamma 1e-5 sum_rows |dy| (1 + |mean| rstd), dbeta 1e-5;
 * on dy = 1, dbeta exactly the row count (each row summed once by the grid) GELU: 1e-6 absolute,
 * 1e-5 relative (dt_expf within 2 ulp) causal softmax rows: 1e-6 relative to the row's largest p,
 * exact zeros above the diagonal; its backward 1e-5 of the row's largest p (|dP| + |rowsum(dP P)|)
 * scale attention through the GEMM plan: y 2e-5, dqkv 5e-5 (absolute, inputs in [-1, 1)) tokpos: y,
 * dwpe bit for bit (one add per term, the CPU's order); dwte bit for bit against the float sum in
 * position order (the CPU backend's) and within 1e-6 x repeats of float64 AdamW: bit for bit
 * against backend.h's formula in float (PyTorch's order), 1e-6 relative against the textbook form
 * in double, 3 steps Left to a GPU (tests/test_cuda_transformer.c): the launches' indexing on the
 * device, the shuffles, cuBLAS's own arithmetic and nvcc honouring -fmad=false. */
#include "backend.h"
#include "cuda_elem.h"
#include "cuda_transformer.h"
#include "gpt_ref.h"
#include "harness.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMS      3     /* a small GPU: the tests' small tensors still take several blocks */
#define PART_CAP 65536 /* the batch-norm scratch's pairs (cuda_ctx.h BN_PARTIALS_CAP) */

/* ---- layer norm --------------------------------------------------------------------------------
 */

/* ln_forward_kernel / ln_dx_kernel: a warp per row, lanes' partials, butterfly */
static void play_ln_forward(const LayerNormShape *s, const float *x, const float *gamma,
                            const float *beta, float *y, float *mean, float *rstd) {
    float v[DT_LANES];
    for (int row = 0; row < s->rows; row++) {
        const float *xr = x + (size_t)row * s->dim;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_sum(xr, s->dim, l, DT_LANES);
        const float m = dt_ln_mean(dt_lanes_sum(v), s->dim);
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_sqdev(xr, s->dim, l, DT_LANES, m);
        const float r = dt_ln_rstd(dt_lanes_sum(v), s->dim, s->eps);
        mean[row] = m, rstd[row] = r;
        for (int j = 0; j < s->dim; j++)
            y[(size_t)row * s->dim + j] = dt_ln_y(xr[j], m, r, gamma[j], beta[j]);
    }
}

static void play_ln_dx(const LayerNormShape *s, const float *x, const float *gamma,
                       const float *mean, const float *rstd, const float *dy, float *dx) {
    float vg[DT_LANES], vx[DT_LANES];
    for (int row = 0; row < s->rows; row++) {
        const size_t o = (size_t)row * s->dim;
        for (int l = 0; l < DT_LANES; l++)
            dt_ln_lane_back(x + o, dy + o, gamma, s->dim, l, DT_LANES, mean[row], rstd[row], &vg[l],
                            &vx[l]);
        const float a = dt_lanes_sum(vg) / (float)s->dim, b = dt_lanes_sum(vx) / (float)s->dim;
        for (int j = 0; j < s->dim; j++)
            dx[o + j] = dt_ln_dx(x[o + j], dy[o + j], gamma[j], mean[row], rstd[row], a, b);
    }
}

/* ln_cols_kernel over the grid, then ln_cols_finish_kernel */
static void play_ln_cols(const LayerNormShape *s, const LnColGrid *g, const float *x,
                         const float *dy, const float *mean, const float *rstd, float *dgamma,
                         float *dbeta) {
    double *part = malloc(2 * (size_t)g->splits * s->dim * sizeof(double));
    double sh_g[LN_LANES][LN_COLS], sh_b[LN_LANES][LN_COLS];
    for (int cb = 0; cb < g->colblocks; cb++)
        for (int split = 0; split < g->splits; split++) {
            const int r0 = split * g->chunk;
            const int r1 = r0 + g->chunk < s->rows ? r0 + g->chunk : s->rows;
            for (int th = 0; th < LN_COLS * LN_LANES; th++) {
                const int tc = th % LN_COLS, lane = th / LN_COLS, col = cb * LN_COLS + tc;
                sh_g[lane][tc] = sh_b[lane][tc] = 0.0;
                if (col < s->dim)
                    dt_ln_col_thread(x, dy, mean, rstd, s->dim, col, r0, r1, lane, &sh_g[lane][tc],
                                     &sh_b[lane][tc]);
            }
            for (int tc = 0; tc < LN_COLS && cb * LN_COLS + tc < s->dim; tc++) {
                const int col = cb * LN_COLS + tc;
                part[(size_t)split * s->dim + col] = dt_ln_col_lanes(&sh_g[0][tc], LN_COLS);
                part[(size_t)(g->splits + split) * s->dim + col] =
                    dt_ln_col_lanes(&sh_b[0][tc], LN_COLS);
            }
        }
    for (int c = 0; c < s->dim; c++) {
        dgamma[c] = dt_ln_col_finish(part, g->splits, s->dim, c);
        dbeta[c] = dt_ln_col_finish(part + (size_t)g->splits * s->dim, g->splits, s->dim, c);
    }
    free(part);
}

static void test_ln_grid(void) {
    const int shapes[][3] = {{8192, 768, 132}, {1024, 768, 132}, {37, 50, 3},  {1, 1, 3},
                             {100000, 3, 132}, {64, 4096, 132},  {5, 65536, 8}};
    int ok = 1;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        LnColGrid g;
        const int rows = shapes[k][0], dim = shapes[k][1];
        ok &= ln_col_grid(rows, dim, shapes[k][2], PART_CAP, &g);
        ok &= g.colblocks * LN_COLS >= dim && (g.colblocks - 1) * LN_COLS < dim && g.splits >= 1 &&
              (long long)g.splits * g.chunk >= rows && (long long)(g.splits - 1) * g.chunk < rows &&
              (long long)g.splits * dim <= PART_CAP && g.splits <= 65535;
        if (!ok) {
            printf("  [%d x %d] colblocks %d splits %d chunk %d\n", rows, dim, g.colblocks,
                   g.splits, g.chunk);
            break;
        }
    }
    LnColGrid g;
    ok &= !ln_col_grid(0, 8, 3, PART_CAP, &g) && !ln_col_grid(8, 70000, 3, PART_CAP, &g);
    EXPECT(ok, "ln_col_grid: every column and row in one block, no empty split, within the "
               "scratch; refuses no rows and more columns than the scratch");
}

static void test_layernorm(int rows, int dim, int sms, long long cap) {
    const LayerNormShape s = {.rows = rows, .dim = dim, .eps = 1e-5f};
    const size_t n = (size_t)rows * dim;
    float *x = rand_floats(n, -1, 1), *dy = rand_floats(n, -1, 1);
    float *gamma = rand_floats((size_t)dim, 0.5f, 1.5f), *beta = rand_floats((size_t)dim, -1, 1);
    for (int r = 0; r < rows; r += 3) /* rows of other scales and far from zero */
        for (int j = 0; j < dim; j++)
            x[(size_t)r * dim + j] = 40.0f + 0.01f * x[(size_t)r * dim + j];
    float *y = halloc(n), *dx = halloc(n), *mean = halloc((size_t)rows),
          *rstd = halloc((size_t)rows);
    float *ry = halloc(n), *rdx = halloc(n), *rm = halloc((size_t)rows), *rr = halloc((size_t)rows);
    float *dg = halloc((size_t)dim), *db = halloc((size_t)dim), *rdg = halloc((size_t)dim),
          *rdb = halloc((size_t)dim);
    play_ln_forward(&s, x, gamma, beta, y, mean, rstd);
    gref_layernorm_forward(&s, x, gamma, beta, ry, rm, rr);
    char shape[32];
    snprintf(shape, sizeof shape, "%dx%d", rows, dim);
    /* A row's float mean is off by up to half an ulp of |mean|, which xhat = (x - mean) rstd
     * carries times rstd: outputs are held to 1e-5 (1 + |mean| rstd), the row's conditioning (the
     * rows offset to 40 with spread 0.01 have |mean| rstd ~ 7000; the CPU backend's float
     * statistics share it). */
    double worst = 0, worst_dx = 0, worst_dg = 0;
    int ok = 1, ok_dx = 1, ok_dg = 1;
    for (size_t i = 0; i < n; i++) {
        const size_t r = i / (size_t)dim;
        const double k = 1.0 + fabs((double)rm[r]) * rr[r], e = fabs((double)y[i] - ry[i]) / k;
        worst = e > worst || isnan(e) ? e : worst;
        ok &= e <= 1e-5 * (1.0 + fabs((double)ry[i]));
    }
    EXPECT(ok, "layernorm y %s: max abs diff / (1 + |mean| rstd) %.3g (tolerance 1e-5 (1 + |y|))",
           shape, worst);
    check_close(fmt_label("layernorm mean %s", shape), mean, rm, (size_t)rows, 1e-6, 1e-5);
    check_close(fmt_label("layernorm rstd %s", shape), rstd, rr, (size_t)rows, 0, 1e-5);

    LnColGrid g = {0, 0, 0};
    EXPECT(ln_col_grid(rows, dim, sms, cap, &g), "ln_col_grid %s: %d splits of %d rows", shape,
           g.splits, g.chunk);
    play_ln_dx(&s, x, gamma, mean, rstd, dy, dx);
    play_ln_cols(&s, &g, x, dy, mean, rstd, dg, db);
    gref_layernorm_backward(&s, x, gamma, dy, rdx, rdg, rdb);
    for (size_t i = 0; i < n; i++) { /* dx relative to its row's scale rstd and conditioning */
        const size_t r = i / (size_t)dim;
        const double e =
            fabs((double)dx[i] - rdx[i]) / (rr[r] * (1.0 + fabs((double)rm[r]) * rr[r]));
        worst_dx = e > worst_dx || isnan(e) ? e : worst_dx;
        ok_dx &= e <= 2e-5;
    }
    EXPECT(ok_dx, "layernorm dx %s: max abs diff / (rstd (1 + |mean| rstd)) %.3g (tolerance 2e-5)",
           shape, worst_dx);
    for (int c = 0; c < dim; c++) { /* dgamma: each term's xhat as conditioned as its row */
        double bound = 0;
        for (int r = 0; r < rows; r++)
            bound += fabs((double)dy[(size_t)r * dim + c]) * (1.0 + fabs((double)rm[r]) * rr[r]);
        const double e = fabs((double)dg[c] - rdg[c]) / bound;
        worst_dg = e > worst_dg || isnan(e) ? e : worst_dg;
        ok_dg &= e <= 1e-5;
    }
    EXPECT(ok_dg,
           "layernorm dgamma %s: max abs diff / sum |dy| (1 + |mean| rstd) %.3g "
           "(tolerance 1e-5)",
           shape, worst_dg);
    check_close(fmt_label("layernorm dbeta %s", shape), db, rdb, (size_t)dim, 1e-5, 1e-5);
    for (size_t i = 0; i < n; i++)
        dy[i] = 1.0f; /* each row counted once: dbeta = rows exactly */
    play_ln_cols(&s, &g, x, dy, mean, rstd, dg, db);
    for (int j = 0; j < dim; j++)
        rdb[j] = (float)rows;
    check_same_bits(fmt_label("layernorm dbeta on dy = 1 %s: the row count", shape), db, rdb,
                    (size_t)dim);
    free(x), free(dy), free(gamma), free(beta), free(y), free(dx), free(mean), free(rstd);
    free(ry), free(rdx), free(rm), free(rr), free(dg), free(db), free(rdg), free(rdb);
}

/* ---- GELU ------------------------------------------------------------------------------------ */

static void test_gelu(void) {
    const size_t n = 20001;
    float *x = halloc(n), *y = halloc(n), *d = halloc(n), *ry = halloc(n), *rd = halloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
    for (size_t i = 0; i < n; i++) { /* the kernels' loops: one element a thread */
        y[i] = dt_gelu(x[i]), d[i] = 1.0f * dt_gelu_grad(x[i]);
        ry[i] = (float)gref_gelu(x[i]), rd[i] = (float)gref_gelu_grad(x[i]);
    }
    check_close("gelu forward on [-12, 12]", y, ry, n, 1e-6, 1e-5);
    check_close("gelu backward (dy = 1) on [-12, 12]", d, rd, n, 1e-6, 1e-5);
    free(x), free(y), free(d), free(ry), free(rd);
}

/* ---- attention ---------------------------------------------------------------------------------
 */

static void play_softmax(size_t rows, int T, float *p) {
    float v[DT_LANES];
    for (size_t row = 0; row < rows; row++) {
        float *pr = p + row * T;
        const int n = (int)(row % (size_t)T) + 1;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_max(pr, n, l, DT_LANES);
        const float m = dt_lanes_max(v);
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_exp(pr, n, l, DT_LANES, m);
        const float inv = 1.0f / dt_lanes_sum(v);
        for (int l = 0; l < DT_LANES; l++)
            dt_att_lane_scale(pr, n, T, l, DT_LANES, inv);
    }
}

static void play_softmax_back(size_t rows, int T, const float *p, float *d, float scale) {
    float v[DT_LANES];
    for (size_t row = 0; row < rows; row++) {
        const float *pr = p + row * T;
        float *dr = d + row * T;
        const int n = (int)(row % (size_t)T) + 1;
        for (int l = 0; l < DT_LANES; l++)
            v[l] = dt_lane_dot(dr, pr, n, l, DT_LANES);
        const float dot = dt_lanes_sum(v);
        for (int l = 0; l < DT_LANES; l++)
            dt_att_lane_grad(dr, pr, n, T, l, DT_LANES, dot, scale);
    }
}

/* one att_gemm product of one sample through cblas, as cublasSgemmStridedBatched takes it */
static void play_gemm(const AttentionShape *s, AttProduct p, int b, float *const base[ATT_BUFS]) {
    const AttGemm a = att_gemm(s, p, b);
    for (int i = 0; i < a.count; i++)
        cblas_sgemm(CblasColMajor, a.g.trans_a ? CblasTrans : CblasNoTrans,
                    a.g.trans_b ? CblasTrans : CblasNoTrans, a.g.m, a.g.n, a.g.k, a.alpha,
                    base[a.a.buf] + a.a.off + i * a.a.stride, a.g.lda,
                    base[a.b.buf] + a.b.off + i * a.b.stride, a.g.ldb, 0.0f,
                    base[a.c.buf] + a.c.off + i * a.c.stride, a.g.ldc);
}

/* cuda_attention_forward and _backward, step by step */
static void play_attention(const AttentionShape *s, const float *qkv, float *y, float *P,
                           const float *dy, float *dqkv) {
    float *work = halloc(att_work_floats(s));
    float *const fw[ATT_BUFS] = {[ATT_QKV] = (float *)qkv, [ATT_P] = P, [ATT_OUT] = y};
    for (int b = 0; b < s->batch; b++)
        play_gemm(s, ATT_S, b, fw);
    play_softmax((size_t)s->batch * s->heads * s->seq, s->seq, P);
    for (int b = 0; b < s->batch; b++)
        play_gemm(s, ATT_Y, b, fw);
    float *const bw[ATT_BUFS] = {[ATT_QKV] = (float *)qkv,
                                 [ATT_P] = P,
                                 [ATT_OUT] = (float *)dy,
                                 [ATT_WORK] = work,
                                 [ATT_DQKV] = dqkv};
    for (int b = 0; b < s->batch; b++) {
        play_gemm(s, ATT_DP, b, bw);
        play_softmax_back((size_t)s->heads * s->seq, s->seq, P + (size_t)b * att_work_floats(s),
                          work, att_scale(s));
        play_gemm(s, ATT_DQ, b, bw), play_gemm(s, ATT_DK, b, bw), play_gemm(s, ATT_DV, b, bw);
    }
    free(work);
}

static void test_softmax_rows(int T) {
    const size_t rows = 3 * (size_t)T, n = rows * T;
    float *p = rand_floats(n, -30, 30), *d = rand_floats(n, -1, 1), *s0 = halloc(n);
    memcpy(s0, p, n * sizeof(float));
    play_softmax(rows, T, p);
    double worst = 0, worst_b = 0;
    int ok = 1, zeros = 1, ok_b = 1;
    double *e = malloc((size_t)T * sizeof(double)), *ds = malloc((size_t)T * sizeof(double));
    float *d0 = halloc(n);
    memcpy(d0, d, n * sizeof(float));
    play_softmax_back(rows, T, p, d, 0.125f);
    for (size_t r = 0; r < rows; r++) {
        const int len = (int)(r % (size_t)T) + 1;
        double mx = -INFINITY, sum = 0, big = 0, dot = 0, bigd = 0;
        for (int j = 0; j < len; j++)
            mx = fmax(mx, s0[r * T + j]);
        for (int j = 0; j < len; j++)
            sum += e[j] = exp(s0[r * T + j] - mx);
        for (int j = 0; j < len; j++)
            big = fmax(big, e[j] / sum);
        for (int j = 0; j < len; j++)
            dot += (double)d0[r * T + j] * p[r * T + j];
        for (int j = 0; j < len; j++) {
            const double err = fabs(p[r * T + j] - e[j] / sum) / big;
            worst = fmax(worst, err), ok &= err <= 1e-6;
            ds[j] = (double)p[r * T + j] * (d0[r * T + j] - dot) * 0.125;
            bigd = fmax(bigd, p[r * T + j] * (fabs(d0[r * T + j]) + fabs(dot)) * 0.125);
        }
        for (int j = 0; j < len; j++) {
            const double err = fabs(d[r * T + j] - ds[j]) / (bigd > 0 ? bigd : 1);
            worst_b = fmax(worst_b, err), ok_b &= err <= 1e-5;
        }
        for (int j = len; j < T; j++)
            zeros &= p[r * T + j] == 0.0f && d[r * T + j] == 0.0f;
    }
    EXPECT(ok && zeros,
           "causal softmax rows T=%d: max diff %.3g of the row's largest p "
           "(tolerance 1e-6), exact zeros above the diagonal",
           T, worst);
    EXPECT(ok_b,
           "causal softmax backward T=%d: max diff %.3g of the row's largest "
           "p (|dP| + |dot|) scale (tolerance 1e-5)",
           T, worst_b);
    free(p), free(d), free(s0), free(d0), free(e), free(ds);
}

static void test_attention(int batch, int seq, int heads, int head_dim) {
    const AttentionShape s = {.batch = batch, .seq = seq, .heads = heads, .head_dim = head_dim};
    const size_t C = (size_t)heads * head_dim, nq = (size_t)batch * seq * 3 * C,
                 ny = (size_t)batch * seq * C;
    float *qkv = rand_floats(nq, -1, 1), *dy = rand_floats(ny, -1, 1);
    float *y = halloc(ny), *dqkv = halloc(nq), *P = halloc(att_reserve_floats(&s));
    float *ry = halloc(ny), *rdq = halloc(nq), *rP = halloc(att_reserve_floats(&s));
    fill_nan(y, ny), fill_nan(dqkv, nq), fill_nan(P, att_reserve_floats(&s));
    play_attention(&s, qkv, y, P, dy, dqkv);
    gref_attention_forward(&s, qkv, ry, rP);
    gref_attention_backward(&s, qkv, dy, rdq);
    char shape[64];
    snprintf(shape, sizeof shape, "b%d T%d h%d d%d", batch, seq, heads, head_dim);
    check_close(fmt_label("attention P (reserve) %s", shape), P, rP, att_reserve_floats(&s), 1e-6,
                1e-5);
    check_close(fmt_label("attention y %s", shape), y, ry, ny, 2e-5, 0);
    check_close(fmt_label("attention dqkv %s", shape), dqkv, rdq, nq, 5e-5, 0);
    free(qkv), free(dy), free(y), free(dqkv), free(P), free(ry), free(rdq), free(rP);
}

/* ---- tokpos ------------------------------------------------------------------------------------
 */

/* tokpos_dwte_kernel: block k owns rows [v0, v1), THREADS threads in warps, chunks of ids */
static void play_dwte(const TokPosShape *s, const float *ids, const float *dy, float *dwte) {
    enum { T = 256, WARPS = T / DT_LANES };
    const size_t D = (size_t)s->dim;
    const int rows = s->batch * s->seq;
    int list[T], counts[WARPS];
    for (int v0 = 0; v0 < s->vocab; v0 += TOKPOS_VROWS) {
        const int v1 = v0 + TOKPOS_VROWS < s->vocab ? v0 + TOKPOS_VROWS : s->vocab;
        for (int v = v0; v < v1; v++)
            memset(dwte + v * D, 0, D * sizeof(float));
        for (int base = 0; base < rows; base += T) {
            unsigned ballot[WARPS] = {0};
            for (int t = 0; t < T; t++) {
                const int r = base + t;
                if (r < rows && dt_tokpos_owned(ids[r], s->vocab, v0, v1))
                    ballot[t / DT_LANES] |= 1u << (t % DT_LANES);
            }
            int total = 0;
            for (int w = 0; w < WARPS; w++) {
                counts[w] = 0;
                for (unsigned b = ballot[w]; b; b &= b - 1u)
                    counts[w]++;
                total += counts[w];
            }
            for (int k = 0; k < T; k++)
                list[k] = -1;
            for (int t = 0; t < T; t++)
                if (ballot[t / DT_LANES] >> (t % DT_LANES) & 1u)
                    list[dt_tokpos_slot(counts, t / DT_LANES, ballot[t / DT_LANES], t % DT_LANES)] =
                        base + t;
            for (int k = 0; k < total; k++) {
                const size_t id = (size_t)dt_token(ids[list[k]], s->vocab);
                for (size_t c = 0; c < D; c++)
                    dwte[id * D + c] += dy[(size_t)list[k] * D + c];
            }
        }
    }
}

static void test_tokpos(int batch, int seq, int vocab, int dim) {
    const TokPosShape s = {.batch = batch, .seq = seq, .vocab = vocab, .dim = dim};
    const size_t rows = (size_t)batch * seq, D = (size_t)dim, ny = rows * D;
    float *ids = halloc(rows), *wte = rand_floats((size_t)vocab * D, -1, 1);
    float *wpe = rand_floats((size_t)seq * D, -1, 1), *dy = rand_floats(ny, -1, 1);
    for (size_t r = 0; r < rows; r++) /* some popular ids, some outside the vocabulary */
        ids[r] = r % 5 == 0    ? 3.0f
                 : r % 17 == 1 ? (r % 2 ? -1.0f : (float)vocab)
                               : (float)(rand_u64() % (uint64_t)vocab);
    float *y = halloc(ny), *ry = halloc(ny), *dwte = halloc((size_t)vocab * D);
    float *fw = halloc((size_t)vocab * D), *rw = halloc((size_t)vocab * D);
    float *dwpe = halloc((size_t)seq * D), *rp = halloc((size_t)seq * D);
    for (size_t e = 0; e < ny; e++) { /* tokpos_forward_kernel */
        const size_t r = e / D, c = e % D, t = r % (size_t)seq;
        const int id = dt_token(ids[r], vocab);
        y[e] = dt_tokpos_y(id, id >= 0 ? wte[(size_t)id * D + c] : 0.0f, wpe[t * D + c]);
    }
    for (size_t e = 0; e < (size_t)seq * D; e++) { /* tokpos_dwpe_kernel */
        float acc = batch > 0 ? dy[e] : 0.0f;
        for (int b = 1; b < batch; b++)
            acc += dy[(size_t)b * seq * D + e];
        dwpe[e] = acc;
    }
    play_dwte(&s, ids, dy, dwte);
    int repeats;
    gref_tokpos_forward(&s, ids, wte, wpe, ry);
    gref_tokpos_backward(&s, ids, dy, rw, rp, &repeats);
    gref_tokpos_dwte_float(&s, ids, dy, fw);
    char shape[64];
    snprintf(shape, sizeof shape, "b%d T%d vocab %d dim %d", batch, seq, vocab, dim);
    check_same_bits(fmt_label("tokpos y %s", shape), y, ry, ny);
    check_close(fmt_label("tokpos dwpe %s", shape), dwpe, rp, (size_t)seq * D, 1e-6 * batch, 0);
    check_same_bits(fmt_label("tokpos dwte %s = the float sum in position order", shape), dwte, fw,
                    (size_t)vocab * D);
    check_close(fmt_label("tokpos dwte %s vs float64 (an id up to %d times)", shape, repeats), dwte,
                rw, (size_t)vocab * D, 1e-6 * repeats, 0);
    free(ids), free(wte), free(wpe), free(dy), free(y), free(ry), free(dwte), free(fw), free(rw);
    free(dwpe), free(rp);
}

/* ---- AdamW -------------------------------------------------------------------------------------
 */

static void test_adamw(float wd) {
    const size_t n = 4099;
    float *p = rand_floats(n, -1, 1), *m = halloc(n), *v = halloc(n), *g = halloc(n);
    float *fp = halloc(n), *fm = halloc(n), *fv = halloc(n), *dpf = halloc(n);
    double *dp = malloc(n * sizeof(double)), *dm = calloc(n, sizeof(double)),
           *dv = calloc(n, sizeof(double));
    memset(m, 0, n * 4), memset(v, 0, n * 4), memcpy(fp, p, n * 4), memset(fm, 0, n * 4),
        memset(fv, 0, n * 4);
    for (size_t i = 0; i < n; i++)
        dp[i] = p[i];
    for (int t = 1; t <= 3; t++) {
        fill_uniform(g, n, -1, 1);
        g[0] = 0.0f, g[1] = 1e-30f; /* v = 0 and v's underflow: eps keeps the step finite */
        AdamWStep a = {
            .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = wd};
        a.bias1 = 1.0f - powf(a.beta1, (float)t), a.bias2 = 1.0f - powf(a.beta2, (float)t);
        /* adamw_kernel: its launcher's constants, then one element a thread */
        const float decay = 1.0f - a.lr * a.weight_decay, c1 = 1.0f - a.beta1, c2 = 1.0f - a.beta2,
                    step = a.lr / a.bias1, root2 = sqrtf(a.bias2);
        for (size_t i = 0; i < n; i++)
            dt_adamw(&p[i], g[i], &m[i], &v[i], decay, c1, a.beta2, c2, step, root2, a.eps);
        gref_adamw_float(n, fp, g, fm, fv, &a);
        gref_adamw_double(n, dp, g, dm, dv, &a);
    }
    for (size_t i = 0; i < n; i++)
        dpf[i] = (float)dp[i];
    check_same_bits(fmt_label("adamw wd=%g p after 3 steps = backend.h's formula in float", wd), p,
                    fp, n);
    check_same_bits("adamw m, v = backend.h's formula", m, fm, n);
    check_same_bits("adamw v = backend.h's formula", v, fv, n);
    check_close(fmt_label("adamw wd=%g p vs float64", wd), p, dpf, n, 1e-6, 1e-6);
    free(p), free(m), free(v), free(g), free(fp), free(fm), free(fv), free(dpf), free(dp), free(dm),
        free(dv);
}

int main(void) {
    rand_seed(7);
    test_ln_grid();
    test_layernorm(64, 768, 132, PART_CAP); /* GPT-2's width, one split per few rows */
    test_layernorm(301, 50, SMS, PART_CAP); /* odd widths: a partial column block */
    test_layernorm(1000, 33, SMS, 40);      /* a scratch that allows one split only */
    test_layernorm(5, 1100, 132, PART_CAP);
    test_gelu();
    test_softmax_rows(1);
    test_softmax_rows(37);
    test_softmax_rows(130); /* rows of more than 4 elements a lane */
    test_attention(2, 7, 3, 4);
    test_attention(2, 33, 2, 16);
    test_attention(1, 64, 4, 8);
    test_tokpos(3, 11, 300, 17); /* several blocks of vocabulary rows, one chunk */
    test_tokpos(4, 200, 70, 33); /* 800 positions: several chunks of ids */
    test_tokpos(0, 5, 10, 3);    /* no samples: zero gradients */
    test_adamw(0.0f);
    test_adamw(0.1f);
    return check_summary();
}
