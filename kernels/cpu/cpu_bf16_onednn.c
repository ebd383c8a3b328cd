/* cpu_bf16_onednn.c - the oneDNN engine of --precision bf16 (see cpu_bf16_onednn.h): oneDNN's
 * matmul and convolution primitives on bf16 inputs with fp32 outputs (AMX where the CPU has it).
 *
 * dtbench's tensors stay fp32 and NCHW. Per call, the inputs and gradients are rounded to bf16 by
 * oneDNN reorders into the layout the primitive chose (channels-last or blocked), and fp32
 * outputs come back to NCHW the same way. Weights go through the same reorders but are kept:
 * one bf16 copy per weight, layout and parameter generation, remade at its first use after
 * cpu_dnnl_weights_ready (the model calls it before each step's first forward pass). Primitives,
 * reorders and weight copies are made at the first call of a shape (the warm-up iteration) and
 * cached; the scratch buffers grow there too, never later.
 *
 * Every oneDNN call is checked (DNNL_CHECK: file, line and oneDNN's status, then check_fail); a
 * convolution shape oneDNN has no implementation for returns 0 and runs as im2col + GEMM. */
#include "cpu_bf16_onednn.h"
#include "cpu_blas.h" /* defines: cpu_blas, the fp32 GEMM of the small-k products */
#include "cpu_vec.h"  /* defines: VBLOCK */
#include "fail.h"     /* defines: check_fail, ALLOC_CHECK */
#include "half_bits.h"

