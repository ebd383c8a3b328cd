/* cuda_check.h - every CUDA runtime, cuBLAS and cuDNN call is checked here (NCCL's in
 * comm/nccl_check.h), as MPI and HDF5 calls are in comm/mpi_check.h and src/results/h5_check.h,
 * through base/fail.h: on failure the macro prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <library>: <error name>: <library message>
 * and aborts the whole job with MPI_Abort (exit(1) outside MPI), so no rank is left hanging in a
 * collective. CUDA-only header: include it only from files built with CUDA. */
#ifndef DTBENCH_CUDA_CHECK_H
#define DTBENCH_CUDA_CHECK_H

#include "fail.h" /* defines: check_fail (base/, no MPI) */

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>

/* CUDA runtime: anything but cudaSuccess. Kernel launches are checked with
 * CUDA_CHECK(cudaGetLastError()) right after the launch. */
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t cuda_check_rc_ = (call);                                                       \
        if (cuda_check_rc_ != cudaSuccess) {                                                       \
            char cuda_check_msg_[512];                                                             \
            snprintf(cuda_check_msg_, sizeof cuda_check_msg_, "CUDA: %s: %s",                      \
                     cudaGetErrorName(cuda_check_rc_), cudaGetErrorString(cuda_check_rc_));        \
            check_fail(__FILE__, __LINE__, #call, cuda_check_msg_);                                \
        }                                                                                          \
    } while (0)

#define CUBLAS_CHECK(call)                                                                         \
    do {                                                                                           \
        cublasStatus_t cublas_check_rc_ = (call);                                                  \
        if (cublas_check_rc_ != CUBLAS_STATUS_SUCCESS) {                                           \
            char cublas_check_msg_[512];                                                           \
            snprintf(cublas_check_msg_, sizeof cublas_check_msg_, "cuBLAS: status %d: %s",         \
                     (int)cublas_check_rc_, cublasGetStatusString(cublas_check_rc_));              \
            check_fail(__FILE__, __LINE__, #call, cublas_check_msg_);                              \
        }                                                                                          \
    } while (0)

#define CUDNN_CHECK(call)                                                                          \
    do {                                                                                           \
        cudnnStatus_t cudnn_check_rc_ = (call);                                                    \
        if (cudnn_check_rc_ != CUDNN_STATUS_SUCCESS) {                                             \
            char cudnn_check_msg_[512];                                                            \
            snprintf(cudnn_check_msg_, sizeof cudnn_check_msg_, "cuDNN: status %d: %s",            \
                     (int)cudnn_check_rc_, cudnnGetErrorString(cudnn_check_rc_));                  \
            check_fail(__FILE__, __LINE__, #call, cudnn_check_msg_);                               \
        }                                                                                          \
    } while (0)


#endif
