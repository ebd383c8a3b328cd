/* signals.h - a graceful stop: SIGTERM and SIGUSR1 (Slurm's time limit, scancel, or a job
 * script's trap) only set a flag; the driver finishes the iteration in progress, the ranks
 * agree to stop after the same one (see exchange.h), and the file is closed as stopped early. */
#ifndef DTBENCH_SIGNALS_H
#define DTBENCH_SIGNALS_H

void signals_install(void);
int signals_stop_requested(void); /* the signal number received, 0 if none */
double signals_time(void);        /* CLOCK_MONOTONIC seconds of the first one, 0 if none */

#endif
