/* coll_mpi.c - the MPI implementation of coll.h: non-blocking MPI collectives (MPI_Iallreduce,
 * MPI_Ireduce_scatter_block, MPI_Iallgather) on a duplicate of the given communicator, or their
 * blocking forms after set_blocking(1) (buckets started after backward: Open MPI 4.1 runs the
 * blocking ones with its tuned algorithms, the non-blocking ones with libnbc's slower ones).
 *
 * Host memory (the CPU backend): operations work on the buffers in place; the scale of an
 * average, and the move of a reduce-scatter's block from the front of the buffer (where MPI's
 * in-place variant leaves it) to the rank's position (where NCCL's leaves it, and where coll.h
 * promises it), are done on completion. Device memory without a CUDA-aware MPI: each operation
 * first downloads its input with the backend (this waits for the compute stream), runs on a host
 * copy kept per operation slot (reused across iterations), and uploads the result on completion,
 * queued on the compute stream before the update. Simple and correct, not fast: the GPU path
 * meant for speed is NCCL (comm/coll_nccl.c).
 *
 * Operations of an iteration are numbered by their tickets; their slots, with the staging
 * buffers, are kept and reused by the next iteration (hidden() starts it).
 *
 * --grad-dtype bf16/fp16 (CollSettings.wire): each collective packs its fp32 input into a 2-byte wire
 * copy kept per slot, runs on it with grad_cast.c's MPI type and sum, and unpacks (and scales)
 * on completion; on device memory the cast is done on the host copy.
 *
 * --progress thread (CollSettings.progress_thread): the non-blocking operations are not MPI_I* requests that
 * only advance inside later MPI calls (polling); a progress thread of this Coll runs each one's
 * BLOCKING collective (Open MPI's tuned algorithms) as soon as it is issued, in issue order,
 * while the caller computes (Horovod's background thread). The caller still prepares the input
 * (download, wire cast) at issue and completes the result (scale, unpack, upload) in done/wait;
 * the thread only calls MPI, on this Coll's communicator, which from then on only it uses while
 * an operation is queued (blocking-mode operations run on the caller's thread once the queue is
 * empty). Needs MPI_THREAD_MULTIPLE (the caller's other communicators stay in use). */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "clock.h"     /* defines: dt_now */
#include "coll.h"
#include "grad_cast.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum { OP_ALLREDUCE, OP_REDUCE_SCATTER, OP_ALLGATHER, OP_LOCAL };

typedef struct {
    MPI_Request req; /* MPI_REQUEST_NULL: nothing in flight (local operations) */
    int kind;
    float *buf;  /* the caller's buffer (device or host memory) */
    float *data; /* what MPI works on: buf itself, or the host copy */
    size_t n;    /* floats of the result (allreduce: n; reduce-scatter: shard; all-gather: all) */
    float scale;
    double t_issue, t_done;
    float *stage; /* host copy for device memory, kept for the slot */
    size_t stage_cap;
    GradWire wire; /* --grad-dtype: the 2-byte copy MPI works on, kept for the slot */
    /* --progress thread: the MPI call the thread runs, and its state */
    void *mpi_data;
    int mpi_count;
    MPI_Datatype mpi_type;
    MPI_Op mpi_sum;
    int threaded; /* handed to the progress thread (t_done is the thread's) */
    int pending;  /* handed and not yet run (under the Coll's mutex) */
} Op;

/* The progress thread of one Coll (--progress thread). */
typedef struct {
    pthread_t tid;
    pthread_mutex_t mu;
    pthread_cond_t work, ran;
    int on;     /* the thread runs */
    int handed; /* ops[0 .. handed) are fully issued: the thread may look at them */
    int next;   /* the next op the thread looks at */
    int quit;
} Progress;

