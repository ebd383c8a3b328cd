/* buckets.c - the bucket engine of the exchange transports (see buckets.h). */
#include "alloc.h" /* defines: xcalloc, xrealloc */
#include "buckets.h"

#include <stdlib.h>
#include <string.h>

/* One piece of a bucket: the whole bucket (flat), its main part, or its tail (hierarchical). */
typedef struct {
    float *work;  /* where the collectives run: the caller's buffer, or the tail scratch */
    float *dst;   /* tail: the caller's floats the scratch stands for */
    size_t count; /* the caller's floats in this piece */
    size_t shard; /* floats per intra rank (hierarchical) */
    int tail;
    int ready;      /* intra ticket after which step 2 may be posted */
    int top_ticket; /* step 2 (flat: the allreduce) */
    /* kept across iterations for the piece at this position */
    float *scratch; /* tail: L floats of intra memory, zero beyond count */
    float *host;    /* staged: host copy of this rank's shard */
    size_t host_cap;
} Piece;

struct BucketEngine {
    const CollOps *io, *to; /* intra (NULL: flat) and top level */
    Coll *intra, *top;
    int staged;
    int L, lrank, N; /* node size, rank in the node, nodes */
    float scale;     /* what the sum is multiplied by: 1/P, or 1 (the caller scales) */
    Piece *pieces;
    int npieces, cap;
    int top_next; /* next piece whose step 2 is to be posted */
    int finished; /* finish() ran: the next start() begins an iteration */
    int measured; /* hidden() ran since finish() */
    int blocking; /* buckets started after backward use the blocking collectives */
    int drain;    /* backward_done ran with buckets in flight: complete them before the next */
};

/* The compute stream and a level's collectives, ordered where the level runs on a stream of its
 * own (CollOps.after_compute, before_compute; NULL: nothing to order). */
static void after_compute(const CollOps *ops, Coll *c) {
    if (ops->after_compute) ops->after_compute(c);
}
static void before_compute(const CollOps *ops, Coll *c) {
    if (ops->before_compute) ops->before_compute(c);
}

/* Blocking (1) or non-blocking (0) collectives from now on, where the Coll offers the choice. */
static void set_blocking(BucketEngine *p, int on) {
    if (!p->blocking) return;
    if (p->to->set_blocking) p->to->set_blocking(p->top, on);
    if (p->intra && p->io->set_blocking) p->io->set_blocking(p->intra, on);
}

/* A new iteration: forget the last one's pieces; buckets go non-blocking until backward ends. */
static void new_iteration(BucketEngine *p) {
    if (!p->measured) buckets_hidden(p);
    p->npieces = p->top_next = 0;
    p->finished = 0;
    set_blocking(p, 0);
}

BucketEngine *buckets_create(const CollOps *intra_ops, Coll *intra, const CollOps *top_ops,
                             Coll *top, int staged, float scale, int blocking) {
    BucketEngine *p = xcalloc(1, sizeof *p);
    p->blocking = blocking;
    p->io = intra_ops, p->intra = intra, p->to = top_ops, p->top = top, p->staged = staged;
    p->L = intra ? intra->size : 1;
    p->lrank = intra ? intra->rank : 0;
    p->N = top->size;
    p->scale = scale;
    p->measured = 1;
    return p;
}

static Piece *new_piece(BucketEngine *p) {
    if (p->npieces == p->cap) {
        int cap = p->cap ? 2 * p->cap : 16;
        p->pieces = xrealloc(p->pieces, (size_t)cap * sizeof(Piece));
        memset(p->pieces + p->cap, 0, (size_t)(cap - p->cap) * sizeof(Piece));
        p->cap = cap;
    }
    return &p->pieces[p->npieces++];
}

