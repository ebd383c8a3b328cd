/* test_cpu_transformer.c - the CPU backend's transformer layers (kernels/cpu/cpu_transformer.c):
 * token and position embedding (repeated ids accumulate, ids out of range ignored, wpe rows past
 * seq untouched), layer norm (and its saved mean and rstd), GELU (extreme inputs, in place), causal
 * self-attention (one and several blocks of rows, 1 and 3 heads, peaked probabilities), against the
 * naive references (tests/ref_transformer.c) with outputs pre-filled with NaN, on 1, 2 and 3
 * threads (shapes large enough that the kernels split them; every thread count must give the
 * 1-thread bits); then every backward pass against finite differences of the kernels' own forward
 * (tests/gradcheck.h). Odd sizes throughout: dims not a multiple of VBLOCK. */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the backend on 1 (kernel_test.h's ctx), 2 and 3 threads */
#define NCTX 3
static BackendCtx *ctxs[NCTX];
static const int nthreads[NCTX] = {1, 2, 3};

static void init_contexts(void) {
    ctxs[0] = ctx;
    for (int i = 1; i < NCTX; i++) {
        BackendConfig cfg = {.threads = nthreads[i]};
        if (B->init(&cfg, &ctxs[i]) != 0) {
            fprintf(stderr, "cpu_backend init on %d threads failed\n", nthreads[i]);
            exit(1);
        }
    }
}

static void finish_contexts(void) {
    for (int i = 1; i < NCTX; i++)
        B->finalize(ctxs[i]);
}

/* got (threads i) against ref (the reference) within atol/rtol; on more than one thread also
 * bit for bit against one (the 1-thread result) */
static void check_threads(const char *what, int i, const float *got, const float *ref,
                          const float *one, size_t n, double atol, double rtol) {
    check_close(fmt_label("%s threads=%d", what, nthreads[i]), got, ref, n, atol, rtol);
    if (i > 0)
        check_same_bits(fmt_label("%s threads=%d = threads=1", what, nthreads[i]), got, one, n);
}

static float *copy_of(const float *a, size_t n) {
    float *c = halloc(n);
    memcpy(c, a, n * sizeof(float));
    return c;
}

/* ---- token and position embedding ---- */

static void test_tokpos(int batch, int seq, int vocab, int dim) {
    TokPosShape s = {batch, seq, vocab, dim};
    char shape[96], what[160];
    snprintf(shape, sizeof shape, "batch=%d seq=%d vocab=%d dim=%d", batch, seq, vocab, dim);
    const int pos_rows = seq + 3; /* wpe[>= seq, dim]: rows from seq on are not touched */
    size_t rows = (size_t)batch * seq, ny = rows * dim, nte = (size_t)vocab * dim;
    size_t npe = (size_t)pos_rows * dim, used = (size_t)seq * dim;
    float *ids = falloc(rows), *wte = falloc(nte), *wpe = falloc(npe), *y = falloc(ny);
    float *dy = falloc(ny), *dwte = falloc(nte), *dwpe = falloc(npe);
    float *ry = halloc(ny), *rdwte = halloc(nte), *rdwpe = halloc(npe), *tail = halloc(npe - used);
    float *one[3] = {0};
    const float odd[] = {-1.0f, (float)vocab, (float)vocab + 3.0f, -1e9f, NAN, 1e9f};
    for (size_t r = 0; r < rows; r++) /* few distinct ids: repeats accumulate */
        ids[r] = (float)(rand_u64() % (uint64_t)(vocab < 4 ? vocab : 4) * (vocab / 4 + 1) % vocab);
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) /* out of range: ignored */
        ids[(k * 5 + 1) % rows] = odd[k];
    fill_uniform(wte, nte, -1, 1);
    fill_uniform(wpe, npe, -1, 1);
    fill_uniform(dy, ny, -1, 1);
    fill_uniform(tail, npe - used, -1, 1);
    /* dwte sums in float the rows of each id: the error grows with the repeats, which cancel */
    int *count = calloc((size_t)vocab, sizeof(int)), reps = 1;
    for (size_t r = 0; r < rows; r++) {
        int id = ids[r] >= 0 && ids[r] < vocab ? (int)ids[r] : -1;
        if (id >= 0 && ++count[id] > reps) reps = count[id];
    }
    free(count);
    const double dwte_atol = reps > 10 ? 1e-7 * reps : 1e-6;
    ref_tokpos_forward(&s, ids, wte, wpe, ry);
    ref_tokpos_backward(&s, ids, dy, rdwte, rdwpe);
    for (int i = 0; i < NCTX; i++) {
        fill_nan(y, ny), fill_nan(dwte, nte), fill_nan(dwpe, used);
        memcpy(dwpe + used, tail, (npe - used) * sizeof(float));
        B->tokpos_forward(ctxs[i], &s, ids, wte, wpe, y);
        snprintf(what, sizeof what, "tokpos_forward %s", shape);
        check_threads(what, i, y, ry, one[0], ny, 0.0, 0.0); /* one float addition: exact */
        B->tokpos_backward(ctxs[i], &s, ids, dy, dwte, dwpe);
        snprintf(what, sizeof what, "tokpos_backward dwte %s", shape);
        check_threads(what, i, dwte, rdwte, one[1], nte, dwte_atol, 1e-5);
        snprintf(what, sizeof what, "tokpos_backward dwpe %s", shape);
        check_threads(what, i, dwpe, rdwpe, one[2], used, 1e-6, 1e-5);
        check_same_bits(fmt_label("tokpos_backward dwpe rows from seq on untouched %s threads=%d",
                                  shape, nthreads[i]),
                        dwpe + used, tail, npe - used);
        if (i == 0)
            one[0] = copy_of(y, ny), one[1] = copy_of(dwte, nte), one[2] = copy_of(dwpe, used);
    }
    B->free(ctx, ids), B->free(ctx, wte), B->free(ctx, wpe), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, dwte), B->free(ctx, dwpe);
    free(ry), free(rdwte), free(rdwpe), free(tail);
    for (int k = 0; k < 3; k++)
        free(one[k]);
}

