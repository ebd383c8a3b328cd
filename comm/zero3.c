/* zero3.c - ZeRO's stage 3, --exchange zero3 (PyTorch FSDP's FULL_SHARD; with --transport hier
 * its HYBRID_SHARD): the parameters sharded too, each rank holding between uses only its shard of
 * them (zero.c's buckets and blocks) with that shard's optimizer state.
 *
 * Groups: zero.c's buckets (--bucket-mb, cut from the end of the flat buffer, each sharded in P
 * blocks). A layer's parameters may straddle two buckets, and a bucket may hold many layers: the
 * group gathered for a layer is every bucket its parameters touch. Per iteration:
 *   forward:  before each layer (the driver's observer calls params_needed with the layer's
 *             ranges: its weights and bias, and the table a tied head multiplies by), the
 *             buckets it reads are gathered (waited for where prefetched, else all-gathered,
 *             blocking, in forward order), and the gathered buckets it does not read are
 *             released, but the next group;
 *   backward: the same before each layer's backward (in backward order); as soon as backward has
 *             produced all of a bucket's gradients (grads_ready), the bucket is reduce-scattered
 *             (blocking) and its gradients outside this rank's block released;
 *   exchange: the rest of the reduce-scatters, hier's allreduce of the shards across the nodes,
 *             the optimizer's step on this rank's blocks (zero.c), then every bucket's parameters
 *             outside this rank's block released. No all-gather here: the next forward gathers.
 *
 * Prefetch (--param-prefetch on, the default: FSDP's forward_prefetch with backward_prefetch
 * BACKWARD_PRE): the first iteration records the group each call reads, in call order (forward
 * order, then backward order: FSDP records its execution order the same way). From the second
 * on, once a layer's group is gathered, the next group (the first later call's that reads a
 * bucket this one does not) is all-gathered without waiting (MPI_Iallgather on the all-gathers'
 * communicator; its tail through a scratch of its own) while the layer computes, and waited for
 * when a call needs one of its buckets or another gather must be issued (one prefetch in flight:
 * at most the current group and the next one held). It progresses inside MPI calls: the wait,
 * and a test between backward's layers (grads_ready). An iteration whose calls are not the
 * first's (none in the driver) stops the prefetch for the run; the gathers still happen on
 * demand. The same bits are gathered, only earlier: the parameters are the same, on or off.
 * off: each group all-gathered when its layer starts, blocking (zero3 before the prefetch).
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
 * (the forward's and the backward's, which lie inside those phases: the time the rank spent in
 * them, issuing, waiting or gathering on demand), reduce_scatter and its bytes every
 * reduce-scatter of the iteration (during backward and after it); hidden the prefetches' time in
 * flight while compute ran: from issue to the completion seen by a test, or to the wait for it
 * (polled, an upper bound, as coll.h's hidden()); 0 without prefetch. */
#include "alloc.h" /* defines: xcalloc, xrealloc */
#include "clock.h" /* defines: dt_now */
#include "communicator.h"
#include "exchange.h"
#include "grad_cast.h"
#include "zero.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

static double payload(const ExchangeState *st, int k) {
    const ZBucket *b = &st->b[k];
    return ((double)(b->n - b->tail) + (b->tail ? (double)st->P : 0.0)) * sizeof(float);
}

static void gather(ExchangeState *st, float *params, int k) {
    zero_gather_bucket(st, params, k);
    st->held[k] = 1;
    st->ag_bytes += payload(st, k);
}

/* Issues bucket k's all-gather without waiting (its tail through gscratch, copied back when
 * waited for: prefetch_wait). */
static void prefetch_issue(ExchangeState *st, float *params, int k) {
    const ZBucket *b = &st->b[k];
    OPS->set_blocking(st->ag, 0);
    if (b->shard) st->pf_last = OPS->allgather(st->ag, params + b->lo + b->tail, b->shard);
    if (b->tail) {
        if ((size_t)st->rank < b->tail) st->gscratch[st->rank] = params[b->lo + (size_t)st->rank];
        st->pf_last = OPS->allgather(st->ag, st->gscratch, 1);
        st->pf_tail = k + 1;
    }
    OPS->set_blocking(st->ag, 1);
    st->held[k] = 2;
    st->ag_bytes += payload(st, k);
}

/* Completes the prefetch in flight; the time from its issue to its completion seen, or to this
 * wait if not seen before, counts as hidden (polled: an upper bound, as coll.h's hidden()). */
static void prefetch_wait(ExchangeState *st, float *params) {
    if (st->pf_last < 0) return;
    const double t = dt_now(), seen = st->pf_seen > 0 && st->pf_seen < t ? st->pf_seen : t;
    OPS->wait(st->ag, st->pf_last);
    if (st->pf_tail) {
        const ZBucket *b = &st->b[st->pf_tail - 1];
        for (size_t i = 0; i < b->tail; i++)
            params[b->lo + i] = st->gscratch[i];
    }
    for (int k = 0; k < st->nb; k++)
        if (st->held[k] == 2) st->held[k] = 1;
    st->t_hidden += seen - st->pf_issue;
    st->pf_last = -1, st->pf_tail = 0, st->pf_seen = 0.0;
}

