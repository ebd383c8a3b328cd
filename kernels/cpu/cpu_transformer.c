/* cpu_transformer.c - the CPU backend's transformer layers (GPT-2): token and position embedding,
 * layer normalisation, GELU (tanh approximation), causal multi-head self-attention. Semantics:
 * backend.h.
 *
 * Threads: every kernel here splits its work over cpu_ctx_threads() threads (--threads), made for
 * the call as the bf16 engine does (cpu_bf16.c; a few tens of microseconds each, so a small call
 * stays on the calling thread: the grain sizes below). The split never changes a result: each
 * output element is computed by one thread in a fixed order, so the bits are the same whatever the
 * thread count (the attention's too, as long as OpenBLAS's single-threaded products are). */
#include "cpu_blas.h" /* defines: cpu_blas (the attention's products, fp32 whatever --precision) */
#include "cpu_kernels.h"
#include "cpu_vec.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

/* ---- threads --------------------------------------------------------------------------------- */

#define PAR_MAX 64 /* threads of one call */

/* One part of a parallel loop: items [begin, end) of the call's, part index `part`. */
typedef void (*ParFn)(void *arg, size_t begin, size_t end, int part);
typedef struct {
    ParFn fn;
    void *arg;
    size_t begin, end;
    int part;
} ParPart;

static void *par_run(void *p) {
    ParPart *q = p;
    q->fn(q->arg, q->begin, q->end, q->part);
    return NULL;
}

/* How many parts n items make on ctx's threads with at least `grain` items each (>= 1). */
static int par_parts(BackendCtx *ctx, size_t n, size_t grain) {
    size_t p = (size_t)cpu_ctx_threads(ctx), most = grain > 1 ? n / grain : n;
    if (p > PAR_MAX) p = PAR_MAX;
    if (p > most) p = most;
    return p < 1 ? 1 : (int)p;
}

/* Runs fn over [0, n) in `parts` contiguous parts of (nearly) equal size: part 0 on the calling
 * thread, the others on threads made for the call (a part whose thread could not be made runs on
 * the calling thread afterwards). */
static void par_for(int parts, size_t n, ParFn fn, void *arg) {
    if (n == 0) return;
    ParPart part[PAR_MAX];
    pthread_t tid[PAR_MAX];
    int started[PAR_MAX] = {0};
    for (int p = 0; p < parts; p++)
        part[p] = (ParPart){fn, arg, n * p / parts, n * (p + 1) / parts, p};
    for (int p = 1; p < parts; p++)
        started[p] = pthread_create(&tid[p], NULL, par_run, &part[p]) == 0;
    par_run(&part[0]);
    for (int p = 1; p < parts; p++)
        if (started[p])
            pthread_join(tid[p], NULL);
        else
            par_run(&part[p]);
}

/* Elements of work below which a part is not worth a thread of its own. */
#define PAR_GRAIN 32768

/* ---- token and position embedding ------------------------------------------------------------ */

typedef struct {
    const TokPosShape *s;
    const float *ids, *wte, *wpe, *dy;
    float *y, *dwte, *dwpe;
    int parts;
} TokPosJob;

/* the id as an index of wte, or -1 outside [0, vocab) (NaN too), as cpu_embedding_forward */
static int tok_id(float id, int vocab) {
    return id >= 0.0f && id < (float)vocab ? (int)id : -1;
}

/* y[n] = a[n] + b[n] */
static void vadd2(float *restrict y, const float *restrict a, const float *restrict b, size_t n) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = a[i + j] + b[i + j];
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

static void tokpos_forward_rows(void *arg, size_t r0, size_t r1, int part) {
    (void)part;
    const TokPosJob *j = arg;
    const size_t dim = (size_t)j->s->dim;
    for (size_t r = r0; r < r1; r++) {
        const float *pos = j->wpe + (r % (size_t)j->s->seq) * dim;
        const int id = tok_id(j->ids[r], j->s->vocab);
        if (id >= 0)
            vadd2(j->y + r * dim, j->wte + (size_t)id * dim, pos, dim);
        else
            memcpy(j->y + r * dim, pos, dim * sizeof(float));
    }
}