#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define DNNL_CHECK(call)                                                                           \
    do {                                                                                           \
        dnnl_status_t st_ = (call);                                                                \
        if (st_ != dnnl_success) check_fail(__FILE__, __LINE__, #call, dnnl_status2str(st_));      \
    } while (0)

#define SCRATCH_SLOTS 4

typedef struct { /* a cached reorder between two layouts */
    dnnl_memory_desc_t from, to;
    dnnl_primitive_t p;
} Reorder;

typedef struct { /* a weight's bf16 copy in one layout, valid for generation `gen` */
    const float *src;
    dnnl_memory_desc_t to;
    void *buf;
    unsigned gen;
} Weight;

typedef struct { /* a matmul shape */
    int m, n, k, ta, tb, ldc;
    float alpha, beta;
    dnnl_memory_desc_t a, b, c; /* bf16 op(A) and op(B) over dense copies, fp32 C */
    dnnl_primitive_t p;
} Matmul;

typedef struct { /* a convolution shape and its three primitives (made at first use) */
    ConvShape s;
    int bias, tried_fwd, tried_bwd;
    dnnl_primitive_desc_t fwd_pd; /* kept: the backward primitives' hint */
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    dnnl_memory_desc_t src, wei, dst;            /* forward: bf16, bf16, fp32 */
    dnnl_memory_desc_t bd_ddst, bd_wei, bd_dsrc; /* backward data: bf16, bf16, fp32 */
    dnnl_memory_desc_t bw_src, bw_ddst, bw_dwei; /* backward weights: bf16, bf16, fp32 */
} Conv;

struct CpuDnnl {
    dnnl_engine_t eng;
    dnnl_stream_t strm;
    unsigned gen;
    Reorder *reorders;
    Weight *weights;
    Matmul *mms;
    Conv *convs;
    int nreorders, nweights, nmms, nconvs;
    void *scratch[SCRATCH_SLOTS];
    size_t scratch_bytes[SCRATCH_SLOTS];
};

/* ---- availability and lifetime --------------------------------------------------------------- */

int cpu_dnnl_available(char *why, size_t len, const char **isa) {
    const dnnl_cpu_isa_t have = dnnl_get_effective_cpu_isa();
    if (isa) *isa = dnnl_cpu_isa2str(have);
    if ((have & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) return 1;
    if (why)
        snprintf(why, len, "oneDNN finds no bf16 instructions on this CPU (%s)",
                 dnnl_cpu_isa2str(have));
    return 0;
}

CpuDnnl *cpu_dnnl_create(int threads) {
    if (!cpu_dnnl_available(NULL, 0, NULL)) return NULL;
    CpuDnnl *d = calloc(1, sizeof *d);
    ALLOC_CHECK(d);
    DNNL_CHECK(dnnl_engine_create(&d->eng, dnnl_cpu, 0));
    DNNL_CHECK(dnnl_stream_create(&d->strm, d->eng, dnnl_stream_default_flags));
    /* oneDNN's threads are OpenMP's (Debian builds it so): --threads of them */
    void (*omp_threads)(int) = (void (*)(int))(uintptr_t)dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (omp_threads) omp_threads(threads < 1 ? 1 : threads);
    d->gen = 1;
    return d;
}

void cpu_dnnl_free(CpuDnnl *d) {
    if (!d) return;
    for (int i = 0; i < d->nreorders; i++)
        dnnl_primitive_destroy(d->reorders[i].p);
    for (int i = 0; i < d->nweights; i++)
        free(d->weights[i].buf);
    for (int i = 0; i < d->nmms; i++)
        dnnl_primitive_destroy(d->mms[i].p);
    for (int i = 0; i < d->nconvs; i++) {
        Conv *c = &d->convs[i];
        if (c->fwd) dnnl_primitive_destroy(c->fwd);
        if (c->bwd_data) dnnl_primitive_destroy(c->bwd_data);
        if (c->bwd_weights) dnnl_primitive_destroy(c->bwd_weights);
        if (c->fwd_pd) dnnl_primitive_desc_destroy(c->fwd_pd);
    }
    for (int i = 0; i < SCRATCH_SLOTS; i++)
        free(d->scratch[i]);
    free(d->reorders), free(d->weights), free(d->mms), free(d->convs);
    dnnl_stream_destroy(d->strm);
    dnnl_engine_destroy(d->eng);
    free(d);
}

void cpu_dnnl_weights_ready(CpuDnnl *d) {
    if (d) d->gen++;
}

/* ---- helpers --------------------------------------------------------------------------------- */

/* Grows array *p of *n elements of `size` bytes by one; returns the new element, zeroed. */
static void *grow(void *p, int *n, size_t size) {
    void **pp = p;
    char *q = realloc(*pp, (size_t)(*n + 1) * size);
    ALLOC_CHECK(q);
    *pp = q;
    memset(q + (size_t)*n * size, 0, size);
    return q + (size_t)(*n)++ * size;
}

/* Scratch slot i of at least `bytes` (grown in the first iteration, never later). */
static void *scratch(CpuDnnl *d, int i, size_t bytes) {
    if (bytes > d->scratch_bytes[i]) {
        free(d->scratch[i]);
        d->scratch[i] = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
        ALLOC_CHECK(d->scratch[i]);
        d->scratch_bytes[i] = bytes;
    }
    return d->scratch[i];
}

typedef struct {
    int arg;
    const dnnl_memory_desc_t *md;
    void *ptr;
} Arg;

/* Runs p on the arguments and waits. */
static void exec(CpuDnnl *d, dnnl_primitive_t p, int n, const Arg *a) {
    dnnl_exec_arg_t args[8];
    for (int i = 0; i < n; i++) {
        args[i].arg = a[i].arg;
        DNNL_CHECK(dnnl_memory_create(&args[i].memory, a[i].md, d->eng, a[i].ptr));
    }
    DNNL_CHECK(dnnl_primitive_execute(p, d->strm, n, args));
    DNNL_CHECK(dnnl_stream_wait(d->strm));
    for (int i = 0; i < n; i++)
        dnnl_memory_destroy(args[i].memory);
}

/* to <- from, converting type and layout (a cached reorder primitive per pair of layouts). */
static void reorder(CpuDnnl *d, const dnnl_memory_desc_t *from, const void *src,
                    const dnnl_memory_desc_t *to, void *dst) {
    Reorder *r = NULL;
    for (int i = 0; i < d->nreorders && !r; i++)
        if (dnnl_memory_desc_equal(&d->reorders[i].from, from) &&
            dnnl_memory_desc_equal(&d->reorders[i].to, to))
            r = &d->reorders[i];
    if (!r) {
        r = grow(&d->reorders, &d->nreorders, sizeof *r);
        r->from = *from, r->to = *to;
        dnnl_primitive_desc_t pd;
        DNNL_CHECK(dnnl_reorder_primitive_desc_create(&pd, from, d->eng, to, d->eng, NULL));
        DNNL_CHECK(dnnl_primitive_create(&r->p, pd));
        dnnl_primitive_desc_destroy(pd);
    }
    const Arg a[2] = {{DNNL_ARG_FROM, from, (void *)src}, {DNNL_ARG_TO, to, dst}};
    exec(d, r->p, 2, a);
}

/* The bf16 copy of weight `w` (layout `from`) in layout `to`, remade once per generation. */
static void *weight(CpuDnnl *d, const float *w, const dnnl_memory_desc_t *from,
                    const dnnl_memory_desc_t *to) {
    Weight *e = NULL;
    for (int i = 0; i < d->nweights && !e; i++)
        if (d->weights[i].src == w && dnnl_memory_desc_equal(&d->weights[i].to, to))
            e = &d->weights[i];
    if (!e) {
        e = grow(&d->weights, &d->nweights, sizeof *e);
        e->src = w, e->to = *to;
        e->buf = aligned_alloc(64, (dnnl_memory_desc_get_size(to) + 63) & ~(size_t)63);
        ALLOC_CHECK(e->buf);
    }
    if (e->gen != d->gen) reorder(d, from, w, to, e->buf), e->gen = d->gen;
    return e->buf;
}

static void md_strided(dnnl_memory_desc_t *md, int rows, int cols, dnnl_dim_t rs, dnnl_dim_t cs,
                       dnnl_data_type_t t) {
    const dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides));
}

