/* test_cuda_transformer.c - the CUDA backend's transformer members, AdamW and the in-place softmax
 * cross-entropy on a GPU, against the float64 references of tests/ref_transformer.c (and
 * gpt_ref.c) and against the CPU backend's kernels where it has them (a member the CPU
 * backend lacks is said so, and compared with the reference alone). Exits 77 (skipped) when no
 * GPU is visible. fp32 (strict: cuBLAS's default math) unless NVIDIA_TF32_OVERRIDE says
 * otherwise; outputs are pre-filled with NaN.
 * Tolerances, |got - ref| <= max(atol, rtol |ref|):
 *   tokpos       y, dwpe and dwte bit for bit against the CPU backend (the same adds in the same
 *                order), dwte within 1e-6 x repeats of float64
 *   layer norm   y, dx 1e-5 (inputs in [-1, 1): well conditioned), dgamma, dbeta 1e-5 x rows^0.5
 *   GELU         1e-6 absolute, 1e-5 relative of float64; 1e-6 of the CPU backend
 *   attention    P 1e-6, y 2e-5, dqkv 5e-5 (absolute, inputs in [-1, 1)), against float64 and
 *                the CPU backend alike
 *   AdamW        bit for bit against backend.h's formula in float (-fmad=false, correctly
 *                rounded / and sqrtf)
 *   softmax_xent in place (dlogits == logits) = out of place, bit for bit, over 8 x 1024 rows
 *                (more than the 4096 partial sums made at init) and 4 rows of 50257 classes;
 *                loss 1e-5 and dlogits 1e-4 x max(1/n, |ref|) of tests/ref_optim.c
 * Every backward runs twice: the two results must be the same bits (no atomics). */
#include "backend.h"
#include "cuda.h"
#include "gpt_ref.h"
#include "harness.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *G = &cuda_backend, *C = &cpu_backend;
static BackendCtx *gctx, *cctx;

static void *up(const void *h, size_t bytes) {
    void *d = G->alloc(gctx, bytes);
    G->upload(gctx, d, h, bytes);
    return d;
}
static float *dnan(size_t n) {
    float *h = halloc(n);
    fill_nan(h, n);
    float *d = up(h, n * sizeof *h);
    free(h);
    return d;
}
static float *down(const void *dev, size_t n) {
    float *h = halloc(n);
    G->download(gctx, h, dev, n * sizeof *h);
    return h;
}
/* the device array against ref (check_close), and against itself computed again (bits) */
static void cmp(const char *what, const void *dev, const float *ref, size_t n, double atol,
                double rtol) {
    float *got = down(dev, n);
    check_close(what, got, ref, n, atol, rtol);
    free(got);
}
static void cmp_bits(const char *what, const void *dev, const float *ref, size_t n) {
    float *got = down(dev, n);
    check_same_bits(what, got, ref, n);
    free(got);
}
static int cpu_has(int present, const char *name) {
    if (!present) printf("note: the CPU backend has no %s: compared with float64 only\n", name);
    return present;
}

