/* cpu_bf16.c - bf16 GEMM for the CPU backend (see cpu_bf16.h): inputs rounded to bfloat16,
 * fp32 accumulation.
 *
 * Our engine ("avx512bf16") is a Goto-style blocked GEMM: op(B) is packed per (KC x NC) block and
 * op(A) per (MC x KC) block into bf16 panels, rounding on the way; a 12 x 32 micro-kernel keeps 24
 * zmm accumulators of fp32 and issues one VDPBF16PS per accumulator and pair of k:
 *   acc[i][j] += A[i][2q] * B[2q][j] + A[i][2q+1] * B[2q+1][j]
 * so a B panel holds, per pair q, 32 columns x 2 k interleaved (64 bf16 = two zmm), and an A
 * panel, per pair q, 12 rows' (A[i][2q], A[i][2q+1]) as 32-bit words that are broadcast. Odd k and
 * partial panels are padded with zeros. Threads (--threads): a product of at least 2M
 * multiply-adds per thread has C's columns split in whole 32-column panels, one block per thread,
 * each with its own packing buffers (threads made per product; each element is summed in the same
 * order whatever the thread count).
 *
 * The "openblas-sbgemm" engine feeds OpenBLAS's cblas_sbgemm (found with dlsym: Debian's 0.3.21
 * is built without BUILD_BFLOAT16, so it must not be a link-time dependency) bf16 copies of
 * blocks of the operands, (MC x KC) of op(A) and (KC x NC) of op(B), so the scratch stays small.
 *
 * The "onednn" engine is cpu_bf16_onednn.c; this file picks it first and hands it its calls.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "cpu_bf16.h"
#include "cpu_bf16_onednn.h" /* defines: the onednn engine */
#include "cpu_blas.h"        /* defines: cpu_blas()->sbgemm */
#include "fail.h"            /* defines: check_fail */

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define MR 12
#define NR 32
#define KC 256  /* even */
#define MC 192  /* multiple of MR */
#define NC 2048 /* multiple of NR */

/* cblas_sbgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) with
 * OpenBLAS's enum values: CblasRowMajor 101, CblasNoTrans 111. */
typedef void (*SbgemmFn)(int, int, int, int, int, int, float, const uint16_t *, int,
                         const uint16_t *, int, float, float *, int);

#define BF16_MAX_THREADS 64
#define BF16_THREAD_MACS (1 << 21) /* multiply-adds per extra thread, at least */

/* Per thread: its packing buffers. */
typedef struct {
    uint16_t *apack; /* MC x KC (rounded up to panels) */
    uint16_t *bpack; /* KC x NC */
} Bf16Bufs;

struct CpuBf16 {
    const char *engine; /* cpu_bf16_engine() when made */
    CpuDnnl *dnnl;      /* the onednn engine (made when it is the engine, or a test asks for it) */
    int threads;        /* our engine splits the columns of C over this many threads */
    Bf16Bufs buf[BF16_MAX_THREADS];
    uint16_t *apack, *bpack; /* = buf[0]'s (the sbgemm engine, and one thread) */
};

static SbgemmFn sbgemm_symbol(void) {
    return cpu_blas()->sbgemm;
}

/* Our engine is x86-64 only (AVX512-BF16); elsewhere (aarch64...) bf16 needs cblas_sbgemm. The
 * one architecture test of the file: the engine below is compiled only where it can run. */
#if defined(__x86_64__)
#define DT_BF16_X86 1
#include <immintrin.h>
#endif

