/* test_device_transformer.c - the CUDA backend's transformer kernels and AdamW played on the CPU,
 * no GPU needed: every block, warp and lane of each launch of
 * kernels/cuda/cuda_transformer_kernels.cu (and of adamw_update's grid) runs the functions it runs
 * on the device (kernels/cuda/cuda_transformer.h, cuda_elem.h: compiled here as plain C), and the
 * attention's cuBLAS calls (att_gemm, kernels/cuda/cuda_transformer_plan.c) run through
 * cblas_sgemm(CblasColMajor), which takes cuBLAS's arguments, against the float64 references of
 * tests/ref_transformer.c and tests/gpt_ref.c. Tolerances (|got - ref| <= max(atol, rtol |ref|),
 * fp32 against float64): layer norm: mean, rstd 1e-5; y 1e-5 (1 + |y|) (1 + |mean| rstd), dx 2e-5
 * rstd (1 + |mean| rstd): a float mean is off by half an ulp of |mean|, which xhat carries times
 * rstd; dgamma 1e-5 sum_rows |dy| (1 + |mean| rstd), dbeta 1e-5; on dy = 1, dbeta exactly the row
 * count (each row summed once by the grid) GELU: 1e-6 absolute,
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
#include "dev_transformer.h"
#include "gpt_ref.h"
#include "harness.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMS      3     /* a small GPU: the tests' small tensors still take several blocks */
#define PART_CAP 65536 /* the batch-norm scratch's pairs (cuda_ctx.h BN_PARTIALS_CAP) */

/* ---- layer norm --------------------------------------------------------------------------------
 */

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
    ref_layernorm_forward(&s, x, gamma, beta, ry, rm, rr);
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
    ref_layernorm_backward(&s, x, gamma, dy, rdx, rdg, rdb);
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
    for (size_t i = 0; i < n; i++) /* the kernels' loops: one element a thread */
        y[i] = dt_gelu(x[i]), d[i] = 1.0f * dt_gelu_grad(x[i]);
    float *ones = halloc(n);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    ref_gelu_forward(n, x, ry);
    ref_gelu_backward(n, x, ones, rd);
    free(ones);
    check_close("gelu forward on [-12, 12]", y, ry, n, 1e-6, 1e-5);
    check_close("gelu backward (dy = 1) on [-12, 12]", d, rd, n, 1e-6, 1e-5);
    free(x), free(y), free(d), free(ry), free(rd);
}

/* ---- attention ---------------------------------------------------------------------------------
 */

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
    ref_attention_forward(&s, qkv, ry);
    ref_attention_probs(&s, qkv, rP);
    ref_attention_backward(&s, qkv, dy, rdq);
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
    play_tokpos_forward(&s, ids, wte, wpe, y);
    play_dwpe(&s, dy, dwpe);
    play_dwte(&s, ids, dy, dwte);
    int repeats;
    ref_tokpos_forward(&s, ids, wte, wpe, ry);
    ref_tokpos_backward(&s, ids, dy, rw, rp);
    repeats = gref_id_repeats(&s, ids);
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

/* ---- against the CPU backend's kernels, where it has them -------------------------------------
 */

static int cpu_has(int present, const char *name) {
    if (!present) printf("note: the CPU backend has no %s: checked against float64 only\n", name);
    return present;
}

/* The played kernels against cpu_backend on the same inputs: GELU and tokpos bit for bit (the same
 * expressions and adds in the same order), AdamW bit for bit; layer norm within 1e-5 and the
 * attention within 1e-5 (other summation orders). */
