/* exchange.h - the gradient-exchange seam: one const struct of function pointers per strategy
 * (comm/sync.c now; asynchronous, mixed and hierarchical strategies plug in the same way).
 *
 * After the backward pass the driver hands the strategy the rank's parameters and gradients
 * (one contiguous buffer each, on the backend's device). The strategy either leaves averaged
 * gradients for the local optimizer step (EXCHANGE_APPLY_UPDATE: synchronous data parallelism)
 * or updates the parameters itself (EXCHANGE_PARAMS_UPDATED: e.g. a parameter server). */
#ifndef DTBENCH_EXCHANGE_H
#define DTBENCH_EXCHANGE_H

#include "backend.h"
#include "topology.h"
#include "transport.h"

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    MPI_Comm comm;         /* the ranks that exchange (COMM_WORLD in data parallelism) */
    const Topology *topo;  /* nodes and local ranks */
    size_t nparams;        /* floats in params and grads */
    size_t bucket_floats;  /* gradients per message (from --bucket-mb) */
    const BackendOps *be;
    BackendCtx *ctx;
    const TransportOps *transport; /* --transport (NULL: mpi) */
    int overlap;                   /* --overlap: buckets start while backward still runs */
} ExchangeConfig;

/* One iteration's exchange: what the driver tells the strategy, and what the strategy reports
 * (stored per iteration by the recorder). */
typedef struct {
    /* in */
    int64_t iteration;
    int stop_requested; /* this rank was asked to stop (SIGTERM / SIGUSR1) */
    /* out */
    int stop;          /* the ranks agreed to stop after this iteration (same on all of them) */
    double bytes_sent; /* payload handed to the transport by this rank */
    double hidden;     /* exchange work done while backward still ran, s (set by report()) */
} ExchangeStep;

enum { EXCHANGE_APPLY_UPDATE = 0, EXCHANGE_PARAMS_UPDATED = 1 };

typedef struct ExchangeState ExchangeState;

typedef struct ExchangeOps {
    const char *name;
    ExchangeState *(*create)(const ExchangeConfig *cfg);
    /* Returns EXCHANGE_APPLY_UPDATE or EXCHANGE_PARAMS_UPDATED. Every strategy also carries the
     * stop vote: when any rank reports stop_requested, all ranks must end up with step->stop set
     * after the same iteration (synchronous strategies) or drain and finish without waiting for
     * each other (asynchronous ones), so that the collective close of the file never hangs. */
    int (*exchange)(ExchangeState *st, float *params, float *grads, ExchangeStep *step);
    /* Completes anything still in flight; every rank calls it once after the last iteration. */
    void (*finish)(ExchangeState *st);
    void (*destroy)(ExchangeState *st);
    /* Optional (NULL when the strategy has no use for them). */
    /* During backward: grads[first .. nparams) are final (model_backward_hook); a strategy that
     * overlaps may start exchanging them. */
    void (*grads_ready)(ExchangeState *st, float *grads, size_t first);
    /* After the iteration, outside the timed phases (may wait for the device): fills what is
     * measured on the device's timeline (step->hidden). */
    void (*report)(ExchangeState *st, ExchangeStep *step);
} ExchangeOps;

#endif
