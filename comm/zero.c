/* zero.c - sharded data parallelism: ZeRO's stages 1 and 2 (DeepSpeed's numbers), --exchange zero1
 * (the optimizer's state sharded) and zero2 (also the reduced gradients: PyTorch FSDP's
 * SHARD_GRAD_OP). Every rank holds the whole parameters; each updates only its shard of them, with
 * its shard of the optimizer's state, which only it holds. Stage 3 (zero3.c) shares the state
 * (zero.h), the buckets and the steps below.
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
 * --transport hier (FSDP's HYBRID_SHARD): P is then the node's ranks, the buckets sharded inside
 * each node and replicated across the nodes. Between 1 and 2, each rank's blocks (and its tail
 * element) are summed with their replicas on the other nodes: an allreduce between the ranks of
 * this local rank, blocking, in the wire type. These are the sums sync over hier makes (its
 * reduce-scatter inside the node, then the allreduce of the shard across the nodes), and the
 * step folds in 1/(all ranks), so both train the same parameters.
 *
 * Memory: the optimizer's state is 1/P per rank (plus at most one element; hier: 1/(node's ranks)).
 * The model's gradient buffer stays whole: backward writes every gradient into it, and a rank keeps
 * only its blocks' sums there, the rest being left undefined by the reduce-scatter. DeepSpeed's
 * stage 2 frees each bucket's gradients once reduced, which needs a backward that writes its
 * gradients per bucket; here zero2 differs from zero1 in when the reduce-scatters run, not in the
 * memory held.
 *
 * Records: ExchangeStep.reduce_scatter and allgather time the two collectives after backward on
 * the host clock (the optimizer's step lies between them, inside the exchange phase; on a device
 * its kernels are waited for before the all-gather, which would wait for them anyway), hidden the
 * reduce-scatters' work before the end of backward (zero2). */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xcalloc */
#include "clock.h"     /* defines: dt_now */
#include "fail.h"      /* defines: check_fail */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"
#include "zero.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPS ZERO_OPS

/* Buckets of B floats (a multiple of P) cut from the end; the lowest takes the rest. */
void zero_plan_shards(ExchangeState *st) {
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
    const double wire = (double)grad_dtype_size(st->cfg.grad_dtype);
    st->bytes_ag = P > 1 ? st->bytes_rs * sizeof(float) : 0.0;
    st->bytes_rs = P > 1 ? st->bytes_rs * wire : 0.0;
    st->bytes_ar = st->x ? (double)at * wire : 0.0;
}

/* hier (FSDP's HYBRID_SHARD): buckets sharded over the node's ranks (*shard_comm), each shard
 * averaged with its replicas on the other nodes, the ranks of this local rank (*cross; NULL with
 * one node). Every node must have as many ranks (shard l of each node meets the others' l). */
static int hybrid_comms(ExchangeState *st, MPI_Comm *shard_comm, MPI_Comm *cross, char *err,
                        size_t errlen) {
    const Topology *t = &st->comm.topo;
    int sizes[2] = {t->local_size, -t->local_size};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, st->cfg.comm));
    if (sizes[0] != -sizes[1]) {
        snprintf(err, errlen,
                 "--transport hier: nodes have between %d and %d ranks; --exchange zero%d shards "
                 "inside a node and needs the same number on every node (group them with "
                 "--ranks-per-node)",
                 -sizes[1], sizes[0], st->stage);
        return -1;
    }
    *shard_comm = t->node_comm;
    if (t->nnodes > 1) MPI_CHECK(MPI_Comm_split(st->cfg.comm, t->local_rank, t->rank, cross));
    return 0;
}

