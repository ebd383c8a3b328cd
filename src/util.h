/* util.h - small helpers shared by the driver: memory available, output paths, the exit status;
 * it also brings the shared base (base/: clock, host name, allocation, RNG, check_fail) and the
 * MPI base (comm/mpi_check.h: the rank, the job abort, the collective "bad input" exit). */
#ifndef DTBENCH_UTIL_H
#define DTBENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The shared base (base/), for the files that include util.h. */
#include "alloc.h" /* defines: xmalloc, xcalloc, xrealloc */
#include "clock.h" /* defines: dt_now, dt_iso_time */
#include "fail.h"  /* defines: check_fail, dt_hostname */
#include "rng.h"   /* defines: rng_mix, rng_uniform */
/* The MPI base (comm/). */
#include "mpi_check.h" /* defines: MPI_CHECK, dt_rank, dt_abort_job, dt_fatal_hook, usage_check_all */

/* Bytes of memory available for new allocations on this node (MemAvailable), -1 if unknown. */
double dt_mem_available(void);

/* The program's exit status once the run ended (1: results were lost to a write error). */
extern int dt_exit_status;

/* Why `path` may not be used for new results (it exists and overwrite is off, it is a folder,
 * its folder is not writable), as one line naming `option`; NULL if it may. */
const char *output_path_problem(const char *option, const char *path, int overwrite, char *err,
                                size_t len);

#endif