void cpu_tokpos_forward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *wte,
                        const float *wpe, float *y) {
    TokPosJob j = {.s = s, .ids = ids, .wte = wte, .wpe = wpe, .y = y};
    const size_t rows = s->seq > 0 && s->dim > 0 ? (size_t)s->batch * s->seq : 0;
    par_for(par_parts(ctx, rows, PAR_GRAIN / (size_t)(s->dim > 0 ? s->dim : 1) + 1), rows,
            tokpos_forward_rows, &j);
}

/* Part p of j->parts owns the ids [vocab*p/parts, vocab*(p+1)/parts) and the positions
 * [seq*p/parts, ...): it zeroes its rows of dwte and adds to them, in row order, the dy rows of
 * its ids (every part reads all the ids: no atomics, no partial copies of dwte), and sums its
 * rows of dwpe over the batch, in sample order. */
static void tokpos_backward_part(void *arg, size_t p, size_t end, int part) {
    (void)end, (void)part;
    const TokPosJob *j = arg;
    const TokPosShape *s = j->s;
    const size_t dim = (size_t)s->dim, rows = (size_t)s->batch * s->seq, P = (size_t)j->parts;
    const int v0 = (int)((size_t)s->vocab * p / P), v1 = (int)((size_t)s->vocab * (p + 1) / P);
    memset(j->dwte + (size_t)v0 * dim, 0, (size_t)(v1 - v0) * dim * sizeof(float));
    for (size_t r = 0; r < rows; r++) {
        const int id = tok_id(j->ids[r], s->vocab);
        if (id >= v0 && id < v1) cpu_vaxpy(j->dwte + (size_t)id * dim, j->dy + r * dim, dim, 1.0f);
    }
    const size_t t0 = (size_t)s->seq * p / P, t1 = (size_t)s->seq * (p + 1) / P;
    const size_t sample = (size_t)s->seq * dim;
    for (size_t t = t0; t < t1; t++) {
        float *d = j->dwpe + t * dim;
        memcpy(d, j->dy + t * dim, dim * sizeof(float));
        for (int b = 1; b < s->batch; b++)
            cpu_vaxpy(d, j->dy + b * sample + t * dim, dim, 1.0f);
    }
}

void cpu_tokpos_backward(BackendCtx *ctx, const TokPosShape *s, const float *ids, const float *dy,
                         float *dwte, float *dwpe) {
    TokPosJob j = {.s = s, .ids = ids, .dy = dy, .dwte = dwte, .dwpe = dwpe};
    if (s->dim <= 0) return;
    if (s->batch <= 0) { /* nothing to add: both gradients are zero */
        memset(dwte, 0, (size_t)s->vocab * s->dim * sizeof(float));
        memset(dwpe, 0, (size_t)s->seq * s->dim * sizeof(float));
        return;
    }
    /* the work is mostly zeroing dwte */
    const size_t work = ((size_t)s->vocab + (size_t)s->batch * s->seq) * (size_t)s->dim;
    j.parts = par_parts(ctx, work, PAR_GRAIN * 4);
    par_for(j.parts, (size_t)j.parts, tokpos_backward_part, &j);
}

/* ---- layer normalisation --------------------------------------------------------------------- */

typedef struct {
    const LayerNormShape *s;
    const float *x, *gamma, *beta, *mean, *rstd, *dy;
    float *y, *mean_out, *rstd_out, *dx, *dgamma, *dbeta;
} LnJob;

/* sum of (x - m)^2 over x[n], in VBLOCK float lanes */
static float sum_sq_dev(const float *restrict x, size_t n, float m) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float d = x[i + j] - m;
            acc[j] += d * d;
        }
    float s = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        s += acc[j];
    for (; i < n; i++)
        s += (x[i] - m) * (x[i] - m);
    return s;
}