/* ---- layer norm ---- */

static void test_layernorm(int rows, int dim) {
    LayerNormShape s = {rows, dim, 1e-5f};
    char shape[64], what[128];
    snprintf(shape, sizeof shape, "rows=%d dim=%d", rows, dim);
    size_t n = (size_t)rows * dim;
    float *x = falloc(n), *g = falloc(dim), *b = falloc(dim), *y = falloc(n), *dy = falloc(n);
    float *mean = falloc(rows), *rstd = falloc(rows), *dx = falloc(n), *dg = falloc(dim),
          *db = falloc(dim);
    float *ry = halloc(n), *rmean = halloc(rows), *rrstd = halloc(rows), *rdx = halloc(n),
          *rdg = halloc(dim), *rdb = halloc(dim);
    float *one[6] = {0};
    fill_uniform(x, n, -2, 2);
    for (size_t i = 0; i < n; i += 7) /* rows off zero: the mean matters */
        x[i] += 3.0f;
    fill_uniform(g, dim, 0.5f, 1.5f);
    fill_uniform(b, dim, -1, 1);
    fill_uniform(dy, n, -1, 1);
    ref_layernorm_forward(&s, x, g, b, ry, rmean, rrstd);
    ref_layernorm_backward(&s, x, g, dy, rdx, rdg, rdb);
    for (int i = 0; i < NCTX; i++) {
        fill_nan(y, n), fill_nan(mean, rows), fill_nan(rstd, rows);
        B->layernorm_forward(ctxs[i], &s, x, g, b, y, mean, rstd);
        snprintf(what, sizeof what, "layernorm_forward %s", shape);
        check_threads(what, i, y, ry, one[0], n, 1e-5, 1e-5);
        snprintf(what, sizeof what, "layernorm_forward mean %s", shape);
        check_threads(what, i, mean, rmean, one[1], rows, 1e-6, 1e-6);
        snprintf(what, sizeof what, "layernorm_forward rstd %s", shape);
        check_threads(what, i, rstd, rrstd, one[2], rows, 1e-6, 1e-5);
        fill_nan(dx, n), fill_nan(dg, dim), fill_nan(db, dim);
        B->layernorm_backward(ctxs[i], &s, x, g, mean, rstd, dy, dx, dg, db);
        snprintf(what, sizeof what, "layernorm_backward dx %s", shape);
        check_threads(what, i, dx, rdx, one[3], n, 1e-5, 1e-4);
        snprintf(what, sizeof what, "layernorm_backward dgamma %s", shape);
        check_threads(what, i, dg, rdg, one[4], dim, 1e-5, 1e-5);
        snprintf(what, sizeof what, "layernorm_backward dbeta %s", shape);
        check_threads(what, i, db, rdb, one[5], dim, 1e-5, 1e-5);
        if (i == 0) {
            one[0] = copy_of(y, n), one[1] = copy_of(mean, rows), one[2] = copy_of(rstd, rows);
            one[3] = copy_of(dx, n), one[4] = copy_of(dg, dim), one[5] = copy_of(db, dim);
        }
    }
    B->free(ctx, x), B->free(ctx, g), B->free(ctx, b), B->free(ctx, y), B->free(ctx, dy);
    B->free(ctx, mean), B->free(ctx, rstd), B->free(ctx, dx), B->free(ctx, dg), B->free(ctx, db);
    free(ry), free(rmean), free(rrstd), free(rdx), free(rdg), free(rdb);
    for (int k = 0; k < 6; k++)
        free(one[k]);
}

