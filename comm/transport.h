/* transport.h - the transport seam: how the exchange averages one bucket of gradients over all
 * ranks (--transport). One const struct of function pointers per transport:
 *   comm/transport_mpi.c   mpi:  MPI_Allreduce, or MPI_Iallreduce with --overlap (device buffers
 *                          staged through the host)
 *   comm/transport_nccl.c  nccl: ncclAllReduce on the GPUs (CUDA and NCCL builds)
 *   comm/transport_hier.c  hier: reduce-scatter inside each node, allreduce across nodes between
 *                          the ranks holding the same shard, all-gather inside the node (NCCL
 *                          inside the node on GPUs when built with NCCL, MPI otherwise)
 * A strategy (comm/sync.c) cuts the gradients into buckets and starts them, possibly while
 * backward still runs (--overlap); the transport never blocks in start() or progress(). */
#ifndef DTBENCH_TRANSPORT_H
#define DTBENCH_TRANSPORT_H

#include "backend.h"
#include "coll.h"
#include "topology.h"

#include <mpi.h>
#include <stddef.h>

typedef struct {
    MPI_Comm comm;        /* the ranks that average (COMM_WORLD in data parallelism) */
    const Topology *topo; /* the nodes of comm or of any communicator containing it (the job's):
                             a transport derives comm's own topology from it (topology_derive) */
    const BackendOps *be; /* where the buckets live */
    BackendCtx *ctx;
    const CollOps *device_coll; /* collectives on device memory (NCCL), NULL when not built */
    /* 1: every bucket is started after backward (no --overlap): the library's blocking
     * collectives are used, which Open MPI implements with faster algorithms than the
     * non-blocking ones (tuned vs libnbc). */
    int blocking;
    /* 1: leave the SUM over the ranks (the caller applies the 1/P scale_left() reports, e.g. in
     * the update) instead of a pass over every bucket; transports that cannot (NCCL averages in
     * the collective, for free) ignore it. */
    int leave_sum;
    /* --grad-dtype (GradDtype, comm/grad_cast.h): the collectives' wire type; 0: fp32 */
    int grad_dtype;
    /* --progress thread: the MPI collectives' non-blocking operations run on a progress thread
     * (CollOps.set_progress); 0: polled */
    int progress_thread;
} TransportConfig;

typedef struct Transport Transport;

typedef struct TransportOps {
    const char *name;
    /* Collective over cfg->comm. Exits with a one-line usage error (status 2, every rank) when
     * the transport cannot run here (nccl without a GPU, hier on nodes of unequal size). */
    Transport *(*create)(const TransportConfig *cfg);
    /* Starts averaging buf[0 .. n) in place. Every rank starts the same buckets in the same
     * order. */
    void (*start)(Transport *t, float *buf, size_t n);
    /* Advances started buckets without blocking (called between layers of backward). */
    void (*progress)(Transport *t);
    /* Backward has ended (its last kernels are queued): the time hidden() measures against. */
    void (*backward_done)(Transport *t);
    /* Completes every started bucket: on return the averages are in place (host memory) or the
     * backend's later work waits for them (device). */
    void (*finish)(Transport *t);
    /* Seconds of the iteration's exchange work that ran before the end of backward; called once
     * per iteration after finish, outside the timed phases (it may wait for the device). */
    double (*hidden)(Transport *t);
    void (*destroy)(Transport *t);
    /* Calibration (comm/calibrate.c): the library's collectives for one bucket buf[0 .. n),
     * blocking, summing without the scale: what the transport costs at best. NULL: calibrated
     * through start/finish. */
    void (*alone)(Transport *t, float *buf, size_t n);
    /* Bus bandwidth factor (nccl-tests): busbw = bytes / time x factor(P), e.g. 2(P-1)/P for
     * an allreduce over P ranks. */
    double (*busbw_factor)(Transport *t);
    /* The scale the buckets still need after finish (1/P with leave_sum, else 1). NULL: 1. */
    double (*scale_left)(Transport *t);
    /* For the resolver (src/resolve.c). reads: long options it reads (comma-separated; NULL:
     * none); device_only: 1 when it averages device buffers only (needs
     * BackendOps.device_memory). */
    const char *reads;
    int device_only;
} TransportOps;

/* --progress: sets c's progress mode from cfg (no-op for Colls that progress themselves). */
void transport_set_progress(const TransportConfig *cfg, const CollOps *ops, Coll *c);

extern const TransportOps mpi_transport;  /* comm/transport_mpi.c */
extern const TransportOps hier_transport; /* comm/transport_hier.c */

#endif
