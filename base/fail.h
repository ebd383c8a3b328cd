/* fail.h - the one failure reporter every layer shares (no MPI, no HDF5): check_fail prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <message>
 * and ends the job: through MPI_Abort when the program is an MPI one (comm/mpi_check.c provides
 * that hook), else exit(1). The library checks build on it: MPI_CHECK in comm/mpi_check.h,
 * H5_CHECK in src/results/h5_check.h, CUDA_CHECK and friends in kernels/cuda/cuda_check.h. */
#ifndef DTBENCH_FAIL_H
#define DTBENCH_FAIL_H

/* Prints the report and ends the job. `what` is the call's text, `msg` the library's message. */
_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg);

/* This host's name ("unknown" if it has none). */
const char *dt_hostname(void);

/* Memory and system calls. */
#define ALLOC_CHECK(ptr)                                                                           \
    do {                                                                                           \
        if ((ptr) == NULL) check_fail(__FILE__, __LINE__, #ptr, "out of memory");                  \
    } while (0)

#endif