typedef struct {
    Coll pub; /* rank, size, on_device 0, the backend (coll.h) */
    MPI_Comm comm;
    int device; /* the buffers are the backend's device memory: staged through host copies */
    Op *ops;
    int nops, cap, completed; /* ops[0 .. completed) are complete */
    double bwd_end;
    int bwd_marked;
    int blocking; /* set_blocking */
    int wire;     /* GradDtype (CollSettings.wire); 0: fp32 */
    Progress pt;  /* CollSettings.progress_thread */
} MpiColl;

static MpiColl *M(Coll *c) {
    return (MpiColl *)c;
}

static void progress_start(MpiColl *c);

static Coll *mpi_create(MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                        const CollSettings *s) {
    MpiColl *c = xcalloc(1, sizeof *c);
    MPI_CHECK(MPI_Comm_dup(comm, &c->comm));
    MPI_CHECK(MPI_Comm_rank(c->comm, &c->pub.rank));
    MPI_CHECK(MPI_Comm_size(c->comm, &c->pub.size));
    c->pub.be = be, c->pub.ctx = ctx, c->device = s->device_memory;
    c->wire = s->wire;
    if (s->progress_thread) progress_start(c); /* --progress thread; else polling */
    return &c->pub;
}

static void progress_stop(MpiColl *c);

static void mpi_destroy(Coll *coll) {
    MpiColl *c = M(coll);
    progress_stop(c);
    for (int i = 0; i < c->cap; i++)
        free(c->ops[i].stage), grad_wire_free(&c->ops[i].wire);
    free(c->ops);
    MPI_Comm_free(&c->comm);
    free(c);
}

/* A new operation slot; its staging buffer holds at least `stage_floats` when device memory. */
static Op *new_op(MpiColl *c, int kind, float *buf, size_t n, float scale, size_t stage_floats) {
    if (c->nops == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        if (c->pt.on) pthread_mutex_lock(&c->pt.mu); /* the thread reads ops[] */
        c->ops = realloc(c->ops, (size_t)cap * sizeof(Op));
        ALLOC_CHECK(c->ops);
        memset(c->ops + c->cap, 0, (size_t)(cap - c->cap) * sizeof(Op));
        c->cap = cap;
        if (c->pt.on) pthread_mutex_unlock(&c->pt.mu);
    }
    Op *op = &c->ops[c->nops++];
    op->req = MPI_REQUEST_NULL;
    op->threaded = op->pending = 0;
    op->kind = kind, op->buf = buf, op->n = n, op->scale = scale, op->data = buf;
    if (c->device && stage_floats > op->stage_cap) {
        free(op->stage);
        op->stage = xmalloc(stage_floats * sizeof(float));
        op->stage_cap = stage_floats;
    }
    if (c->device) op->data = op->stage;
    op->t_issue = dt_now();
    op->t_done = op->t_issue;
    return op;
}

static int ticket_of(MpiColl *c, const Op *op) {
    return (int)(op - c->ops);
}

static void scale_host(float *x, size_t n, float s) {
    if (s != 1.0f)
        for (size_t i = 0; i < n; i++)
            x[i] *= s;
}

/* What MPI works on: op->data itself, or (--grad-dtype) its wire copy of `all` values, of which
 * [from, from + count) are packed from op->data now. */
static void *wire_in(MpiColl *c, Op *op, size_t all, size_t from, size_t count) {
    if (!c->wire) return op->data;
    uint16_t *w = grad_wire_reserve(&op->wire, all);
    grad_pack((GradDtype)c->wire, w + from, op->data + from, count);
    return w;
}

/* The result into op->data[0 .. n), scaled: from the wire copy, or in place. */
static void wire_out(MpiColl *c, Op *op, size_t n, float scale) {
    if (c->wire)
        grad_unpack((GradDtype)c->wire, op->data, op->wire.buf, n, scale);
    else
        scale_host(op->data, n, scale);
}

