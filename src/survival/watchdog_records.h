/* watchdog_records.h - the iteration records a rank has not written to the result file yet, kept
 * twice until it has (--peer-timeout, src/survival/watchdog.h): in the rank itself, for its own
 * finalizer when a peer is lost, and by its keeper, a rank on another host, for a survivor's
 * finalizer when the rank's node dies. Each record is sent to the keeper as soon as it is recorded,
 * over the watchdog's UDP socket (one datagram, normally of that one record; the watchdog thread
 * sends again, at each heartbeat, what the keeper has not confirmed). The keeper drains its socket
 * ten times a second rather than waking for every datagram (a wake-up per iteration cost the sender
 * 0.3-0.7 ms of preemption on a loaded 2-core host), confirms once per drain, and drops what the
 * rank reports written. A dead node therefore loses no completed iteration but the one in flight
 * (and those whose datagrams were all lost, which a LAN does not do).
 *
 * The main thread calls records_add and records_written (src/results/recorder_hdf5.c, through
 * watchdog.h); the watchdog thread everything else. */
#ifndef DTBENCH_WATCHDOG_RECORDS_H
#define DTBENCH_WATCHDOG_RECORDS_H

#include "recorder.h" /* defines: IterRecord */

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define RECORDS_PER_PACKET 7 /* 7 x 184 bytes and a header: one Ethernet frame */

/* What the finalizer reads on its standard input (`--records`): blocks of this header followed by
 * n IterRecords of iterations first .. first+n-1 of `rank`. `done`: the iterations the rank
 * completed, as far as the sender knows (recorded, written or not). */
typedef struct {
    int32_t rank, own; /* own: the sender's own records, else those it kept for `rank` */
    int64_t first, n, done;
} RecordsBlock;

/* Main thread, in watchdog_start before its thread runs: fd is the watchdog's socket, token the
 * job's; the keeper's addresses (network order, 0-terminated, at most naddrs) and port. */
void records_init(int fd, uint64_t token, int rank, int nranks, int keeper, const uint32_t *addrs,
                  int naddrs, uint32_t port);
/* Main thread: iteration `iter` recorded (iterations are added in order). */
void records_add(int64_t iter, const IterRecord *rec);
/* Main thread: iterations 0 .. written-1 are in the file. */
void records_written(int64_t written);
/* Watchdog thread, at each heartbeat: what the keeper has not confirmed, again. */
void records_resend(void);
/* Watchdog thread: a datagram of kind WD_RECORDS or WD_HELD (watchdog_wire.h). */
void records_receive(const void *packet, size_t len, const struct sockaddr_in *from);
/* Watchdog thread, after draining its socket: tells each rank it keeps records for how far it
 * holds them (once per drain, not per datagram). */
void records_answer(void);
/* Watchdog thread: every record this rank holds (its own and those it keeps), as the stream the
 * finalizer reads; malloc'd, its length in *len. */
char *records_dump(size_t *len);
void records_free(void);

#endif
