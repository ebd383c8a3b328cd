/* coll.h - one communicator's collectives on one kind of memory, queued without waiting: the
 * building block of the exchange transports (comm/buckets.c). One const struct of function
 * pointers per implementation:
 *   comm/coll_mpi.c   MPI non-blocking collectives on host memory (device buffers are staged
 *                     through the host with the backend's download/upload), always built;
 *   comm/coll_nccl.c  NCCL on the GPU, on a stream of its own (CUDA and NCCL builds).
 *
 * Every operation is in place, returns a ticket, and completes in issue order: done(t) means
 * every operation issued up to t is complete (on the device: its end event has happened). On the
 * device, operations also START in issue order (one stream), so one may read what the previous
 * one writes; on the host (on_device 0) an operation takes its input when it is issued, so
 * the caller waits for the operation whose result it reads before issuing the next. All
 * ranks of the communicator must issue the same operations in the same order (MPI's and NCCL's
 * rule for collectives); the bucket engine guarantees it.
 *
 * Timing: each operation's interval is kept (host clock for MPI: from issue to the completion
 * seen by done/wait; CUDA events around it for NCCL). hidden() returns how much of the iteration's
 * intervals (their union) lay before mark_backward_end(), then forgets them.
 *
 * Memory is the backend's (Coll.be): buffers of a Coll's kind from be->alloc (device memory on a
 * device backend), and the host copies of an on-device Coll's buffers from be->host_alloc
 * (page-locked); moves between them are operations in issue order (copy). */
#ifndef DTBENCH_COLL_H
#define DTBENCH_COLL_H

#include "backend.h"

#include <mpi.h>
#include <stddef.h>

/* What every Coll shows (an implementation's own state follows it in memory). */
typedef struct {
    int rank, size; /* in the communicator */
    /* 1: operations, copies included, run asynchronously in stream order (NCCL); 0: each takes
     * its input when issued (MPI, on host memory or staged through it). */
    int on_device;
    const BackendOps *be; /* the run's backend and its context: where the buffers live */
    BackendCtx *ctx;
} Coll;

/* How a Coll is made: fixed for its life (CollOps.create). */
typedef struct CollSettings {
    /* 1: the buffers given to this Coll are the backend's device memory (an MPI Coll then stages
     * them through host memory) */
    int device_memory;
    /* the collectives' wire type (GradDtype of comm/grad_cast.h, --grad-dtype; 0: fp32, the only
     * one where CollOps.wire_types is 0): buffers stay fp32; allreduce and reduce_scatter sum
     * in the wire type, and every value a collective delivers, the rank's own block included, is
     * rounded to it, so every rank holds the same values */
    int wire;
    /* 1 (--progress thread; only where CollOps.progress_thread is 1): a thread of this Coll runs
     * the non-blocking operations as they are issued; 0: they advance inside done()/wait()
     * (polling). Needs MPI_THREAD_MULTIPLE. */
    int progress_thread;
} CollSettings;

/* copy: from this Coll's memory to host memory (from be->host_alloc), back, or within it. */
typedef enum { COLL_TO_HOST, COLL_FROM_HOST, COLL_WITHIN } CollCopy;

typedef struct CollOps {
    const char *name;
    /* What CollSettings may ask beyond fp32 and the library's own progress. wire_types 1: the
     * bf16 and fp16 wires; progress_thread 1: a progress thread of its own (0: the library
     * progresses its operations itself, e.g. NCCL's stream). */
    int wire_types, progress_thread;
    /* Collective over comm, as s says (transport_coll, comm/transport.c, checks s against the
     * capabilities above first). */
    Coll *(*create)(MPI_Comm comm, const BackendOps *be, BackendCtx *ctx, const CollSettings *s);
    void (*destroy)(Coll *c);

    /* buf[n] = scale * sum over ranks of buf[n] */
    int (*allreduce)(Coll *c, float *buf, size_t n, float scale);
    /* buf[size*shard] in; buf[rank*shard .. (rank+1)*shard) = scale * sum over ranks of that
     * block; the rest of buf is left undefined */
    int (*reduce_scatter)(Coll *c, float *buf, size_t shard, float scale);
    /* buf[size*shard]: every rank's block buf[r*shard ..] is sent to all */
    int (*allgather)(Coll *c, float *buf, size_t shard);
    /* dst[n] = src[n], an operation in issue order like the collectives (CollCopy says where
     * dst and src are) */
    int (*copy)(Coll *c, float *dst, const float *src, size_t n, CollCopy kind);

    /* Non-blocking: has ticket t (and everything before it) completed? Also advances progress. */
    int (*done)(Coll *c, int ticket);
    void (*wait)(Coll *c, int ticket);
    /* Optional (NULL: nothing to order, the operations take their input when issued and have
     * written their results when done). after_compute: operations issued from now on start only
     * after the work queued so far on the backend's compute stream (the gradients they read).
     * before_compute: the compute stream's later work (the update) waits for every operation
     * issued so far. */
    void (*after_compute)(Coll *c);
    void (*before_compute)(Coll *c);

    /* Optional (NULL: always non-blocking). blocking 1: the operations issued from now on use
     * the library's blocking collectives and are complete on return (MPI_Allreduce instead of
     * MPI_Iallreduce: Open MPI's tuned algorithms instead of libnbc's). */
    void (*set_blocking)(Coll *c, int blocking);
    void (*mark_backward_end)(Coll *c);
    double (*hidden)(Coll *c); /* may wait for the device; resets the iteration's intervals */
    /* Optional: the library's version ("2.27.3"), for /ranks/nccl_version (comm/parts.c). */
    void (*version)(char *buf, size_t len);
} CollOps;

extern const CollOps coll_mpi; /* comm/coll_mpi.c */

#endif