/* Step 1 of a hierarchical piece, and the copy of its shard to the host when staged. */
static void start_piece(BucketEngine *p, Piece *pc) {
    const CollOps *io = p->io;
    float *mine = pc->work + (size_t)p->lrank * pc->shard;
    if (pc->tail) io->copy(p->intra, pc->work, pc->dst, pc->count, COLL_WITHIN);
    pc->ready = io->reduce_scatter(p->intra, pc->work, pc->shard, p->N > 1 ? 1.0f : p->scale);
    if (p->N > 1 && p->staged) {
        if (pc->host_cap < pc->shard) { /* pinned, from an on-device level's backend */
            const Coll *in = p->intra;
            if (pc->host) in->be->host_free(in->ctx, pc->host);
            pc->host = in->be->host_alloc(in->ctx, pc->shard * sizeof(float));
            pc->host_cap = pc->shard;
        }
        pc->ready = io->copy(p->intra, pc->host, mine, pc->shard, COLL_TO_HOST);
    }
}

static void add_hier_piece(BucketEngine *p, float *buf, size_t count, int tail) {
    Piece *pc = new_piece(p);
    pc->tail = tail, pc->count = count, pc->dst = buf;
    pc->shard = tail ? 1 : count / (size_t)p->L;
    if (tail) {
        if (!pc->scratch) { /* zeroed on the backend's compute stream: the level waits for it */
            pc->scratch = p->intra->be->alloc(p->intra->ctx, (size_t)p->L * sizeof(float));
            after_compute(p->io, p->intra);
        }
        pc->work = pc->scratch;
    } else {
        pc->work = buf;
    }
    start_piece(p, pc);
}

static void drain(BucketEngine *p);

void buckets_start(BucketEngine *p, float *buf, size_t n) {
    if (p->finished) new_iteration(p);
    if (n == 0) return;
    if (p->drain) { /* before the first blocking collective */
        drain(p);
        p->drain = 0;
        set_blocking(p, 1);
    }
    if (!p->intra) { /* flat */
        after_compute(p->to, p->top);
        Piece *pc = new_piece(p);
        pc->work = buf, pc->count = n;
        pc->top_ticket = p->to->allreduce(p->top, buf, n, p->scale);
        p->top_next = p->npieces;
        return;
    }
    after_compute(p->io, p->intra);
    size_t main = n / (size_t)p->L * (size_t)p->L;
    if (main) add_hier_piece(p, buf, main, 0);
    if (n > main) add_hier_piece(p, buf + main, n - main, 1);
    buckets_progress(p);
}

/* Step 2 of piece i (its step 1 is complete). */
static void post_top(BucketEngine *p, Piece *pc) {
    float *data = p->staged ? pc->host : pc->work + (size_t)p->lrank * pc->shard;
    pc->top_ticket = p->to->allreduce(p->top, data, pc->shard, p->scale);
}

void buckets_progress(BucketEngine *p) {
    if (p->npieces == 0) return;
    if (!p->intra) { /* flat: let MPI progress the allreduces (NCCL: a cheap event query) */
        (void)p->to->done(p->top, p->pieces[p->npieces - 1].top_ticket);
        return;
    }
    if (p->N == 1) { /* no step 2: let MPI progress the steps 1 */
        p->top_next = p->npieces;
        (void)p->io->done(p->intra, p->pieces[p->npieces - 1].ready);
        return;
    }
    while (p->top_next < p->npieces && p->io->done(p->intra, p->pieces[p->top_next].ready))
        post_top(p, &p->pieces[p->top_next++]);
    if (p->top_next > 0) /* let MPI progress the posted ones */
        (void)p->to->done(p->top, p->pieces[p->top_next - 1].top_ticket);
}

/* Completes every collective started so far (during backward), posting the steps 2 of
 * hierarchical pieces on the way. */
static void drain(BucketEngine *p) {
    Piece *last = &p->pieces[p->npieces - 1];
    if (!p->intra) {
        p->to->wait(p->top, last->top_ticket);
        return;
    }
    if (p->N == 1) {
        p->io->wait(p->intra, last->ready);
        return;
    }
    for (; p->top_next < p->npieces; p->top_next++) {
        p->io->wait(p->intra, p->pieces[p->top_next].ready);
        post_top(p, &p->pieces[p->top_next]);
    }
    p->to->wait(p->top, last->top_ticket);
}

