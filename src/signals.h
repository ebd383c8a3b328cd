/* signals.h - a graceful stop: SIGTERM and SIGUSR1 (Slurm's time limit, scancel, or a job
 * script's trap) only set a flag; the driver finishes the iteration in progress, the ranks
 * agree to stop after the same one (see exchange.h), and the file is closed as stopped early. */
#ifndef DTBENCH_SIGNALS_H
#define DTBENCH_SIGNALS_H

/* Installed as main's first instruction, before MPI_Init: a signal at any time after the
 * process starts is a stop request, never its death. */
void signals_install(void);
/* The signal number received (SIGUSR1 for the stop file), 0 if none. */
int signals_stop_requested(void);
double signals_time(void);        /* CLOCK_MONOTONIC seconds of the first one, 0 if none */

#endif
