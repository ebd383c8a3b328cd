/* buckets.h - the bucket engine: averages gradient buckets over all ranks with one or two levels of
 * collectives (coll.h). A transport (comm/transport_*.c) creates it over its collectives; the
 * strategies (comm/sync.c, ssp.c, mixed.c) drive it.
 *
 * Flat (intra == NULL): each bucket is one allreduce on `top`, which spans all ranks.
 * Hierarchical (Horovod's hierarchical allreduce): `intra` spans the ranks of a node, `top` the
 * ranks holding the same local rank on every node. Per bucket:
 *   1. reduce-scatter inside the node: local rank l ends with the node's sum of shard l;
 *   2. allreduce of shard l across the nodes (skipped with one node);
 *   3. all-gather inside the node: every rank has every averaged shard.
 * A bucket whose size is not a multiple of the node size is cut into a main piece (in place) and
 * a tail of fewer than L floats that goes through a zero-padded scratch of L floats. When intra is
 * on the device and top is MPI on host memory (`staged`), each shard is copied to pinned host
 * memory in the intra stream before step 2 and back before step 3.
 *
 * Order: MPI and NCCL need every rank to issue a communicator's collectives in the same order.
 * Steps 1 (and the copy to the host) are issued when a bucket is started; steps 2 are posted in
 * bucket order, each once its step 1 has completed (checked at progress() and finish()); steps 3
 * are issued in finish(), in bucket order, after every step 1. So each communicator sees the same
 * sequence on every rank, whatever the timing.
 *
 * Averaging: step 2 (or step 1 with one node; the allreduce when flat) multiplies the sum by the
 * scale given at create: 1/P (P = all ranks) for the average, 1 to leave the sum to the caller.
 *
 * Bus bandwidth (nccl-tests' busbw = bytes / time x factor): the bytes through each rank's
 * busiest link per byte of bucket. Flat: an allreduce's 2(P-1)/P. Hierarchical, L ranks per node
 * and N nodes: reduce-scatter and all-gather inside the node move (L-1)/L each, the allreduce of a
 * 1/L shard across the nodes 2(N-1)/N of it. */
#ifndef DTBENCH_BUCKETS_H
#define DTBENCH_BUCKETS_H

#include "coll.h"

#include <stddef.h>

typedef struct BucketEngine BucketEngine;

/* Takes ownership of the Colls (destroyed with the engine). scale: what the sum over the ranks
 * is multiplied by (1/P: the average). blocking: the buckets started after backward use the
 * library's blocking collectives where every level offers them (coll.h set_blocking: MPI); those
 * started during backward (--overlap) are non-blocking and are completed before the first
 * blocking one is issued (at the first start() after backward_done, so that the caller can time
 * the arrival wait between the two). Where a level has no blocking form (NCCL), every bucket stays
 * as it is. */
BucketEngine *buckets_create(const CollOps *intra_ops, Coll *intra, const CollOps *top_ops,
                             Coll *top, int staged, float scale, int blocking);
/* The bus-bandwidth factor of this engine's levels (see above). */
double buckets_busbw_factor(const BucketEngine *p);
/* Starts bucket buf[0 .. n). Buckets are started in the same order on every rank. */
void buckets_start(BucketEngine *p, float *buf, size_t n);
/* Posts what can be posted without waiting (called between layers of backward). */
void buckets_progress(BucketEngine *p);
/* The end of backward, for buckets_hidden. */
void buckets_backward_done(BucketEngine *p);
/* Completes every started bucket (device: the compute stream's later work waits for them). */
void buckets_finish(BucketEngine *p);
/* Seconds of this iteration's exchange work before the end of backward (see coll.h); call once
 * per iteration, after finish. */
double buckets_hidden(BucketEngine *p);
void buckets_destroy(BucketEngine *p);
/* Calibration: the collectives of one bucket buf[0 .. n), blocking where possible, summing
 * without the 1/P scale, outside any iteration (call between iterations). On the device the
 * result is queued: the caller synchronizes. Meant for engines with a blocking level
 * (buckets_can_block); without one, a bucket alone is not what an iteration runs. */
void buckets_alone(BucketEngine *p, float *buf, size_t n);
/* 1 when a level offers the library's blocking collectives (coll.h set_blocking: MPI). */
int buckets_can_block(const BucketEngine *p);

#endif
