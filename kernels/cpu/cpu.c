/* cpu.c - the CPU compute backend (OpenBLAS): its function table `cpu_backend` (see backend.h),
 * its lifetime, memory and phase timer. The kernels are in kernels/cpu/cpu_*.c by concern (GEMM
 * layers, convolution, pooling, normalisation, recurrent, element-wise, loss and optimizer), all
 * declared in cpu_kernels.h. Fully connected and convolution layers are single-precision GEMMs;
 * the other kernels are plain loops written so the compiler can vectorise them (cpu_vec.h).
 * Nothing allocates memory in a hot path: the convolution scratch is the caller's `work` buffer.
 * "Device" memory is host memory, so upload/download are copies and synchronize is a no-op.
 *
 * Threads: init() sets OpenBLAS's thread count to cfg->threads (process-wide, OpenBLAS has no
 * per-context setting); the non-GEMM loops run on the calling thread, except the transformer's
 * (cpu_transformer.c), which split their rows and attention heads over cpu_ctx_threads() threads.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "backend.h"
#include "cpu_bf16.h"    /* defines: the bf16 GEMM engines (--precision bf16) */
#include "cpu_blas.h"    /* defines: cpu_blas, OpenBLAS loaded with the core that fits the CPU */
#include "cpu_kernels.h" /* defines: the kernels entered into the table below */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct BackendCtx {
    int threads;                       /* OpenBLAS threads set at init (0: OpenBLAS's default) */
    Precision precision;               /* FP32 or BF16 (cpu_precision_ok) */
    CpuBf16 *bf16;                     /* BF16: the engine of cpu_bf16_gemm (cpu_bf16.h) */
    double marks[BACKEND_TIMER_SLOTS]; /* timer_record(): CLOCK_MONOTONIC seconds per slot */
};

/* ---- lifetime ------------------------------------------------------------------------------ */

/* OpenBLAS older than the CPU (e.g. 0.3.21 on Sapphire/Emerald Rapids) falls back to its generic
 * SSE kernels, several times slower; cpu_blas.c reloads it with the core that fits. Where that
 * could not be done (OPENBLAS_CORETYPE exported with a generic core, or a program linked against
 * OpenBLAS at load time), say so and what to set: a benchmark must not quietly measure the wrong
 * kernels. */
static void warn_generic_kernels(void) {
    const CpuBlas *b = cpu_blas();
    if (b->better)
        fprintf(stderr,
                "dtbench: warning: OpenBLAS runs its generic %s kernels: %s. For a fair "
                "measurement export OPENBLAS_CORETYPE=%s to every rank\n",
                b->core, b->why, b->better);
}

/* fp32 always; bf16 where a bf16 GEMM engine exists (cpu_bf16.h; both use --threads threads);
 * tf32 and fp16 never (they are tensor-core modes of GPUs; a CPU emulation would measure nothing
 * real). */
static int cpu_precision_ok(Precision p, int threads, char *why, size_t len) {
    (void)threads;
    if (p == PRECISION_FP32) return 1;
    if (p == PRECISION_BF16) {
        char reason[200];
        if (cpu_bf16_engine(reason, sizeof reason)) return 1;
        snprintf(why, len, "%s; expected fp32", reason);
        return 0;
    }
    snprintf(why, len,
             "%s is a GPU tensor-core mode; expected fp32 or bf16 (bf16 where the CPU "
             "has AVX512-BF16)",
             PRECISION_NAME(p));
    return 0;
}

static int cpu_init(const BackendConfig *cfg, BackendCtx **out) {
    if (!out) return -1;
    *out = NULL;
    BackendCtx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return -1;
    ctx->precision = cfg ? cfg->precision : PRECISION_FP32;
    if (ctx->precision != PRECISION_FP32 &&
        !cpu_precision_ok(ctx->precision, cfg ? cfg->threads : 1, NULL, 0)) {
        free(ctx);
        return -1;
    }
    if (ctx->precision == PRECISION_BF16 &&
        !(ctx->bf16 = cpu_bf16_create(cfg && cfg->threads > 0 ? cfg->threads : 1))) {
        free(ctx);
        return -1;
    }
    if (cfg && cfg->threads > 0) {
        cpu_blas()->set_num_threads(cfg->threads);
        ctx->threads = cfg->threads;
    }
    if (cfg && cfg->verbose) warn_generic_kernels();
    *out = ctx;
    return 0;
}

/* /ranks/kernel_choices: which BLAS and kernels ran, and why (cpu_blas.h), and the bf16 engine. */
static size_t cpu_describe_kernels(BackendCtx *ctx, char *buf, size_t len) {
    const CpuBlas *b = cpu_blas();
    char bf16[200] = "";
    if (ctx && ctx->bf16) cpu_bf16_describe(ctx->bf16, bf16, sizeof bf16);
    int n = snprintf(buf, len, "blas: OpenBLAS %s\nblas core: %s: %s\ngemm: %s%s", b->path, b->core,
                     b->why, bf16[0] ? "bf16 engine " : "cblas_sgemm (fp32)", bf16);
    return n < 0 ? 0 : (size_t)n;
}

/* At build and before each step's first forward pass: the bf16 engine's weight copies are
 * remade at their next use (lazily: a convolution's layout is known once its primitive exists). */
static void cpu_weights_ready(BackendCtx *ctx, const float *params, size_t n) {
    (void)params, (void)n;
    if (ctx) cpu_bf16_weights_ready(ctx->bf16);
}

static void cpu_finalize(BackendCtx *ctx) {
    if (ctx) cpu_bf16_free(ctx->bf16);
    free(ctx);
}

