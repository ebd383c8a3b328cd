/* check.h - every MPI and HDF5 call is checked here: on failure the macro prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <library message>
 * and aborts the whole job with MPI_Abort, so no rank is left hanging (check_fail, base/fail.h).
 * For src/ and comm/; kernels/ use base/fail.h alone. CUDA, cuBLAS, cuDNN and NCCL checks follow
 * the same pattern in kernels/cuda_check.h. */
#ifndef DTBENCH_CHECK_H
#define DTBENCH_CHECK_H

#include "fail.h" /* defines: check_fail, ALLOC_CHECK (base/, shared with kernels/) */

#include <mpi.h>

/* MPI: any return other than MPI_SUCCESS. Requires MPI_ERRORS_RETURN on the communicator
 * (main() sets it on MPI_COMM_WORLD) for the error to reach us instead of the default abort. */
#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int mpi_check_rc_ = (call);                                                                \
        if (mpi_check_rc_ != MPI_SUCCESS) {                                                        \
            char mpi_check_msg_[MPI_MAX_ERROR_STRING];                                             \
            int mpi_check_len_ = 0;                                                                \
            MPI_Error_string(mpi_check_rc_, mpi_check_msg_, &mpi_check_len_);                      \
            check_fail(__FILE__, __LINE__, #call, mpi_check_msg_);                                 \
        }                                                                                          \
    } while (0)

/* HDF5: negative return (herr_t or hid_t). The message is the innermost entry of HDF5's
 * error stack (automatic stack printing is switched off in recorder_hdf5.c). */
const char *h5_error_message(void);
#define H5_CHECK(call)                                                                             \
    __extension__({                                                                                \
        __typeof__(call) h5_check_rc_ = (call);                                                    \
        if (h5_check_rc_ < 0) check_fail(__FILE__, __LINE__, #call, h5_error_message());           \
        h5_check_rc_;                                                                              \
    })

#endif
