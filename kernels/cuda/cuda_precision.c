/* cuda_precision.c - the host side of --precision on the GPU (see cuda_precision.h): cuBLAS math
 * modes, 16-bit GEMMs through cublasGemmEx, 16-bit convolutions through cuDNN, the loss scaler's
 * overflow check. Written without a GPU: compiled and linked in CI, not run here. */
#include <config.h>
#include "cuda_precision.h"
#include "cuda_check.h"     /* defines: CUDA_CHECK, CUBLAS_CHECK, CUDNN_CHECK */
#include "cuda_kernels16.h" /* defines: dth_filters */

#include <library_types.h>
#include <stdint.h>
#include <stdio.h>

static const float ONE = 1.0f, ZERO = 0.0f;

int cuda_precision_ok(Precision p, int threads, char *why, size_t len) {
    (void)p, (void)threads, (void)why, (void)len; /* all four; TF32/bf16 need sm_80 (CUDA_ARCHS) */
    return 1;
}

int cuda_prec_16bit(const BackendCtx *ctx) {
    return ctx->precision == PRECISION_BF16 || ctx->precision == PRECISION_FP16;
}

void cuda_prec_init(BackendCtx *ctx, Precision p) {
    ctx->precision = p;
    /* fp32: CUBLAS_DEFAULT_MATH never uses TF32 (only CUBLAS_TF32_TENSOR_OP_MATH or a TF32
     * compute type would); bf16/fp16 pass CUBLAS_COMPUTE_32F to cublasGemmEx themselves */
    CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, p == PRECISION_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                    : CUBLAS_DEFAULT_MATH));
    CUDA_CHECK(cudaMalloc((void **)&ctx->nonfinite, sizeof(int)));
}

void cuda_prec_free(BackendCtx *ctx) {
    if (ctx->h16) cudaFree(ctx->h16);
    if (ctx->w16) cudaFree(ctx->w16);
    if (ctx->nonfinite) cudaFree(ctx->nonfinite);
}

/* Scratch of at least `bytes` for 16-bit copies. Grows (synchronising) on the first product of a
 * larger size: in the first iteration (warm-up), never later. */
void *cuda_prec_scratch(BackendCtx *ctx, size_t bytes) {
    if (bytes > ctx->h16_bytes) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        if (ctx->h16) CUDA_CHECK(cudaFree(ctx->h16));
        CUDA_CHECK(cudaMalloc(&ctx->h16, bytes));
        ctx->h16_bytes = bytes;
    }
    return ctx->h16;
}

static size_t align256(size_t b) {
    return (b + 255) & ~(size_t)255;
}

/* bf16/fp16: the 16-bit copy of params[n], made once per step (backend.h's weights_ready); with
 * NHWC 16-bit activations also the convolutions' filters in KRSC order and their biases, into
 * the aligned copies weights_layout laid out (cuda_act16.c), in one more launch. The buffer is
 * made on the first call (the model calls it when it is built) and again only for another
 * parameter buffer. */
void cuda_weights_ready(BackendCtx *ctx, const float *params, size_t n) {
    if (!cuda_prec_16bit(ctx) || !n) return;
    if (ctx->w16_src != params || ctx->w16_n != n) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        if (ctx->w16) CUDA_CHECK(cudaFree(ctx->w16));
        CUDA_CHECK(cudaMalloc(&ctx->w16, 2 * n));
        ctx->w16_src = params, ctx->w16_n = n;
    }
    CUDA_CHECK(dtp_to_16(ctx->stream, ctx->precision == PRECISION_FP16, n, params, ctx->w16));
    if (ctx->act16 && ctx->nconvw)
        CUDA_CHECK(dth_filters(ctx->stream, ctx->precision == PRECISION_FP16, ctx->convw_dev,
                               ctx->nconvw, ctx->convw_largest, params, ctx->wkrsc));
}

/* The 16-bit twin of x[0 .. count) when it lies in the parameters copied by weights_ready, else
 * NULL (an activation or a gradient: converted at the call). */
