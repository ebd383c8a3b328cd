/* util.h - small helpers shared by the driver: the MPI rank and job abort, output paths and the
 * collective "bad input" exit (one line, exit status 2); it also brings the shared base (base/:
 * clock, host name, allocation, RNG, check_fail). */
#ifndef DTBENCH_UTIL_H
#define DTBENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The shared base (base/), for the files that include util.h. */
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "clock.h" /* defines: dt_now, dt_iso_time */
#include "fail.h"  /* defines: check_fail, dt_hostname */
#include "rng.h"   /* defines: rng_mix, rng_uniform */

/* MPI: rank in MPI_COMM_WORLD, or -1 before MPI_Init or after MPI_Finalize; and the job-wide
 * abort (MPI_Abort while MPI is up, else nothing). check_fail (base/fail.c) calls both. */
int dt_rank(void);
void dt_abort_job(void);

void *xrealloc(void *p, size_t bytes); /* out of memory is reported by check_fail */
/* Bytes of memory available for new allocations on this node (MemAvailable), -1 if unknown. */
double dt_mem_available(void);

/* Called once by check_fail (through dt_abort_job) and by usage_check_all before the process
 * ends on an error (e.g. outputs_abandon: remove what the run created and never filled). */
extern void (*dt_fatal_hook)(void);
/* The program's exit status once the run ended (1: results were lost to a write error). */
extern int dt_exit_status;

/* Why `path` may not be used for new results (it exists and overwrite is off, it is a folder,
 * its folder is not writable), as one line naming `option`; NULL if it may. */
const char *output_path_problem(const char *option, const char *path, int overwrite, char *err,
                                size_t len);

/* Bad input: every rank calls this with its own verdict (ok != 0 means fine). If any rank
 * reports a problem, the lowest such rank prints its message on stderr as one line
 * "dtbench: error: MSG", and every rank exits with status 2 after MPI_Finalize. */
void usage_check_all(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
