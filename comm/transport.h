/* transport.h - the transport seam: which collectives average a bucket of gradients over all
 * ranks, at which level (--transport). A transport adds only that choice: its create() builds the
 * bucket engine (comm/buckets.h) over its collectives, and the strategies drive the engine. One
 * const struct per transport:
 *   comm/transport_mpi.c   mpi:  one level, MPI_Allreduce, or MPI_Iallreduce with --overlap
 *                          (device buffers staged through the host)
 *   comm/transport_nccl.c  nccl: one level, ncclAllReduce on the GPUs (CUDA and NCCL builds)
 *   comm/transport_hier.c  hier: two levels: reduce-scatter inside each node, allreduce across
 *                          nodes between the ranks holding the same shard, all-gather inside the
 *                          node (NCCL inside the node on GPUs when built with NCCL, MPI otherwise)
 * Its bus-bandwidth factor follows from those levels (buckets_busbw_factor). A strategy gets its
 * engine from exchange_engine (comm/transport.c, declared in exchange.h), the one place that picks
 * the transport and fills this config. */
#ifndef DTBENCH_TRANSPORT_H
#define DTBENCH_TRANSPORT_H

#include "backend.h"
#include "buckets.h"
#include "coll.h"
#include "topology.h"

#include <mpi.h>
#include <stddef.h>

/* --progress: how the MPI collectives in flight advance (TransportConfig.progress_thread), named
 * in the enum's order (base/names.h). */
typedef enum { PROGRESS_POLL = 0, PROGRESS_THREAD } ProgressMode;
#define PROGRESS_NAMES "poll,thread"

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
    /* What the engine multiplies the sum over the ranks by: 1/P (the average) or 1 (the sum,
     * which the strategy's caller scales; exchange_engine decides). */
    float scale;
    /* --grad-dtype (GradDtype, comm/grad_cast.h): the collectives' wire type; 0: fp32 */
    int grad_dtype;
    /* --progress thread: the MPI collectives' non-blocking operations run on a progress thread
     * (CollSettings.progress_thread); 0: polled */
    int progress_thread;
} TransportConfig;

typedef struct TransportOps {
    const char *name;
    /* Collective over cfg->comm: the bucket engine over this transport's collectives. Exits with
     * a one-line usage error (status 2, every rank) when the transport cannot run here (nccl
     * without a GPU, hier on nodes of unequal size). */
    BucketEngine *(*create)(const TransportConfig *cfg);
    /* 1: its collectives average as cheaply as they sum (NCCL's ncclAvg): it is never asked to
     * leave the sum (exchange_engine). */
    int averages_free;
    /* For the resolver (src/run/resolve.c). reads: long options it reads (comma-separated; NULL:
     * none); device_only: 1 when it averages device buffers only (needs
     * BackendOps.device_memory); mpi_levels: 1 when some of its collectives are MPI's (what
     * --progress thread drives). */
    const char *reads;
    int device_only;
    int mpi_levels;
} TransportOps;

/* For the transports: a Coll of `ops` over comm on the run's backend (device_memory: on its
 * device memory), set to the run's wire type and progress mode. */
Coll *transport_coll(const CollOps *ops, MPI_Comm comm, const TransportConfig *cfg,
                     int device_memory);

extern const TransportOps mpi_transport;  /* comm/transport_mpi.c */
extern const TransportOps hier_transport; /* comm/transport_hier.c */

#endif
