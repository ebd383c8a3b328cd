/* watchdog_witness.h - the node witness of a rank (--peer-timeout, src/survival/watchdog.h): a
 * small process of its own, started by the rank's watchdog, that answers the neighbours' probes on
 * a UDP port of its own for as long as its rank lives and a while after it ended. It tells a dead
 * rank from a dead node: a neighbour that stopped hearing a rank probes its witness; an answer
 * means the node lives (the rank's process ended or froze), "port unreachable" or silence means
 * nothing of the run answers on that node any more (it died, lost its link, or had every process
 * killed while its network stack still answers). */
#ifndef DTBENCH_WATCHDOG_WITNESS_H
#define DTBENCH_WATCHDOG_WITNESS_H

#include <stdint.h>

/* A UDP socket bound to any address; its port (network order) in *port. 0, or -1 (errno). Before
 * the ranks exchange their addresses. */
int witness_open(uint32_t *port);

/* Starts the witness (a process in a session of its own, holding no descriptor of the rank but
 * its socket and a pipe from it) for `rank`, answering the probes of this job (`token`); once the
 * rank has ended without witness_stop it answers `linger` seconds more. Closes the socket here.
 * 0, or -1 when it could not be started (the neighbours then judge without it). */
int witness_start(uint64_t token, int rank, double linger);

/* `dtbench --witness ...` (what witness_start runs): starts the witness; 0, or non-zero when it
 * could not. */
int witness_exec_main(int argc, char **argv);

/* The rank ends normally: the witness leaves at once. */
void witness_stop(void);

#endif
