/* zero.c - sharded data parallelism: ZeRO's stages 1 and 2 (DeepSpeed's numbers), --exchange zero1
 * (the optimizer's state sharded) and zero2 (also the reduced gradients: PyTorch FSDP's
 * SHARD_GRAD_OP). Every rank holds the whole parameters; each updates only its shard of them, with
 * its shard of the optimizer's state, which only it holds.
 *
 * Shards: the gradient buffer is cut into buckets from its END, as sync cuts it (backward produces
 * the last layers' gradients first), of --bucket-mb rounded down to a multiple of the P ranks (at
 * least P floats). Each bucket is sharded as FSDP shards a flat parameter: rank r owns the r-th of
 * its P equal blocks. Only the lowest bucket (the first parameters) may not divide by P: its first
 * t < P floats, the tail, go through a scratch of P floats, rank r < t owning element r. A rank
 * thus owns one block of every bucket and at most one element more: the ranks' shards differ by
 * at most one element, in every bucket and in all.
 *
 * Per iteration, after the stop vote (which times the ranks' arrival: ExchangeStep.wait, as in
 * sync.c):
 *   1. reduce-scatter: each bucket's sum over the ranks lands in its owner's block, in place in
 *      the gradient buffer (in --grad-dtype on the wire). zero1: every bucket after backward, with
 *      the library's blocking collectives; zero2: each bucket as soon as backward has produced all
 *      of it (grads_ready, non-blocking, what --overlap does for sync), the rest after backward.
 *   2. update: the run's optimizer (SGD with momentum, or AdamW with the model's decay runs cut to
 *      each block: optimizer_update) on this rank's blocks, with the state allocated here for them
 *      only, its step t counted in cfg->steps as the driver counts its own. The sums' 1/P is folded
 *      into the step as the driver folds sync's (src/run/driver.c: SGD's lr x 1/P and weight decay
 *      x P, AdamW's eps x P), so the parameters are sync's bit for bit where the sums are.
 *   3. all-gather: every rank's updated blocks to all, in fp32, blocking. The parameters are then
 *      up to date on every rank (EXCHANGE_PARAMS_UPDATED).
 * The reduce-scatters and the all-gathers run on two duplicates of the communicator (coll_mpi,
 * staging device buffers through the host): the gradients' in the wire type, the parameters'
 * always in fp32.
 *
 * Memory: the optimizer's state is 1/P per rank (plus at most one element). The model's gradient
 * buffer stays whole: backward writes every gradient into it, and a rank keeps only its blocks'
 * sums there, the rest being left undefined by the reduce-scatter. DeepSpeed's stage 2 frees each
 * bucket's gradients once reduced, which needs a backward that writes its gradients per bucket;
 * here zero2 differs from zero1 in when the reduce-scatters run, not in the memory held.
 *
 * Records: ExchangeStep.reduce_scatter and allgather time the two collectives after backward on
 * the host clock (the optimizer's step lies between them, inside the exchange phase; on a device
 * its kernels are waited for before the all-gather, which would wait for them anyway), hidden the
 * reduce-scatters' work before the end of backward (zero2). */
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_now */
#include "fail.h"  /* defines: check_fail */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t lo, n;  /* the bucket: grads[lo .. lo + n) */
    size_t tail;   /* its first `tail` (< P) floats go through the scratch (the lowest bucket) */
    size_t shard;  /* its blocks' length: (n - tail) / P */
    size_t own;    /* this rank's block: [own, own + shard) */
    size_t soff;   /* where the block's state begins in m[] and v[] */
    size_t tsoff;  /* where this rank's tail element's state is (rank < tail) */
} ZBucket;

