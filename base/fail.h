/* fail.h - the one failure reporter every layer shares (no MPI, no HDF5): check_fail prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <message>
 * and ends the job: through MPI_Abort when the program is an MPI one (comm/mpi_check.c's
 * mpi_check_start hands it over with fail_set_handlers once MPI is up), else exit(1). The library checks build on it: MPI_CHECK in comm/mpi_check.h,
 * H5_CHECK in src/results/h5_check.h, CUDA_CHECK and friends in kernels/cuda/cuda_check.h. */
#ifndef DTBENCH_FAIL_H
#define DTBENCH_FAIL_H

/* Prints the report and ends the job. `what` is the call's text, `msg` the library's message. */
_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg);

/* Called by the MPI layer once MPI has started (comm/mpi_check.c: mpi_check_start): rank_fn gives
 * the rank check_fail reports (-1 before), abort_fn ends every rank of the job before check_fail
 * exits. Either may be NULL: the rank is then -1, and only this process ends. */
void fail_set_handlers(int (*rank_fn)(void), void (*abort_fn)(void));

/* This host's name ("unknown" if it has none). */
const char *dt_hostname(void);

/* Memory and system calls. */
#define ALLOC_CHECK(ptr)                                                                           \
    do {                                                                                           \
        if ((ptr) == NULL) check_fail(__FILE__, __LINE__, #ptr, "out of memory");                  \
    } while (0)

#endif
