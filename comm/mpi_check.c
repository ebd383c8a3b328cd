/* mpi_check.c - the MPI failure report, the rank, the job abort and the collective usage error
 * (see mpi_check.h). */
#include "mpi_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

_Noreturn void mpi_check_fail(const char *file, int line, const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "MPI error %d", rc);
    check_fail(file, line, what, msg);
}

int dt_rank(void) {
    int initialized = 0, finalized = 0, rank = -1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

void mpi_check_start(void) {
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    fail_set_handlers(dt_rank, dt_abort_job);
}

static void (*fatal_hook)(void) = NULL;

void fatal_hook_set(void (*hook)(void)) {
    fatal_hook = hook;
}

void fatal_hook_run(void) {
    void (*hook)(void) = fatal_hook;
    fatal_hook = NULL; /* once, even if the hook itself fails */
    if (hook) hook();
}

void dt_abort_job(void) {
    fatal_hook_run(); /* check_fail (base/fail.c) calls this before it exits */
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
}

void usage_check_all(int ok, const char *fmt, ...) {
    int rank = 0, nranks = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int mine = ok ? nranks : rank, first_bad = nranks;
    MPI_CHECK(MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad == nranks) return;
    if (rank == first_bad) {
        va_list ap;
        va_start(ap, fmt);
        fputs("dtbench: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        fflush(stderr);
    }
    fatal_hook_run();
    MPI_Finalize();
    exit(2);
}