/* dims[nd] copied into oneDNN's fixed-size dims array (the API reads all of it) */
static void md_tag(dnnl_memory_desc_t *md, int nd, const dnnl_dim_t *dims, dnnl_data_type_t t,
                   dnnl_format_tag_t tag) {
    dnnl_dims_t all = {0};
    memcpy(all, dims, (size_t)nd * sizeof(dnnl_dim_t));
    DNNL_CHECK(dnnl_memory_desc_init_by_tag(md, nd, all, t, tag));
}

/* ---- matrix products ------------------------------------------------------------------------- */

/* y[n] = x[n] rounded to bf16, as bf16 (VBLOCK-wide blocks: -O2 vectorises them, 2.6x the plain
 * loop) or as fp32 values. */
static void round_bf16(const float *restrict x, uint16_t *restrict y, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = gc_bf16_from_float(x[i + j]);
    for (; i < n; i++)
        y[i] = gc_bf16_from_float(x[i]);
}

static void round_f32(const float *restrict x, float *restrict y, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = gc_bf16_to_float(gc_bf16_from_float(x[i + j]));
    for (; i < n; i++)
        y[i] = gc_bf16_to_float(gc_bf16_from_float(x[i]));
}

/* fp32 copy of the stored rows x cols matrix x (leading dimension ld), each value rounded to bf16,
 * dense (leading dimension cols). */
static float *rounded(CpuDnnl *d, int slot, const float *x, int rows, int cols, int ld) {
    float *y = scratch(d, slot, (size_t)rows * cols * sizeof(float));
    for (int r = 0; r < rows; r++)
        round_f32(x + (size_t)r * ld, y + (size_t)r * cols, (size_t)cols);
    return y;
}

static Matmul *matmul(CpuDnnl *d, int ta, int tb, int m, int n, int k, float alpha, float beta,
                      int ldc) {
    for (int i = 0; i < d->nmms; i++) {
        Matmul *e = &d->mms[i];
        if (e->m == m && e->n == n && e->k == k && e->ta == ta && e->tb == tb && e->ldc == ldc &&
            e->alpha == alpha && e->beta == beta)
            return e;
    }
    Matmul *e = grow(&d->mms, &d->nmms, sizeof *e);
    *e = (Matmul){
        .m = m, .n = n, .k = k, .ta = ta, .tb = tb, .ldc = ldc, .alpha = alpha, .beta = beta};
    /* op(A) over a dense copy of A (stored k x m when transposed), likewise op(B) */
    md_strided(&e->a, m, k, ta ? 1 : k, ta ? m : 1, dnnl_bf16);
    md_strided(&e->b, k, n, tb ? 1 : n, tb ? k : 1, dnnl_bf16);
    md_strided(&e->c, m, n, ldc, 1, dnnl_f32);
    dnnl_matmul_desc_t desc;
    DNNL_CHECK(dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c));
    dnnl_primitive_attr_t attr;
    DNNL_CHECK(dnnl_primitive_attr_create(&attr));
    if (alpha != 1.0f) DNNL_CHECK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha));
    dnnl_post_ops_t po = NULL;
    if (beta != 0.0f) {
        DNNL_CHECK(dnnl_post_ops_create(&po));
        DNNL_CHECK(dnnl_post_ops_append_sum(po, beta));
        DNNL_CHECK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t pd;
    DNNL_CHECK(dnnl_primitive_desc_create(&pd, &desc, attr, d->eng, NULL));
    DNNL_CHECK(dnnl_primitive_create(&e->p, pd));
    dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return e;
}