static int have_avx512bf16(void) {
#ifdef DT_BF16_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

const char *cpu_bf16_engine(char *why, size_t len) {
    const char *force = getenv("DTBENCH_BF16_ENGINE");
    if (why && len) why[0] = '\0';
    if (force && !strcmp(force, "none")) {
        if (why) snprintf(why, len, "bf16 disabled by DTBENCH_BF16_ENGINE=none (tests)");
        return NULL;
    }
    char no_dnnl[160] = "";
    const int dn = cpu_dnnl_available(no_dnnl, sizeof no_dnnl, NULL);
    const int sb = sbgemm_symbol() != NULL, hw = have_avx512bf16();
    if (force && !strcmp(force, "avx512bf16") && hw) return "avx512bf16";
    if (force && !strcmp(force, "openblas-sbgemm") && sb) return "openblas-sbgemm";
    if (dn) return "onednn";
    if (sb) return "openblas-sbgemm";
    if (hw) return "avx512bf16";
    if (why)
        snprintf(why, len,
                 "this CPU has no AVX512-BF16, the loaded OpenBLAS has no cblas_sbgemm (built "
                 "without BUILD_BFLOAT16), and %s",
                 no_dnnl);
    return NULL;
}

CpuBf16 *cpu_bf16_create(int threads) {
    const char *engine = cpu_bf16_engine(NULL, 0);
    if (!engine) return NULL;
    CpuBf16 *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->engine = engine;
    g->threads = threads < 1 ? 1 : threads > BF16_MAX_THREADS ? BF16_MAX_THREADS : threads;
    if (!strcmp(engine, "onednn") && !(g->dnnl = cpu_dnnl_create(g->threads))) {
        free(g);
        return NULL;
    }
    for (int t = 0; t < g->threads; t++) {
        g->buf[t].apack = aligned_alloc(64, (size_t)MC * KC * sizeof(uint16_t));
        g->buf[t].bpack = aligned_alloc(64, (size_t)KC * NC * sizeof(uint16_t));
        if (!g->buf[t].apack || !g->buf[t].bpack) {
            cpu_bf16_free(g);
            return NULL;
        }
    }
    g->apack = g->buf[0].apack, g->bpack = g->buf[0].bpack;
    return g;
}

void cpu_bf16_free(CpuBf16 *g) {
    if (!g) return;
    cpu_dnnl_free(g->dnnl);
    for (int t = 0; t < BF16_MAX_THREADS; t++)
        free(g->buf[t].apack), free(g->buf[t].bpack);
    free(g);
}

const char *cpu_bf16_name(const CpuBf16 *g) {
    return g ? g->engine : NULL;
}

void cpu_bf16_describe(const CpuBf16 *g, char *buf, size_t len) {
    const char *isa = NULL;
    if (g && g->dnnl) cpu_dnnl_available(NULL, 0, &isa);
    snprintf(buf, len, "%s%s%s%s", g ? g->engine : "none", isa ? " (oneDNN on " : "",
             isa ? isa : "", isa ? ")" : "");
}

void cpu_bf16_weights_ready(CpuBf16 *g) {
    if (g) cpu_dnnl_weights_ready(g->dnnl);
}

/* op(X)[r][c] of a row-major X with leading dimension ld */
static inline float at(const float *x, int ld, int trans, int r, int c) {
    return trans ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

/* ---- the avx512bf16 engine ------------------------------------------------------------------ */
#ifdef DT_BF16_X86

/* Packing rounds with VCVTNEPS2BF16 (round to nearest even, NaN kept) and builds the 32-bit
 * pair words the micro-kernel reads: word = bf16(x at k) | bf16(x at k+1) << 16. */
#define AVX512BF16 __attribute__((target("avx512f,avx512bf16")))

static inline AVX512BF16 __mmask16 first_n(int n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? 0 : (__mmask16)((1u << n) - 1);
}

/* Pair words of two rows contiguous over j: word j = (r0[j], r1[j]) for j < n <= 16, else 0;
 * r1 NULL: zeros (odd k). */
static inline AVX512BF16 __m512i pair_rows(const float *r0, const float *r1, int n) {
    const __mmask16 m = first_n(n);
    const __m512 a = _mm512_maskz_loadu_ps(m, r0);
    const __m512 b = r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
    const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(a));
    const __m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(b));
    return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

/* Pair words along one row: word t = (x[2t], x[2t+1]) for the first n <= 32 values, zeros after. */
static inline AVX512BF16 __m512i pair_along(const float *x, int n) {
    const __m512 a = _mm512_maskz_loadu_ps(first_n(n), x);
    const __m512 b = _mm512_maskz_loadu_ps(first_n(n - 16), x + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(b, a); /* words 0..7 from a, 8..15 from b */
}

/* 16 x 16 transpose of 32-bit words: v[r] word c -> v[c] word r. */
static inline AVX512BF16 void transpose16(__m512i v[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) { /* 2x2 blocks of words */
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) /* 4x4 within 128-bit lanes: v[i+c] = column c of the lane */
        for (int j = 0; j < 2; j++) {
            v[i + 2 * j] = _mm512_unpacklo_epi64(t[i + j], t[i + 2 + j]);
            v[i + 2 * j + 1] = _mm512_unpackhi_epi64(t[i + j], t[i + 2 + j]);
        }
    for (int i = 0; i < 16; i += 8) /* 128-bit lanes: pairs of 4-row groups */
        for (int j = 0; j < 4; j++) {
            t[i + j] = _mm512_shuffle_i32x4(v[i + j], v[i + 4 + j], 0x88);
            t[i + 4 + j] = _mm512_shuffle_i32x4(v[i + j], v[i + 4 + j], 0xdd);
        }
    for (int j = 0; j < 8; j++) {
        v[j] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0x88);
        v[j + 8] = _mm512_shuffle_i32x4(t[j], t[j + 8], 0xdd);
    }
}

/* Rows contiguous along k (op(X) = X for A, X^T for B): `rows` rows of the panel, row r at
 * x + r*ld (r >= nrows: zeros), into words dst[q * stride + r] for the kq pairs: 16 rows x 16
 * pairs at a time, transposed in registers. */
static AVX512BF16 void pack_along_k(uint32_t *dst, int stride, const float *x, size_t ld, int rows,
                                    int nrows, int kb) {
    const int kq = (kb + 1) / 2;
    __m512i v[16];
    for (int r0 = 0; r0 < rows; r0 += 16) {
        const __mmask16 lanes = first_n(rows - r0);
        for (int q0 = 0; q0 < kq; q0 += 16) {
            for (int r = 0; r < 16; r++)
                v[r] = r0 + r < nrows && r0 + r < rows
                           ? pair_along(x + (size_t)(r0 + r) * ld + 2 * q0, kb - 2 * q0)
                           : _mm512_setzero_si512();
            transpose16(v); /* v[q]: pair q0+q of rows r0 .. r0+15 */
            for (int q = 0; q < 16 && q0 + q < kq; q++)
                _mm512_mask_storeu_epi32(dst + (size_t)(q0 + q) * stride + r0, lanes, v[q]);
        }
    }
}

/* Rows contiguous along the panel (op(X) = X^T for A, X for B): pair q from rows k0+2q and
 * k0+2q+1 at x + k*ld, `cols` words per pair (n valid, the rest zeros) at dst + q*cols. */
static AVX512BF16 void pack_across_k(uint32_t *dst, int cols, const float *x, size_t ld, int n,
                                     int kb) {
    const int kq = (kb + 1) / 2;
    for (int q = 0; q < kq; q++) {
        const float *r0 = x + (size_t)(2 * q) * ld, *r1 = 2 * q + 1 < kb ? r0 + ld : NULL;
        for (int c = 0; c < cols; c += 16) {
            const __m512i w = pair_rows(r0 + c, r1 ? r1 + c : NULL, n - c);
            _mm512_mask_storeu_epi32(dst + (size_t)q * cols + c, first_n(cols - c), w);
        }
    }
}

/* op(B)[k0.., j0..] (kb x nb) into panels of NR columns: panel p, pair q at words
 * bp + (p * kq + q) * NR, word j = (op(B)[2q][j], op(B)[2q+1][j]). */
static AVX512BF16 void pack_b(uint16_t *bp, const float *b, int ldb, int tb, int k0, int kb, int j0,
                              int nb) {
    const int kq = (kb + 1) / 2, panels = (nb + NR - 1) / NR;
    for (int p = 0; p < panels; p++) {
        uint32_t *dst = (uint32_t *)bp + (size_t)p * kq * NR;
        const int n = nb - p * NR < NR ? nb - p * NR : NR, j = j0 + p * NR;
        if (tb) /* B[j][k]: each column's k run is contiguous */
            pack_along_k(dst, NR, b + (size_t)j * ldb + k0, (size_t)ldb, NR, n, kb);
        else
            pack_across_k(dst, NR, b + (size_t)k0 * ldb + j, (size_t)ldb, n, kb);
    }
}

/* op(A)[i0.., k0..] (mb x kb) into panels of MR rows: panel p, pair q at words
 * ap + (p*kq + q)*MR, word i = (op(A)[i][2q], op(A)[i][2q+1]). */
static AVX512BF16 void pack_a(uint16_t *ap, const float *a, int lda, int ta, int i0, int mb, int k0,
                              int kb) {
    const int kq = (kb + 1) / 2, panels = (mb + MR - 1) / MR;
    for (int p = 0; p < panels; p++) {
        uint32_t *dst = (uint32_t *)ap + (size_t)p * kq * MR;
        const int n = mb - p * MR < MR ? mb - p * MR : MR, i = i0 + p * MR;
        if (ta) /* A[k][i]: rows k, k+1 contiguous over i */
            pack_across_k(dst, MR, a + (size_t)k0 * lda + i, (size_t)lda, n, kb);
        else
            pack_along_k(dst, MR, a + (size_t)i * lda + k0, (size_t)lda, MR, n, kb);
    }
}

/* C[mr x nr] (= or +=) alpha * Apanel * Bpanel over kq pairs; beta applies when `first`. */
AVX512BF16 static void micro(int kq, const uint16_t *ap, const uint16_t *bp, float *c, int ldc,
                             int mr, int nr, float alpha, float beta, int first) {
    __m512 acc[MR][2];
    for (int i = 0; i < MR; i++)
        acc[i][0] = _mm512_setzero_ps(), acc[i][1] = _mm512_setzero_ps();
    const int32_t *a32 = (const int32_t *)ap;
    for (int q = 0; q < kq; q++) {
        const __m512bh b0 = (__m512bh)_mm512_load_si512(bp + (size_t)q * 2 * NR);
        const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + (size_t)q * 2 * NR + NR);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32(a32[(size_t)q * MR + i]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    const __mmask16 m1 = nr >= 32 ? 0xffff : nr <= 16 ? 0 : (__mmask16)((1u << (nr - 16)) - 1);
    for (int i = 0; i < mr; i++) {
        float *ci = c + (size_t)i * ldc;
        for (int h = 0; h < 2; h++) {
            const __mmask16 mk = h ? m1 : m0;
            if (!mk) continue;
            __m512 r = _mm512_mul_ps(va, acc[i][h]);
            if (!first)
                r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mk, ci + 16 * h));
            else if (beta != 0.0f)
                r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, ci + 16 * h), r);
            _mm512_mask_storeu_ps(ci + 16 * h, mk, r);
        }
    }
}