struct ExchangeState {
    ExchangeConfig cfg;
    int stage; /* 1 or 2 */
    Communicator comm;
    int P, rank;
    Coll *rs, *ag; /* reduce-scatters (wire type) and all-gathers (fp32); NULL on one rank */
    ZBucket *b;    /* b[0] the highest: the order the reduce-scatters are started in */
    int nb;
    int started; /* buckets whose reduce-scatter was started this iteration */
    int last_rs; /* the last reduce-scatter's ticket this iteration (-1: none) */
    size_t shard_floats;
    float *m, *v;    /* the optimizer's state for this rank's shard (v: AdamW's second moment) */
    float *scratch;  /* [P] the tail's reduce-scatter and all-gather */
    int64_t updates; /* this strategy's own count when cfg->steps is NULL */
    double bytes_rs, bytes_ag;
};

static const CollOps *const OPS = &coll_mpi;

/* Buckets of B floats (a multiple of P) cut from the end; the lowest takes the rest. */
static void plan_shards(ExchangeState *st) {
    const size_t N = st->cfg.nparams, P = (size_t)st->P;
    size_t B = st->cfg.bucket_floats / P * P;
    if (B < P) B = P;
    st->nb = N ? (int)((N + B - 1) / B) : 0;
    st->b = xcalloc((size_t)st->nb + 1, sizeof(ZBucket));
    size_t hi = N, at = 0;
    for (int k = 0; k < st->nb; k++) {
        ZBucket *b = &st->b[k];
        b->lo = hi > B ? hi - B : 0, b->n = hi - b->lo;
        b->tail = b->n % P, b->shard = (b->n - b->tail) / P;
        b->own = b->lo + b->tail + (size_t)st->rank * b->shard;
        b->soff = at, at += b->shard;
        if ((size_t)st->rank < b->tail) b->tsoff = at++;
        st->bytes_rs += (double)(b->n - b->tail) + (b->tail ? (double)P : 0.0);
        hi = b->lo;
    }
    st->shard_floats = at;
    st->bytes_ag = st->bytes_rs * sizeof(float);
    st->bytes_rs *= (double)grad_dtype_size(st->cfg.grad_dtype);
}

static ExchangeState *zero_create(const ExchangeConfig *cfg, int stage, char *err, size_t errlen) {
    const char *tname = cfg->transport ? cfg->transport->name : "mpi";
    if (strcmp(tname, "mpi") != 0) {
        snprintf(err, errlen, "--transport: '%s' is not accepted with --exchange zero%d: expected mpi",
                 tname, stage);
        return NULL;
    }
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    st->stage = stage;
    communicator_init(&st->comm, cfg->comm, cfg->topo);
    st->P = st->comm.size, st->rank = st->comm.rank;
    st->last_rs = -1;
    const BackendOps *be = cfg->be;
    if (st->P > 1) {
        TransportConfig tc = {.comm = cfg->comm,
                              .topo = &st->comm.topo,
                              .be = be,
                              .ctx = cfg->ctx,
                              .scale = 1.0f,
                              .grad_dtype = cfg->grad_dtype,
                              .progress_thread = stage == 2 && cfg->progress_thread};
        st->rs = transport_coll(OPS, cfg->comm, &tc, be->device_memory);
        tc.grad_dtype = 0, tc.progress_thread = 0;
        st->ag = transport_coll(OPS, cfg->comm, &tc, be->device_memory);
        OPS->set_blocking(st->ag, 1);
        if (stage == 1) OPS->set_blocking(st->rs, 1);
    }
    plan_shards(st);
    size_t bytes = (st->shard_floats ? st->shard_floats : 1) * sizeof(float);
    st->m = be->alloc(cfg->ctx, bytes); /* zeroed */
    if (cfg->optim.kind == OPTIMIZER_ADAMW) st->v = be->alloc(cfg->ctx, bytes);
    st->scratch = be->alloc(cfg->ctx, (size_t)st->P * sizeof(float));
    if (!st->m || (cfg->optim.kind == OPTIMIZER_ADAMW && !st->v) || !st->scratch)
        check_fail(__FILE__, __LINE__, "alloc", "the optimizer's state of the shard");
    return st;
}

