/* ssp.c - stale-synchronous allreduce (--exchange ssp --staleness S): the allreduce of iteration
 * t is started (MPI_Iallreduce) right after t's backward and completed only at iteration t+S, so
 * S iterations of compute can overlap it; iteration t+S applies the averaged gradient of t
 * (staleness S). S = 0 is the synchronous exchange.
 *
 * Ring of S+1 buffers, each [nparams + 1] floats: the gradient copy, then the stop vote, so the
 * vote posted at t is learnt by every rank at t+S and all stop after the same iteration.
 * finish() completes the S allreduces still in flight and applies them: no update is lost.
 * Open MPI progresses nonblocking collectives only inside MPI calls; each iteration tests the
 * requests in flight to let them advance. */
#include "check.h"
#include "exchange.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float *buf;        /* [nparams + 1] */
    MPI_Request *reqs; /* one per bucket */
    int nreqs;
    int64_t iteration; /* -1: empty */
} Slot;

struct ExchangeState {
    ExchangeConfig cfg;
    int nranks, S;
    Slot *slots;     /* [S + 1] */
    int64_t applied; /* updates applied (= parameter version) */
    int64_t pushed;
    int64_t last_started; /* iteration of the newest allreduce posted */
};

static ExchangeState *ssp_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    st->S = cfg->staleness;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &st->nranks));
    size_t n = cfg->nparams + 1;
    int nbuckets = (int)((n + cfg->bucket_floats - 1) / cfg->bucket_floats);
    st->slots = xcalloc((size_t)st->S + 1, sizeof(Slot));
    for (int i = 0; i <= st->S; i++) {
        st->slots[i].buf = xmalloc(n * sizeof(float));
        st->slots[i].reqs = xcalloc((size_t)nbuckets, sizeof(MPI_Request));
        st->slots[i].nreqs = nbuckets;
        st->slots[i].iteration = -1;
        for (int b = 0; b < nbuckets; b++)
            st->slots[i].reqs[b] = MPI_REQUEST_NULL;
    }
    st->last_started = -1;
    return st;
}

static int ssp_role(ExchangeState *st, int *index, int *count) {
    MPI_CHECK(MPI_Comm_rank(st->cfg.comm, index));
    *count = st->nranks;
    return EXCHANGE_WORKER;
}

static void start(ExchangeState *st, Slot *s, int64_t it) {
    size_t n = st->cfg.nparams + 1, bucket = st->cfg.bucket_floats;
    for (int b = 0; b < s->nreqs; b++) {
        size_t off = (size_t)b * bucket, count = n - off < bucket ? n - off : bucket;
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, s->buf + off, (int)count, MPI_FLOAT, MPI_SUM,
                                 st->cfg.comm, &s->reqs[b]));
    }
    s->iteration = it;
    st->last_started = it;
    st->pushed++;
}

/* Completes slot s; returns the seconds blocked. Its buffer then holds sum of gradients, vote. */
static double complete(ExchangeState *st, Slot *s) {
    double t = dt_now();
    MPI_CHECK(MPI_Waitall(s->nreqs, s->reqs, MPI_STATUSES_IGNORE));
    double waited = dt_now() - t;
    float scale = 1.0f / (float)st->nranks;
    for (size_t i = 0; i < st->cfg.nparams; i++)
        s->buf[i] *= scale;
    s->iteration = -1;
    return waited;
}

static int ssp_step(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    (void)params;
    size_t n = st->cfg.nparams;
    int64_t t = step->iteration;
    Slot *now = &st->slots[t % (st->S + 1)];
    memcpy(now->buf, grads, n * sizeof(float));
    now->buf[n] = (float)(step->stop_requested != 0);
    start(st, now, t);
    step->bytes_sent = step->bytes_recv = st->nranks > 1 ? (double)(n + 1) * sizeof(float) : 0.0;

    /* Let the allreduces in flight advance (Open MPI has no progress thread). */
    for (int i = 0; i <= st->S; i++) {
        Slot *s = &st->slots[i];
        int done;
        if (s != now && s->iteration >= 0)
            MPI_CHECK(MPI_Testall(s->nreqs, s->reqs, &done, MPI_STATUSES_IGNORE));
    }
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

/* Applies, oldest first, every allreduce still in flight (the last S iterations). */
static void ssp_finish(ExchangeState *st, float *params) {
    const ExchangeConfig *c = &st->cfg;
    for (int64_t it = st->last_started - st->S + 1; it <= st->last_started; it++) {
        if (it < 0) continue;
        Slot *s = &st->slots[it % (st->S + 1)];
        if (s->iteration != it) continue;
        complete(st, s);
        c->be->sgd_update(c->ctx, c->nparams, params, s->buf, c->velocity, c->lr, c->momentum,
                          c->weight_decay);
        st->applied++;
    }
}

static void ssp_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = st->pushed;
    *applied = st->applied;
}

static void ssp_destroy(ExchangeState *st) {
    for (int i = 0; i <= st->S; i++)
        free(st->slots[i].buf), free(st->slots[i].reqs);
    free(st->slots);
    free(st);
}

const ExchangeOps ssp_exchange = {
    .name = "ssp",
    .reads = "staleness,bucket-mb",
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