/* One thread's product with its own buffers. */
static void gemm_avx512_1(const Bf16Bufs *g, int ta, int tb, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc) {
    for (int j0 = 0; j0 < n; j0 += NC) {
        const int nb = n - j0 < NC ? n - j0 : NC;
        for (int k0 = 0; k0 < k; k0 += KC) {
            const int kb = k - k0 < KC ? k - k0 : KC, kq = (kb + 1) / 2;
            pack_b(g->bpack, b, ldb, tb, k0, kb, j0, nb);
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mb = m - i0 < MC ? m - i0 : MC;
                pack_a(g->apack, a, lda, ta, i0, mb, k0, kb);
                for (int jp = 0; jp < nb; jp += NR)
                    for (int ip = 0; ip < mb; ip += MR)
                        micro(kq, g->apack + (size_t)(ip / MR) * kq * 2 * MR,
                              g->bpack + (size_t)(jp / NR) * kq * 2 * NR,
                              c + (size_t)(i0 + ip) * ldc + j0 + jp, ldc,
                              mb - ip < MR ? mb - ip : MR, nb - jp < NR ? nb - jp : NR, alpha, beta,
                              k0 == 0);
            }
        }
    }
}

/* A block of C's columns [j0, j1) for one thread: the same arithmetic, element by element, as one
 * thread doing all of them (results do not depend on the thread count). */
