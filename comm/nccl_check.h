/* nccl_check.h - NCCL_CHECK for the NCCL parts of comm/ (coll_nccl.c), built only with NCCL: the
 * same pattern as CUDA_CHECK in kernels/cuda/cuda_check.h (rank, host, file:line, the library's
 * message, then the job ends through check_fail). */
#ifndef DTBENCH_NCCL_CHECK_H
#define DTBENCH_NCCL_CHECK_H

#include "fail.h"

#include <nccl.h>
#include <stdio.h>

/* NCCL: the error string, and NCCL's own last message (which names the failing peer or
 * transport) when it has one. */
#define NCCL_CHECK(call)                                                                           \
    do {                                                                                           \
        ncclResult_t nccl_check_rc_ = (call);                                                      \
        if (nccl_check_rc_ != ncclSuccess) {                                                       \
            char nccl_check_msg_[768];                                                             \
            const char *nccl_check_last_ = ncclGetLastError(NULL);                                 \
            snprintf(nccl_check_msg_, sizeof nccl_check_msg_, "NCCL: result %d: %s%s%s",           \
                     (int)nccl_check_rc_, ncclGetErrorString(nccl_check_rc_),                      \
                     nccl_check_last_ &&*nccl_check_last_ ? ": " : "",                             \
                     nccl_check_last_ ? nccl_check_last_ : "");                                    \
            check_fail(__FILE__, __LINE__, #call, nccl_check_msg_);                                \
        }                                                                                          \
    } while (0)

#endif