static void test_tokpos(int batch, int seq, int vocab, int dim) {
    const TokPosShape s = {.batch = batch, .seq = seq, .vocab = vocab, .dim = dim};
    const size_t rows = (size_t)batch * seq, D = (size_t)dim, ny = rows * D, nw = (size_t)vocab * D;
    float *ids = halloc(rows), *wte = rand_floats(nw, -1, 1),
          *wpe = rand_floats((size_t)seq * D, -1, 1);
    float *dy = rand_floats(ny, -1, 1);
    for (size_t r = 0; r < rows; r++)
        ids[r] = r % 7 == 0 ? 11.0f : r % 29 == 3 ? -1.0f : (float)(rand_u64() % (uint64_t)vocab);
    float *gids = up(ids, rows * 4), *gwte = up(wte, nw * 4), *gwpe = up(wpe, (size_t)seq * D * 4);
    float *gdy = up(dy, ny * 4), *gy = dnan(ny), *gdwte = dnan(nw), *gdwpe = dnan((size_t)seq * D);
    float *ry = halloc(ny), *rw = halloc(nw), *rp = halloc((size_t)seq * D), *fw = halloc(nw);
    int repeats;
    ref_tokpos_forward(&s, ids, wte, wpe, ry);
    ref_tokpos_backward(&s, ids, dy, rw, rp);
    repeats = gref_id_repeats(&s, ids);
    gref_tokpos_dwte_float(&s, ids, dy, fw);
    char sh[80];
    snprintf(sh, sizeof sh, "b%d T%d vocab %d dim %d", batch, seq, vocab, dim);
    G->tokpos_forward(gctx, &s, gids, gwte, gwpe, gy);
    G->tokpos_backward(gctx, &s, gids, gdy, gdwte, gdwpe);
    cmp_bits(fmt_label("tokpos y %s", sh), gy, ry, ny);
    cmp(fmt_label("tokpos dwpe %s", sh), gdwpe, rp, (size_t)seq * D, 1e-6 * batch, 0);
    cmp_bits(fmt_label("tokpos dwte %s = float sum in position order", sh), gdwte, fw, nw);
    cmp(fmt_label("tokpos dwte %s vs float64 (repeats %d)", sh, repeats), gdwte, rw, nw,
        1e-6 * repeats, 0);
    float *first = down(gdwte, nw);
    G->tokpos_backward(gctx, &s, gids, gdy, gdwte, gdwpe);
    cmp_bits(fmt_label("tokpos dwte %s: a second run", sh), gdwte, first, nw);
    if (cpu_has(C->tokpos_backward != NULL, "tokpos")) {
        float *cy = halloc(ny), *cw = halloc(nw), *cp = halloc((size_t)seq * D);
        C->tokpos_forward(cctx, &s, ids, wte, wpe, cy);
        C->tokpos_backward(cctx, &s, ids, dy, cw, cp);
        cmp_bits(fmt_label("tokpos y %s = CPU", sh), gy, cy, ny);
        cmp_bits(fmt_label("tokpos dwpe %s = CPU", sh), gdwpe, cp, (size_t)seq * D);
        cmp_bits(fmt_label("tokpos dwte %s = CPU", sh), gdwte, cw, nw);
        free(cy), free(cw), free(cp);
    }
    void *d[] = {gids, gwte, gwpe, gdy, gy, gdwte, gdwpe};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        G->free(gctx, d[i]);
    free(ids), free(wte), free(wpe), free(dy), free(ry), free(rw), free(rp), free(fw), free(first);
}

