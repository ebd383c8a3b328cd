/* ssp.c - stale-synchronous allreduce (--exchange ssp --staleness S): the bucket engine with a
 * delay. The average of iteration t is started right after t's backward, through the transport
 * (non-blocking collectives), and completed only at iteration t+S, so S iterations of compute
 * can overlap it; iteration t+S applies the averaged gradient of t (staleness S). S = 0 is the
 * synchronous exchange.
 *
 * Ring of S+1 slots, each a bucket engine of its own (its own duplicate of the communicator, so the
 * generations in flight never mix) and a buffer of [nparams + 1] floats: the gradient copy, then
 * the stop vote, so the vote posted at t is learnt by every rank at t+S and all stop after the
 * same iteration. finish() completes the S averages still in flight and applies them with the
 * run's optimizer (AdamW: steps counted on from the driver's, ExchangeConfig.steps): no update
 * is lost. Open MPI progresses non-blocking collectives only inside MPI calls: each iteration
 * progresses the slots in flight. */
#include "calibrate.h"
#include "alloc.h" /* defines: xmalloc, xcalloc */
#include "clock.h" /* defines: dt_now */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float *buf; /* [nparams + 1] */
    BucketEngine *eng;
    int64_t iteration; /* -1: empty */
} Slot;

struct ExchangeState {
    ExchangeConfig cfg;
    Communicator comm;
    int nranks, S;
    Slot *slots;     /* [S + 1] */
    int64_t applied; /* updates applied (= parameter version) */
    int64_t pushed;
    int64_t last_started; /* iteration of the newest average posted */
};

static ExchangeState *ssp_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    st->S = cfg->staleness;
    communicator_init(&st->comm, cfg->comm, cfg->topo);
    st->nranks = st->comm.size;
    st->slots = xcalloc((size_t)st->S + 1, sizeof(Slot));
    for (int i = 0; i <= st->S; i++) {
        st->slots[i].buf = xmalloc((cfg->nparams + 1) * sizeof(float));
        st->slots[i].eng = exchange_engine(cfg, cfg->comm, &st->comm.topo, st->S == 0, NULL);
        st->slots[i].iteration = -1;
    }
    st->last_started = -1;
    return st;
}

static int ssp_role(ExchangeState *st, int *index, int *count) {
    *index = st->comm.rank;
    *count = st->nranks;
    return EXCHANGE_WORKER;
}

static void start(ExchangeState *st, Slot *s, int64_t it) {
    size_t n = st->cfg.nparams + 1, bucket = st->cfg.bucket_floats;
    if (st->nranks > 1) {
        buckets_backward_done(s->eng);
        for (size_t hi = n; hi > 0; hi = bucket_lo(hi, bucket))
            buckets_start(s->eng, s->buf + bucket_lo(hi, bucket), hi - bucket_lo(hi, bucket));
    }
    s->iteration = it;
    st->last_started = it;
    st->pushed++;
}

/* Completes slot s; returns the seconds blocked. Its buffer then holds the average, the vote. */
static double complete(ExchangeState *st, Slot *s) {
    double t = dt_now();
    if (st->nranks > 1) {
        buckets_finish(s->eng);
        (void)buckets_hidden(s->eng);
    }
    s->iteration = -1;
    return dt_now() - t;
}

static int ssp_step(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    (void)params;
    size_t n = st->cfg.nparams;
    int64_t t = step->iteration;
    Slot *now = &st->slots[t % (st->S + 1)];
    memcpy(now->buf, grads, n * sizeof(float));
    now->buf[n] = (float)(step->stop_requested != 0);
    start(st, now, t);
    size_t wire = grad_dtype_size(st->cfg.grad_dtype); /* the vote travels in the wire type too */
    step->bytes_sent = step->bytes_recv = st->nranks > 1 ? (double)(n + 1) * wire : 0.0;

    for (int i = 0; i <= st->S && st->nranks > 1; i++) /* let the averages in flight advance */
        if (st->slots[i].iteration >= 0) buckets_progress(st->slots[i].eng);
    if (t < st->S) { /* nothing old enough to apply yet */
        step->staleness = 0, step->version = (double)st->applied, step->wait = 0, step->stop = 0;
        return EXCHANGE_PARAMS_UPDATED;
    }
    Slot *old = &st->slots[(t - st->S) % (st->S + 1)];
    step->wait = complete(st, old);
    step->stop = old->buf[n] > 0.0f;
    memcpy(grads, old->buf, n * sizeof(float));
    step->staleness = st->S;
    step->version = (double)++st->applied;
    return EXCHANGE_APPLY_UPDATE;
}

/* Applies, oldest first, every average still in flight (the last S iterations). */
static void ssp_finish(ExchangeState *st, float *params) {
    const ExchangeConfig *c = &st->cfg;
    for (int64_t it = st->last_started - st->S + 1; it <= st->last_started; it++) {
        if (it < 0) continue;
        Slot *s = &st->slots[it % (st->S + 1)];
        if (s->iteration != it) continue;
        complete(st, s);
        const int64_t t = c->steps ? ++*c->steps : st->applied + 1;
        optimizer_update(c->be, c->ctx, &c->optim, t, 0, c->nparams, params, s->buf, c->velocity,
                         c->variance);
        st->applied++;
    }
}

static void ssp_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = st->pushed;
    *applied = st->applied;
}

static void ssp_destroy(ExchangeState *st) {
    for (int i = 0; i <= st->S; i++) {
        buckets_destroy(st->slots[i].eng);
        free(st->slots[i].buf);
    }
    free(st->slots);
    communicator_free(&st->comm);
    free(st);
}

const ExchangeOps ssp_exchange = {
    .name = "ssp",
    .in_flight = IN_FLIGHT_STALENESS,
    .reads = "staleness,bucket-mb,transport,progress,grad-dtype",
    .delays_grads = 1,
    .lockstep = 1,
    .device_ok = 0,
    .create = ssp_create,
    .role = ssp_role,
    .exchange = ssp_step,
    .serve = NULL,
    .finish = ssp_finish,
    .counts = ssp_counts,
    .destroy = ssp_destroy,
};
