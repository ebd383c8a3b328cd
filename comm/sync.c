/* sync.c - synchronous data-parallel exchange: every iteration the gradients of all ranks are
 * averaged in buckets of --bucket-mb, in place, so every rank applies the same update. The
 * averaging itself is the transport's (--transport: comm/transport_*.c, on host or device
 * memory). Buckets are cut from the END of the gradient buffer, since backward produces the last
 * layers' gradients first: with --overlap a bucket starts as soon as backward has finished every
 * gradient in it (grads_ready), the rest when backward is done; without, all start then. */
#include "check.h"
#include "exchange.h"
#include "util.h"

#include <stdlib.h>

struct ExchangeState {
    ExchangeConfig cfg;
    int nranks;
    Transport *tp;
    size_t started_from; /* buckets cover grads[started_from .. nparams) this iteration */
};

static ExchangeState *sync_create(const ExchangeConfig *cfg)
{
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    if (!st->cfg.transport) st->cfg.transport = &mpi_transport;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &st->nranks));
    TransportConfig tc = {cfg->comm, cfg->topo, cfg->be, cfg->ctx};
    st->tp = st->cfg.transport->create(&tc);
    st->started_from = cfg->nparams;
    return st;
}

/* Starts every bucket lying entirely in grads[first .. nparams) not yet started. Bucket k covers
 * [n - (k+1)*B, n - k*B), the last one starting at 0. */
static void start_buckets(ExchangeState *st, float *grads, size_t first)
{
    size_t bucket = st->cfg.bucket_floats;
    while (st->started_from > first) {
        size_t hi = st->started_from, lo = hi > bucket ? hi - bucket : 0;
        if (lo < first) break; /* not all of it is final yet */
        st->cfg.transport->start(st->tp, grads + lo, hi - lo);
        st->started_from = lo;
    }
}

static void sync_grads_ready(ExchangeState *st, float *grads, size_t first)
{
    if (st->nranks == 1 || !st->cfg.overlap) return;
    start_buckets(st, grads, first);
    st->cfg.transport->progress(st->tp);
}

static int sync_average(ExchangeState *st, float *params, float *grads, ExchangeStep *step)
{
    (void)params;
    size_t n = st->cfg.nparams;
    /* The stop vote travels beside the gradients: one int, MAX over the ranks. */
    MPI_Request vote;
    int stop_local = step->stop_requested, stop_any = stop_local;
    MPI_CHECK(MPI_Iallreduce(&stop_local, &stop_any, 1, MPI_INT, MPI_MAX, st->cfg.comm, &vote));
    if (st->nranks > 1) {
        st->cfg.transport->backward_done(st->tp);
        start_buckets(st, grads, 0);
        st->cfg.transport->finish(st->tp);
    }
    st->started_from = n;
    MPI_CHECK(MPI_Wait(&vote, MPI_STATUS_IGNORE));
    step->stop = stop_any;
    step->bytes_sent = st->nranks > 1 ? (double)n * sizeof(float) : 0.0;
    return EXCHANGE_APPLY_UPDATE;
}

static void sync_report(ExchangeState *st, ExchangeStep *step)
{
    step->hidden = st->nranks > 1 ? st->cfg.transport->hidden(st->tp) : 0.0;
}

static void sync_finish(ExchangeState *st)
{
    (void)st; /* every bucket completes within its iteration */
}

static void sync_destroy(ExchangeState *st)
{
    st->cfg.transport->destroy(st->tp);
    free(st);
}

const ExchangeOps sync_exchange = {
    .name = "sync",
    .create = sync_create,
    .exchange = sync_average,
    .finish = sync_finish,
    .destroy = sync_destroy,
    .grads_ready = sync_grads_ready,
    .report = sync_report,
};
