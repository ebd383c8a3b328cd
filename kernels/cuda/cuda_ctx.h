/* cuda_ctx.h - the CUDA backend's per-rank state (struct BackendCtx), shared by the files that
 * implement its operations: kernels/cuda/cuda.c (lifetime, memory, timers) and
 * kernels/cuda/cuda_*.c (the operations by concern, cuda_ops.h).
 * Private to the CUDA backend; CUDA-only header. */
#ifndef DTBENCH_CUDA_CTX_H
#define DTBENCH_CUDA_CTX_H

#include "backend.h"
#include "cuda_kernels16.h" /* defines: ConvW16 */

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

/* Device memory the convolution workspace budget leaves free (cuda_conv.c): the free memory when
 * the model's convolutions are planned (every other buffer of the model exists then) less this
 * margin, for what is allocated later: cuBLAS's and NCCL's buffers, the exchange's staging and
 * 16-bit GEMM copies, and ranks sharing the GPU. 1 GiB or 1/16 of the device, the larger. */
#define CONV_WS_MARGIN(total) ((total) / 16 > ((size_t)1 << 30) ? (total) / 16 : ((size_t)1 << 30))
#define XENT_ROWS0            4096  /* softmax scratch rows made at init */
#define BN_PARTIALS_CAP       65536 /* partial-sum pairs of the batch-norm kernels' blocks (1 MiB) */
/* cuBLAS's workspace, given to the handle once (cuda_stream.c): 32 MiB, cuBLAS's own default on
 * Hopper, so a captured GEMM allocates nothing (without it cuBLAS allocates one per graph). */
#define CUBLAS_WS_BYTES ((size_t)32 << 20)

/* cuDNN descriptors and chosen algorithms of one convolution shape. */
typedef struct {
    ConvShape s;
    cudnnTensorDescriptor_t x, y, b; /* x, y in cuda_prec_conv_type (float unless bf16/fp16) */
    cudnnTensorDescriptor_t y32;     /* y as fp32, for the bias */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    size_t fwd_ws, bwd_data_ws, bwd_filter_ws;
    /* the chosen algorithms' times measured by cudnnFind*AlgorithmEx, ms (< 0: not timed) */
    float fwd_ms, bwd_data_ms, bwd_filter_ms;
    /* conv_relu_forward through cudnnConvolutionBiasActivationForward: 0 not tried yet, 1 ran,
     * -1 refused by cuDNN for this plan (CUDNN_STATUS_NOT_SUPPORTED: the unfused kernels run) */
    int fused;
} ConvPlan;

struct BackendCtx {
    int device;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    cudaEvent_t marks[BACKEND_TIMER_SLOTS];
    /* One plan per convolution shape, never evicted: the array grows while the model is built
     * (conv_workspace_bytes is called for every layer), so its size is the model's number of
     * shapes and nothing is planned inside the timed loop. */
    ConvPlan *plans;
    int nplans, cap_plans;
    int plans_made_late;      /* plans first made by a forward/backward call (not at build time) */
    size_t ws_granted;        /* largest cuDNN workspace conv_workspace_bytes has planned */
    size_t work_granted;      /* largest value it returned (bf16/fp16: with the 16-bit copies) */
    ConvAlgoChoice conv_algo; /* --conv-algo: timed (find) or cuDNN's heuristics */
    size_t ws_budget;         /* the smallest workspace budget a plan was made under ... */
    int ws_budgeted;          /* ... once one was */
    size_t ws_margin;         /* the margin it left (CONV_WS_MARGIN) */
    cudnnTensorDescriptor_t ta, tb; /* ReLU, set per call */
    cudnnActivationDescriptor_t relu;
    int sms;             /* the device's multiprocessors */
    double *bn_partials; /* [2 * BN_PARTIALS_CAP] batch-norm scratch, made at init */
    double *row_loss;    /* softmax scratch [xent_cap], made at init */
    int *row_hit;
    int xent_cap;
    /* --precision (kernels/cuda/cuda_precision.c) */
    Precision precision;
    void *h16; /* 16-bit copies of GEMM operands, grown on first use */
    size_t h16_bytes;
    /* 16-bit copy of the model's parameters [w16_n], of w16_src, made by weights_ready */
    void *w16;
    const float *w16_src;
    size_t w16_n;
    int *nonfinite; /* [1] overflow flag of all_finite, made at init */
    /* --act-layout (cuda_act16.c): the activation format; act16: NHWC 16-bit (bf16/fp16) */
    ActFormat act;
    int act16;
    float *bn_coef; /* [4 * BN_PARTIALS_CAP] per-channel factors of the NHWC kernels, at init */
    /* weights_layout: the convolutions' parameters and their 16-bit KRSC copies (act16), made by
     * weights_ready in wkrsc [wkrsc_n values]; the table on the host and on the device */
    ConvW16 *convw, *convw_dev;
    int nconvw;
    size_t convw_largest; /* most values of one filter */
    void *wkrsc;
    size_t wkrsc_n;
    /* The batch prefetch's copy stream and, per slot, the event after its copies (`copied`, the
     * compute stream and prefetch_fence wait on it) and the event after the compute work that
     * last reads it (`released`, the copies wait on it); made at init (cuda_stream.c). */
    cudaStream_t copy_stream;
    cudaEvent_t copied[BACKEND_PREFETCH_SLOTS], released[BACKEND_PREFETCH_SLOTS];
    void *cublas_ws; /* [CUBLAS_WS_BYTES], the cuBLAS handle's workspace */
};

#endif