/* What happens when op's MPI request has completed. */
static void complete(MpiColl *c, Op *op) {
    if (!op->threaded) op->t_done = dt_now();
    size_t bytes = op->n * sizeof(float);
    switch (op->kind) {
    case OP_ALLREDUCE:
        wire_out(c, op, op->n, op->scale);
        if (c->device) c->pub.be->upload(c->pub.ctx, op->buf, op->data, bytes);
        break;
    case OP_REDUCE_SCATTER: { /* MPI left the block at the front: move it to rank*shard */
        float *block = op->data;
        wire_out(c, op, op->n, op->scale);
        size_t at = (size_t)c->pub.rank * op->n;
        if (c->device)
            c->pub.be->upload(c->pub.ctx, op->buf + at, block, bytes);
        else if (at)
            memmove(op->buf + at, block, bytes);
        break;
    }
    case OP_ALLGATHER:
        if (c->wire) wire_out(c, op, op->n, 1.0f); /* the own block too: equal on every rank */
        if (c->device) c->pub.be->upload(c->pub.ctx, op->buf, op->data, bytes);
        break;
    default:
        break;
    }
}

static void mpi_wait(Coll *coll, int ticket);

/* op's collective on `data`, blocking (*req unused) or non-blocking (into *req). */
static void run_collective(MpiColl *c, const Op *op, int blocking, MPI_Request *req) {
    void *d = op->mpi_data;
    int n = op->mpi_count;
    MPI_Datatype t = op->mpi_type;
    switch (op->kind) {
    case OP_ALLREDUCE:
        if (blocking)
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, d, n, t, op->mpi_sum, c->comm));
        else
            MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, d, n, t, op->mpi_sum, c->comm, req));
        break;
    case OP_REDUCE_SCATTER:
        if (blocking)
            MPI_CHECK(MPI_Reduce_scatter_block(MPI_IN_PLACE, d, n, t, op->mpi_sum, c->comm));
        else
            MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, d, n, t, op->mpi_sum, c->comm, req));
        break;
    case OP_ALLGATHER:
        if (blocking)
            MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d, n, t, c->comm));
        else
            MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d, n, t, c->comm, req));
        break;
    default:
        break;
    }
}

/* ---- --progress thread ------------------------------------------------------------------ */

/* Runs the handed operations' blocking collectives in issue order until told to quit. */
static void *progress_main(void *arg) {
    MpiColl *c = arg;
    Progress *pt = &c->pt;
    pthread_mutex_lock(&pt->mu);
    for (;;) {
        while (pt->next >= pt->handed && !pt->quit)
            pthread_cond_wait(&pt->work, &pt->mu);
        if (pt->next >= pt->handed) break; /* quit, nothing left */
        Op op = c->ops[pt->next];          /* a copy: ops[] may be reallocated meanwhile */
        if (!op.pending) {
            pt->next++;
            continue;
        }
        pthread_mutex_unlock(&pt->mu);
        run_collective(c, &op, 1, NULL);
        double t = dt_now();
        pthread_mutex_lock(&pt->mu);
        c->ops[pt->next].t_done = t;
        c->ops[pt->next].pending = 0;
        pt->next++;
        pthread_cond_broadcast(&pt->ran);
    }
    pthread_mutex_unlock(&pt->mu);
    return NULL;
}

static void progress_start(MpiColl *c) {
    Progress *pt = &c->pt;
    int level = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&level));
    if (level < MPI_THREAD_MULTIPLE)
        check_fail(__FILE__, __LINE__, "--progress thread",
                   "MPI was not initialised with MPI_THREAD_MULTIPLE");
    pthread_mutex_init(&pt->mu, NULL);
    pthread_cond_init(&pt->work, NULL);
    pthread_cond_init(&pt->ran, NULL);
    sigset_t all, old; /* signals go to the training thread (signals.c) */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&pt->tid, NULL, progress_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) check_fail(__FILE__, __LINE__, "pthread_create (progress)", strerror(rc));
    pt->on = 1;
}