/* y = (x - m) * r * gamma + beta over one row */
static void ln_row_affine(float *restrict y, const float *restrict x, const float *restrict gamma,
                          const float *restrict beta, size_t n, float m, float r) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            y[i + j] = (x[i + j] - m) * r * gamma[i + j] + beta[i + j];
    for (; i < n; i++)
        y[i] = (x[i] - m) * r * gamma[i] + beta[i];
}

/* Rows [r0, r1): the statistics in two passes over the row (it is in cache: the mean, then the
 * squared deviations from it, so no cancellation), each in VBLOCK float lanes. */
static void ln_forward_rows(void *arg, size_t r0, size_t r1, int part) {
    (void)part;
    const LnJob *j = arg;
    const size_t dim = (size_t)j->s->dim;
    for (size_t r = r0; r < r1; r++) {
        const float *x = j->x + r * dim;
        const float m = cpu_vsum(x, dim) / (float)dim;
        const float var = sum_sq_dev(x, dim, m) / (float)dim;
        const float rs = 1.0f / sqrtf(var + j->s->eps);
        j->mean_out[r] = m, j->rstd_out[r] = rs;
        ln_row_affine(j->y + r * dim, x, j->gamma, j->beta, dim, m, rs);
    }
}

void cpu_layernorm_forward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                           const float *gamma, const float *beta, float *y, float *mean,
                           float *rstd) {
    LnJob j = {
        .s = s, .x = x, .gamma = gamma, .beta = beta, .y = y, .mean_out = mean, .rstd_out = rstd};
    const size_t rows = s->rows > 0 && s->dim > 0 ? (size_t)s->rows : 0;
    const size_t grain = PAR_GRAIN / (size_t)(s->dim > 0 ? s->dim : 1) + 1;
    par_for(par_parts(ctx, rows, grain), rows, ln_forward_rows, &j);
}

/* One row's dx = r * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - m) * r. */
static void ln_row_dx(float *restrict dx, const float *restrict x, const float *restrict dy,
                      const float *restrict gamma, size_t n, float m, float r) {
    float sg[VBLOCK] = {0}, sgx[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float g = dy[i + j] * gamma[i + j];
            sg[j] += g;
            sgx[j] += g * ((x[i + j] - m) * r);
        }
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        a += sg[j], b += sgx[j];
    for (; i < n; i++) {
        const float g = dy[i] * gamma[i];
        a += g, b += g * ((x[i] - m) * r);
    }
    a /= (float)n, b /= (float)n;
    for (i = 0; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            dx[i + j] = r * (dy[i + j] * gamma[i + j] - a - (x[i + j] - m) * r * b);
    for (; i < n; i++)
        dx[i] = r * (dy[i] * gamma[i] - a - (x[i] - m) * r * b);
}

static void ln_backward_rows(void *arg, size_t r0, size_t r1, int part) {
    (void)part;
    const LnJob *j = arg;
    const size_t dim = (size_t)j->s->dim;
    for (size_t r = r0; r < r1; r++)
        ln_row_dx(j->dx + r * dim, j->x + r * dim, j->dy + r * dim, j->gamma, dim, j->mean[r],
                  j->rstd[r]);
}

#define LN_COLS 256 /* columns of dgamma and dbeta summed at once */
#define LN_ROWS 32  /* rows summed in float before their sums join the double ones */

/* g[n] += dy * (x - m) * r, b[n] += dy: one row's terms of dgamma and dbeta */
static void ln_col_terms(float *restrict g, float *restrict b, const float *restrict x,
                         const float *restrict dy, size_t n, float m, float r) {
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            g[i + j] += dy[i + j] * ((x[i + j] - m) * r);
            b[i + j] += dy[i + j];
        }
    for (; i < n; i++) {
        g[i] += dy[i] * ((x[i] - m) * r);
        b[i] += dy[i];
    }
}