static void cpu_describe(BackendCtx *ctx, char *buf, size_t len) {
    if (!buf || len == 0) return;
    const char *engine = ctx ? cpu_bf16_name(ctx->bf16) : NULL;
    const CpuBlas *b = cpu_blas();
    snprintf(buf, len, "%s; core %s; threads %d; precision %s%s%s%s", b->config, b->core,
             b->get_num_threads(), engine ? "bf16" : "fp32", engine ? " (GEMM engine " : "",
             engine ? engine : "", engine ? ", fp32 accumulation)" : "");
}

/* ---- the matrix products of every layer ------------------------------------------------------ */

CpuBf16 *cpu_ctx_bf16(const BackendCtx *ctx) {
    return ctx ? ctx->bf16 : NULL;
}

int cpu_ctx_threads(const BackendCtx *ctx) {
    if (!ctx) return 1;
    return ctx->threads > 0 ? ctx->threads : cpu_blas()->get_num_threads();
}

void cpu_gemm(BackendCtx *ctx, int weight, int ta, int tb, int m, int n, int k, float alpha,
              const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (cpu_ctx_bf16(ctx))
        cpu_bf16_gemm(ctx->bf16, weight, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cpu_blas()->sgemm(CPU_BLAS_ROW_MAJOR, ta ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS,
                          tb ? CPU_BLAS_TRANS : CPU_BLAS_NO_TRANS, m, n, k, alpha, a, lda, b, ldb,
                          beta, c, ldc);
}

/* ---- memory -------------------------------------------------------------------------------- */

static void *cpu_alloc(BackendCtx *ctx, size_t bytes) {
    (void)ctx;
    size_t size = (bytes + 63) & ~(size_t)63; /* aligned_alloc needs a multiple of the alignment */
    if (size == 0) size = 64;
    void *p = aligned_alloc(64, size);
    if (p) memset(p, 0, size);
    return p;
}

static void cpu_free(BackendCtx *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void cpu_upload(BackendCtx *ctx, void *dst_dev, const void *src_host, size_t bytes) {
    (void)ctx;
    if (dst_dev != src_host) memcpy(dst_dev, src_host, bytes);
}

static void cpu_download(BackendCtx *ctx, void *dst_host, const void *src_dev, size_t bytes) {
    (void)ctx;
    if (dst_host != src_dev) memcpy(dst_host, src_dev, bytes);
}

static void cpu_zero(BackendCtx *ctx, void *p, size_t bytes) {
    (void)ctx;
    memset(p, 0, bytes);
}

static void cpu_synchronize(BackendCtx *ctx) {
    (void)ctx;
}

/* ---- phase timer --------------------------------------------------------------------------- */

static void cpu_timer_record(BackendCtx *ctx, int slot) {
    if (slot < 0 || slot >= BACKEND_TIMER_SLOTS) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ctx->marks[slot] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds from mark a to mark b; NaN for a slot outside [0, BACKEND_TIMER_SLOTS). */
static double cpu_timer_elapsed(BackendCtx *ctx, int slot_a, int slot_b) {
    if (slot_a < 0 || slot_a >= BACKEND_TIMER_SLOTS || slot_b < 0 || slot_b >= BACKEND_TIMER_SLOTS)
        return NAN;
    return ctx->marks[slot_b] - ctx->marks[slot_a];
}

const BackendOps cpu_backend = {
    .name = "cpu",
    .reads = "threads",
    .precision_ok = cpu_precision_ok,
    .init = cpu_init,
    .finalize = cpu_finalize,
    .describe = cpu_describe,
    .describe_kernels = cpu_describe_kernels,
    .weights_ready = cpu_weights_ready,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .zero = cpu_zero,
    .synchronize = cpu_synchronize,
    .fc_forward = cpu_fc_forward,
    .fc_backward = cpu_fc_backward,
    .conv_workspace_bytes = cpu_conv_workspace_bytes,
    .conv_forward = cpu_conv_forward,
    .conv_backward = cpu_conv_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .softmax_xent = cpu_softmax_xent,
    .sgd_update = cpu_sgd_update,
    .adamw_update = cpu_adamw_update,
    .timer_record = cpu_timer_record,
    .timer_elapsed = cpu_timer_elapsed,
    .axpy = cpu_axpy,
    .scale = cpu_scale,
    .scale_by = cpu_scale_by,
    .copy = cpu_copy,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .global_avgpool_forward = cpu_global_avgpool_forward,
    .global_avgpool_backward = cpu_global_avgpool_backward,
    .lrn_forward = cpu_lrn_forward,
    .lrn_backward = cpu_lrn_backward,
    .batchnorm_forward_train = cpu_batchnorm_forward_train,
    .batchnorm_forward_infer = cpu_batchnorm_forward_infer,
    .batchnorm_backward = cpu_batchnorm_backward,
    .bn_act_forward_train = cpu_bn_act_forward_train,
    .bn_act_forward_infer = cpu_bn_act_forward_infer,
    .bn_act_backward = cpu_bn_act_backward,
    .concat_forward = cpu_concat_forward,
    .concat_backward = cpu_concat_backward,
    .add_forward = cpu_add_forward,
    .add_backward = cpu_add_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .lstm_reserve_bytes = cpu_lstm_reserve_bytes,
    .lstm_workspace_bytes = cpu_lstm_workspace_bytes,
    .lstm_forward = cpu_lstm_forward,
    .lstm_backward = cpu_lstm_backward,
    .all_finite = cpu_all_finite,
    .tokpos_forward = cpu_tokpos_forward,
    .tokpos_backward = cpu_tokpos_backward,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .gelu_forward = cpu_gelu_forward,
    .gelu_backward = cpu_gelu_backward,
    .attention_reserve_bytes = cpu_attention_reserve_bytes,
    .attention_workspace_bytes = cpu_attention_workspace_bytes,
    .attention_forward = cpu_attention_forward,
    .attention_backward = cpu_attention_backward,
};