/* ---- GELU ---- */

static void test_gelu(size_t n) {
    char what[96];
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n), *in = falloc(n);
    float *ry = halloc(n), *rdx = halloc(n), *one_y = NULL, *one_dx = NULL;
    const float extremes[] = {0.0f, -0.0f,  1e-8f, -1e-8f,  -3.0f,  3.0f,  -9.0f,
                              9.0f, -20.0f, 20.0f, -100.0f, 100.0f, -1e4f, 1e4f};
    fill_uniform(x, n, -6, 6);
    for (size_t i = 0; i < n && i < sizeof extremes / sizeof extremes[0]; i++)
        x[i * 7 % n] = extremes[i];
    fill_uniform(dy, n, -1, 1);
    ref_gelu_forward(n, x, ry);
    ref_gelu_backward(n, x, dy, rdx);
    for (int i = 0; i < NCTX; i++) {
        fill_nan(y, n), fill_nan(dx, n);
        B->gelu_forward(ctxs[i], n, x, y);
        snprintf(what, sizeof what, "gelu_forward n=%zu", n);
        check_threads(what, i, y, ry, one_y, n, 1e-6, 1e-5);
        B->gelu_backward(ctxs[i], n, x, dy, dx);
        snprintf(what, sizeof what, "gelu_backward n=%zu", n);
        check_threads(what, i, dx, rdx, one_dx, n, 1e-6, 1e-5);
        if (i == 0) one_y = copy_of(y, n), one_dx = copy_of(dx, n);
        /* in place: y over x, dx over dy */
        memcpy(in, x, n * sizeof(float));
        B->gelu_forward(ctxs[i], n, in, in);
        check_same_bits(fmt_label("gelu_forward in place n=%zu threads=%d", n, nthreads[i]), in, y,
                        n);
        memcpy(in, dy, n * sizeof(float));
        B->gelu_backward(ctxs[i], n, x, in, in);
        check_same_bits(fmt_label("gelu_backward in place n=%zu threads=%d", n, nthreads[i]), in,
                        dx, n);
    }
    B->free(ctx, x), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dx), B->free(ctx, in);
    free(ry), free(rdx), free(one_y), free(one_dx);
}

/* ---- causal self-attention ---- */

