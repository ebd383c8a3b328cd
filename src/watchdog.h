/* watchdog.h - dead-peer detection that never calls MPI (--peer-timeout).
 *
 * The exchange uses blocking MPI collectives, so a rank whose peer died waits in MPI_Allreduce
 * forever (srun: until Slurm marks the node down, 300 s by default). A thread per rank sends UDP
 * heartbeats to its WATCHDOG_NEIGHBOURS nearest ranks on either side of the rank ring and watches
 * theirs; addresses (the IPv4 addresses of interfaces that are up on each rank's host), pids and
 * host names are exchanged once with MPI_Allgather when it starts, and every rank must hear each
 * neighbour once before the run goes on (blocked UDP: the run is refused). A neighbour is lost
 * when
 *   - it has been silent for --peer-timeout seconds (a dead or cut-off node), or
 *   - its process is known to be gone and it has been silent for a second: on the same host (and
 *     pid namespace) its pid no longer exists, holds another process or a zombie; elsewhere its
 *     port answered "port unreachable" at an address its heartbeats came from (a dead process on
 *     a live node).
 * A run that ends normally says goodbye after MPI_Finalize (watchdog_stop), and so does a survivor
 * leaving after the finalizer, so that neither is taken for a lost one.
 *
 * On a loss the watchdog prints one line, starts `dtbench --finalize` (src/finalize.c) in a
 * session of its own, which reopens the result file without MPI-IO and closes it marked
 * stop_reason=peer_lost, waits for it, tells its neighbours that the run is over (they pass it on
 * and leave too) and ends the process with WATCHDOG_EXIT_STATUS, so that the launcher ends the
 * job. The process never closes the file itself (_exit: no HDF5 or MPI
 * clean-up), so the finalizer's metadata is the file's last word. */
#ifndef DTBENCH_WATCHDOG_H
#define DTBENCH_WATCHDOG_H

#include <mpi.h>

#define WATCHDOG_NEIGHBOURS  3  /* ranks watched on each side */
#define WATCHDOG_EXIT_STATUS 75 /* a survivor of a lost peer (sysexits' EX_TEMPFAIL) */

/* Collective over comm. timeout <= 0 or a single rank: off (no thread, no socket, returns 0).
 * result_path: the published result file the finalizer marks. Returns 0, or -1 with a reason in
 * err when the socket or thread cannot be set up (same verdict on every rank). */
int watchdog_start(MPI_Comm comm, double timeout, const char *result_path, char *err,
                   size_t errlen);
/* Says goodbye to the neighbours and joins the thread (before MPI_Finalize). Not collective. */
void watchdog_stop(void);

#endif