static void progress_stop(MpiColl *c) {
    Progress *pt = &c->pt;
    if (!pt->on) return;
    pthread_mutex_lock(&pt->mu);
    pt->quit = 1;
    pthread_cond_signal(&pt->work);
    pthread_mutex_unlock(&pt->mu);
    pthread_join(pt->tid, NULL);
    pthread_mutex_destroy(&pt->mu);
    pthread_cond_destroy(&pt->work);
    pthread_cond_destroy(&pt->ran);
    pt->on = 0;
}

/* op has run (its MPI part); wait: block until it has. */
static int progress_ran(MpiColl *c, const Op *op, int wait) {
    Progress *pt = &c->pt;
    pthread_mutex_lock(&pt->mu);
    while (wait && op->pending)
        pthread_cond_wait(&pt->ran, &pt->mu);
    int ran = !op->pending;
    pthread_mutex_unlock(&pt->mu);
    return ran;
}

/* Issues op's collective on data[count]: blocking (completed on return, the result scaled while
 * in cache), handed to the progress thread, or an MPI_I* request. */
static int issue(MpiColl *c, Op *op, void *data, int count, MPI_Datatype type, MPI_Op sum) {
    op->mpi_data = data, op->mpi_count = count, op->mpi_type = type, op->mpi_sum = sum;
    int t = ticket_of(c, op);
    if (c->pt.on && !c->blocking) { /* to the progress thread */
        op->threaded = op->pending = 1;
        pthread_mutex_lock(&c->pt.mu);
        c->pt.handed = c->nops;
        pthread_cond_signal(&c->pt.work);
        pthread_mutex_unlock(&c->pt.mu);
        return t;
    }
    if (c->pt.on && t > 0) mpi_wait(&c->pub, t - 1); /* the thread must be idle on c->comm */
    run_collective(c, op, c->blocking, &op->req);
    if (c->blocking) mpi_wait(&c->pub, t);
    return t;
}

static int mpi_allreduce(Coll *coll, float *buf, size_t n, float scale) {
    MpiColl *c = M(coll);
    Op *op = new_op(c, OP_ALLREDUCE, buf, n, scale, n);
    if (c->device) c->pub.be->download(c->pub.ctx, op->data, buf, n * sizeof(float));
    void *data = wire_in(c, op, n, 0, n);
    MPI_Datatype type = grad_mpi_type((GradDtype)c->wire);
    MPI_Op sum = grad_mpi_sum((GradDtype)c->wire);
    return issue(c, op, data, (int)n, type, sum);
}

static int mpi_reduce_scatter(Coll *coll, float *buf, size_t shard, float scale) {
    MpiColl *c = M(coll);
    size_t all = shard * (size_t)c->pub.size;
    Op *op = new_op(c, OP_REDUCE_SCATTER, buf, shard, scale, all);
    if (c->device) c->pub.be->download(c->pub.ctx, op->data, buf, all * sizeof(float));
    void *data = wire_in(c, op, all, 0, all);
    MPI_Datatype type = grad_mpi_type((GradDtype)c->wire);
    MPI_Op sum = grad_mpi_sum((GradDtype)c->wire);
    return issue(c, op, data, (int)shard, type, sum);
}

static int mpi_allgather(Coll *coll, float *buf, size_t shard) {
    MpiColl *c = M(coll);
    size_t all = shard * (size_t)c->pub.size, at = (size_t)c->pub.rank * shard;
    Op *op = new_op(c, OP_ALLGATHER, buf, all, 1.0f, all);
    if (c->device) c->pub.be->download(c->pub.ctx, op->data + at, buf + at, shard * sizeof(float));
    void *data = wire_in(c, op, all, at, shard);
    MPI_Datatype type = grad_mpi_type((GradDtype)c->wire);
    return issue(c, op, data, (int)shard, type, MPI_OP_NULL);
}