static void test_layernorm(int rows, int dim) {
    const LayerNormShape s = {.rows = rows, .dim = dim, .eps = 1e-5f};
    const size_t n = (size_t)rows * dim, R = (size_t)rows, Dm = (size_t)dim;
    float *x = rand_floats(n, -1, 1), *dy = rand_floats(n, -1, 1);
    float *gamma = rand_floats(Dm, 0.5f, 1.5f), *beta = rand_floats(Dm, -1, 1);
    float *gx = up(x, n * 4), *gdy = up(dy, n * 4), *gg = up(gamma, Dm * 4), *gb = up(beta, Dm * 4);
    float *gy = dnan(n), *gm = dnan(R), *gr = dnan(R), *gdx = dnan(n), *gdg = dnan(Dm),
          *gdb = dnan(Dm);
    float *ry = halloc(n), *rm = halloc(R), *rr = halloc(R), *rdx = halloc(n), *rdg = halloc(Dm),
          *rdb = halloc(Dm);
    ref_layernorm_forward(&s, x, gamma, beta, ry, rm, rr);
    ref_layernorm_backward(&s, x, gamma, dy, rdx, rdg, rdb);
    char sh[48];
    snprintf(sh, sizeof sh, "%dx%d", rows, dim);
    const double sums = 1e-5 * sqrt((double)rows);
    G->layernorm_forward(gctx, &s, gx, gg, gb, gy, gm, gr);
    G->layernorm_backward(gctx, &s, gx, gg, gm, gr, gdy, gdx, gdg, gdb);
    cmp(fmt_label("layernorm y %s", sh), gy, ry, n, 1e-5, 1e-5);
    cmp(fmt_label("layernorm mean %s", sh), gm, rm, R, 1e-6, 1e-5);
    cmp(fmt_label("layernorm rstd %s", sh), gr, rr, R, 0, 1e-5);
    cmp(fmt_label("layernorm dx %s", sh), gdx, rdx, n, 1e-5, 1e-5);
    cmp(fmt_label("layernorm dgamma %s", sh), gdg, rdg, Dm, sums, 1e-5);
    cmp(fmt_label("layernorm dbeta %s", sh), gdb, rdb, Dm, sums, 1e-5);
    float *first = down(gdg, Dm), *first_b = down(gdb, Dm);
    G->layernorm_backward(gctx, &s, gx, gg, gm, gr, gdy, gdx, gdg, gdb);
    cmp_bits(fmt_label("layernorm dgamma %s: a second run", sh), gdg, first, Dm);
    cmp_bits(fmt_label("layernorm dbeta %s: a second run", sh), gdb, first_b, Dm);
    if (cpu_has(C->layernorm_backward != NULL, "layernorm")) {
        float *cy = halloc(n), *cm = halloc(R), *cr = halloc(R), *cdx = halloc(n),
              *cdg = halloc(Dm), *cdb = halloc(Dm);
        C->layernorm_forward(cctx, &s, x, gamma, beta, cy, cm, cr);
        C->layernorm_backward(cctx, &s, x, gamma, cm, cr, dy, cdx, cdg, cdb);
        cmp(fmt_label("layernorm y %s vs CPU", sh), gy, cy, n, 1e-5, 1e-5);
        cmp(fmt_label("layernorm dx %s vs CPU", sh), gdx, cdx, n, 1e-5, 1e-5);
        cmp(fmt_label("layernorm dgamma %s vs CPU", sh), gdg, cdg, Dm, sums, 1e-5);
        cmp(fmt_label("layernorm dbeta %s vs CPU", sh), gdb, cdb, Dm, sums, 1e-5);
        free(cy), free(cm), free(cr), free(cdx), free(cdg), free(cdb);
    }
    void *d[] = {gx, gdy, gg, gb, gy, gm, gr, gdx, gdg, gdb};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        G->free(gctx, d[i]);
    free(x), free(dy), free(gamma), free(beta), free(ry), free(rm), free(rr), free(rdx), free(rdg),
        free(rdb), free(first), free(first_b);
}

static void test_gelu(size_t n) {
    float *x = halloc(n), *dy = rand_floats(n, -1, 1), *ry = halloc(n), *rdx = halloc(n);
    for (size_t i = 0; i < n; i++)
        x[i] = -10.0f + 20.0f * (float)i / (float)n;
    ref_gelu_forward(n, x, ry);
    ref_gelu_backward(n, x, dy, rdx);
    float *gx = up(x, n * 4), *gdy = up(dy, n * 4), *gy = dnan(n), *gdx = dnan(n);
    G->gelu_forward(gctx, n, gx, gy);
    G->gelu_backward(gctx, n, gx, gdy, gdx);
    cmp("gelu forward", gy, ry, n, 1e-6, 1e-5);
    cmp("gelu backward", gdx, rdx, n, 1e-6, 1e-5);
    if (cpu_has(C->gelu_forward != NULL, "gelu")) {
        C->gelu_forward(cctx, n, x, ry);
        C->gelu_backward(cctx, n, x, dy, rdx);
        cmp("gelu forward vs CPU", gy, ry, n, 1e-6, 1e-6);
        cmp("gelu backward vs CPU", gdx, rdx, n, 1e-6, 1e-6);
    }
    float *out = down(gy, n);
    G->gelu_forward(gctx, n, gx, gx); /* in place */
    cmp_bits("gelu forward in place = out of place", gx, out, n);
    free(out);
    G->free(gctx, gx), G->free(gctx, gdy), G->free(gctx, gy), G->free(gctx, gdx);
    free(x), free(dy), free(ry), free(rdx);
}