static ExchangeState *zero1_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    return zero_create(cfg, 1, err, errlen);
}

static ExchangeState *zero2_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    return zero_create(cfg, 2, err, errlen);
}

static int zero_role(ExchangeState *st, int *index, int *count) {
    *index = st->rank;
    *count = st->P;
    return EXCHANGE_WORKER;
}

/* Bucket k's reduce-scatter: its blocks in place, its tail through the scratch. */
static void start_bucket(ExchangeState *st, float *grads, int k) {
    const ZBucket *b = &st->b[k];
    if (b->shard) st->last_rs = OPS->reduce_scatter(st->rs, grads + b->lo + b->tail, b->shard, 1.0f);
    if (b->tail) {
        const BackendOps *be = st->cfg.be;
        be->zero(st->cfg.ctx, st->scratch + b->tail, ((size_t)st->P - b->tail) * sizeof(float));
        OPS->copy(st->rs, st->scratch, grads + b->lo, b->tail, COLL_WITHIN);
        st->last_rs = OPS->reduce_scatter(st->rs, st->scratch, 1, 1.0f);
    }
}

/* zero2: starts the reduce-scatter of every bucket backward has finished (grads[first ..) final). */
static void zero_grads_ready(ExchangeState *st, float *grads, size_t first) {
    if (st->P == 1 || first == 0) return; /* the rest starts in exchange(), blocking */
    while (st->started < st->nb && st->b[st->started].lo >= first)
        start_bucket(st, grads, st->started++);
    if (st->last_rs >= 0) (void)OPS->done(st->rs, st->last_rs); /* progress */
}

/* Completes every bucket's reduce-scatter: those started during backward first, then the rest
 * with the blocking collectives. */
static void reduce_scatter_all(ExchangeState *st, float *grads) {
    if (st->last_rs >= 0) OPS->wait(st->rs, st->last_rs);
    if (st->stage == 2) OPS->set_blocking(st->rs, 1);
    while (st->started < st->nb)
        start_bucket(st, grads, st->started++);
    if (st->last_rs >= 0) OPS->wait(st->rs, st->last_rs);
    if (st->stage == 2) OPS->set_blocking(st->rs, 0);
}

/* The optimizer's step on this rank's blocks, with the sums' 1/P folded in (driver.c). */
static void update_shard(ExchangeState *st, float *params, float *grads) {
    const ExchangeConfig *c = &st->cfg;
    Optimizer o = c->optim;
    const double gs = st->P > 1 ? (double)(1.0f / (float)st->P) : 1.0; /* sync's grad_scale */
    if (o.kind == OPTIMIZER_ADAMW)
        o.eps = (float)(o.eps / gs);
    else
        o.lr = (float)(o.lr * gs), o.weight_decay = (float)(o.weight_decay / gs);
    const int64_t t = c->steps ? ++*c->steps : st->updates + 1;
    for (int k = 0; k < st->nb; k++) {
        const ZBucket *b = &st->b[k];
        if (b->shard)
            optimizer_update(c->be, c->ctx, &o, t, b->own, b->shard, params + b->own,
                             grads + b->own, st->m + b->soff, st->v ? st->v + b->soff : NULL);
        if ((size_t)st->rank < b->tail) {
            const size_t i = b->lo + (size_t)st->rank;
            const float *g = st->P > 1 ? st->scratch + st->rank : grads + i;
            optimizer_update(c->be, c->ctx, &o, t, i, 1, params + i, g, st->m + b->tsoff,
                             st->v ? st->v + b->tsoff : NULL);
        }
    }
}