const void *cuda_prec_weights16(const BackendCtx *ctx, const float *x, size_t count) {
    const uintptr_t lo = (uintptr_t)ctx->w16_src, p = (uintptr_t)x;
    if (!ctx->w16 || p < lo || (p - lo) / sizeof(float) + count > ctx->w16_n) return NULL;
    return (const char *)ctx->w16 + (p - lo) / sizeof(float) * 2;
}

void cuda_prec_gemm(BackendCtx *ctx, ColGemm g, const float *a, const float *b, float beta,
                    float *c) {
    const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* fp32, tf32: the handle's math mode decides; an empty product is only C = beta C */
    if (!cuda_prec_16bit(ctx) || g.m <= 0 || g.n <= 0 || g.k <= 0) {
        CUBLAS_CHECK(cublasSgemm(ctx->cublas, ta, tb, g.m, g.n, g.k, &ONE, a, g.lda, b, g.ldb,
                                 &beta, c, g.ldc));
        return;
    }
    const int half = ctx->precision == PRECISION_FP16;
    const cudaDataType_t t16 = half ? CUDA_R_16F : CUDA_R_16BF;
    /* column-major storage: A holds (trans_a ? k : m) rows in (trans_a ? m : k) columns of lda,
     * B (trans_b ? n : k) rows in (trans_b ? k : n) columns of ldb; converted up to the last
     * element only (the LSTM's operands are blocks of a wider matrix: a full last column of lda
     * would read past its end) */
    const size_t na = (size_t)g.lda * ((g.trans_a ? g.m : g.k) - 1) + (g.trans_a ? g.k : g.m);
    const size_t nb = (size_t)g.ldb * ((g.trans_b ? g.k : g.n) - 1) + (g.trans_b ? g.n : g.k);
    char *s = cuda_prec_scratch(ctx, align256(2 * na) + 2 * nb);
    const void *a16 = cuda_prec_weights16(ctx, a, na),
               *b16 = cuda_prec_weights16(ctx, b, nb); /* the weights' copy */
    if (!a16) {
        CUDA_CHECK(dtp_to_16(ctx->stream, half, na, a, s));
        a16 = s;
    }
    if (!b16) {
        CUDA_CHECK(dtp_to_16(ctx->stream, half, nb, b, s + align256(2 * na)));
        b16 = s + align256(2 * na);
    }
    CUBLAS_CHECK(cublasGemmEx(ctx->cublas, ta, tb, g.m, g.n, g.k, &ONE, a16, t16, g.lda, b16, t16,
                              g.ldb, &beta, c, CUDA_R_32F, g.ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

void cuda_prec_describe(const BackendCtx *ctx, char *line, size_t len) {
    snprintf(line, len, "precision %s: cuBLAS %s; cuDNN %s; activations %s %s\n",
             PRECISION_NAME(ctx->precision),
             ctx->precision == PRECISION_FP32   ? "sgemm, default math (no TF32)"
             : ctx->precision == PRECISION_TF32 ? "sgemm, CUBLAS_TF32_TENSOR_OP_MATH"
             : ctx->act16 ? "cublasGemmEx on 16-bit activations, CUBLAS_COMPUTE_32F"
                          : "cublasGemmEx on 16-bit copies, CUBLAS_COMPUTE_32F",
             ctx->act16             ? "on NHWC 16-bit x/dy, KRSC 16-bit W, float compute"
             : cuda_prec_16bit(ctx) ? "on 16-bit x/W/dy copies, float compute"
                                    : "fp32 tensors",
             ACT_LAYOUT_NAME(ctx->act.layout), ACT_TYPE_NAME(ctx->act.type));
}

int cuda_all_finite(BackendCtx *ctx, size_t n, const float *x) {
    int flag = 0;
    CUDA_CHECK(dtp_nonfinite(ctx->stream, n, x, ctx->nonfinite));
    CUDA_CHECK(
        cudaMemcpyAsync(&flag, ctx->nonfinite, sizeof flag, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return !flag;
}

cudnnDataType_t cuda_prec_conv_type(const BackendCtx *ctx) {
    return ctx->precision == PRECISION_FP16   ? CUDNN_DATA_HALF
           : ctx->precision == PRECISION_BF16 ? CUDNN_DATA_BFLOAT16
                                              : CUDNN_DATA_FLOAT;
}

/* 16-bit copies after cuDNN's workspace: x16, w16, y16 (dy16) and out16 (dW16 or dx16). */
typedef struct {
    void *x, *w, *y, *out;
    size_t nx, nw, ny;
} Conv16;

static Conv16 conv16(const ConvShape *s, void *work, size_t conv_ws) {
    Conv16 c;
    c.nx = (size_t)s->batch * s->c_in * s->h_in * s->w_in;
    c.nw = (size_t)s->c_out * s->c_in * s->k * s->k;
    c.ny = (size_t)s->batch * s->c_out * s->h_out * s->w_out;
    char *p = (char *)work + align256(conv_ws);
    c.x = p, p += align256(2 * c.nx);
    c.w = p, p += align256(2 * c.nw);
    c.y = p, p += align256(2 * c.ny);
    c.out = p;
    return c;
}

/* The filter in 16 bits: the step's copy of the weights where it is 16-byte aligned (the filter's
 * offset in the parameters a multiple of 8: cuDNN's algorithms were timed on aligned buffers),
 * or converted into c->w (aligned) at the call. */
static const void *conv_weights16(BackendCtx *ctx, const Conv16 *c, const float *w) {
    const void *w16 = cuda_prec_weights16(ctx, w, c->nw);
    if (w16 && (uintptr_t)w16 % 16 == 0) return w16;
    CUDA_CHECK(dtp_to_16(ctx->stream, ctx->precision == PRECISION_FP16, c->nw, w, c->w));
    return c->w;
}

size_t cuda_prec_conv_extra(const BackendCtx *ctx, const ConvShape *s) {
    if (!cuda_prec_16bit(ctx)) return 0;
    Conv16 c = conv16(s, NULL, 0);
    if (ctx->act16) return 256 + align256(2 * c.nw); /* the 16-bit filter gradient only */
    const size_t nout = c.nx > c.nw ? c.nx : c.nw;
    return 256 + align256(2 * c.nx) + align256(2 * c.nw) + align256(2 * c.ny) + 2 * nout;
}

void cuda_prec_conv_forward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                            float *y, void *work, size_t conv_ws) {
    const int half = ctx->precision == PRECISION_FP16;
    Conv16 c = conv16(&p->s, work, conv_ws);
    CUDA_CHECK(dtp_to_16(ctx->stream, half, c.nx, x, c.x));
    const void *w16 = conv_weights16(ctx, &c, w);
    CUDNN_CHECK(cudnnConvolutionForward(ctx->cudnn, &ONE, p->x, c.x, p->w, w16, p->conv, p->fwd,
                                        work, p->fwd_ws, &ZERO, p->y, c.y));
    CUDA_CHECK(dtp_from_16(ctx->stream, half, c.ny, c.y, y));
}

void cuda_prec_conv_backward(BackendCtx *ctx, const ConvPlan *p, const float *x, const float *w,
                             const float *dy, float *dx, float *dw, void *work, size_t conv_ws) {
    const int half = ctx->precision == PRECISION_FP16;
    Conv16 c = conv16(&p->s, work, conv_ws);
    CUDA_CHECK(dtp_to_16(ctx->stream, half, c.nx, x, c.x));
    const void *w16 = conv_weights16(ctx, &c, w);
    CUDA_CHECK(dtp_to_16(ctx->stream, half, c.ny, dy, c.y));
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_filter_math));
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx->cudnn, &ONE, p->x, c.x, p->y, c.y, p->conv,
                                               p->bwd_filter, work, p->bwd_filter_ws, &ZERO, p->w,
                                               c.out));
    CUDA_CHECK(dtp_from_16(ctx->stream, half, c.nw, c.out, dw));
    if (!dx) return;
    CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, p->bwd_data_math));
    CUDNN_CHECK(cudnnConvolutionBackwardData(ctx->cudnn, &ONE, p->w, w16, p->y, c.y, p->conv,
                                             p->bwd_data, work, p->bwd_data_ws, &ZERO, p->x,
                                             c.out));
    CUDA_CHECK(dtp_from_16(ctx->stream, half, c.nx, c.out, dx));
}
