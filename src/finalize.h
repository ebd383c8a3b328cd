/* finalize.h - `dtbench --finalize FILE --by RANK --lost RANK:SECONDS:silent|gone ...`: the serial
 * finalizer the watchdog (watchdog.h) starts when a peer is lost. No MPI. */
#ifndef DTBENCH_FINALIZE_H
#define DTBENCH_FINALIZE_H

#define FINALIZE_ALREADY_CLOSED 3 /* exit status: the run had closed the file itself */

/* argv[1] is "--finalize". Exit status: 0 marked, 2 bad arguments, FINALIZE_ALREADY_CLOSED,
 * 1 the file could not be marked. */
int finalize_main(int argc, char **argv);

#endif