/* A stored rows x cols f32 matrix with leading dimension ld as bf16, dense: the weight's kept copy
 * or a per-call one in scratch slot `slot`, rounded by our loop (the layout does not change, and
 * ResNet-50's per-sample products make 1600 such calls per step: a oneDNN reorder adds its
 * primitive's overhead to each). */
static void *as_bf16(CpuDnnl *d, int is_weight, int slot, const float *x, int rows, int cols,
                     int ld) {
    if (is_weight) {
        dnnl_memory_desc_t from, to;
        md_strided(&from, rows, cols, ld, 1, dnnl_f32);
        md_strided(&to, rows, cols, cols, 1, dnnl_bf16);
        return weight(d, x, &from, &to);
    }
    uint16_t *y = scratch(d, slot, (size_t)rows * cols * sizeof(uint16_t));
    for (int r = 0; r < rows; r++)
        round_bf16(x + (size_t)r * ld, y + (size_t)r * cols, (size_t)cols);
    return y;
}

void cpu_dnnl_gemm(CpuDnnl *d, int weight_op, int ta, int tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
    if (m <= 0 || n <= 0) return;
    const int arows = ta ? k : m, acols = ta ? m : k, brows = tb ? n : k, bcols = tb ? k : n;
    if (k <= CPU_DNNL_SMALL_K) { /* k = 0 included: C = beta C, as BLAS */
        const float *ra = k ? rounded(d, 0, a, arows, acols, lda) : a;
        const float *rb = k ? rounded(d, 1, b, brows, bcols, ldb) : b;
        cpu_blas()->sgemm(CPU_BLAS_ROW_MAJOR, ta ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS,
                          tb ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS, m, n, k, alpha, ra,
                          k ? acols : lda, rb, k ? bcols : ldb, beta, c, ldc);
        return;
    }
    Matmul *e = matmul(d, ta, tb, m, n, k, alpha, beta, ldc);
    void *a16 = as_bf16(d, weight_op == 1, 0, a, arows, acols, lda);
    void *b16 = as_bf16(d, weight_op == 2, 1, b, brows, bcols, ldb);
    const Arg args[3] = {
        {DNNL_ARG_SRC, &e->a, a16}, {DNNL_ARG_WEIGHTS, &e->b, b16}, {DNNL_ARG_DST, &e->c, c}};
    exec(d, e->p, 3, args);
}

/* ---- convolutions ---------------------------------------------------------------------------- */

/* The user's fp32 NCHW tensors of a shape: x, y, w (OIHW), b. */
typedef struct {
    dnnl_memory_desc_t x, y, w, b;
} User;

static User user_mds(const ConvShape *s) {
    User u;
    const dnnl_dim_t x[4] = {s->batch, s->c_in, s->h_in, s->w_in};
    const dnnl_dim_t y[4] = {s->batch, s->c_out, s->h_out, s->w_out};
    const dnnl_dim_t w[4] = {s->c_out, s->c_in, s->k, s->k}, b[1] = {s->c_out};
    md_tag(&u.x, 4, x, dnnl_f32, dnnl_nchw);
    md_tag(&u.y, 4, y, dnnl_f32, dnnl_nchw);
    md_tag(&u.w, 4, w, dnnl_f32, dnnl_oihw);
    md_tag(&u.b, 1, b, dnnl_f32, dnnl_a);
    return u;
}

/* Layouts the primitive chooses ("any"): bf16 for x, w, dy; fp32 for y, dx, dw. */
static void any_mds(const ConvShape *s, dnnl_data_type_t tx, dnnl_data_type_t ty,
                    dnnl_memory_desc_t *x, dnnl_memory_desc_t *w, dnnl_memory_desc_t *y,
                    dnnl_data_type_t tw) {
    const dnnl_dim_t xd[4] = {s->batch, s->c_in, s->h_in, s->w_in};
    const dnnl_dim_t yd[4] = {s->batch, s->c_out, s->h_out, s->w_out};
    const dnnl_dim_t wd[4] = {s->c_out, s->c_in, s->k, s->k};
    md_tag(x, 4, xd, tx, dnnl_format_tag_any);
    md_tag(y, 4, yd, ty, dnnl_format_tag_any);
    md_tag(w, 4, wd, tw, dnnl_format_tag_any);
}

