/* cpu_bf16.c - bf16 GEMM for the CPU backend (see cpu_bf16.h): inputs rounded to bfloat16,
 * fp32 accumulation.
 *
 * Our engine ("avx512bf16") is a Goto-style blocked GEMM: op(B) is packed per (KC x NC) block and
 * op(A) per (MC x KC) block into bf16 panels, rounding on the way; a 12 x 32 micro-kernel keeps 24
 * zmm accumulators of fp32 and issues one VDPBF16PS per accumulator and pair of k:
 *   acc[i][j] += A[i][2q] * B[2q][j] + A[i][2q+1] * B[2q+1][j]
 * so a B panel holds, per pair q, 32 columns x 2 k interleaved (64 bf16 = two zmm), and an A
 * panel, per pair q, 12 rows' (A[i][2q], A[i][2q+1]) as 32-bit words that are broadcast. Odd k and
 * partial panels are padded with zeros. Single-threaded (one rank per core is how dtbench runs
 * CPU ranks; OpenBLAS's threads serve fp32).
 *
 * The "openblas-sbgemm" engine feeds OpenBLAS's cblas_sbgemm (found with dlsym: Debian's 0.3.21
 * is built without BUILD_BFLOAT16, so it must not be a link-time dependency) bf16 copies of
 * blocks of the operands, (MC x KC) of op(A) and (KC x NC) of op(B), so the scratch stays small.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "cpu_bf16.h"
#include "fail.h" /* defines: check_fail */

#include <dlfcn.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#define MR 12
#define NR 32
#define KC 256 /* even */
#define MC 192 /* multiple of MR */
#define NC 2048 /* multiple of NR */

/* cblas_sbgemm(order, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) with
 * OpenBLAS's enum values: CblasRowMajor 101, CblasNoTrans 111. */
typedef void (*SbgemmFn)(int, int, int, int, int, int, float, const uint16_t *, int,
                         const uint16_t *, int, float, float *, int);

struct CpuBf16 {
    uint16_t *apack; /* MC x KC (rounded up to panels) */
    uint16_t *bpack; /* KC x NC */
};

static SbgemmFn sbgemm_symbol(void) {
    return (SbgemmFn)(uintptr_t)dlsym(RTLD_DEFAULT, "cblas_sbgemm");
}

static int have_avx512bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
}

const char *cpu_bf16_engine(char *why, size_t len) {
    const char *force = getenv("DTBENCH_BF16_ENGINE");
    if (why && len) why[0] = '\0';
    if (force && !strcmp(force, "none")) {
        if (why) snprintf(why, len, "bf16 disabled by DTBENCH_BF16_ENGINE=none (tests)");
        return NULL;
    }
    int sb = sbgemm_symbol() != NULL, hw = have_avx512bf16();
    if (force && !strcmp(force, "avx512bf16") && hw) return "avx512bf16";
    if (sb) return "openblas-sbgemm";
    if (hw) return "avx512bf16";
    if (why)
        snprintf(why, len, "this CPU has no AVX512-BF16 and the linked OpenBLAS has no "
                           "cblas_sbgemm (built without BUILD_BFLOAT16)");
    return NULL;
}

CpuBf16 *cpu_bf16_create(void) {
    if (!cpu_bf16_engine(NULL, 0)) return NULL;
    CpuBf16 *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->apack = aligned_alloc(64, (size_t)MC * KC * sizeof(uint16_t));
    g->bpack = aligned_alloc(64, (size_t)KC * NC * sizeof(uint16_t));
    if (!g->apack || !g->bpack) {
        cpu_bf16_free(g);
        return NULL;
    }
    return g;
}

void cpu_bf16_free(CpuBf16 *g) {
    if (!g) return;
    free(g->apack), free(g->bpack), free(g);
}

/* op(X)[r][c] of a row-major X with leading dimension ld */
static inline float at(const float *x, int ld, int trans, int r, int c) {
    return trans ? x[(size_t)c * ld + r] : x[(size_t)r * ld + c];
}

/* ---- the avx512bf16 engine ------------------------------------------------------------------ */

/* op(B)[k0.., j0..] (kb x nb) into panels of NR columns: panel p, pair q at
 * bp + (p * kq + q) * 2*NR, element (2q+h, j) at 2*j + h. Zero padding. */
static void pack_b(uint16_t *bp, const float *b, int ldb, int tb, int k0, int kb, int j0, int nb) {
    const int kq = (kb + 1) / 2, panels = (nb + NR - 1) / NR;
    for (int p = 0; p < panels; p++)
        for (int q = 0; q < kq; q++) {
            uint16_t *dst = bp + ((size_t)p * kq + q) * 2 * NR;
            for (int h = 0; h < 2; h++) {
                const int kk = 2 * q + h;
                for (int j = 0; j < NR; j++) {
                    const int jj = p * NR + j;
                    dst[2 * j + h] =
                        kk < kb && jj < nb ? cpu_bf16_round(at(b, ldb, tb, k0 + kk, j0 + jj)) : 0;
                }
            }
        }
}

/* op(A)[i0.., k0..] (mb x kb) into panels of MR rows: panel p, pair q at ap + (p*kq + q)*2*MR,
 * element (i, 2q+h) at 2*i + h. */
static void pack_a(uint16_t *ap, const float *a, int lda, int ta, int i0, int mb, int k0, int kb) {
    const int kq = (kb + 1) / 2, panels = (mb + MR - 1) / MR;
    for (int p = 0; p < panels; p++)
        for (int q = 0; q < kq; q++) {
            uint16_t *dst = ap + ((size_t)p * kq + q) * 2 * MR;
            for (int i = 0; i < MR; i++) {
                const int ii = p * MR + i;
                for (int h = 0; h < 2; h++) {
                    const int kk = 2 * q + h;
                    dst[2 * i + h] =
                        ii < mb && kk < kb ? cpu_bf16_round(at(a, lda, ta, i0 + ii, k0 + kk)) : 0;
                }
            }
        }
}

/* C[mr x nr] (= or +=) alpha * Apanel * Bpanel over kq pairs; beta applies when `first`. */
__attribute__((target("avx512f,avx512bf16"))) static void
micro(int kq, const uint16_t *ap, const uint16_t *bp, float *c, int ldc, int mr, int nr,
      float alpha, float beta, int first) {
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

static void gemm_avx512(CpuBf16 *g, int ta, int tb, int m, int n, int k, float alpha,
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
                              mb - ip < MR ? mb - ip : MR, nb - jp < NR ? nb - jp : NR, alpha,
                              beta, k0 == 0);
            }
        }
    }
}

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
                        cpu_bf16_round(at(b, ldb, tb, k0 + kk, j0 + j));
            for (int i0 = 0; i0 < m; i0 += MC) {
                const int mb = m - i0 < MC ? m - i0 : MC;
                for (int i = 0; i < mb; i++) /* apack[mb, kb] */
                    for (int kk = 0; kk < kb; kk++)
                        g->apack[(size_t)i * kb + kk] =
                            cpu_bf16_round(at(a, lda, ta, i0 + i, k0 + kk));
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

void cpu_bf16_gemm(CpuBf16 *g, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    static const char *engine;
    if (!engine) engine = cpu_bf16_engine(NULL, 0);
    cpu_bf16_gemm_with(g, engine ? engine : "", ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                       ldc);
}