static void test_vs_cpu(void) {
    BackendCtx *cc = NULL;
    const BackendConfig cfg = {.threads = 2};
    if (!EXPECT(cpu_backend.init(&cfg, &cc) == 0, "the CPU backend starts")) return;
    if (cpu_has(cpu_backend.gelu_forward && cpu_backend.gelu_backward, "gelu")) {
        const size_t n = 10007;
        float *x = rand_floats(n, -9, 9), *dy = rand_floats(n, -1, 1), *y = halloc(n),
              *dx = halloc(n), *cy = halloc(n), *cdx = halloc(n);
        for (size_t i = 0; i < n; i++)
            y[i] = dt_gelu(x[i]), dx[i] = dy[i] * dt_gelu_grad(x[i]);
        cpu_backend.gelu_forward(cc, n, x, cy), cpu_backend.gelu_backward(cc, n, x, dy, cdx);
        check_same_bits("gelu forward = CPU backend", y, cy, n);
        check_same_bits("gelu backward = CPU backend", dx, cdx, n);
        free(x), free(dy), free(y), free(dx), free(cy), free(cdx);
    }
    if (cpu_has(cpu_backend.tokpos_forward && cpu_backend.tokpos_backward, "tokpos")) {
        const TokPosShape s = {.batch = 3, .seq = 300, .vocab = 70, .dim = 33};
        const size_t rows = 900, ny = rows * 33, nw = 70 * 33, np = 300 * 33;
        float *ids = halloc(rows), *wte = rand_floats(nw, -1, 1), *wpe = rand_floats(np, -1, 1);
        float *dy = rand_floats(ny, -1, 1), *y = halloc(ny), *cy = halloc(ny), *w = halloc(nw),
              *cw = halloc(nw), *p = halloc(np), *cp = halloc(np);
        for (size_t r = 0; r < rows; r++)
            ids[r] = r % 9 == 4 ? -1.0f : (float)(rand_u64() % 72);
        play_tokpos_forward(&s, ids, wte, wpe, y), play_dwpe(&s, dy, p), play_dwte(&s, ids, dy, w);
        cpu_backend.tokpos_forward(cc, &s, ids, wte, wpe, cy);
        cpu_backend.tokpos_backward(cc, &s, ids, dy, cw, cp);
        check_same_bits("tokpos y = CPU backend", y, cy, ny);
        check_same_bits("tokpos dwte = CPU backend", w, cw, nw);
        check_same_bits("tokpos dwpe = CPU backend", p, cp, np);
        free(ids), free(wte), free(wpe), free(dy), free(y), free(cy), free(w), free(cw), free(p),
            free(cp);
    }
    if (cpu_has(cpu_backend.layernorm_forward && cpu_backend.layernorm_backward, "layernorm")) {
        const LayerNormShape s = {.rows = 200, .dim = 96, .eps = 1e-5f};
        const size_t n = 200 * 96;
        float *x = rand_floats(n, -2, 2), *dy = rand_floats(n, -1, 1),
              *g = rand_floats(96, 0.5f, 1.5f), *b = rand_floats(96, -1, 1);
        float *o[6], *c[6]; /* y, dx, mean, rstd, dgamma, dbeta */
        const size_t len[6] = {n, n, 200, 200, 96, 96};
        for (int k = 0; k < 6; k++)
            o[k] = halloc(len[k]), c[k] = halloc(len[k]);
        LnColGrid grid;
        ln_col_grid(s.rows, s.dim, SMS, PART_CAP, &grid);
        play_ln_forward(&s, x, g, b, o[0], o[2], o[3]);
        play_ln_dx(&s, x, g, o[2], o[3], dy, o[1]);
        play_ln_cols(&s, &grid, x, dy, o[2], o[3], o[4], o[5]);
        cpu_backend.layernorm_forward(cc, &s, x, g, b, c[0], c[2], c[3]);
        cpu_backend.layernorm_backward(cc, &s, x, g, c[2], c[3], dy, c[1], c[4], c[5]);
        const char *names[6] = {"y", "dx", "mean", "rstd", "dgamma", "dbeta"};
        for (int k = 0; k < 6; k++)
            check_close(fmt_label("layernorm %s vs CPU backend", names[k]), o[k], c[k], len[k],
                        1e-5, 1e-5);
        for (int k = 0; k < 6; k++)
            free(o[k]), free(c[k]);
        free(x), free(dy), free(g), free(b);
    }
    if (cpu_has(cpu_backend.attention_forward && cpu_backend.attention_backward, "attention")) {
        const AttentionShape s = {.batch = 2, .seq = 70, .heads = 3, .head_dim = 16};
        const size_t nq = 2 * 70 * 3 * 48, ny = 2 * 70 * 48;
        float *qkv = rand_floats(nq, -1, 1), *dy = rand_floats(ny, -1, 1), *y = halloc(ny),
              *cy = halloc(ny), *dq = halloc(nq), *cdq = halloc(nq),
              *P = halloc(att_reserve_floats(&s));
        void *res = malloc(cpu_backend.attention_reserve_bytes(cc, &s) + 4);
        void *work = malloc(cpu_backend.attention_workspace_bytes(cc, &s) + 4);
        play_attention(&s, qkv, y, P, dy, dq);
        cpu_backend.attention_forward(cc, &s, qkv, cy, res, work);
        cpu_backend.attention_backward(cc, &s, qkv, cy, res, dy, cdq, work);
        check_close("attention y vs CPU backend", y, cy, ny, 1e-5, 0);
        check_close("attention dqkv vs CPU backend", dq, cdq, nq, 1e-5, 0);
        free(qkv), free(dy), free(y), free(cy), free(dq), free(cdq), free(P), free(res), free(work);
    }
    if (cpu_has(cpu_backend.adamw_update != NULL, "adamw_update")) {
        const size_t n = 1001;
        float *p = rand_floats(n, -1, 1), *g = rand_floats(n, -1, 1), *m = rand_floats(n, -1, 1),
              *v = rand_floats(n, 0, 1), *cp = halloc(n), *cm = halloc(n), *cv = halloc(n);
        memcpy(cp, p, n * 4), memcpy(cm, m, n * 4), memcpy(cv, v, n * 4);
        const AdamWStep a = {
            1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 1.0f - 0.9f * 0.9f, 1.0f - 0.999f * 0.999f};
        const float decay = 1.0f - a.lr * a.weight_decay, c1 = 1.0f - a.beta1, c2 = 1.0f - a.beta2;
        for (size_t i = 0; i < n; i++)
            dt_adamw(&p[i], g[i], &m[i], &v[i], decay, c1, a.beta2, c2, a.lr / a.bias1,
                     sqrtf(a.bias2), a.eps);
        cpu_backend.adamw_update(cc, n, cp, g, cm, cv, &a);
        check_same_bits("adamw p = CPU backend", p, cp, n);
        free(p), free(g), free(m), free(v), free(cp), free(cm), free(cv);
    }
    cpu_backend.finalize(cc);
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
    test_vs_cpu();
    return check_summary();
}