ExchangeState *zero_create(const ExchangeConfig *cfg, int stage, char *err, size_t errlen) {
    const char *tname = cfg->transport ? cfg->transport->name : "mpi";
    const int hybrid = !strcmp(tname, "hier");
    if (!hybrid && strcmp(tname, "mpi") != 0) {
        snprintf(err, errlen,
                 "--transport: '%s' is not accepted with --exchange zero%d: expected mpi or hier",
                 tname, stage);
        return NULL;
    }
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    st->stage = stage;
    communicator_init(&st->comm, cfg->comm, cfg->topo);
    st->world = st->comm.size;
    st->last_rs = -1;
    MPI_Comm shard_comm = cfg->comm, cross = MPI_COMM_NULL;
    if (hybrid && hybrid_comms(st, &shard_comm, &cross, err, errlen) != 0) {
        zero_destroy(st);
        return NULL;
    }
    MPI_CHECK(MPI_Comm_size(shard_comm, &st->P));
    MPI_CHECK(MPI_Comm_rank(shard_comm, &st->rank));
    const BackendOps *be = cfg->be;
    TransportConfig tc = {.comm = shard_comm,
                          .topo = &st->comm.topo,
                          .be = be,
                          .ctx = cfg->ctx,
                          .scale = 1.0f,
                          .grad_dtype = cfg->grad_dtype,
                          .progress_thread = stage == 2 && cfg->progress_thread};
    if (st->P > 1) st->rs = transport_coll(OPS, shard_comm, &tc, be->device_memory);
    tc.progress_thread = 0; /* the others run after backward, blocking */
    if (cross != MPI_COMM_NULL) {
        st->x = transport_coll(OPS, cross, &tc, be->device_memory);
        OPS->set_blocking(st->x, 1);
        MPI_CHECK(MPI_Comm_free(&cross)); /* the Coll holds a duplicate */
    }
    if (st->P > 1) {
        tc.grad_dtype = 0;
        st->ag = transport_coll(OPS, shard_comm, &tc, be->device_memory);
        OPS->set_blocking(st->ag, 1);
        if (stage != 2) OPS->set_blocking(st->rs, 1); /* zero3: zero3.c */
    }
    zero_plan_shards(st);
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

int zero_role(ExchangeState *st, int *index, int *count) {
    *index = st->comm.rank; /* the batch is split over every rank, whatever the shards */
    *count = st->world;
    return EXCHANGE_WORKER;
}

/* Bucket k's reduce-scatter: its blocks in place, its tail through the scratch. */
void zero_start_bucket(ExchangeState *st, float *grads, int k) {
    const ZBucket *b = &st->b[k];
    if (b->shard)
        st->last_rs = OPS->reduce_scatter(st->rs, grads + b->lo + b->tail, b->shard, 1.0f);
    if (b->tail) {
        const BackendOps *be = st->cfg.be;
        be->zero(st->cfg.ctx, st->scratch + b->tail, ((size_t)st->P - b->tail) * sizeof(float));
        OPS->copy(st->rs, st->scratch, grads + b->lo, b->tail, COLL_WITHIN);
        st->last_rs = OPS->reduce_scatter(st->rs, st->scratch, 1, 1.0f);
    }
}

/* zero2: starts the reduce-scatter of every bucket backward has finished (grads[first ..) final).
 */
static void zero_grads_ready(ExchangeState *st, float *grads, size_t first) {
    if (!st->rs || first == 0) return; /* the rest starts in exchange(), blocking */
    while (st->started < st->nb && st->b[st->started].lo >= first)
        zero_start_bucket(st, grads, st->started++);
    if (st->last_rs >= 0) (void)OPS->done(st->rs, st->last_rs); /* progress */
}

/* Completes every bucket's reduce-scatter: those started during backward first, then the rest
 * with the blocking collectives. */
static void reduce_scatter_all(ExchangeState *st, float *grads) {
    if (st->last_rs >= 0) OPS->wait(st->rs, st->last_rs);
    if (st->stage == 2) OPS->set_blocking(st->rs, 1);
    while (st->started < st->nb)
        zero_start_bucket(st, grads, st->started++);
    if (st->last_rs >= 0) OPS->wait(st->rs, st->last_rs);
    if (st->stage == 2) OPS->set_blocking(st->rs, 0);
}

/* hier: each of this rank's blocks (and its tail element) summed with its replicas on the other
 * nodes, blocking. Every rank of the cross communicator has this local rank, hence these blocks. */
void zero_allreduce_shards(ExchangeState *st, float *grads) {
    int last = -1;
    for (int k = 0; k < st->nb; k++) {
        const ZBucket *b = &st->b[k];
        if (b->shard) last = OPS->allreduce(st->x, grads + b->own, b->shard, 1.0f);
        if ((size_t)st->rank < b->tail) /* P > 1 here: the tail is in the scratch */
            last = OPS->allreduce(st->x, st->scratch + st->rank, 1, 1.0f);
    }
    if (last >= 0) OPS->wait(st->x, last);
}

/* The optimizer's step on this rank's blocks, with the sums' 1/world folded in (driver.c). */
void zero_update_shard(ExchangeState *st, float *params, float *grads) {
    const ExchangeConfig *c = &st->cfg;
    Optimizer o = c->optim;
    const double gs = st->world > 1 ? (double)(1.0f / (float)st->world) : 1.0; /* sync's */
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

/* Bucket k's blocks (and its tail) from every rank to all, fp32, blocking. */
void zero_gather_bucket(ExchangeState *st, float *params, int k) {
    const ZBucket *b = &st->b[k];
    int last = -1;
    if (b->shard) last = OPS->allgather(st->ag, params + b->lo + b->tail, b->shard);
    if (b->tail) {
        if ((size_t)st->rank < b->tail)
            OPS->copy(st->ag, st->scratch + st->rank, params + b->lo + st->rank, 1, COLL_WITHIN);
        last = OPS->allgather(st->ag, st->scratch, 1);
        OPS->wait(st->ag, last); /* before the copy back reads it */
        last = OPS->copy(st->ag, params + b->lo, st->scratch, b->tail, COLL_WITHIN);
    }
    if (last >= 0) OPS->wait(st->ag, last);
}

/* Every rank's updated blocks to all. */
static void allgather_all(ExchangeState *st, float *params) {
    for (int k = 0; k < st->nb; k++)
        zero_gather_bucket(st, params, k);
}

static int zero_exchange(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    if (st->rs) OPS->mark_backward_end(st->rs);
    step->wait = communicator_vote(st->cfg.comm, step->stop_requested, &step->stop);
    double t0 = dt_now();
    if (st->rs) reduce_scatter_all(st, grads);
    double t1 = dt_now();
    if (st->x) zero_allreduce_shards(st, grads);
    double t2 = dt_now();
    zero_update_shard(st, params, grads);
    if (st->world > 1 && st->cfg.be->device_memory) st->cfg.be->synchronize(st->cfg.ctx);
    double t3 = dt_now();
    if (st->ag) allgather_all(st, params);
    double t4 = dt_now();
    st->started = 0;
    step->reduce_scatter = st->rs ? t1 - t0 : 0.0;
    step->allreduce = st->x ? t2 - t1 : 0.0;
    step->allgather = st->ag ? t4 - t3 : 0.0;
    step->reduce_scatter_bytes = st->bytes_rs;
    step->allreduce_bytes = st->bytes_ar;
    step->allgather_bytes = st->bytes_ag;
    step->bytes_sent = step->bytes_recv = st->bytes_rs + st->bytes_ar + st->bytes_ag;
    step->staleness = 0;
    step->version = (double)++st->updates;
    step->grad_scale = 1.0;
    return EXCHANGE_PARAMS_UPDATED;
}

/* The reduce-scatters' work before the end of backward; forgets the iteration's operations. */
static void zero_report(ExchangeState *st, ExchangeStep *step) {
    step->hidden = 0.0;
    if (st->x) (void)OPS->hidden(st->x);
    if (!st->rs) return;
    step->hidden = OPS->hidden(st->rs);
    (void)OPS->hidden(st->ag);
    st->last_rs = -1;
}

static void zero_finish(ExchangeState *st, float *params) {
    (void)st, (void)params; /* every collective completes within its iteration */
}

void zero_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = *applied = st->updates;
}

size_t zero_shard_size(ExchangeState *st) {
    return st->shard_floats;
}

void zero_destroy(ExchangeState *st) {
    const BackendOps *be = st->cfg.be;
    if (st->rs) OPS->destroy(st->rs), OPS->destroy(st->ag);
    if (st->x) OPS->destroy(st->x);
    float *bufs[] = {st->m, st->v, st->scratch};
    for (int i = 0; i < 3; i++)
        if (bufs[i]) be->free(st->cfg.ctx, bufs[i]);
    communicator_free(&st->comm);
    free(st->b), free(st->held);
    free(st->trace), free(st->need), free(st->gscratch);
    free(st);
}

const ExchangeOps zero1_exchange = {
    .name = "zero1",
    .reads = "transport,bucket-mb,grad-dtype",
    .transports = "mpi,hier",
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
    .transports = "mpi,hier",
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
