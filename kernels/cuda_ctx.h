/* cuda_ctx.h - the CUDA backend's per-rank state (struct BackendCtx), shared by the files that
 * implement its operations: kernels/cuda.c (lifetime, memory, timers) and kernels/cuda_*.c (the
 * operations by concern, cuda_ops.h).
 * Private to the CUDA backend; CUDA-only header. */
#ifndef DTBENCH_CUDA_CTX_H
#define DTBENCH_CUDA_CTX_H

#include "backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#define CONV_WS_LIMIT ((size_t)512 << 20) /* largest workspace an algorithm may ask for */
#define XENT_ROWS0    4096                /* softmax scratch rows made at init */

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
    int plans_made_late; /* plans first made by a forward/backward call (not at build time) */
    size_t ws_granted;   /* largest cuDNN workspace conv_workspace_bytes has planned */
    size_t work_granted; /* largest value it returned (bf16/fp16: with the 16-bit copies) */
    cudnnTensorDescriptor_t ta, tb; /* ReLU, set per call */
    cudnnActivationDescriptor_t relu;
    double *row_loss; /* softmax scratch [xent_cap], made at init */
    int *row_hit;
    int xent_cap;
    /* --precision (kernels/cuda_precision.c) */
    Precision precision;
    void *h16; /* 16-bit copies of GEMM operands, grown on first use */
    size_t h16_bytes;
    int *nonfinite; /* [1] overflow flag of all_finite, made at init */
};

#endif
