/* h5_check.h - HDF5's library check, H5_CHECK, for the files that write results; on failure it
 * prints, as MPI_CHECK (comm/mpi_check.h, included here) does,
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <library message>
 * and aborts the whole job with MPI_Abort, so no rank is left hanging (check_fail, base/fail.h).
 * The rest of src/ checks MPI with comm/mpi_check.h, kernels/ its calls with base/fail.h alone;
 * CUDA, cuBLAS, cuDNN and NCCL checks follow the same pattern in kernels/cuda/cuda_check.h. */
#ifndef DTBENCH_H5_CHECK_H
#define DTBENCH_H5_CHECK_H

#include "mpi_check.h" /* defines: MPI_CHECK (comm/), check_fail, ALLOC_CHECK (base/) */

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
