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

#include <mpi.h>
#include <stddef.h>

typedef struct {
    MPI_Comm comm;         /* the ranks that exchange (COMM_WORLD in data parallelism) */
    const Topology *topo;  /* nodes and local ranks */
    size_t nparams;        /* floats in params and grads */
    size_t bucket_floats;  /* gradients per message (from --bucket-mb) */
    const BackendOps *be;
    BackendCtx *ctx;
} ExchangeConfig;

/* What one iteration's exchange did, stored per iteration by the recorder. */
typedef struct {
    double bytes_sent; /* payload handed to the transport by this rank */
} ExchangeStats;

enum { EXCHANGE_APPLY_UPDATE = 0, EXCHANGE_PARAMS_UPDATED = 1 };

typedef struct ExchangeState ExchangeState;

typedef struct ExchangeOps {
    const char *name;
    ExchangeState *(*create)(const ExchangeConfig *cfg);
    /* Collective among cfg->comm. Returns EXCHANGE_APPLY_UPDATE or EXCHANGE_PARAMS_UPDATED. */
    int (*exchange)(ExchangeState *st, float *params, float *grads, ExchangeStats *stats);
    /* Completes anything still in flight; every rank calls it once after the last iteration. */
    void (*finish)(ExchangeState *st);
    void (*destroy)(ExchangeState *st);
} ExchangeOps;

#endif