static void test_attention(int batch, int seq, int heads, int head_dim, float range) {
    AttentionShape s = {batch, seq, heads, head_dim};
    char shape[96], what[160];
    snprintf(shape, sizeof shape, "batch=%d seq=%d heads=%d head_dim=%d |qkv|<=%g", batch, seq,
             heads, head_dim, range);
    size_t ny = (size_t)batch * seq * heads * head_dim, nqkv = 3 * ny;
    float *qkv = falloc(nqkv), *y = falloc(ny), *dy = falloc(ny), *dqkv = falloc(nqkv);
    float *ry = halloc(ny), *rdqkv = halloc(nqkv), *one_y = NULL, *one_d = NULL;
    fill_uniform(qkv, nqkv, -range, range);
    fill_uniform(dy, ny, -1, 1);
    ref_attention_forward(&s, qkv, ry);
    ref_attention_backward(&s, qkv, dy, rdqkv);
    for (int i = 0; i < NCTX; i++) {
        void *reserve = B->alloc(ctxs[i], B->attention_reserve_bytes(ctxs[i], &s));
        void *work = B->alloc(ctxs[i], B->attention_workspace_bytes(ctxs[i], &s));
        fill_nan(y, ny), fill_nan(dqkv, nqkv);
        fill_nan(work, B->attention_workspace_bytes(ctxs[i], &s) / sizeof(float));
        B->attention_forward(ctxs[i], &s, qkv, y, reserve, work);
        snprintf(what, sizeof what, "attention_forward %s", shape);
        check_threads(what, i, y, ry, one_y, ny, 1e-5, 1e-5);
        fill_nan(work, B->attention_workspace_bytes(ctxs[i], &s) / sizeof(float));
        B->attention_backward(ctxs[i], &s, qkv, y, reserve, dy, dqkv, work);
        snprintf(what, sizeof what, "attention_backward dqkv %s", shape);
        check_threads(what, i, dqkv, rdqkv, one_d, nqkv, 1e-5, 1e-4);
        if (i == 0) one_y = copy_of(y, ny), one_d = copy_of(dqkv, nqkv);
        B->free(ctxs[i], reserve), B->free(ctxs[i], work);
    }
    B->free(ctx, qkv), B->free(ctx, y), B->free(ctx, dy), B->free(ctx, dqkv);
    free(ry), free(rdqkv), free(one_y), free(one_d);
}

/* ---- softmax cross-entropy in place (kernels/cpu/cpu_optim.c; a language model's logits) ---- */

static void test_xent_in_place(int n, int c, float range) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d |logits|<=%g", n, c, range);
    size_t nz = (size_t)n * c;
    float *z = falloc(nz), *zz = falloc(nz), *dz = falloc(nz), *rdz = halloc(nz);
    float *st = falloc(2), *st_in = falloc(2);
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    int rcorr = -1;
    fill_uniform(z, nz, -range, range);
    for (int i = 0; i < n; i++) {
        lab[i] = (int32_t)(rand_u64() % (uint64_t)c);
        if (i % 2 == 0) z[(size_t)i * c + lab[i]] += range; /* some rows predicted correctly */
    }
    double rloss = ref_softmax_xent(n, c, z, lab, rdz, &rcorr);
    fill_nan(dz, nz);
    B->softmax_xent(ctx, n, c, z, lab, dz, st);
    memcpy(zz, z, nz * sizeof(float));
    B->softmax_xent(ctx, n, c, zz, lab, zz, st_in); /* the gradient over the logits */
    float fl = (float)rloss, rc = (float)rcorr;
    check_close(fmt_label("softmax_xent in place loss %s", shape), &st_in[0], &fl, 1, 1e-5, 1e-5);
    check_close(fmt_label("softmax_xent in place correct %s", shape), &st_in[1], &rc, 1, 0, 0);
    check_close(fmt_label("softmax_xent in place dlogits %s", shape), zz, rdz, nz, 1e-4 / n, 1e-4);
    check_same_bits(fmt_label("softmax_xent in place = out of place %s", shape), zz, dz, nz);
    check_same_bits(fmt_label("softmax_xent in place stats = out of place %s", shape), st_in, st,
                    2);
    B->free(ctx, z), B->free(ctx, zz), B->free(ctx, dz), B->free(ctx, st), B->free(ctx, st_in);
    free(rdz), free(lab);
}