/* dgamma[c] = sum over rows of dy * xhat, dbeta[c] = sum of dy, for the columns [c0, c1): each
 * thread owns columns (no partial sums to combine: the same bits whatever the split), LN_COLS of
 * them at a time down every row, LN_ROWS rows summed in float lanes, those sums added in double. */
static void ln_backward_cols(void *arg, size_t c0, size_t c1, int part) {
    (void)part;
    const LnJob *j = arg;
    const size_t dim = (size_t)j->s->dim, rows = (size_t)j->s->rows;
    for (size_t cb = c0; cb < c1; cb += LN_COLS) {
        const size_t n = c1 - cb < LN_COLS ? c1 - cb : LN_COLS;
        double sg[LN_COLS] = {0}, sb[LN_COLS] = {0};
        for (size_t r0 = 0; r0 < rows; r0 += LN_ROWS) {
            float g[LN_COLS] = {0}, b[LN_COLS] = {0};
            const size_t r1 = rows - r0 < LN_ROWS ? rows : r0 + LN_ROWS;
            for (size_t r = r0; r < r1; r++)
                ln_col_terms(g, b, j->x + r * dim + cb, j->dy + r * dim + cb, n, j->mean[r],
                             j->rstd[r]);
            for (size_t c = 0; c < n; c++)
                sg[c] += g[c], sb[c] += b[c];
        }
        for (size_t c = 0; c < n; c++)
            j->dgamma[cb + c] = (float)sg[c], j->dbeta[cb + c] = (float)sb[c];
    }
}

void cpu_layernorm_backward(BackendCtx *ctx, const LayerNormShape *s, const float *x,
                            const float *gamma, const float *mean, const float *rstd,
                            const float *dy, float *dx, float *dgamma, float *dbeta) {
    LnJob j = {.s = s,
               .x = x,
               .gamma = gamma,
               .mean = mean,
               .rstd = rstd,
               .dy = dy,
               .dx = dx,
               .dgamma = dgamma,
               .dbeta = dbeta};
    if (s->rows <= 0 || s->dim <= 0) {
        if (s->dim > 0) memset(dgamma, 0, (size_t)s->dim * sizeof(float));
        if (s->dim > 0) memset(dbeta, 0, (size_t)s->dim * sizeof(float));
        return;
    }
    const size_t rows = (size_t)s->rows, dim = (size_t)s->dim;
    par_for(par_parts(ctx, rows, PAR_GRAIN / dim + 1), rows, ln_backward_rows, &j);
    /* a part of columns reads rows x its columns: worth a thread from PAR_GRAIN of those */
    par_for(par_parts(ctx, dim, PAR_GRAIN / rows + VBLOCK), dim, ln_backward_cols, &j);
}

/* ---- GELU (tanh approximation) --------------------------------------------------------------- */

/* y = 0.5 x (1 + tanh u) with u = sqrt(2/pi) (x + 0.044715 x^3), computed as y = x * sigma(2u)
 * (1 + tanh u = 2 sigma(2u)): no cancellation where tanh u is near -1, and one dt_expf. Its
 * derivative, with s = sigma(2u) and 1 - tanh^2 u = 4 s (1 - s):
 *   dy/dx = s + x * 2 s (1 - s) * sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

typedef struct {
    const float *x, *dy;
    float *y, *dx;
} GeluJob;

/* In place is allowed (y == x, dx == dy): each block is loaded into temporaries first. */
static void gelu_forward_part(void *arg, size_t i0, size_t i1, int part) {
    (void)part;
    const GeluJob *g = arg;
    size_t i = i0;
    for (; i + VBLOCK <= i1; i += VBLOCK) {
        float t[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = g->x[i + j];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = t[j] / (1.0f + dt_expf(-2.0f * GELU_K * (t[j] + GELU_C * t[j] * t[j] * t[j])));
        for (int j = 0; j < VBLOCK; j++)
            g->y[i + j] = t[j];
    }
    for (; i < i1; i++) {
        const float t = g->x[i];
        g->y[i] = t / (1.0f + dt_expf(-2.0f * GELU_K * (t + GELU_C * t * t * t)));
    }
}

static inline float gelu_grad(float x) {
    const float s = 1.0f / (1.0f + dt_expf(-2.0f * GELU_K * (x + GELU_C * x * x * x)));
    return s + x * 2.0f * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * GELU_C * x * x);
}

