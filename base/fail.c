/* fail.c - check_fail and the host name (see fail.h). MPI-free: the MPI layer, when a program has
 * one, supplies the rank and the job-wide abort through two weak references, so that the kernels
 * and their tests link without MPI while dtbench aborts every rank. */
#define _GNU_SOURCE
#include "fail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Defined by comm/mpi_check.c in MPI programs; NULL in programs without it. */
extern int dt_rank(void) __attribute__((weak));       /* rank in MPI_COMM_WORLD, or -1 */
extern void dt_abort_job(void) __attribute__((weak)); /* MPI_Abort when MPI is up */

const char *dt_hostname(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) != 0) strcpy(host, "unknown");
    return host;
}

_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg) {
    fprintf(stderr, "dtbench: rank %d on %s: %s:%d: %s: %s\n", dt_rank ? dt_rank() : -1,
            dt_hostname(), file, line, what, msg);
    fflush(stderr);
    if (dt_abort_job) dt_abort_job();
    exit(1);
}
