/* mpi_check.h - the MPI base of the exchange layer and everything above it: every MPI call is
 * checked by MPI_CHECK, which on failure prints
 *   dtbench: rank R on HOST: file.c:LINE: <call>: <library message>
 * and ends the whole job (check_fail, base/fail.h, through dt_abort_job's MPI_Abort), so no rank
 * is left hanging. Also the rank and job abort that check_fail reports and calls, and the
 * collective one-line usage error (exit status 2) that a transport or the driver gives when a
 * setting cannot run on this job. HDF5's checks are the results' (src/results/h5_check.h). */
#ifndef DTBENCH_MPI_CHECK_H
#define DTBENCH_MPI_CHECK_H

#include "fail.h" /* defines: check_fail, ALLOC_CHECK (base/, shared with kernels/) */

#include <mpi.h>

/* Any return other than MPI_SUCCESS. Requires MPI_ERRORS_RETURN on the communicator
 * (mpi_check_start sets it on MPI_COMM_WORLD) for the error to reach us instead of the default
 * abort. Through mpi_check_fail, so that every program checking MPI links this file's job abort. */
#define MPI_CHECK(call)                                                                            \
    do {                                                                                           \
        int mpi_check_rc_ = (call);                                                                \
        if (mpi_check_rc_ != MPI_SUCCESS)                                                          \
            mpi_check_fail(__FILE__, __LINE__, #call, mpi_check_rc_);                              \
    } while (0)
/* check_fail with MPI's message for error code rc. */
_Noreturn void mpi_check_fail(const char *file, int line, const char *what, int rc);

/* Right after MPI_Init: sets MPI_ERRORS_RETURN on MPI_COMM_WORLD and hands check_fail
 * (base/fail.c) the rank and the job-wide abort below (fail_set_handlers). Until it is called a
 * failure reports rank -1 and ends only its own process. */
void mpi_check_start(void);

/* Rank in MPI_COMM_WORLD, or -1 before MPI_Init or after MPI_Finalize; and the job-wide abort
 * (runs the fatal hook, then MPI_Abort while MPI is up). */
int dt_rank(void);
void dt_abort_job(void);

/* The one thing to do before the process ends on an error or a stop during set-up (the driver's:
 * src/results/outputs.c removes what the run created and never filled; NULL: nothing).
 * fatal_hook_run runs it once and forgets it; dt_abort_job and usage_check_all call it, and so
 * does the driver when a stop ends the set-up. */
void fatal_hook_set(void (*hook)(void));
void fatal_hook_run(void);

/* Bad input: every rank calls this with its own verdict (ok != 0 means fine). If any rank
 * reports a problem, the lowest such rank prints its message on stderr as one line
 * "dtbench: error: MSG", and every rank exits with status 2 after MPI_Finalize. Collective over
 * MPI_COMM_WORLD. */
void usage_check_all(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
