/* zero.h - the sharded exchanges' common state and steps (comm/zero.c: zero1 and zero2; comm/
 * zero3.c: zero3), inside comm/ only. The buckets, shards and the steps are described in zero.c. */
#ifndef DTBENCH_ZERO_H
#define DTBENCH_ZERO_H

#include "coll.h"
#include "communicator.h"
#include "exchange.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t lo, n; /* the bucket: grads[lo .. lo + n) */
    size_t tail;  /* its first `tail` (< P) floats go through the scratch (the lowest bucket) */
    size_t shard; /* its blocks' length: (n - tail) / P */
    size_t own;   /* this rank's block: [own, own + shard) */
    size_t soff;  /* where the block's state begins in m[] and v[] */
    size_t tsoff; /* where this rank's tail element's state is (rank < tail) */
} ZBucket;

struct ExchangeState {
    ExchangeConfig cfg;
    int stage; /* 1, 2 or 3 */
    Communicator comm;
    int world;     /* the ranks exchanging (cfg->comm) */
    int P, rank;   /* the ranks a bucket is sharded over (all, or a node's: hier), this one's */
    Coll *rs, *ag; /* reduce-scatters (wire type) and all-gathers (fp32); NULL when P is 1 */
    Coll *x;       /* hier: the shards' allreduce across the nodes (wire type); NULL: one node */
    ZBucket *b;    /* b[0] the highest: the order the reduce-scatters are started in */
    int nb;
    int started; /* buckets whose reduce-scatter was started this iteration */
    int last_rs; /* the last reduce-scatter's ticket this iteration (-1: none) */
    size_t shard_floats;
    float *m, *v;    /* the optimizer's state for this rank's shard (v: AdamW's second moment) */
    float *scratch;  /* [P] the tail's reduce-scatter and all-gather */
    int64_t updates; /* this strategy's own count when cfg->steps is NULL */
    double bytes_rs, bytes_ag, bytes_ar;
    /* zero3 (zero3.c): each bucket's parameters gathered now (held[k]), all of them held while
     * `pinned` (an evaluation, the end), the collectives' time and payload since the last
     * exchange, and the page size the released pages are counted in */
    unsigned char *held; /* 0: released, 1: gathered, 2: its prefetch in flight */
    int pinned;
    double t_ag, t_rs, ag_bytes, rs_bytes;
    size_t page;
    /* zero3's prefetch (--param-prefetch on): the groups the first iteration's calls read, in
     * call order (trace[call * nb + k]: call reads bucket k), 1 once recorded (0: recording; -1:
     * an iteration ran other calls: no prefetch from then on); this iteration's call; the
     * prefetch in flight (its last ticket, -1: none; the tail through gscratch), when it was
     * issued and when its completion was first seen; the in-flight time hidden behind compute
     * since the last exchange, and the last iteration's (ExchangeStep.hidden) */
    int prefetch;
    unsigned char *trace, *need, *next;
    int ncalls, traced, call, pf_last, pf_tail;
    double pf_issue, pf_seen, t_hidden, hidden;
    float *gscratch;
};

#define ZERO_OPS (&coll_mpi)

/* Collective over cfg->comm: the state of stage 1, 2 or 3, or NULL with a one-line reason. */
ExchangeState *zero_create(const ExchangeConfig *cfg, int stage, char *err, size_t errlen);
void zero_destroy(ExchangeState *st);
void zero_plan_shards(ExchangeState *st);
/* Bucket k's reduce-scatter (its blocks in place, its tail through the scratch). */
void zero_start_bucket(ExchangeState *st, float *grads, int k);
/* hier: this rank's blocks summed with their replicas on the other nodes, blocking. */
void zero_allreduce_shards(ExchangeState *st, float *grads);
/* The optimizer's step on this rank's blocks, the sums' 1/world folded in. */
void zero_update_shard(ExchangeState *st, float *params, float *grads);
/* Bucket k's parameters from their owners to every rank, fp32, blocking. */
void zero_gather_bucket(ExchangeState *st, float *params, int k);
int zero_role(ExchangeState *st, int *index, int *count);
void zero_counts(ExchangeState *st, int64_t *pushed, int64_t *applied);
size_t zero_shard_size(ExchangeState *st);

#endif
