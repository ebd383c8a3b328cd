/* clock.h - the clocks every layer measures with. */
#ifndef DTBENCH_CLOCK_H
#define DTBENCH_CLOCK_H

#include <stddef.h>

/* Seconds on CLOCK_MONOTONIC (the clock every phase and timestamp is measured on). */
double dt_now(void);
/* ISO 8601 UTC wall time, e.g. 2026-11-21T10:00:00Z. */
void dt_iso_time(char *buf, size_t len);

#endif
