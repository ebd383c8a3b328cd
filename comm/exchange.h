/* exchange.h - the gradient-exchange seam: one const struct of function pointers per strategy,
 * one file each in comm/: sync.c (allreduce every iteration), ssp.c (stale-synchronous
 * allreduce), async_ps.c (Downpour parameter server), mixed.c (sync inside a node, asynchronous
 * elastic averaging across nodes), zero.c (ZeRO stages 1 and 2: reduce-scatter, an update of this
 * rank's shard with its shard of the optimizer's state, all-gather), zero3.c (stage 3: the
 * parameters sharded too, gathered layer by layer).
 *
 * After the backward pass the driver hands the strategy the rank's parameters and gradients
 * (one contiguous buffer each, on the backend's device). The strategy either leaves averaged
 * gradients for the local optimizer step (EXCHANGE_APPLY_UPDATE) or has brought the parameters
 * up to date itself (EXCHANGE_PARAMS_UPDATED), using the optimizer settings in its config.
 * Some strategies dedicate ranks to serving (parameter servers): those ranks call serve()
 * instead of training. */
#ifndef DTBENCH_EXCHANGE_H
#define DTBENCH_EXCHANGE_H

#include "backend.h"
#include "communicator.h"
#include "optimizer.h" /* defines: Optimizer, DecayRange */
#include "topology.h"
#include "transport.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    MPI_Comm comm;        /* the ranks that exchange (COMM_WORLD in data parallelism) */
    const Topology *topo; /* the job's nodes; a strategy derives comm's own (communicator.h) */
    size_t nparams;       /* floats in params and grads */
    size_t bucket_floats; /* gradients per message (from --bucket-mb) */
    const BackendOps *be;
    BackendCtx *ctx;
    /* A backend on host memory (the CPU backend), for strategies run through the host-staging
     * wrapper (exchange_staged below) on a device backend: their own optimizer steps. */
    const BackendOps *host_be;
    const TransportOps *transport; /* --transport (NULL: mpi), for the gradient average */
    const CollOps *device_coll;    /* collectives on device memory (NCCL) or NULL (registry) */
    int overlap;                   /* --overlap: buckets start while backward still runs */
    int progress_thread;           /* --progress thread (TransportConfig.progress_thread) */
    int param_prefetch;            /* --param-prefetch on: zero3 gathers the next group ahead */
    /* The optimizer, for strategies that apply updates themselves (the driver's: SGD, or AdamW
     * with the decaying runs of this layout, optim.ranges), and its state: */
    Optimizer optim;
    float *velocity; /* [nparams] the model's momentum buffer (AdamW: its first moment) */
    float *variance; /* [nparams] AdamW's second moment (NULL with SGD) */
    /* (both NULL for a strategy that shards the optimizer's state: ExchangeOps.shards_optimizer) */
    /* The updates applied to this rank's parameters so far, by the driver and the strategy
     * alike: whoever applies one counts it here first (AdamW's step t). NULL: SGD only. */
    int64_t *steps;
    /* Strategy settings (--staleness, --ps-ranks, --sync-period). */
    int staleness, ps_ranks, sync_period;
    /* --grad-dtype (GradDtype, comm/grad_cast.h): gradients cross the network in this type
     * (bytes_sent counts it); 0: fp32. Parameters (async pulls, mixed's ring) stay fp32. */
    int grad_dtype;
} ExchangeConfig;

/* One iteration's exchange: what the driver tells the strategy, and what the strategy reports
 * (stored per iteration by the recorder). */
