/* communicator.h - the exchange's view of a group of ranks: the MPI communicator, its node
 * topology derived from that communicator (not the job's: a pipeline stage's replicas are a
 * subset of the job), the stop vote, a blocking average on host memory and point-to-point sends
 * of whole buffers. Every strategy (comm/sync.c, ssp.c, mixed.c, async_ps.c) holds one; the
 * transports (transport.h) are created from it. */
#ifndef DTBENCH_COMMUNICATOR_H
#define DTBENCH_COMMUNICATOR_H

#include "topology.h"

#include <mpi.h>
#include <stddef.h>

typedef struct {
    MPI_Comm comm; /* not owned */
    int rank, size;
    Topology topo; /* comm's nodes (topology_derive) */
} Communicator;

/* Collective over comm. job: the job's topology (which node each rank runs on). */
void communicator_init(Communicator *c, MPI_Comm comm, const Topology *job);
void communicator_free(Communicator *c);
/* The stop vote: MAX of `mine` over the ranks into *any; returns the seconds spent blocked in
 * it (the arrival imbalance of the ranks, as the vote cannot complete before the last rank). */
double communicator_vote(MPI_Comm comm, int mine, int *any);
/* In-place average of host buf[n] over comm, in buckets of `bucket` floats, blocking
 * (MPI_Allreduce). */
void communicator_average(MPI_Comm comm, float *buf, size_t n, size_t bucket);
/* Point-to-point of whole host buffers (bytes, any size), non-blocking. */
void communicator_isend(MPI_Comm comm, const void *buf, size_t bytes, int to, int tag,
                        MPI_Request *req);
void communicator_irecv(MPI_Comm comm, void *buf, size_t bytes, int from, int tag,
                        MPI_Request *req);

#endif