/* 0 when oneDNN has no implementation (the shape then runs as im2col + GEMM). */
static int create(CpuDnnl *d, const void *desc, const_dnnl_primitive_desc_t hint,
                  dnnl_primitive_desc_t *pd, dnnl_primitive_t *p) {
    dnnl_status_t st = dnnl_primitive_desc_create(pd, desc, NULL, d->eng, hint);
    if (st == dnnl_unimplemented) return 0;
    DNNL_CHECK(st);
    DNNL_CHECK(dnnl_primitive_create(p, *pd));
    return 1;
}

static const dnnl_memory_desc_t *query(const_dnnl_primitive_desc_t pd, dnnl_query_t what) {
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

static void geometry(const ConvShape *s, dnnl_dims_t strides, dnnl_dims_t pl, dnnl_dims_t pr) {
    const dnnl_dim_t r_h = (dnnl_dim_t)(s->h_out - 1) * s->stride + s->k - s->h_in - s->pad;
    const dnnl_dim_t r_w = (dnnl_dim_t)(s->w_out - 1) * s->stride + s->k - s->w_in - s->pad;
    strides[0] = strides[1] = s->stride;
    pl[0] = pl[1] = s->pad;
    pr[0] = r_h, pr[1] = r_w;
}

static Conv *conv_entry(CpuDnnl *d, const ConvShape *s, int bias) {
    for (int i = 0; i < d->nconvs; i++)
        if (!memcmp(&d->convs[i].s, s, sizeof *s) && d->convs[i].bias == bias) return &d->convs[i];
    Conv *c = grow(&d->convs, &d->nconvs, sizeof *c);
    c->s = *s, c->bias = bias;
    return c;
}

/* The forward primitive (first call of the shape). */
static int make_forward(CpuDnnl *d, Conv *c) {
    if (c->tried_fwd) return c->fwd != NULL;
    c->tried_fwd = 1;
    const User u = user_mds(&c->s);
    dnnl_memory_desc_t x, w, y;
    any_mds(&c->s, dnnl_bf16, dnnl_f32, &x, &w, &y, dnnl_bf16);
    dnnl_dims_t st, pl, pr;
    geometry(&c->s, st, pl, pr);
    dnnl_convolution_desc_t desc;
    if (dnnl_convolution_forward_desc_init(&desc, dnnl_forward_training, dnnl_convolution_direct,
                                           &x, &w, c->bias ? &u.b : NULL, &y, st, pl,
                                           pr) != dnnl_success)
        return 0;
    if (!create(d, &desc, NULL, &c->fwd_pd, &c->fwd)) return 0;
    c->src = *query(c->fwd_pd, dnnl_query_src_md);
    c->wei = *query(c->fwd_pd, dnnl_query_weights_md);
    c->dst = *query(c->fwd_pd, dnnl_query_dst_md);
    return 1;
}

/* The backward primitives (first backward of the shape; the forward's is their hint). */
static int make_backward(CpuDnnl *d, Conv *c) {
    if (c->tried_bwd) return c->bwd_data && c->bwd_weights;
    c->tried_bwd = 1;
    const User u = user_mds(&c->s);
    dnnl_memory_desc_t x, w, y, dx, dw, dy;
    any_mds(&c->s, dnnl_bf16, dnnl_bf16, &x, &w, &dy, dnnl_bf16);
    any_mds(&c->s, dnnl_f32, dnnl_bf16, &dx, &dw, &y, dnnl_f32);
    dnnl_dims_t st, pl, pr;
    geometry(&c->s, st, pl, pr);
    dnnl_convolution_desc_t bd, bw;
    dnnl_primitive_desc_t pd;
    if (dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &dx, &w, &dy, st, pl,
                                                 pr) != dnnl_success ||
        !create(d, &bd, c->fwd_pd, &pd, &c->bwd_data))
        return 0;
    c->bd_ddst = *query(pd, dnnl_query_diff_dst_md);
    c->bd_wei = *query(pd, dnnl_query_weights_md);
    c->bd_dsrc = *query(pd, dnnl_query_diff_src_md);
    dnnl_primitive_desc_destroy(pd);
    (void)y;
    if (dnnl_convolution_backward_weights_desc_init(&bw, dnnl_convolution_direct, &x, &dw,
                                                    c->bias ? &u.b : NULL, &dy, st, pl,
                                                    pr) != dnnl_success ||
        !create(d, &bw, c->fwd_pd, &pd, &c->bwd_weights))
        return 0;
    c->bw_src = *query(pd, dnnl_query_src_md);
    c->bw_ddst = *query(pd, dnnl_query_diff_dst_md);
    c->bw_dwei = *query(pd, dnnl_query_diff_weights_md);
    dnnl_primitive_desc_destroy(pd);
    return 1;
}