/* ---- finite differences ---- */

typedef struct {
    LayerNormShape s;
    float *x, *g, *b, *mean, *rstd;
} LnState;

static void ln_fwd(GradLayer *l) {
    LnState *st = l->state;
    B->layernorm_forward(ctx, &st->s, st->x, st->g, st->b, l->y, st->mean, st->rstd);
}

static void gradcheck_layernorm(int rows, int dim) {
    LnState st = {{rows, dim, 1e-5f}, NULL, NULL, NULL, NULL, NULL};
    char name[64];
    snprintf(name, sizeof name, "layernorm rows=%d dim=%d", rows, dim);
    size_t n = (size_t)rows * dim;
    st.x = falloc(n), st.g = falloc(dim), st.b = falloc(dim);
    st.mean = falloc(rows), st.rstd = falloc(rows);
    float *dx = falloc(n), *dg = falloc(dim), *db = falloc(dim);
    GradLayer l = {ln_fwd, falloc(n), falloc(n), n, &st, NULL, NULL, 0};
    fill_uniform(st.x, n, -2, 2);
    fill_uniform(st.g, dim, 0.5f, 1.5f);
    fill_uniform(st.b, dim, -1, 1);
    fill_uniform(l.r, n, -1, 1);
    ln_fwd(&l);
    B->layernorm_backward(ctx, &st.s, st.x, st.g, st.mean, st.rstd, l.r, dx, dg, db);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dx", &pr, st.x, dx, n, 1e-2f, 1e-2);
    fd_check(name, "dgamma", &pr, st.g, dg, dim, 1e-2f, 1e-2);
    fd_check(name, "dbeta", &pr, st.b, db, dim, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, st.g), B->free(ctx, st.b), B->free(ctx, st.mean);
    B->free(ctx, st.rstd), B->free(ctx, dx), B->free(ctx, dg), B->free(ctx, db);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    size_t n;
    float *x;
} GeluState;

static void gelu_fwd(GradLayer *l) {
    GeluState *st = l->state;
    B->gelu_forward(ctx, st->n, st->x, l->y);
}

static void gradcheck_gelu(size_t n) {
    GeluState st = {n, falloc(n)};
    float *dx = falloc(n);
    GradLayer l = {gelu_fwd, falloc(n), falloc(n), n, &st, NULL, NULL, 0};
    fill_uniform(st.x, n, -4, 4);
    fill_uniform(l.r, n, -1, 1);
    B->gelu_backward(ctx, n, st.x, l.r, dx);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(fmt_label("gelu n=%zu", n), "dx", &pr, st.x, dx, n, 1e-2f, 1e-2);
    B->free(ctx, st.x), B->free(ctx, dx), B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    AttentionShape s;
    float *qkv;
    void *reserve, *work;
} AttState;

static void att_fwd(GradLayer *l) {
    AttState *st = l->state;
    B->attention_forward(ctx, &st->s, st->qkv, l->y, st->reserve, st->work);
}

