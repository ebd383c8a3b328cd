/* watchdog.h - dead-peer detection that never calls MPI (--peer-timeout).
 *
 * The exchange uses blocking MPI collectives, so a rank whose peer died waits in MPI_Allreduce
 * forever (srun: until Slurm marks the node down, 300 s by default). A thread per rank sends UDP
 * heartbeats to its WATCHDOG_NEIGHBOURS nearest ranks on either side of the rank ring and watches
 * theirs; addresses (the IPv4 addresses of interfaces that are up on each rank's host), pids and
 * host names are exchanged once with MPI_Allgather when it starts, and every rank must hear each
 * neighbour once before the run goes on (blocked UDP: the run is refused). A neighbour is lost
 * when
 *   - it has been silent for --peer-timeout seconds (a dead, frozen or cut-off node), or
 *   - its process is known to be gone and it has been silent for a second: on the same host (and
 *     pid namespace) its pid no longer exists, holds another process or a zombie; elsewhere its
 *     port answered "port unreachable" at an address its heartbeats came from.
 * Whether its node died with it is asked of the rank's node witness (watchdog_witness.h), probed
 * from the moment the neighbour is suspect (silent for more than a heartbeat, or refused): an
 * answer means the node lives (the process ended: "gone"; it froze: "frozen"); its port
 * unreachable, or no answer within a second of probing, means the node is lost too ("down": the
 * process ended with every other process of the node while its network stack still answers;
 * "silent": nothing answers). Ranks on the watcher's own host never count as a lost node.
 * A run that ends normally says goodbye after MPI_Finalize (watchdog_stop), and so does a survivor
 * leaving after the finalizer, so that neither is taken for a lost one.
 *
 * Records: every iteration a rank records is also held by its watchdog until the rank has written
 * it, and sent to the rank's keeper on another host (watchdog_records.h).
 *
 * On a loss the watchdog prints one line, starts `dtbench --finalize` (src/survival/finalize.c) in
 * a session of its own and hands it every record it holds (its own unwritten ones and those it
 * keeps for others); the finalizer reopens the result file without MPI-IO, writes them and closes
 * it marked stop_reason=peer_lost. The watchdog waits for it, tells its neighbours that the run is
 * over (they pass it on, hand their records to a finalizer of their own and leave too) and ends
 * the process with WATCHDOG_EXIT_STATUS, so that the launcher ends the job. The process never
 * closes the file itself (_exit: no HDF5 or MPI clean-up), so the finalizer's metadata is the
 * file's last word. */
#ifndef DTBENCH_WATCHDOG_H
#define DTBENCH_WATCHDOG_H

#include "recorder.h" /* defines: IterRecord */

#include <mpi.h>
#include <stdint.h>

#define WATCHDOG_NEIGHBOURS  3  /* ranks watched on each side */
#define WATCHDOG_EXIT_STATUS 75 /* a survivor of a lost peer (sysexits' EX_TEMPFAIL) */

/* Collective over comm. timeout <= 0 or a single rank: off (no thread, no socket, returns 0).
 * result_path: the published result file the finalizer marks. Returns 0, or -1 with a reason in
 * err when the socket or thread cannot be set up (same verdict on every rank). */
int watchdog_start(MPI_Comm comm, double timeout, const char *result_path, char *err,
                   size_t errlen);
/* Says goodbye to the neighbours and joins the thread (before MPI_Finalize). Not collective. */
void watchdog_stop(void);

/* The recorder (main thread; no-ops while the watchdog is off): iteration `iter` was recorded;
 * iterations 0 .. written-1 are in the file. */
void watchdog_record(int64_t iter, const IterRecord *rec);
void watchdog_written(int64_t written);
/* 1 once a finalizer writes this rank's records: the recorder must write no more. */
int watchdog_leaving(void);
/* The recorder's keeper of records (recorder.h's RecordKeeper): the four calls above and below. */
extern const RecordKeeper watchdog_keeper;
/* A failure on this rank of `comm` that may leave the other ranks inside a collective call (an
 * extension of the result file that failed inside HDF5): a finalizer closes the file at `path`
 * marked stop_reason=write_error with `detail`; with the watchdog on, it writes every record this
 * rank holds and the neighbours are told that the run is over (they hand their records to a
 * finalizer too and leave); without it the job is aborted. Ends this process with status 1. */
_Noreturn void watchdog_abandon_run(const char *path, const char *detail, MPI_Comm comm);

#endif
