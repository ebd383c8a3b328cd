/* clocksync.h - aligns the ranks' clocks: the offset of each rank's CLOCK_MONOTONIC to rank 0's,
 * measured by ping-pong (Cristian's method, keeping the round with the smallest round trip). */
#ifndef DTBENCH_CLOCKSYNC_H
#define DTBENCH_CLOCKSYNC_H

#include <mpi.h>

typedef struct {
    double offset; /* this rank's clock minus rank 0's, seconds (0 on rank 0) */
    double rtt;    /* smallest round trip seen: the offset's error is below rtt/2 */
} ClockOffset;

/* Collective over comm; `rounds` ping-pongs per rank. */
ClockOffset clocksync_measure(MPI_Comm comm, int rounds);

#endif