static void test_attention(int batch, int seq, int heads, int head_dim) {
    const AttentionShape s = {.batch = batch, .seq = seq, .heads = heads, .head_dim = head_dim};
    const size_t Cm = (size_t)heads * head_dim, nq = (size_t)batch * seq * 3 * Cm,
                 ny = (size_t)batch * seq * Cm, np = (size_t)batch * heads * seq * seq;
    const size_t rb = G->attention_reserve_bytes(gctx, &s),
                 wb = G->attention_workspace_bytes(gctx, &s);
    float *qkv = rand_floats(nq, -1, 1), *dy = rand_floats(ny, -1, 1);
    float *ry = halloc(ny), *rp = halloc(np), *rdq = halloc(nq);
    ref_attention_forward(&s, qkv, ry);
    ref_attention_probs(&s, qkv, rp);
    ref_attention_backward(&s, qkv, dy, rdq);
    float *gq = up(qkv, nq * 4), *gdy = up(dy, ny * 4), *gy = dnan(ny), *gdq = dnan(nq);
    float *res = dnan(rb / 4), *work = dnan(wb / 4 + 1);
    char sh[64];
    snprintf(sh, sizeof sh, "b%d T%d h%d d%d", batch, seq, heads, head_dim);
    EXPECT(rb >= np * 4, "attention %s: reserve %zu bytes holds P", sh, rb);
    G->attention_forward(gctx, &s, gq, gy, res, work);
    G->attention_backward(gctx, &s, gq, gy, res, gdy, gdq, work);
    cmp(fmt_label("attention P %s", sh), res, rp, np, 1e-6, 0);
    cmp(fmt_label("attention y %s", sh), gy, ry, ny, 2e-5, 0);
    cmp(fmt_label("attention dqkv %s", sh), gdq, rdq, nq, 5e-5, 0);
    float *first = down(gdq, nq);
    G->attention_backward(gctx, &s, gq, gy, res, gdy, gdq, work);
    cmp_bits(fmt_label("attention dqkv %s: a second run", sh), gdq, first, nq);
    if (cpu_has(C->attention_backward != NULL, "attention")) {
        float *cy = halloc(ny), *cdq = halloc(nq);
        void *cres = malloc(C->attention_reserve_bytes(cctx, &s) + 1);
        void *cwork = malloc(C->attention_workspace_bytes(cctx, &s) + 1);
        C->attention_forward(cctx, &s, qkv, cy, cres, cwork);
        C->attention_backward(cctx, &s, qkv, cy, cres, dy, cdq, cwork);
        cmp(fmt_label("attention y %s vs CPU", sh), gy, cy, ny, 2e-5, 0);
        cmp(fmt_label("attention dqkv %s vs CPU", sh), gdq, cdq, nq, 5e-5, 0);
        free(cy), free(cdq), free(cres), free(cwork);
    }
    void *d[] = {gq, gdy, gy, gdq, res, work};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        G->free(gctx, d[i]);
    free(qkv), free(dy), free(ry), free(rp), free(rdq), free(first);
}