/* Local moves complete at once (device memory: through the backend, which orders them on the
 * compute stream; within it, through a host copy kept for the slot). */
static int mpi_copy(Coll *coll, float *dst, const float *src, size_t n, CollCopy kind) {
    MpiColl *c = M(coll);
    const size_t bytes = n * sizeof(float);
    Op *op = new_op(c, OP_LOCAL, kind == COLL_TO_HOST ? (float *)src : dst, n, 1.0f,
                    kind == COLL_WITHIN ? n : 0);
    if (!c->device) {
        if (dst != src) memmove(dst, src, bytes);
    } else if (kind == COLL_TO_HOST) {
        c->pub.be->download(c->pub.ctx, dst, src, bytes);
    } else if (kind == COLL_FROM_HOST) {
        c->pub.be->upload(c->pub.ctx, dst, src, bytes);
    } else {
        c->pub.be->download(c->pub.ctx, op->stage, src, bytes);
        c->pub.be->upload(c->pub.ctx, dst, op->stage, bytes);
    }
    return ticket_of(c, op);
}

static int mpi_done(Coll *coll, int ticket) {
    MpiColl *c = M(coll);
    while (c->completed <= ticket && c->completed < c->nops) {
        Op *op = &c->ops[c->completed];
        int flag = 1;
        if (op->threaded)
            flag = progress_ran(c, op, 0);
        else if (op->req != MPI_REQUEST_NULL)
            MPI_CHECK(MPI_Test(&op->req, &flag, MPI_STATUS_IGNORE));
        if (!flag) return 0;
        complete(c, op);
        c->completed++;
    }
    return 1;
}

static void mpi_wait(Coll *coll, int ticket) {
    MpiColl *c = M(coll);
    while (c->completed <= ticket && c->completed < c->nops) {
        Op *op = &c->ops[c->completed];
        if (op->threaded)
            progress_ran(c, op, 1);
        else if (op->req != MPI_REQUEST_NULL)
            MPI_CHECK(MPI_Wait(&op->req, MPI_STATUS_IGNORE));
        complete(c, op);
        c->completed++;
    }
}

static void mpi_set_blocking(Coll *c, int blocking) {
    M(c)->blocking = blocking;
}

static void mpi_mark_backward_end(Coll *coll) {
    MpiColl *c = M(coll);
    c->bwd_end = dt_now();
    c->bwd_marked = 1;
}

/* Union of the operations' [issue, completion] intervals before the end of backward. Intervals
 * are in issue order, so one sweep suffices. */
static double mpi_hidden(Coll *coll) {
    MpiColl *c = M(coll);
    if (c->nops) mpi_wait(coll, c->nops - 1);
    double sum = 0.0, covered = -1e300;
    for (int i = 0; i < c->nops && c->bwd_marked; i++) {
        const Op *op = &c->ops[i];
        if (op->kind == OP_LOCAL) continue;
        double s = op->t_issue > covered ? op->t_issue : covered;
        double e = op->t_done < c->bwd_end ? op->t_done : c->bwd_end;
        if (e > s) sum += e - s;
        if (op->t_done > covered) covered = op->t_done;
    }
    if (c->pt.on) { /* every op has run: the thread is idle */
        pthread_mutex_lock(&c->pt.mu);
        c->pt.handed = c->pt.next = 0;
        pthread_mutex_unlock(&c->pt.mu);
    }
    c->nops = c->completed = 0;
    c->bwd_marked = 0;
    return sum;
}

const CollOps coll_mpi = {
    .name = "mpi",
    .wire_types = 1,
    .progress_thread = 1,
    .create = mpi_create,
    .destroy = mpi_destroy,
    .allreduce = mpi_allreduce,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .copy = mpi_copy,
    .done = mpi_done,
    .wait = mpi_wait,
    .set_blocking = mpi_set_blocking,
    .mark_backward_end = mpi_mark_backward_end,
    .hidden = mpi_hidden,
};
