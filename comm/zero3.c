/* zero3.c - ZeRO's stage 3, --exchange zero3 (PyTorch FSDP's FULL_SHARD; with --transport hier
 * its HYBRID_SHARD): the parameters sharded too, each rank holding between uses only its shard of
 * them (zero.c's buckets and blocks) with that shard's optimizer state.
 *
 * Groups: zero.c's buckets (--bucket-mb, cut from the end of the flat buffer, each sharded in P
 * blocks). A layer's parameters may straddle two buckets, and a bucket may hold many layers: the
 * group gathered for a layer is every bucket its parameters touch. Per iteration:
 *   forward:  before each layer (the driver's observer calls params_needed with the layer's
 *             ranges: its weights and bias, and the table a tied head multiplies by), the
 *             buckets it reads are all-gathered (blocking, in forward order), and the gathered
 *             buckets it does not read are released;
 *   backward: the same before each layer's backward (in backward order); as soon as backward has
 *             produced all of a bucket's gradients (grads_ready), the bucket is reduce-scattered
 *             (blocking) and its gradients outside this rank's block released;
 *   exchange: the rest of the reduce-scatters, hier's allreduce of the shards across the nodes,
 *             the optimizer's step on this rank's blocks (zero.c), then every bucket's parameters
 *             outside this rank's block released. No all-gather here: the next forward gathers.
 * The gathers are blocking and run in order: the next bucket's gather is not prefetched while a
 * layer computes (not built; it would need a non-blocking all-gather driven during the layer's
 * compute, and a second bucket held).
 *
 * Release: the model keeps its one flat parameter buffer and its gradient buffer (every layer's
 * pointers into them stay valid); a bucket's pages outside this rank's block are handed back to
 * the kernel with madvise(MADV_DONTNEED). Read again, they are fresh zero pages, which a gather
 * (parameters) or backward (gradients, overwritten) fills before anything reads them, so the
 * process's resident memory really drops. Only whole pages inside the bucket and outside the block
 * are released: at most two pages per bucket boundary and per block stay, and the lowest bucket's
 * tail (< P floats) stays. Correctness never depends on a release (a gather overwrites every
 * float outside the block): where madvise fails the pages just stay resident.
 *
 * Evaluations run different numbers of batches on different ranks, so the driver holds every
 * parameter gathered around one (params_hold), as finish() leaves them at the end.
 *
 * Records: ExchangeStep.allgather and allgather_bytes count the gathers since the last exchange
 * (the forward's and the backward's, which lie inside those phases), reduce_scatter and its bytes
 * every reduce-scatter of the iteration (during backward and after it). */
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_now */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"
#include "zero.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define OPS ZERO_OPS

/* Hands back the whole pages of buf[lo, hi) (floats). */
static void release_range(const ExchangeState *st, float *buf, size_t lo, size_t hi) {
    if (hi <= lo) return;
    const uintptr_t pg = (uintptr_t)st->page;
    uintptr_t a = ((uintptr_t)(buf + lo) + pg - 1) & ~(pg - 1),
              e = (uintptr_t)(buf + hi) & ~(pg - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED); /* failed: the pages stay */
}

/* Bucket k's floats outside this rank's block and the tail. */
static void release_bucket(const ExchangeState *st, float *buf, int k) {
    const ZBucket *b = &st->b[k];
    release_range(st, buf, b->lo + b->tail, b->own);
    release_range(st, buf, b->own + b->shard, b->lo + b->n);
}

static void gather(ExchangeState *st, float *params, int k) {
    const ZBucket *b = &st->b[k];
    zero_gather_bucket(st, params, k);
    st->held[k] = 1;
    st->ag_bytes += ((double)(b->n - b->tail) + (b->tail ? (double)st->P : 0.0)) * sizeof(float);
}

static ExchangeState *zero3_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    ExchangeState *st = zero_create(cfg, 3, err, errlen);
    if (!st) return NULL;
    st->held = xcalloc((size_t)st->nb + 1, 1);
    for (int k = 0; k < st->nb; k++)
        st->held[k] = 1; /* every rank starts with the same whole parameters */
    long pg = sysconf(_SC_PAGESIZE);
    st->page = pg > 0 ? (size_t)pg : 4096;
    return st;
}

static int overlaps(const ZBucket *b, const size_t *lohi, int n) {
    for (int i = 0; i < n; i++)
        if (b->lo < lohi[2 * i + 1] && lohi[2 * i] < b->lo + b->n) return 1;
    return 0;
}

