/* signals.h - a graceful stop: SIGTERM and SIGUSR1 (Slurm's time limit, scancel, or a job
 * script's trap) only set a flag; the driver finishes the iteration in progress, the ranks
 * agree to stop after the same one (see exchange.h), and the file is closed as stopped early. */
#ifndef DTBENCH_SIGNALS_H
#define DTBENCH_SIGNALS_H

/* Installed before anything else of the process runs (signals.c: the program's .preinit_array,
 * after the dynamic loader, before any library's constructor), and again as main's first
 * instruction: a signal at any time after the loader is done is a stop request, never death.
 * SIGPIPE never ends the process either: a write to a closed socket or pipe fails with EPIPE. */
void signals_install(void);
/* The signal number received (SIGUSR1 for the stop file), 0 if none. */
int signals_stop_requested(void);
double signals_time(void);        /* CLOCK_MONOTONIC seconds of the first one, 0 if none */

#endif