static void gelu_backward_part(void *arg, size_t i0, size_t i1, int part) {
    (void)part;
    const GeluJob *g = arg;
    size_t i = i0;
    for (; i + VBLOCK <= i1; i += VBLOCK) {
        float t[VBLOCK], d[VBLOCK];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = g->x[i + j], d[j] = g->dy[i + j];
        for (int j = 0; j < VBLOCK; j++)
            t[j] = d[j] * gelu_grad(t[j]);
        for (int j = 0; j < VBLOCK; j++)
            g->dx[i + j] = t[j];
    }
    for (; i < i1; i++)
        g->dx[i] = g->dy[i] * gelu_grad(g->x[i]);
}

void cpu_gelu_forward(BackendCtx *ctx, size_t n, const float *x, float *y) {
    GeluJob g = {.x = x, .y = y};
    par_for(par_parts(ctx, n, PAR_GRAIN), n, gelu_forward_part, &g);
}

void cpu_gelu_backward(BackendCtx *ctx, size_t n, const float *x, const float *dy, float *dx) {
    GeluJob g = {.x = x, .dy = dy, .dx = dx};
    par_for(par_parts(ctx, n, PAR_GRAIN), n, gelu_backward_part, &g);
}

/* ---- causal self-attention ------------------------------------------------------------------- */

/* Per (sample, head) pair, on the strided q, k, v of qkv (row stride 3C, head h at column h*D; no
 * copies), in blocks of ATT_RB query rows [i0, i1) that read keys [0, i1) only, so the products
 * skip the masked upper triangle but for the diagonal blocks:
 *   forward   S = scale Q K^T, P = softmax of each row over t' <= t (0 above), Y = P V;
 *   backward  dP = dY V^T, dS = P (dP - rowsum(dP P)) scale, dQ = dS K, dK = dS^T Q, dV = P^T dY.
 * Every output element is written by one product with beta 0: y and dqkv need no zeroing.
 *
 * The reserve keeps P [batch, heads, seq, seq] (only the lower triangle and the zeros above the
 * diagonal in each diagonal block are written and read): the backward reads it instead of
 * recomputing Q K^T. The workspace holds one dS [seq, seq] per thread.
 *
 * Threads: OpenBLAS 0.3.21 (Debian's) has no batched sgemm, so the pairs are the batch: they are
 * split among the threads, each pair's products single-threaded (OpenBLAS's count set to 1 for the
 * call, process-wide as OpenBLAS has no other setting, and restored after). */
#define ATT_RB 64

typedef struct {
    const AttentionShape *s;
    const float *qkv, *dy, *p_in;
    float *y, *p, *dqkv, *work;
} AttJob;

/* C[m,n] = alpha op(A) op(B), row-major, fp32 (the attention runs fp32 under --precision bf16) */
static void gemm0(int ta, int tb, int m, int n, int k, float alpha, const float *a, size_t lda,
                  const float *b, size_t ldb, float *c, size_t ldc) {
    cpu_blas()->sgemm(CPU_BLAS_ROW_MAJOR, ta ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS,
                      tb ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS, m, n, k, alpha, a, (int)lda, b,
                      (int)ldb, 0.0f, c, (int)ldc);
}