static ExchangeState *zero3_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    ExchangeState *st = zero_create(cfg, 3, err, errlen);
    if (!st) return NULL;
    st->held = xcalloc((size_t)st->nb + 1, 1);
    for (int k = 0; k < st->nb; k++)
        st->held[k] = 1; /* every rank starts with the same whole parameters */
    long pg = sysconf(_SC_PAGESIZE);
    st->page = pg > 0 ? (size_t)pg : 4096;
    st->prefetch = cfg->param_prefetch && st->ag;
    st->need = xcalloc(2 * (size_t)st->nb + 1, 1), st->next = st->need + st->nb;
    st->gscratch = xcalloc((size_t)st->P, sizeof(float));
    st->pf_last = -1;
    return st;
}

static int overlaps(const ZBucket *b, const size_t *lohi, int n) {
    for (int i = 0; i < n; i++)
        if (b->lo < lohi[2 * i + 1] && lohi[2 * i] < b->lo + b->n) return 1;
    return 0;
}

/* The first iteration records each call's group (need); the later ones check that they make the
 * same calls, and find the next group to prefetch: the first later call's that reads a bucket
 * the current one does not. Returns 1 with it in st->next, 0 when there is none. */
static int next_group(ExchangeState *st) {
    const size_t nb = (size_t)st->nb;
    const int i = st->call++;
    if (!st->prefetch || st->traced < 0) return 0;
    if (!st->traced) {
        st->trace = xrealloc(st->trace, (size_t)(i + 1) * nb + 1);
        memcpy(st->trace + (size_t)i * nb, st->need, nb);
        st->ncalls = i + 1;
        return 0;
    }
    if (i >= st->ncalls || memcmp(st->trace + (size_t)i * nb, st->need, nb) != 0)
        return st->traced = -1, 0; /* not the first iteration's calls: prefetch no more */
    for (int j = i + 1; j < st->ncalls; j++) {
        const unsigned char *g = st->trace + (size_t)j * nb;
        for (size_t k = 0; k < nb; k++)
            if (g[k] && !st->need[k]) return memcpy(st->next, g, nb), 1;
    }
    return 0;
}

/* Gathers the buckets the layer reads (lowest first: forward order), waiting for them where
 * their prefetch is in flight; releases the others held but the next group, and issues that
 * group's gathers without waiting (--param-prefetch on). */
static void zero3_params_needed(ExchangeState *st, float *params, const size_t *lohi, int n) {
    if (!st->ag || st->pinned) return; /* one rank per shard: nothing is ever released */
    double t = dt_now();
    for (int k = 0; k < st->nb; k++)
        st->need[k] = (unsigned char)overlaps(&st->b[k], lohi, n);
    const int ahead = next_group(st);
    int issue = 0;
    for (int k = 0; k < st->nb; k++) {
        if (!ahead) st->next[k] = 0;
        issue |= (st->need[k] && st->held[k] != 1) || (st->next[k] && !st->held[k]);
    }
    if (issue) prefetch_wait(st, params); /* ag's operations complete in issue order */
    for (int k = 0; k < st->nb; k++)
        if (st->held[k] == 1 && !st->need[k] && !st->next[k]) {
            release_bucket(st, params, k);
            st->held[k] = 0;
        }
    for (int k = st->nb - 1; k >= 0; k--)
        if (!st->held[k] && st->need[k]) gather(st, params, k);
    if (ahead && st->pf_last < 0) {
        for (int k = st->nb - 1; k >= 0; k--)
            if (st->next[k] && !st->held[k]) prefetch_issue(st, params, k);
        st->pf_issue = dt_now(); /* in flight from here while the layer computes */
    }
    st->t_ag += dt_now() - t;
}

static void zero3_params_hold(ExchangeState *st, float *params, int hold) {
    if (!st->ag) return;
    st->pinned = 0;
    if (!hold) return;
    prefetch_wait(st, params);
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
    if (st->pf_last >= 0 && st->pf_seen <= 0 && OPS->done(st->ag, st->pf_last))
        st->pf_seen = dt_now(); /* polled between layers: progress, and a tighter bound */
}

static int zero3_step(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    step->wait = communicator_vote(st->cfg.comm, step->stop_requested, &step->stop);
    if (st->rs) reduce_scatter_from(st, grads, 0);
    prefetch_wait(st, params); /* none in flight when the iteration ran the traced calls */
    if (st->prefetch && !st->traced && st->ncalls) st->traced = 1;
    st->call = 0;
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
    st->hidden = st->t_hidden, st->t_hidden = 0.0;
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
    step->hidden = st->hidden; /* the prefetches' (the other collectives block) */
    if (st->x) (void)OPS->hidden(st->x);
    if (st->rs) (void)OPS->hidden(st->rs), (void)OPS->hidden(st->ag);
    st->last_rs = -1;
}

static void zero3_finish(ExchangeState *st, float *params) {
    zero3_params_hold(st, params, 1); /* every rank ends with the whole parameters */
}

/* The shard, and at most the largest bucket gathered beside it (a layer straddling buckets reads
 * two or more: the plan counts the largest one, as FSDP counts its largest unit); with prefetch
 * the parameters of the second largest too, the next group. */
static void zero3_held_floats(ExchangeState *st, size_t *params, size_t *grads) {
    size_t big = 0, second = 0;
    for (int k = 0; k < st->nb; k++)
        if (st->b[k].n > big)
            second = big, big = st->b[k].n;
        else if (st->b[k].n > second)
            second = st->b[k].n;
    *params = *grads = st->ag ? st->shard_floats + big : st->cfg.nparams;
    if (st->prefetch) *params += second; /* the prefetched group beside it */
}

const ExchangeOps zero3_exchange = {
    .name = "zero3",
    .reads = "transport,overlap,bucket-mb,grad-dtype,param-prefetch", /* overlap: implied */
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
