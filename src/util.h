/* util.h - small helpers shared by the driver: clock, host name, allocation, RNG,
 * and the collective "bad input" exit (one line, exit status 2). */
#ifndef DTBENCH_UTIL_H
#define DTBENCH_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Seconds on CLOCK_MONOTONIC (the clock every phase and timestamp is measured on). */
double dt_now(void);
/* ISO 8601 UTC wall time, e.g. 2026-11-21T10:00:00Z. */
void dt_iso_time(char *buf, size_t len);

const char *dt_hostname(void);
int dt_rank(void); /* rank in MPI_COMM_WORLD, or -1 before MPI_Init */

void *xmalloc(size_t bytes);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t bytes);
/* Bytes of memory available for new allocations on this node (MemAvailable), -1 if unknown. */
double dt_mem_available(void);

/* splitmix64: a counter-based generator, so that sample g of a data set, or parameter i of a
 * model, gets the same value whatever the number of ranks. */
uint64_t rng_mix(uint64_t x);
static inline float rng_uniform(uint64_t key) /* [0,1) */
{
    return (float)(rng_mix(key) >> 40) * (1.0f / 16777216.0f);
}

/* Why `path` may not be used for new results (it exists and overwrite is off, it is a folder,
 * its folder is not writable), as one line naming `option`; NULL if it may. (The
 * driver now uses outputs_claim, outputs.h, which also locks the files.) */
const char *output_path_problem(const char *option, const char *path, int overwrite, char *err,
                                size_t len);

/* Called once by check_fail and by usage_check_all before the process ends on an error (e.g.
 * outputs_abandon: remove what the run created and never filled). */
extern void (*dt_fatal_hook)(void);
/* The program's exit status once the run ended (1: results were lost to a write error). */
extern int dt_exit_status;

/* Bad input: every rank calls this with its own verdict (ok != 0 means fine). If any rank
 * reports a problem, the lowest such rank prints its message on stderr as one line
 * "dtbench: error: MSG", and every rank exits with status 2 after MPI_Finalize. */
void usage_check_all(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