/* Gathers the buckets the layer reads (lowest first: forward order), releases the others held. */
static void zero3_params_needed(ExchangeState *st, float *params, const size_t *lohi, int n) {
    if (!st->ag || st->pinned) return; /* one rank per shard: nothing is ever released */
    for (int k = 0; k < st->nb; k++)
        if (st->held[k] && !overlaps(&st->b[k], lohi, n)) {
            release_bucket(st, params, k);
            st->held[k] = 0;
        }
    double t = dt_now();
    for (int k = st->nb - 1; k >= 0; k--)
        if (!st->held[k] && overlaps(&st->b[k], lohi, n)) gather(st, params, k);
    st->t_ag += dt_now() - t;
}

static void zero3_params_hold(ExchangeState *st, float *params, int hold) {
    if (!st->ag) return;
    st->pinned = 0;
    if (!hold) return;
    const double t = st->t_ag, bytes = st->ag_bytes;
    for (int k = st->nb - 1; k >= 0; k--)
        if (!st->held[k]) gather(st, params, k);
    st->t_ag = t, st->ag_bytes = bytes; /* not the iteration's */
    st->pinned = 1;
}

/* Reduce-scatters every bucket backward has finished (grads[first ..) final), blocking, and
 * releases its gradients outside this rank's block. */
static void reduce_scatter_from(ExchangeState *st, float *grads, size_t first) {
    double t = dt_now();
    while (st->started < st->nb && st->b[st->started].lo >= first) {
        const int k = st->started++;
        const ZBucket *b = &st->b[k];
        zero_start_bucket(st, grads, k);
        if (st->last_rs >= 0) OPS->wait(st->rs, st->last_rs);
        release_bucket(st, grads, k);
        st->rs_bytes += ((double)(b->n - b->tail) + (b->tail ? (double)st->P : 0.0)) *
                        (double)grad_dtype_size(st->cfg.grad_dtype);
    }
    st->t_rs += dt_now() - t;
}

static void zero3_grads_ready(ExchangeState *st, float *grads, size_t first) {
    if (st->rs) reduce_scatter_from(st, grads, first);
}

static int zero3_step(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    step->wait = communicator_vote(st->cfg.comm, step->stop_requested, &step->stop);
    if (st->rs) reduce_scatter_from(st, grads, 0);
    double t1 = dt_now();
    if (st->x) zero_allreduce_shards(st, grads);
    double t2 = dt_now();
    zero_update_shard(st, params, grads);
    if (st->ag)
        for (int k = 0; k < st->nb; k++) {
            if (st->held[k]) release_bucket(st, params, k);
            st->held[k] = 0;
        }
    st->started = 0;
    step->reduce_scatter = st->t_rs;
    step->allreduce = st->x ? t2 - t1 : 0.0;
    step->allgather = st->t_ag;
    step->reduce_scatter_bytes = st->rs_bytes;
    step->allreduce_bytes = st->bytes_ar;
    step->allgather_bytes = st->ag_bytes;
    step->bytes_sent = step->bytes_recv = st->rs_bytes + st->bytes_ar + st->ag_bytes;
    st->t_rs = st->t_ag = st->rs_bytes = st->ag_bytes = 0.0;
    step->staleness = 0;
    step->version = (double)++st->updates;
    step->grad_scale = 1.0;
    return EXCHANGE_PARAMS_UPDATED;
}

static void zero3_report(ExchangeState *st, ExchangeStep *step) {
    step->hidden = 0.0; /* every collective blocks the compute it lies in */
    if (st->x) (void)OPS->hidden(st->x);
    if (st->rs) (void)OPS->hidden(st->rs), (void)OPS->hidden(st->ag);
    st->last_rs = -1;
}

static void zero3_finish(ExchangeState *st, float *params) {
    zero3_params_hold(st, params, 1); /* every rank ends with the whole parameters */
}

/* The shard, and at most the largest bucket gathered beside it (a layer straddling buckets reads
 * two or more: the plan counts the largest one, as FSDP counts its largest unit). */
static void zero3_held_floats(ExchangeState *st, size_t *params, size_t *grads) {
    size_t big = 0;
    for (int k = 0; k < st->nb; k++)
        if (st->b[k].n > big) big = st->b[k].n;
    *params = *grads = st->ag ? st->shard_floats + big : st->cfg.nparams;
}

const ExchangeOps zero3_exchange = {
    .name = "zero3",
    .reads = "transport,overlap,bucket-mb,grad-dtype", /* overlap: implied (grads_ready) */
    .transports = "mpi,hier",
    .shards_optimizer = 1,
    .shards_params = 1,
    .overlaps = 1,
    .lockstep = 1,
    .device_ok = 1, /* host memory only: refused on a device (src/run/resolve.c) */
    .create = zero3_create,
    .role = zero_role,
    .exchange = zero3_step,
    .finish = zero3_finish,
    .counts = zero_counts,
    .destroy = zero_destroy,
    .grads_ready = zero3_grads_ready,
    .report = zero3_report,
    .shard_size = zero_shard_size,
    .params_needed = zero3_params_needed,
    .params_hold = zero3_params_hold,
    .held_floats = zero3_held_floats,
};