/* p[0, n) = softmax of p[0, n) (scores), p[n, width) = 0 (masked) */
static void softmax_row(float *restrict p, size_t n, size_t width) {
    const float mx = cpu_vmax(p, n);
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++) {
            const float e = dt_expf(p[i + j] - mx);
            p[i + j] = e;
            acc[j] += e;
        }
    double sum = 0.0;
    for (int j = 0; j < VBLOCK; j++)
        sum += acc[j];
    for (; i < n; i++)
        sum += p[i] = dt_expf(p[i] - mx);
    cpu_vscale(p, n, (float)(1.0 / sum));
    cpu_vfill(p + n, width - n, 0.0f);
}

/* d[0, n) = p (d - sum(d p)) scale, d[n, width) = 0: dP into dS in place */
static void softmax_grad_row(float *restrict d, const float *restrict p, size_t n, size_t width,
                             float scale) {
    float acc[VBLOCK] = {0};
    size_t i = 0;
    for (; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            acc[j] += d[i + j] * p[i + j];
    float dot = 0.0f;
    for (int j = 0; j < VBLOCK; j++)
        dot += acc[j];
    for (; i < n; i++)
        dot += d[i] * p[i];
    for (i = 0; i + VBLOCK <= n; i += VBLOCK)
        for (int j = 0; j < VBLOCK; j++)
            d[i + j] = p[i + j] * (d[i + j] - dot) * scale;
    for (; i < n; i++)
        d[i] = p[i] * (d[i] - dot) * scale;
    cpu_vfill(d + n, width - n, 0.0f);
}

/* The pair's operands: q (k, v at + C, + 2C) with row stride 3C, y / dy with stride C, dqkv. */
typedef struct {
    int T, D, C;
    const float *q, *k, *v, *dy;
    float *y, *dq, *p;
} AttPair;

static AttPair att_pair(const AttJob *j, size_t pair) {
    const AttentionShape *s = j->s;
    AttPair a;
    a.T = s->seq, a.D = s->head_dim, a.C = s->heads * s->head_dim;
    const size_t b = pair / (size_t)s->heads, h = pair % (size_t)s->heads, T = (size_t)a.T;
    a.q = j->qkv + b * T * 3 * a.C + h * a.D, a.k = a.q + a.C, a.v = a.q + 2 * a.C;
    a.y = j->y ? j->y + b * T * a.C + h * a.D : NULL;
    a.dy = j->dy ? j->dy + b * T * a.C + h * a.D : NULL;
    a.dq = j->dqkv ? j->dqkv + b * T * 3 * a.C + h * a.D : NULL;
    a.p = (j->p ? j->p : (float *)j->p_in) + pair * T * T;
    return a;
}

static void att_forward_pairs(void *arg, size_t first, size_t end, int part) {
    (void)part;
    const AttJob *j = arg;
    for (size_t pair = first; pair < end; pair++) {
        const AttPair a = att_pair(j, pair);
        const size_t T = (size_t)a.T, ld = 3 * (size_t)a.C;
        const float scale = 1.0f / sqrtf((float)a.D);
        for (int i0 = 0; i0 < a.T; i0 += ATT_RB) {
            const int i1 = a.T - i0 < ATT_RB ? a.T : i0 + ATT_RB, m = i1 - i0;
            float *p = a.p + i0 * T;
            gemm0(0, 1, m, i1, a.D, scale, a.q + i0 * ld, ld, a.k, ld, p, T);
            for (int i = i0; i < i1; i++)
                softmax_row(a.p + i * T, (size_t)i + 1, (size_t)i1);
            gemm0(0, 0, m, a.D, i1, 1.0f, p, T, a.v, ld, a.y + (size_t)i0 * a.C, (size_t)a.C);
        }
    }
}

static void att_backward_pairs(void *arg, size_t first, size_t end, int part) {
    const AttJob *j = arg;
    for (size_t pair = first; pair < end; pair++) {
        const AttPair a = att_pair(j, pair);
        const size_t T = (size_t)a.T, ld = 3 * (size_t)a.C, C = (size_t)a.C;
        const float scale = 1.0f / sqrtf((float)a.D);
        float *ds = j->work + (size_t)part * T * T, *dk = a.dq + C, *dv = a.dq + 2 * C;
        for (int i0 = 0; i0 < a.T; i0 += ATT_RB) { /* dS and dQ by blocks of rows */
            const int i1 = a.T - i0 < ATT_RB ? a.T : i0 + ATT_RB, m = i1 - i0;
            gemm0(0, 1, m, i1, a.D, 1.0f, a.dy + i0 * C, C, a.v, ld, ds + i0 * T, T);
            for (int i = i0; i < i1; i++)
                softmax_grad_row(ds + i * T, a.p + i * T, (size_t)i + 1, (size_t)i1, scale);
            gemm0(0, 0, m, a.D, i1, 1.0f, ds + i0 * T, T, a.k, ld, a.dq + i0 * ld, ld);
        }
        for (int j0 = 0; j0 < a.T; j0 += ATT_RB) { /* dK, dV by blocks of keys: rows t >= j0 */
            const int j1 = a.T - j0 < ATT_RB ? a.T : j0 + ATT_RB, n = j1 - j0, k = a.T - j0;
            gemm0(1, 0, n, a.D, k, 1.0f, ds + j0 * T + j0, T, a.q + j0 * ld, ld, dk + j0 * ld, ld);
            gemm0(1, 0, n, a.D, k, 1.0f, a.p + j0 * T + j0, T, a.dy + j0 * C, C, dv + j0 * ld, ld);
        }
    }
}

/* Pairs per thread: at least ~2^20 multiply-adds of products each (about a thread's making). */
static int att_parts(BackendCtx *ctx, const AttentionShape *s) {
    const size_t pairs = (size_t)s->batch * s->heads, T = (size_t)s->seq;
    const size_t per_pair = T * (T + 1) / 2 * (size_t)s->head_dim + 1;
    return par_parts(ctx, pairs, ((size_t)1 << 20) / per_pair + 1);
}

static void att_run(BackendCtx *ctx, const AttentionShape *s, ParFn fn, AttJob *j) {
    const size_t pairs = s->seq > 0 && s->head_dim > 0 ? (size_t)s->batch * s->heads : 0;
    const int parts = att_parts(ctx, s);
    const CpuBlas *blas = cpu_blas();
    const int blas_threads = blas->get_num_threads();
    if (parts > 1 && blas_threads != 1) blas->set_num_threads(1);
    par_for(parts, pairs, fn, j);
    if (parts > 1 && blas_threads != 1) blas->set_num_threads(blas_threads);
}

size_t cpu_attention_reserve_bytes(BackendCtx *ctx, const AttentionShape *s) {
    (void)ctx;
    return (size_t)s->batch * s->heads * s->seq * s->seq * sizeof(float);
}

size_t cpu_attention_workspace_bytes(BackendCtx *ctx, const AttentionShape *s) {
    return (size_t)att_parts(ctx, s) * s->seq * s->seq * sizeof(float);
}

void cpu_attention_forward(BackendCtx *ctx, const AttentionShape *s, const float *qkv, float *y,
                           void *reserve, void *work) {
    (void)work;
    AttJob j = {.s = s, .qkv = qkv, .y = y, .p = reserve};
    att_run(ctx, s, att_forward_pairs, &j);
}

void cpu_attention_backward(BackendCtx *ctx, const AttentionShape *s, const float *qkv,
                            const float *y, const void *reserve, const float *dy, float *dqkv,
                            void *work) {
    (void)y;
    AttJob j = {.s = s, .qkv = qkv, .dy = dy, .p_in = reserve, .dqkv = dqkv, .work = work};
    att_run(ctx, s, att_backward_pairs, &j);
}
