/* check.h - every MPI and HDF5 call is checked here: on failure the macro prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <library message>
 * and aborts the whole job with MPI_Abort, so no rank is left hanging.
 * CUDA, cuBLAS, cuDNN and NCCL checks follow the same pattern in the GPU backend. */
#ifndef DTBENCH_CHECK_H
#define DTBENCH_CHECK_H

#include <mpi.h>

/* Prints the report and aborts the job. `what` is the call's text, `msg` the library's message. */
_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg);

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

/* Memory and system calls. */
#define ALLOC_CHECK(ptr)                                                                           \
    do {                                                                                           \
        if ((ptr) == NULL) check_fail(__FILE__, __LINE__, #ptr, "out of memory");                  \
    } while (0)

#endif