typedef struct {
    const Bf16Bufs *buf;
    int ta, tb, m, j0, j1, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
} Bf16Job;

static void *bf16_job(void *p) {
    const Bf16Job *j = p;
    const float *b = j->b + (j->tb ? (size_t)j->j0 * j->ldb : (size_t)j->j0);
    gemm_avx512_1(j->buf, j->ta, j->tb, j->m, j->j1 - j->j0, j->k, j->alpha, j->a, j->lda, b,
                  j->ldb, j->beta, j->c + j->j0, j->ldc);
    return NULL;
}

/* Columns split over up to g->threads threads (whole NR panels each; small products on one). */
static void gemm_avx512(CpuBf16 *g, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) {
    const double macs = (double)m * n * k;
    int t = g->threads, panels = (n + NR - 1) / NR;
    if (t > panels) t = panels;
    while (t > 1 && macs < (double)BF16_THREAD_MACS * t)
        t--;
    Bf16Job job[BF16_MAX_THREADS];
    pthread_t tid[BF16_MAX_THREADS];
    int started[BF16_MAX_THREADS] = {0};
    for (int i = 0; i < t; i++) {
        int p0 = panels * i / t, p1 = panels * (i + 1) / t;
        job[i] =
            (Bf16Job){&g->buf[i], ta,   tb, m, p0 * NR, p1 * NR < n ? p1 * NR : n, k, lda, ldb, ldc,
                      alpha,      beta, a,  b, c};
    }
    for (int i = 1; i < t; i++) /* a thread that cannot start: its block runs here below */
        started[i] = pthread_create(&tid[i], NULL, bf16_job, &job[i]) == 0;
    bf16_job(&job[0]);
    for (int i = 1; i < t; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            bf16_job(&job[i]);
    }
}