typedef struct {
    /* in */
    int64_t iteration;
    int stop_requested; /* this rank was asked to stop (SIGTERM / SIGUSR1 / target accuracy) */
    /* out */
    int stop;          /* this rank stops after this iteration (see `exchange` below) */
    double bytes_sent; /* payload handed to the transport by this rank */
    double bytes_recv; /* payload received by this rank */
    double staleness;  /* parameter versions between the parameters the gradient was computed on
                          and those it was applied to (0: synchronous) */
    double version;    /* version of the parameters this rank holds after the exchange */
    double wait;       /* s of the exchange spent waiting for other ranks (arrival imbalance,
                          a staleness bound, a busy server), the rest being transfer */
    double hidden;     /* exchange work done while backward still ran, s (set by report());
                          zero3: its all-gathers prefetched while a layer computed */
    /* Sharding strategies (zero.c; 0 elsewhere): the parts of the exchange spent completing the
     * gradients' reduce-scatters after backward and in the parameters' all-gathers, s (the
     * optimizer's step on the shard lies between them), and the payload handed to each, bytes
     * (bytes_sent and bytes_recv are the sum of the three kinds'). */
    double reduce_scatter, allgather;
    double reduce_scatter_bytes, allgather_bytes;
    /* and with --transport hier (sharded inside a node, FSDP's HYBRID_SHARD) the allreduce of
     * each shard across the nodes, between reduce-scatter and update: s, bytes */
    double allreduce, allreduce_bytes;
    /* The factor the gradients still need (0 or 1: they are averaged). sync leaves the SUM and
     * 1/P here (decided by exchange_engine, below): the driver's update is the one step that
     * folds it in (src/run/driver.c: lr x s, weight decay / s; the momentum buffer then holds P
     * times PyTorch's), which saves the exchange a pass over the buffer. */
    double grad_scale;
} ExchangeStep;

/* The transport's collectives timed alone on the run's buckets before training
 * (comm/calibrate.c): what the exchange would cost if it cost only the library's work. */
typedef struct {
    int iters;           /* measured repetitions (0: not calibrated) */
    int nbuckets;        /* buckets per repetition */
    double bucket_bytes; /* the largest bucket */
    double bytes;        /* payload per repetition (this rank's gradients) */
    double seconds;      /* median over repetitions of the time for all buckets, s */
    double seconds_lo;   /* the fastest and the slowest repetition, s: the spread that the */
    double seconds_hi;   /* recorded transfer is held against (dtbench-analyze summary) */
    double algbw;        /* bytes / seconds, B/s */
    double busbw;        /* algbw x the transport's bus factor (2(P-1)/P for an allreduce) */
    double busbw_factor;
} ExchangeCalibration;

enum { EXCHANGE_APPLY_UPDATE = 0, EXCHANGE_PARAMS_UPDATED = 1 };
enum { EXCHANGE_WORKER = 0, EXCHANGE_SERVER = 1 };

typedef struct ExchangeState ExchangeState;