void buckets_backward_done(BucketEngine *p) {
    if (p->finished) new_iteration(p); /* no bucket started during backward */
    if (p->intra) p->io->mark_backward_end(p->intra);
    p->to->mark_backward_end(p->top);
    /* The buckets started from here on use the blocking collectives (Open MPI's tuned ones,
     * faster than libnbc's non-blocking ones) when every level offers them. MPI matches a
     * non-blocking collective only with non-blocking ones on the other ranks, and when a step 2
     * is posted (progress or finish) depends on timing: every collective of a bucket started
     * during backward stays non-blocking, and those are completed (drain) before the first
     * blocking one, at the next start(). Not here: the caller times the arrival wait after this
     * mark (sync's stop vote), and in-flight collectives cannot complete before the last rank
     * arrives. Their transfer is exposed either way; the rest runs at the blocking speed. */
    int can = p->blocking && p->to->set_blocking && (!p->intra || p->io->set_blocking);
    p->drain = p->npieces && can;
    set_blocking(p, p->npieces == 0);
}

void buckets_alone(BucketEngine *p, float *buf, size_t n) {
    float scale = p->scale;
    int blocking = p->blocking;
    p->scale = 1.0f, p->blocking = 1;
    buckets_backward_done(p);
    buckets_start(p, buf, n);
    buckets_finish(p);
    buckets_hidden(p);
    set_blocking(p, 0);
    p->scale = scale, p->blocking = blocking;
}

void buckets_finish(BucketEngine *p) {
    p->drain = 0;    /* everything is waited for below */
    if (!p->intra) { /* host: wait (and scale); device: the compute stream will wait */
        if (!p->top->on_device)
            for (int i = 0; i < p->npieces; i++)
                p->to->wait(p->top, p->pieces[i].top_ticket);
        before_compute(p->to, p->top);
        p->finished = 1, p->measured = 0;
        return;
    }
    const CollOps *io = p->io;
    if (p->N > 1)
        for (; p->top_next < p->npieces; p->top_next++) {
            Piece *pc = &p->pieces[p->top_next];
            io->wait(p->intra, pc->ready);
            post_top(p, pc);
        }
    /* On the host, an operation takes its input when issued (coll.h): wait for the step it
     * reads. On the device, stream order does it. */
    const int host = !p->intra->on_device;
    for (int i = 0; i < p->npieces; i++) { /* steps 3, in bucket order */
        Piece *pc = &p->pieces[i];
        float *mine = pc->work + (size_t)p->lrank * pc->shard;
        if (p->N > 1) {
            p->to->wait(p->top, pc->top_ticket);
            if (p->staged) io->copy(p->intra, mine, pc->host, pc->shard, COLL_FROM_HOST);
        } else if (host) {
            io->wait(p->intra, pc->ready);
        }
        int gathered = io->allgather(p->intra, pc->work, pc->shard);
        if (pc->tail) {
            if (host) io->wait(p->intra, gathered);
            io->copy(p->intra, pc->dst, pc->work, pc->count, COLL_WITHIN);
        }
    }
    before_compute(io, p->intra);
    if (host && p->npieces) /* host: the results are in place on return */
        io->wait(p->intra, INT32_MAX);
    p->finished = 1, p->measured = 0;
}

double buckets_hidden(BucketEngine *p) {
    double h = p->to->hidden(p->top);
    if (p->intra) h += p->io->hidden(p->intra);
    p->measured = 1;
    return h;
}

double buckets_busbw_factor(const BucketEngine *p) {
    return 2.0 * (p->L - 1) / p->L + 2.0 * (p->N - 1) / p->N / p->L;
}

int buckets_can_block(const BucketEngine *p) {
    return p->to->set_blocking || (p->intra && p->io->set_blocking);
}

void buckets_destroy(BucketEngine *p) {
    if (!p) return;
    for (int i = 0; i < p->cap; i++) {
        if (p->pieces[i].scratch) p->intra->be->free(p->intra->ctx, p->pieces[i].scratch);
        if (p->pieces[i].host) p->intra->be->host_free(p->intra->ctx, p->pieces[i].host);
    }
    free(p->pieces);
    if (p->intra) p->io->destroy(p->intra);
    p->to->destroy(p->top);
    free(p);
}
