/* sync.c - synchronous data-parallel exchange: every iteration the gradients of all ranks are
 * averaged in buckets of --bucket-mb, in place, so every rank applies the same update. The
 * averaging itself is the transport's (--transport: comm/transport_*.c, on host or device
 * memory). Buckets are cut from the END of the gradient buffer, since backward produces the last
 * layers' gradients first: with --overlap a bucket starts as soon as backward has finished every
 * gradient in it (grads_ready), the rest when backward is done; without, all start then.
 *
 * Wait versus transfer: a one-int allreduce (the stop vote) goes first; it cannot complete before
 * the last rank has arrived, so the time blocked in it is the arrival imbalance (wait), and the
 * buckets completed after it are the data movement (transfer). */
#include "check.h"
#include "exchange.h"
#include "exchange_util.h"
#include "util.h"

#include <stdlib.h>

struct ExchangeState {
    ExchangeConfig cfg;
    int nranks;
    int64_t updates;
    Transport *tp;
    size_t started_from; /* buckets cover grads[started_from .. nparams) this iteration */
};

static ExchangeState *sync_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    if (!st->cfg.transport) st->cfg.transport = &mpi_transport;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &st->nranks));
    TransportConfig tc = {cfg->comm, cfg->topo, cfg->be, cfg->ctx};
    st->tp = st->cfg.transport->create(&tc);
    st->started_from = cfg->nparams;
    return st;
}

static int sync_role(ExchangeState *st, int *index, int *count) {
    MPI_CHECK(MPI_Comm_rank(st->cfg.comm, index));
    *count = st->nranks;
    return EXCHANGE_WORKER;
}

/* The stop vote: MAX of one int over comm; returns the seconds spent blocked in it. */
double exchange_vote(MPI_Comm comm, int mine, int *any) {
    double t = dt_now();
    MPI_CHECK(MPI_Allreduce(&mine, any, 1, MPI_INT, MPI_MAX, comm));
    return dt_now() - t;
}

/* In-place average of host grads[n] over comm, in buckets (strategies that work on the host). */
void exchange_average(MPI_Comm comm, int nranks, float *grads, size_t n, size_t bucket) {
    if (nranks < 2) return;
    for (size_t off = 0; off < n; off += bucket) {
        size_t count = n - off < bucket ? n - off : bucket; /* grads[off .. off+count) */
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads + off, (int)count, MPI_FLOAT, MPI_SUM, comm));
    }
    float scale = 1.0f / (float)nranks;
    for (size_t i = 0; i < n; i++)
        grads[i] *= scale;
}

/* Starts every bucket lying entirely in grads[first .. nparams) not yet started. Bucket k covers
 * [n - (k+1)*B, n - k*B), the last one starting at 0. */
static void start_buckets(ExchangeState *st, float *grads, size_t first) {
    size_t bucket = st->cfg.bucket_floats;
    while (st->started_from > first) {
        size_t hi = st->started_from, lo = hi > bucket ? hi - bucket : 0;
        if (lo < first) break; /* not all of it is final yet */
        st->cfg.transport->start(st->tp, grads + lo, hi - lo);
        st->started_from = lo;
    }
}

static void sync_grads_ready(ExchangeState *st, float *grads, size_t first) {
    if (st->nranks == 1 || !st->cfg.overlap) return;
    start_buckets(st, grads, first);
    st->cfg.transport->progress(st->tp);
}

static int sync_average(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    (void)params;
    size_t n = st->cfg.nparams;
    step->wait = exchange_vote(st->cfg.comm, step->stop_requested, &step->stop);
    if (st->nranks > 1) {
        st->cfg.transport->backward_done(st->tp);
        start_buckets(st, grads, 0);
        st->cfg.transport->finish(st->tp);
    }
    st->started_from = n;
    double bytes = st->nranks > 1 ? (double)n * sizeof(float) : 0.0;
    step->bytes_sent = step->bytes_recv = bytes;
    step->staleness = 0;
    step->version = (double)++st->updates;
    return EXCHANGE_APPLY_UPDATE;
}

static void sync_report(ExchangeState *st, ExchangeStep *step) {
    step->hidden = st->nranks > 1 ? st->cfg.transport->hidden(st->tp) : 0.0;
}

static void sync_finish(ExchangeState *st, float *params) {
    (void)st, (void)params; /* every bucket completes within its iteration */
}

static void sync_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = *applied = st->updates;
}

static void sync_destroy(ExchangeState *st) {
    st->cfg.transport->destroy(st->tp);
    free(st);
}

const ExchangeOps sync_exchange = {
    .name = "sync",
    .reads = "transport,overlap,bucket-mb", .pipeline_ok = 1,
    .lockstep = 1,
    .device_ok = 1,
    .create = sync_create,
    .role = sync_role,
    .exchange = sync_average,
    .serve = NULL,
    .finish = sync_finish,
    .counts = sync_counts,
    .destroy = sync_destroy,
    .grads_ready = sync_grads_ready,
    .report = sync_report,
};
