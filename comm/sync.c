/* sync.c - synchronous data-parallel exchange: every iteration the gradients of all ranks are
 * averaged in buckets of --bucket-mb, in place, so every rank applies the same update. The
 * averaging itself is the transport's (--transport: comm/transport_*.c, on host or device
 * memory). Buckets are cut from the END of the gradient buffer, since backward produces the last
 * layers' gradients first: with --overlap a bucket starts as soon as backward has finished every
 * gradient in it (grads_ready), the rest when backward is done; without, all start then. The
 * buckets started after backward run with the library's blocking collectives
 * (TransportConfig.blocking), once those started during backward have completed (buckets.h).
 *
 * Wait versus transfer: the end of backward is marked first (the engine's backward_done: what
 * exchange_hidden is measured against), then a one-int allreduce (the stop vote) runs; it cannot
 * complete before the last rank has arrived, so the time blocked in it is the arrival imbalance
 * (wait), and the buckets completed after it are the data movement (transfer). */
#include "calibrate.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"

#include <stdlib.h>

struct ExchangeState {
    ExchangeConfig cfg;
    Communicator comm;
    int nranks;
    int64_t updates;
    BucketEngine *eng;
    double grad_scale;   /* what the gradients still need after the exchange (exchange_engine) */
    size_t started_from; /* buckets cover grads[started_from .. nparams) this iteration */
};

static ExchangeState *sync_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    communicator_init(&st->comm, cfg->comm, cfg->topo);
    st->nranks = st->comm.size;
    st->eng = exchange_engine(cfg, cfg->comm, &st->comm.topo, 1, &st->grad_scale);
    st->started_from = cfg->nparams;
    return st;
}

static int sync_role(ExchangeState *st, int *index, int *count) {
    *index = st->comm.rank;
    *count = st->nranks;
    return EXCHANGE_WORKER;
}

/* Starts every bucket lying entirely in grads[first .. nparams) not yet started. */
static void start_buckets(ExchangeState *st, float *grads, size_t first) {
    size_t bucket = st->cfg.bucket_floats;
    while (st->started_from > first) {
        size_t hi = st->started_from, lo = bucket_lo(hi, bucket);
        if (lo < first) break; /* not all of it is final yet */
        buckets_start(st->eng, grads + lo, hi - lo);
        st->started_from = lo;
    }
}

static void sync_grads_ready(ExchangeState *st, float *grads, size_t first) {
    /* first == 0: backward has ended; the last buckets start in exchange(), with the blocking
     * collectives when nothing else was started (a non-blocking start now would hide nothing
     * and run with the slower algorithms: LeNet's single bucket) */
    if (st->nranks == 1 || !st->cfg.overlap || first == 0) return;
    start_buckets(st, grads, first);
    buckets_progress(st->eng);
}

static int sync_average(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    (void)params;
    size_t n = st->cfg.nparams;
    if (st->nranks > 1) buckets_backward_done(st->eng); /* before any waiting */
    step->wait = communicator_vote(st->cfg.comm, step->stop_requested, &step->stop);
    if (st->nranks > 1) {
        start_buckets(st, grads, 0);
        buckets_finish(st->eng);
    }
    st->started_from = n;
    double bytes = st->nranks > 1 ? (double)n * grad_dtype_size(st->cfg.grad_dtype) : 0.0;
    step->bytes_sent = step->bytes_recv = bytes;
    step->staleness = 0;
    step->version = (double)++st->updates;
    step->grad_scale = st->nranks > 1 ? st->grad_scale : 1.0;
    return EXCHANGE_APPLY_UPDATE;
}

static void sync_report(ExchangeState *st, ExchangeStep *step) {
    step->hidden = st->nranks > 1 ? buckets_hidden(st->eng) : 0.0;
}

static void sync_finish(ExchangeState *st, float *params) {
    (void)st, (void)params; /* every bucket completes within its iteration */
}

static void sync_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = *applied = st->updates;
}

static void sync_calibrate(ExchangeState *st, float *buf, int iters, ExchangeCalibration *out) {
    const ExchangeConfig *c = &st->cfg;
    transport_calibrate(st->eng, c->comm, c->be, c->ctx, buf, c->nparams, c->bucket_floats, iters,
                        c->overlap, out);
    double w = (double)grad_dtype_size(c->grad_dtype) / sizeof(float); /* --grad-dtype's bytes */
    out->bucket_bytes *= w, out->bytes *= w, out->algbw *= w, out->busbw *= w;
}

static void sync_destroy(ExchangeState *st) {
    buckets_destroy(st->eng);
    communicator_free(&st->comm);
    free(st);
}

const ExchangeOps sync_exchange = {
    .name = "sync",
    .reads = "transport,overlap,progress,bucket-mb,calibrate-iters,grad-dtype",
    .pipeline_ok = 1,
    .same_update = 1,
    .in_flight = IN_FLIGHT_OVERLAP,
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
    .calibrate = sync_calibrate,
};
