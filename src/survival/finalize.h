/* finalize.h - `dtbench --finalize FILE --by RANK [--records] --lost RANK:SECONDS:KIND ...` (KIND
 * silent, gone, frozen or down, see finalize.c): the serial finalizer the watchdog (watchdog.h)
 * starts when a peer is lost. No MPI. */
#ifndef DTBENCH_FINALIZE_H
#define DTBENCH_FINALIZE_H

#include <stddef.h>

#define FINALIZE_ALREADY_CLOSED 3 /* exit status: the run had closed the file itself */

/* argv[1] is "--finalize". Exit status: 0 marked, 2 bad arguments, FINALIZE_ALREADY_CLOSED,
 * 1 the file could not be marked. */
int finalize_main(int argc, char **argv);

/* Starts `argv` (a --finalize command line; argv[0] is ignored: this program runs) in a session
 * of its own, so that a launcher tearing the job down does not end it, writes `input` (len bytes,
 * NULL: none) to its standard input, and waits until it has exited, at most a minute. Returns its
 * exit status (passed through a pipe: it is not this process's child), -1 if unknown. A
 * finalizer that ends before reading its input is EPIPE here, not SIGPIPE (signals.c). */
int finalize_start(char **argv, const void *input, size_t len);

#endif