static void test_adamw(size_t n, float wd) {
    if (!G->adamw_update) {
        EXPECT(0, "the CUDA backend has adamw_update");
        return;
    }
    float *p = rand_floats(n, -1, 1), *m = halloc(n), *v = halloc(n), *g = halloc(n);
    memset(m, 0, n * 4), memset(v, 0, n * 4);
    float *gp = up(p, n * 4), *gm = up(m, n * 4), *gv = up(v, n * 4), *gg = G->alloc(gctx, n * 4);
    for (int t = 1; t <= 3; t++) {
        fill_uniform(g, n, -1, 1);
        AdamWStep a = {
            .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = wd};
        a.bias1 = 1.0f - powf(a.beta1, (float)t), a.bias2 = 1.0f - powf(a.beta2, (float)t);
        G->upload(gctx, gg, g, n * 4);
        G->adamw_update(gctx, n, gp, gg, gm, gv, &a);
        gref_adamw_float(n, p, g, m, v, &a);
    }
    cmp_bits(fmt_label("adamw n=%zu wd=%g p after 3 steps = backend.h's formula", n, wd), gp, p, n);
    cmp_bits("adamw m", gm, m, n);
    cmp_bits("adamw v", gv, v, n);
    G->free(gctx, gp), G->free(gctx, gm), G->free(gctx, gv), G->free(gctx, gg);
    free(p), free(m), free(v), free(g);
}

static void test_xent_in_place(int n, int c) {
    const size_t nz = (size_t)n * c;
    float *z = rand_floats(nz, -4, 4), *rdz = halloc(nz), stats[2], stats2[2];
    int32_t *lab = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++)
        lab[i] = (int32_t)(rand_u64() % (uint64_t)c);
    int correct = 0;
    const float want[2] = {(float)ref_softmax_xent(n, c, z, lab, rdz, &correct), 0};
    float *gz = up(z, nz * 4), *gd = dnan(nz), *gs = dnan(2), *gs2 = dnan(2);
    int32_t *glab = up(lab, (size_t)n * 4);
    G->softmax_xent(gctx, n, c, gz, glab, gd, gs);  /* out of place */
    G->softmax_xent(gctx, n, c, gz, glab, gz, gs2); /* in place: gz becomes the gradient */
    char sh[48];
    snprintf(sh, sizeof sh, "n=%d c=%d", n, c);
    float *out = down(gd, nz);
    cmp_bits(fmt_label("softmax_xent in place %s: dlogits = out of place", sh), gz, out, nz);
    G->download(gctx, stats, gs, sizeof stats), G->download(gctx, stats2, gs2, sizeof stats2);
    EXPECT(!memcmp(stats, stats2, sizeof stats) && stats[1] == (float)correct,
           "softmax_xent in place %s: the same loss %.9g and %g correct (reference %d)", sh,
           stats2[0], stats2[1], correct);
    check_close(fmt_label("softmax_xent loss %s", sh), stats, want, 1, 1e-5, 1e-5);
    check_close(fmt_label("softmax_xent dlogits %s", sh), out, rdz, nz, 1e-4 / n, 1e-4);
    G->free(gctx, gz), G->free(gctx, gd), G->free(gctx, gs), G->free(gctx, gs2),
        G->free(gctx, glab);
    free(z), free(rdz), free(lab), free(out);
}

int main(void) {
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    BackendConfig cfg = {.threads = 1, .verbose = 1}; /* fp32 */
    if (G->init(&cfg, &gctx) != 0 || C->init(&cfg, &cctx) != 0) return 1;
    rand_seed(11);
    test_tokpos(4, 64, 50257, 48); /* GPT-2's vocabulary: 786 blocks of rows */
    test_tokpos(3, 300, 70, 33);   /* 900 positions: chunks of ids, popular ids */
    test_layernorm(8 * 128, 768);  /* GPT-2's width */
    test_layernorm(301, 50);
    test_gelu((size_t)1 << 20);
    test_attention(2, 128, 4, 32);
    test_attention(3, 33, 3, 8); /* odd sizes */
    test_attention(1, 1, 2, 4);
    test_adamw(1000003, 0.0f);
    test_adamw(4099, 0.1f);
    test_xent_in_place(8 * 1024, 97); /* more rows than the 4096 partials made at init */
    test_xent_in_place(4, 50257);     /* GPT-2's vocabulary */
    G->finalize(gctx), C->finalize(cctx);
    return check_summary();
}