#else
static void gemm_avx512(CpuBf16 *g, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) {
    (void)g, (void)ta, (void)tb, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc; /* never called: have_avx512bf16() is 0 */
}
#endif

/* ---- the openblas-sbgemm engine ------------------------------------------------------------- */

static void gemm_sbgemm(CpuBf16 *g, SbgemmFn sb, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc) {
    for (int j0 = 0; j0 < n; j0 += NC) {
        const int nb = n - j0 < NC ? n - j0 : NC;
        for (int k0 = 0; k0 < k; k0 += KC) {
            const int kb = k - k0 < KC ? k - k0 : KC;
            for (int kk = 0; kk < kb; kk++) /* bpack[kb, nb], row-major */
                for (int j = 0; j < nb; j++)
                    g->bpack[(size_t)kk * nb + j] =
                        gc_bf16_from_float(at(b, ldb, tb, k0 + kk, j0 + j));
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mb = m - i0 < MC ? m - i0 : MC;
                for (int i = 0; i < mb; i++) /* apack[mb, kb] */
                    for (int kk = 0; kk < kb; kk++)
                        g->apack[(size_t)i * kb + kk] =
                            gc_bf16_from_float(at(a, lda, ta, i0 + i, k0 + kk));
                sb(101, 111, 111, mb, nb, kb, alpha, g->apack, kb, g->bpack, nb,
                   k0 == 0 ? beta : 1.0f, c + (size_t)i0 * ldc + j0, ldc);
            }
        }
    }
}

/* ---- entry points --------------------------------------------------------------------------- */

/* k == 0: C = beta * C (beta 0: zeros), as BLAS. */
static void scale_only(int m, int n, float beta, float *c, int ldc) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
}

void cpu_bf16_gemm_with(CpuBf16 *g, const char *engine, int ta, int tb, int m, int n, int k,
                        float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                        float *c, int ldc) {
    if (!strcmp(engine, "onednn")) { /* tests: the engine on a context made for another */
        if (!g->dnnl) g->dnnl = cpu_dnnl_create(g->threads);
        if (!g->dnnl)
            check_fail(__FILE__, __LINE__, "cpu_bf16_gemm", "oneDNN cannot run bf16 here");
        cpu_dnnl_gemm(g->dnnl, CPU_BF16_NO_WEIGHT, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc);
        return;
    }
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_only(m, n, beta, c, ldc);
        return;
    }
    SbgemmFn sb = !strcmp(engine, "openblas-sbgemm") ? sbgemm_symbol() : NULL;
    if (sb)
        gemm_sbgemm(g, sb, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (!strcmp(engine, "avx512bf16") && have_avx512bf16())
        gemm_avx512(g, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else /* the backend refuses bf16 before building anything (cpu_bf16_engine) */
        check_fail(__FILE__, __LINE__, "cpu_bf16_gemm", "no bf16 GEMM engine on this machine");
}

void cpu_bf16_gemm(CpuBf16 *g, int weight, int ta, int tb, int m, int n, int k, float alpha,
                   const float *a, int lda, const float *b, int ldb, float beta, float *c,
                   int ldc) {
    if (g->dnnl && !strcmp(g->engine, "onednn"))
        cpu_dnnl_gemm(g->dnnl, weight, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cpu_bf16_gemm_with(g, g->engine, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

int cpu_bf16_conv_forward(CpuBf16 *g, const ConvShape *s, const float *x, const float *w,
                          const float *b, float *y) {
    return g->dnnl && !strcmp(g->engine, "onednn") && cpu_dnnl_conv_forward(g->dnnl, s, x, w, b, y);
}

int cpu_bf16_conv_backward(CpuBf16 *g, const ConvShape *s, const float *x, const float *w,
                           const float *dy, float *dx, float *dw, float *db) {
    return g->dnnl && !strcmp(g->engine, "onednn") &&
           cpu_dnnl_conv_backward(g->dnnl, s, x, w, dy, dx, dw, db);
}