static void gradcheck_attention(int batch, int seq, int heads, int head_dim) {
    AttState st = {{batch, seq, heads, head_dim}, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "attention batch=%d seq=%d heads=%d head_dim=%d", batch, seq, heads,
             head_dim);
    size_t ny = (size_t)batch * seq * heads * head_dim, nqkv = 3 * ny;
    st.qkv = falloc(nqkv);
    st.reserve = B->alloc(ctx, B->attention_reserve_bytes(ctx, &st.s));
    st.work = B->alloc(ctx, B->attention_workspace_bytes(ctx, &st.s));
    float *dqkv = falloc(nqkv);
    GradLayer l = {att_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    fill_uniform(st.qkv, nqkv, -1.5f, 1.5f);
    fill_uniform(l.r, ny, -1, 1);
    att_fwd(&l);
    B->attention_backward(ctx, &st.s, st.qkv, l.y, st.reserve, l.r, dqkv, st.work);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dqkv", &pr, st.qkv, dqkv, nqkv, 1e-2f, 1e-2);
    B->free(ctx, st.qkv), B->free(ctx, st.reserve), B->free(ctx, st.work), B->free(ctx, dqkv);
    B->free(ctx, l.y), B->free(ctx, l.r);
}

typedef struct {
    TokPosShape s;
    float *ids, *wte, *wpe;
} TokPosState;

static void tokpos_fwd(GradLayer *l) {
    TokPosState *st = l->state;
    B->tokpos_forward(ctx, &st->s, st->ids, st->wte, st->wpe, l->y);
}

static void gradcheck_tokpos(int batch, int seq, int vocab, int dim) {
    TokPosState st = {{batch, seq, vocab, dim}, NULL, NULL, NULL};
    char name[96];
    snprintf(name, sizeof name, "tokpos batch=%d seq=%d vocab=%d dim=%d", batch, seq, vocab, dim);
    size_t rows = (size_t)batch * seq, ny = rows * dim, nte = (size_t)vocab * dim;
    size_t npe = (size_t)seq * dim;
    st.ids = falloc(rows), st.wte = falloc(nte), st.wpe = falloc(npe);
    float *dwte = falloc(nte), *dwpe = falloc(npe);
    GradLayer l = {tokpos_fwd, falloc(ny), falloc(ny), ny, &st, NULL, NULL, 0};
    for (size_t r = 0; r < rows; r++)
        st.ids[r] = (float)(rand_u64() % (uint64_t)(vocab + 1)); /* vocab: out of range */
    fill_uniform(st.wte, nte, -1, 1);
    fill_uniform(st.wpe, npe, -1, 1);
    fill_uniform(l.r, ny, -1, 1);
    B->tokpos_backward(ctx, &st.s, st.ids, l.r, dwte, dwpe);
    Probe pr = grad_layer_probe(&l, 0);
    fd_check(name, "dwte", &pr, st.wte, dwte, nte, 1e-2f, 1e-2);
    fd_check(name, "dwpe", &pr, st.wpe, dwpe, npe, 1e-2f, 1e-2);
    B->free(ctx, st.ids), B->free(ctx, st.wte), B->free(ctx, st.wpe), B->free(ctx, dwte);
    B->free(ctx, dwpe), B->free(ctx, l.y), B->free(ctx, l.r);
}

int main(void) {
    kernel_test_init(0x7f0a);
    init_contexts();
    /*          batch seq vocab dim */
    test_tokpos(1, 1, 1, 1);
    test_tokpos(2, 7, 5, 3);
    test_tokpos(3, 11, 50, 13);
    test_tokpos(8, 250, 11000, 37); /* split over threads: rows, and ids and positions */
    /*             rows dim */
    test_layernorm(1, 1);
    test_layernorm(5, 3);
    test_layernorm(7, 37);
    test_layernorm(520, 200); /* split over threads: rows forward, columns of dgamma/dbeta */
    test_gelu(1);
    test_gelu(13);
    test_gelu(100003); /* split over threads */
    /*             batch seq heads head_dim |qkv| */
    test_attention(1, 1, 1, 1, 1.0f);
    test_attention(2, 7, 3, 5, 1.0f);
    test_attention(1, 67, 1, 9, 2.0f);   /* two blocks of rows, the second of 3 */
    test_attention(3, 29, 3, 13, 4.0f);  /* peaked probabilities */
    test_attention(4, 130, 3, 24, 1.0f); /* three blocks; 12 pairs split over threads */

    test_xent_in_place(7, 5, 500.0f);   /* exp() would overflow without subtracting the max */
    test_xent_in_place(3, 50257, 5.0f); /* GPT-2's vocabulary */

    gradcheck_tokpos(2, 5, 4, 3);
    gradcheck_layernorm(3, 13);
    gradcheck_layernorm(2, 64);
    gradcheck_gelu(45);
    gradcheck_attention(2, 5, 3, 4);
    gradcheck_attention(1, 9, 1, 7);
    gradcheck_attention(1, 70, 1, 3); /* two blocks */
    finish_contexts();
    return kernel_test_finish();
}