/* An fp32 output in the primitive's layout `md`: the user's buffer itself when the layouts agree,
 * else scratch slot `slot`, reordered into the user's after (see from_scratch). */
static void *out_buf(CpuDnnl *d, int slot, const dnnl_memory_desc_t *md,
                     const dnnl_memory_desc_t *user, float *dst) {
    return dnnl_memory_desc_equal(md, user) ? (void *)dst
                                            : scratch(d, slot, dnnl_memory_desc_get_size(md));
}

static void from_scratch(CpuDnnl *d, const dnnl_memory_desc_t *md, void *buf,
                         const dnnl_memory_desc_t *user, float *dst) {
    if (buf != (void *)dst) reorder(d, md, buf, user, dst);
}

/* A per-call bf16 input in the primitive's layout, in scratch slot `slot`. */
static void *in_buf(CpuDnnl *d, int slot, const dnnl_memory_desc_t *user, const float *src,
                    const dnnl_memory_desc_t *md) {
    void *buf = scratch(d, slot, dnnl_memory_desc_get_size(md));
    reorder(d, user, src, md, buf);
    return buf;
}

int cpu_dnnl_conv_forward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                          const float *b, float *y) {
    Conv *c = conv_entry(d, s, b != NULL);
    if (!make_forward(d, c)) return 0;
    const User u = user_mds(s);
    void *x16 = in_buf(d, 0, &u.x, x, &c->src), *w16 = weight(d, w, &u.w, &c->wei);
    void *out = out_buf(d, 1, &c->dst, &u.y, y);
    const Arg a[4] = {{DNNL_ARG_SRC, &c->src, x16},
                      {DNNL_ARG_WEIGHTS, &c->wei, w16},
                      {DNNL_ARG_DST, &c->dst, out},
                      {DNNL_ARG_BIAS, &u.b, (void *)b}};
    exec(d, c->fwd, b ? 4 : 3, a);
    from_scratch(d, &c->dst, out, &u.y, y);
    return 1;
}

int cpu_dnnl_conv_backward(CpuDnnl *d, const ConvShape *s, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db) {
    Conv *c = conv_entry(d, s, db != NULL);
    if (!make_forward(d, c) || !make_backward(d, c)) return 0;
    const User u = user_mds(s);
    void *dy16 = in_buf(d, 2, &u.y, dy, &c->bd_ddst);
    if (dx) {
        void *w16 = weight(d, w, &u.w, &c->bd_wei), *out = out_buf(d, 1, &c->bd_dsrc, &u.x, dx);
        const Arg a[3] = {{DNNL_ARG_DIFF_DST, &c->bd_ddst, dy16},
                          {DNNL_ARG_WEIGHTS, &c->bd_wei, w16},
                          {DNNL_ARG_DIFF_SRC, &c->bd_dsrc, out}};
        exec(d, c->bwd_data, 3, a);
        from_scratch(d, &c->bd_dsrc, out, &u.x, dx);
    }
    void *ddst = dnnl_memory_desc_equal(&c->bw_ddst, &c->bd_ddst)
                     ? dy16
                     : in_buf(d, 3, &u.y, dy, &c->bw_ddst);
    void *x16 = in_buf(d, 0, &u.x, x, &c->bw_src), *out = out_buf(d, 1, &c->bw_dwei, &u.w, dw);
    const Arg a[4] = {{DNNL_ARG_SRC, &c->bw_src, x16},
                      {DNNL_ARG_DIFF_DST, &c->bw_ddst, ddst},
                      {DNNL_ARG_DIFF_WEIGHTS, &c->bw_dwei, out},
                      {DNNL_ARG_DIFF_BIAS, &u.b, db}};
    exec(d, c->bwd_weights, db ? 4 : 3, a);
    from_scratch(d, &c->bw_dwei, out, &u.w, dw);
    return 1;
}