/* Every rank's updated blocks to all, fp32, blocking. */
static void allgather_all(ExchangeState *st, float *params) {
    int last = -1;
    for (int k = 0; k < st->nb; k++) {
        const ZBucket *b = &st->b[k];
        if (b->shard) last = OPS->allgather(st->ag, params + b->lo + b->tail, b->shard);
        if (!b->tail) continue;
        if ((size_t)st->rank < b->tail)
            OPS->copy(st->ag, st->scratch + st->rank, params + b->lo + st->rank, 1, COLL_WITHIN);
        last = OPS->allgather(st->ag, st->scratch, 1);
        OPS->wait(st->ag, last); /* before the copy back reads it */
        last = OPS->copy(st->ag, params + b->lo, st->scratch, b->tail, COLL_WITHIN);
    }
    if (last >= 0) OPS->wait(st->ag, last);
}

static int zero_exchange(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    const int many = st->P > 1;
    if (many) OPS->mark_backward_end(st->rs);
    step->wait = communicator_vote(st->cfg.comm, step->stop_requested, &step->stop);
    double t0 = dt_now();
    if (many) reduce_scatter_all(st, grads);
    double t1 = dt_now();
    update_shard(st, params, grads);
    if (many && st->cfg.be->device_memory) st->cfg.be->synchronize(st->cfg.ctx);
    double t2 = dt_now();
    if (many) allgather_all(st, params);
    double t3 = dt_now();
    st->started = 0;
    step->reduce_scatter = many ? t1 - t0 : 0.0;
    step->allgather = many ? t3 - t2 : 0.0;
    step->reduce_scatter_bytes = many ? st->bytes_rs : 0.0;
    step->allgather_bytes = many ? st->bytes_ag : 0.0;
    step->bytes_sent = step->bytes_recv = step->reduce_scatter_bytes + step->allgather_bytes;
    step->staleness = 0;
    step->version = (double)++st->updates;
    step->grad_scale = 1.0;
    return EXCHANGE_PARAMS_UPDATED;
}

/* The reduce-scatters' work before the end of backward; forgets the iteration's operations. */
static void zero_report(ExchangeState *st, ExchangeStep *step) {
    step->hidden = 0.0;
    if (st->P == 1) return;
    step->hidden = OPS->hidden(st->rs);
    (void)OPS->hidden(st->ag);
    st->last_rs = -1;
}

static void zero_finish(ExchangeState *st, float *params) {
    (void)st, (void)params; /* every collective completes within its iteration */
}

static void zero_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = *applied = st->updates;
}

static size_t zero_shard_size(ExchangeState *st) {
    return st->shard_floats;
}

static void zero_destroy(ExchangeState *st) {
    const BackendOps *be = st->cfg.be;
    if (st->rs) OPS->destroy(st->rs), OPS->destroy(st->ag);
    be->free(st->cfg.ctx, st->m);
    if (st->v) be->free(st->cfg.ctx, st->v);
    be->free(st->cfg.ctx, st->scratch);
    communicator_free(&st->comm);
    free(st->b);
    free(st);
}

const ExchangeOps zero1_exchange = {
    .name = "zero1",
    .reads = "transport,bucket-mb,grad-dtype",
    .transports = "mpi",
    .shards_optimizer = 1,
    .lockstep = 1,
    .device_ok = 1,
    .create = zero1_create,
    .role = zero_role,
    .exchange = zero_exchange,
    .finish = zero_finish,
    .counts = zero_counts,
    .destroy = zero_destroy,
    .report = zero_report,
    .shard_size = zero_shard_size,
};

const ExchangeOps zero2_exchange = {
    .name = "zero2",
    .reads = "transport,overlap,progress,bucket-mb,grad-dtype",
    .transports = "mpi",
    .shards_optimizer = 1,
    .overlaps = 1,
    .in_flight = IN_FLIGHT_OVERLAP,
    .lockstep = 1,
    .device_ok = 1,
    .create = zero2_create,
    .role = zero_role,
    .exchange = zero_exchange,
    .finish = zero_finish,
    .counts = zero_counts,
    .destroy = zero_destroy,
    .grads_ready = zero_grads_ready,
    .report = zero_report,
    .shard_size = zero_shard_size,
};
