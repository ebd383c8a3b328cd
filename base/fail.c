/* fail.c - check_fail and the host name (see fail.h). MPI-free: the MPI layer, when a program has
 * one, hands over the rank and the job-wide abort once MPI has started (fail_set_handlers, called
 * by comm/mpi_check.c's mpi_check_start), so that the kernels and their tests link without MPI
 * while dtbench aborts every rank. */
#define _GNU_SOURCE
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Set by fail_set_handlers (MPI programs, once MPI is up); NULL until then and without MPI. */
static int (*report_rank)(void); /* rank in MPI_COMM_WORLD, or -1 */
static void (*abort_job)(void);  /* MPI_Abort when MPI is up */

void fail_set_handlers(int (*rank_fn)(void), void (*abort_fn)(void)) {
    report_rank = rank_fn;
    abort_job = abort_fn;
}

const char *dt_hostname(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) != 0) strcpy(host, "unknown");
    return host;
}

_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg) {
    fprintf(stderr, "dtbench: rank %d on %s: %s:%d: %s: %s\n", report_rank ? report_rank() : -1,
            dt_hostname(), file, line, what, msg);
    fflush(stderr);
    if (abort_job) abort_job();
    exit(1);
}