typedef struct ExchangeOps {
    const char *name;
    /* 1: all ranks run the same iteration at the same time (sync, ssp): evaluations can be
     * sharded over the ranks and a stop decided by all of them at once. 0: ranks drift apart
     * (async, mixed): the first worker evaluates alone. */
    int lockstep;
    /* 1: works on device memory (BackendOps.device_memory) through its transport; 0: the
     * strategy reads and writes parameters and gradients on the host (CPU backend only). */
    int device_ok;
    /* Collective over cfg->comm. Returns NULL with a one-line reason in err when the settings
     * do not fit the job (e.g. more parameter servers than ranks allow). */
    ExchangeState *(*create)(const ExchangeConfig *cfg, char *err, size_t errlen);
    /* EXCHANGE_WORKER or EXCHANGE_SERVER; workers train, servers call serve(). index/count:
     * this worker's place among the workers (data are sharded over workers only). */
    int (*role)(ExchangeState *st, int *worker_index, int *worker_count);
    /* Workers, once per iteration. Returns EXCHANGE_APPLY_UPDATE or EXCHANGE_PARAMS_UPDATED.
     * The stop vote: when any rank reports stop_requested, every worker must eventually see
     * step->stop (synchronous strategies: all after the same iteration; asynchronous ones: each
     * after its next exchange), so that no rank waits forever for another. */
    int (*exchange)(ExchangeState *st, float *params, float *grads, ExchangeStep *step);
    /* Servers: serve until every worker has finished. NULL for strategies without servers. */
    void (*serve)(ExchangeState *st, float *params);
    /* Every rank, once, after its last iteration (or serve): completes what is in flight so
     * that no update is lost, and leaves every rank with the same final parameters. */
    void (*finish)(ExchangeState *st, float *params);
    /* Updates this rank pushed and applied (counted, to check that each is applied once). */
    void (*counts)(ExchangeState *st, int64_t *pushed, int64_t *applied);
    /* Optional (NULL when the strategy has no use for them). During backward:
     * grads[first .. nparams) are final (model_backward_hook); an overlapping strategy may start
     * exchanging them. */
    void (*grads_ready)(ExchangeState *st, float *grads, size_t first);
    /* After the iteration, outside the timed phases (may wait for the device): fills what is
     * measured on the device's timeline (step->hidden). */
    void (*report)(ExchangeState *st, ExchangeStep *step);
    void (*destroy)(ExchangeState *st);
    /* Optional: collective over cfg->comm, before training: times the transport's collectives
     * alone at this run's bucket sizes, `iters` times (bounded to about 2 s), on buf[nparams]
     * (device memory; its contents are destroyed). With iters 0 it only runs one unmeasured
     * exchange, so that the transport allocates at setup what it keeps across iterations. */
    void (*calibrate)(ExchangeState *st, float *buf, int iters, ExchangeCalibration *out);
    /* Optional, for a strategy that shards the optimizer's state (shards_optimizer): the
     * parameters this rank updates, whose state (SGD's momentum, AdamW's two moments) it holds. */
    size_t (*shard_size)(ExchangeState *st);
    /* Optional, for a strategy that shards the parameters themselves between uses (zero3,
     * shards_params): params_needed is called before each layer's forward and backward with the
     * n ranges [lo, hi) of params (offsets, lo < hi) that the layer reads; it gathers them (a
     * collective: every rank calls it for the same layers in the same order) and may release
     * others. params_hold(st, params, 1) gathers every parameter and keeps them until
     * params_hold(st, params, 0) (an evaluation, whose batches differ between ranks); finish()
     * leaves them all gathered. held_floats: the parameters and gradients a rank holds at most
     * (the plan, for /ranks/memory_params and memory_grads). */
    void (*params_needed)(ExchangeState *st, float *params, const size_t *lohi, int n);
    void (*params_hold)(ExchangeState *st, float *params, int hold);
    void (*held_floats)(ExchangeState *st, size_t *params, size_t *grads);
    /* For the resolver (src/run/resolve.c). reads: the long options the strategy reads
     * (comma-separated; given explicitly with a strategy that does not read them, they are
     * refused; "overlap" needs grads_ready). pipeline_ok: 1 when it can average the gradients of
     * a pipeline stage's replicas (--parallel model / hybrid, ExchangeConfig.comm a sub-group).
     * delays_grads: 1 when it holds the gradients of the last --staleness + 1 iterations (ssp), a
     * copy each, which the memory estimate counts (src/run/run_limits.c). same_update: 1 when
     * every replica applies the same averaged gradients in the same iteration, so that a step
     * can be skipped everywhere at once (fp16's loss scaler). in_flight: which of its settings
     * leaves collectives in flight while compute runs, what a progress thread can drive
     * (--progress thread). overlaps: 1 when it always starts buckets during backward (--overlap
     * is implied: the resolver sets it). transports: the --transport values it runs over
     * (comma-separated; NULL: every one). shards_optimizer: 1 when it keeps the optimizer's state
     * itself, for the part of the parameters this rank updates (ExchangeConfig.velocity and
     * variance NULL: the driver allocates none; the memory estimate counts 1/P of it). */
    const char *reads;
    int pipeline_ok;
    int delays_grads;
    int same_update;
    enum { IN_FLIGHT_NEVER, IN_FLIGHT_OVERLAP, IN_FLIGHT_STALENESS } in_flight;
    int overlaps;
    const char *transports;
    int shards_optimizer;
    int shards_params; /* params_needed above; host memory only (refused on a device) */
} ExchangeOps;

/* For the strategies (comm/transport.c): the bucket engine that averages over `comm` (cfg->comm,
 * or a node's in mixed; topo: its topology), through cfg->transport (mpi when NULL) with the run's
 * backend, device collectives, wire type and progress mode. blocking: TransportConfig.blocking.
 * grad_scale NULL: the engine averages. Else the strategy hands the driver the factor the
 * gradients still need (ExchangeStep.grad_scale), set here: 1/P where the engine leaves the sum
 * (scaling costs a pass over the buffer, folding 1/P into the update nothing), 1 where its
 * collectives average for free (TransportOps.averages_free). */
BucketEngine *exchange_engine(const ExchangeConfig *cfg, MPI_Comm comm, const Topology *topo,
                              int blocking, double *grad_scale);

/* The host-staging wrapper of a strategy with device_ok 0 (comm/staged.c): the same strategy,
 * device_ok 1, on host mirrors of the device buffers made at create (cfg->host_be required).
 * Chosen by the resolver when the backend has device memory. NULL when too many are wrapped. */
const ExchangeOps *exchange_staged(const ExchangeOps *inner);

#endif
