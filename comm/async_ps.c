/* async_ps.c - asynchronous exchange through parameter servers, Downpour style
 * (--exchange async --ps-ranks N --staleness S).
 *
 * The last N ranks are servers; server j holds shard j of the parameters (and of the momentum).
 * Every iteration a worker pushes each shard of its gradient to its server and pulls the shard's
 * current parameters back (point-to-point MPI; one message each way per server). A server applies
 * each push as it arrives with the run's optimizer on its shard: SGD with momentum, the gradient
 * scaled by 1/workers so that one round of pushes moves the parameters as far as one synchronous
 * step; AdamW, whose step length does not follow the gradient's scale, with the gradient as
 * pushed and lr/workers for the same reason, its moments the shard's part of the model's buffers,
 * its decay the runs of the layout that fall in the shard, its step t the pushes the shard has
 * taken. It answers the worker's pull
 * only when the clock bound holds: a worker that has pushed c gradients gets parameters when
 * every unfinished worker has pushed at least c - S. S = 0 is lock-step. Why point-to-point and
 * not one-sided windows: the server must enforce the bound and count every push, which needs it
 * to see each message; passive-target RMA would also rely on progress that Open MPI's TCP and
 * shared-memory paths only make inside MPI calls on the target.
 *
 * staleness (per push) = updates from other workers applied to the shard between the worker's
 * pull and its push being applied; the clock bound keeps it <= (2S+1)(workers-1).
 * Shutdown: a worker sends DONE after its last iteration; a server serves until all workers are
 * DONE (every push received before DONE is applied: MPI keeps a sender's messages in order);
 * finish() then broadcasts each server's final shard so that every rank holds the same model.
 * A stop request travels in the push header; servers then answer every later pull with stop.
 * --grad-dtype bf16/fp16: the pushed gradient shard travels in that type (grad_cast.h; the server
 * applies the rounded gradient); the parameters pulled back stay fp32. */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "clock.h"     /* defines: dt_now */
#include "exchange.h"
#include "grad_cast.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TAG_PUSH = 7101, TAG_PARAMS = 7102, TAG_DONE = 7103 };

typedef struct {
    int64_t pushes;  /* gradients this worker has pushed, including this one */
    int64_t version; /* shard version the worker's parameters have */
    int32_t stop;
    int32_t pad;
} PushHeader;

typedef struct {
    int64_t version;   /* shard version after applying the push */
    int64_t staleness; /* updates by others between the pull and this push */
    double hold;       /* s the server held the answer back (clock bound) */
    int32_t stop;
    int32_t pad;
} ParamsHeader;

typedef struct {
    int waiting; /* an answer is due */
    int64_t staleness;
    double arrived;
} Pending;

struct ExchangeState {
    ExchangeConfig cfg;
    int rank, nranks, nservers, nworkers;
    int server_index; /* -1 on workers */
    size_t *lo, *hi;  /* shard bounds, per server */
    /* worker */
    char **sendbufs, **recvbufs; /* per server */
    int64_t pushes;
    int64_t *versions_seen; /* per server: shard version of this worker's parameters */
    /* server */
    int64_t applied, version;
    char *msg;   /* receive buffer */
    float *grad; /* shard gradient (SGD: scaled by 1/workers) */
};

static size_t shard_len(const ExchangeState *st, int j) {
    return st->hi[j] - st->lo[j];
}

static ExchangeState *ps_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    int rank, nranks;
    MPI_CHECK(MPI_Comm_rank(cfg->comm, &rank));
    MPI_CHECK(MPI_Comm_size(cfg->comm, &nranks));
    if (cfg->ps_ranks < 1 || cfg->ps_ranks >= nranks) {
        snprintf(err, errlen,
                 "--ps-ranks: %d is not accepted with %d ranks for --exchange async: expected 1 "
                 "to %d (the other ranks are workers)",
                 cfg->ps_ranks, nranks, nranks - 1);
        return NULL;
    }
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    st->rank = rank, st->nranks = nranks;
    st->nservers = cfg->ps_ranks, st->nworkers = nranks - cfg->ps_ranks;
    st->server_index = rank >= st->nworkers ? rank - st->nworkers : -1;
    st->lo = xcalloc((size_t)st->nservers, sizeof(size_t));
    st->hi = xcalloc((size_t)st->nservers, sizeof(size_t));
    for (int j = 0; j < st->nservers; j++) {
        st->lo[j] = cfg->nparams * (size_t)j / (size_t)st->nservers;
        st->hi[j] = cfg->nparams * (size_t)(j + 1) / (size_t)st->nservers;
    }
    if (st->server_index < 0) {
        st->versions_seen = xcalloc((size_t)st->nservers, sizeof(int64_t));
        st->sendbufs = xcalloc((size_t)st->nservers, sizeof(char *));
        st->recvbufs = xcalloc((size_t)st->nservers, sizeof(char *));
        for (int j = 0; j < st->nservers; j++) {
            st->sendbufs[j] = xmalloc(sizeof(PushHeader) + shard_len(st, j) * sizeof(float));
            st->recvbufs[j] = xmalloc(sizeof(ParamsHeader) + shard_len(st, j) * sizeof(float));
        }
    } else {
        size_t n = shard_len(st, st->server_index);
        /* holds a push, then the answer to it: room for the larger header */
        size_t header =
            sizeof(PushHeader) > sizeof(ParamsHeader) ? sizeof(PushHeader) : sizeof(ParamsHeader);
        st->msg = xmalloc(header + n * sizeof(float));
        st->grad = xmalloc(n * sizeof(float));
    }
    return st;
}

static int ps_role(ExchangeState *st, int *index, int *count) {
    *index = st->server_index < 0 ? st->rank : -1;
    *count = st->nworkers;
    return st->server_index < 0 ? EXCHANGE_WORKER : EXCHANGE_SERVER;
}

/* ---- worker ---------------------------------------------------------------------------------- */

static int ps_exchange(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    int ns = st->nservers;
    MPI_Request reqs[2 * ns];
    st->pushes++;
    for (int j = 0; j < ns; j++) {
        size_t n = shard_len(st, j);
        PushHeader h = {st->pushes, st->versions_seen[j], step->stop_requested != 0, 0};
        memcpy(st->sendbufs[j], &h, sizeof h);
        size_t gbytes = n * grad_dtype_size(st->cfg.grad_dtype);
        if (st->cfg.grad_dtype)
            grad_pack(st->cfg.grad_dtype, (uint16_t *)(st->sendbufs[j] + sizeof h),
                      grads + st->lo[j], n);
        else
            memcpy(st->sendbufs[j] + sizeof h, grads + st->lo[j], gbytes);
        int dest = st->nworkers + j;
        MPI_CHECK(MPI_Irecv(st->recvbufs[j], (int)(sizeof(ParamsHeader) + n * sizeof(float)),
                            MPI_BYTE, dest, TAG_PARAMS, st->cfg.comm, &reqs[ns + j]));
        MPI_CHECK(MPI_Isend(st->sendbufs[j], (int)(sizeof h + gbytes), MPI_BYTE, dest, TAG_PUSH,
                            st->cfg.comm, &reqs[j]));
    }
    MPI_CHECK(MPI_Waitall(2 * ns, reqs, MPI_STATUSES_IGNORE));
    step->stop = 0, step->staleness = 0, step->wait = 0, step->version = 0;
    for (int j = 0; j < ns; j++) {
        ParamsHeader h;
        memcpy(&h, st->recvbufs[j], sizeof h);
        memcpy(params + st->lo[j], st->recvbufs[j] + sizeof h, shard_len(st, j) * sizeof(float));
        if (h.staleness > step->staleness) step->staleness = (double)h.staleness;
        if (h.hold > step->wait) step->wait = h.hold;
        if (h.version > step->version) step->version = (double)h.version;
        st->versions_seen[j] = h.version;
        step->stop |= h.stop;
    }
    step->bytes_sent = (double)st->cfg.nparams * grad_dtype_size(st->cfg.grad_dtype);
    step->bytes_recv = (double)st->cfg.nparams * sizeof(float);
    return EXCHANGE_PARAMS_UPDATED;
}

/* ---- server ---------------------------------------------------------------------------------- */

static void answer(ExchangeState *st, int worker, const Pending *p, int stop, float *params) {
    int j = st->server_index;
    size_t n = shard_len(st, j);
    ParamsHeader h = {st->version, p->staleness, dt_now() - p->arrived, stop, 0};
    char *out = st->msg; /* reuse: the push it answers has been applied */
    memcpy(out, &h, sizeof h);
    memcpy(out + sizeof h, params + st->lo[j], n * sizeof(float));
    MPI_CHECK(MPI_Send(out, (int)(sizeof h + n * sizeof(float)), MPI_BYTE, worker, TAG_PARAMS,
                       st->cfg.comm));
}

static void ps_serve(ExchangeState *st, float *params) {
    const ExchangeConfig *c = &st->cfg;
    int W = st->nworkers, j = st->server_index, ndone = 0, stop = 0;
    size_t n = shard_len(st, j);
    int64_t *pushes = xcalloc((size_t)W, sizeof(int64_t));
    int *done = xcalloc((size_t)W, sizeof(int));
    Pending *pending = xcalloc((size_t)W, sizeof(Pending));
    const int adamw = c->optim.kind == OPTIMIZER_ADAMW;
    Optimizer opt = c->optim; /* one round of W pushes moves as far as one synchronous step: */
    float scale = adamw ? 1.0f : 1.0f / (float)W; /* SGD: each gradient / W */
    if (adamw) opt.lr /= (float)W;                /* AdamW: each step lr / W */

    while (ndone < W) {
        MPI_Message m;
        MPI_Status s;
        MPI_CHECK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->comm, &m, &s));
        int w = s.MPI_SOURCE, bytes = 0;
        MPI_CHECK(MPI_Get_count(&s, MPI_BYTE, &bytes));
        MPI_CHECK(MPI_Mrecv(st->msg, bytes, MPI_BYTE, &m, MPI_STATUS_IGNORE));
        if (s.MPI_TAG == TAG_DONE) {
            done[w] = 1, ndone++;
        } else if (s.MPI_TAG == TAG_PUSH) {
            PushHeader h;
            memcpy(&h, st->msg, sizeof h);
            if (c->grad_dtype) {
                grad_unpack(c->grad_dtype, st->grad, (const uint16_t *)(st->msg + sizeof h), n,
                            scale);
            } else {
                const float *g = (const float *)(st->msg + sizeof h);
                for (size_t i = 0; i < n; i++)
                    st->grad[i] = g[i] * scale;
            }
            size_t lo = st->lo[j];
            optimizer_update(c->be, c->ctx, &opt, st->applied + 1, lo, n, params + lo, st->grad,
                             c->velocity + lo, c->variance ? c->variance + lo : NULL);
            pending[w] = (Pending){1, st->version - h.version, dt_now()};
            st->version++, st->applied++;
            pushes[w] = h.pushes;
            stop |= h.stop;
        }
        /* Answer every pull the clock bound now allows. */
        int64_t slowest = INT64_MAX;
        for (int u = 0; u < W; u++)
            if (!done[u] && pushes[u] < slowest) slowest = pushes[u];
        for (int u = 0; u < W; u++)
            if (pending[u].waiting &&
                (slowest == INT64_MAX || slowest >= pushes[u] - c->staleness)) {
                answer(st, u, &pending[u], stop, params);
                pending[u].waiting = 0;
            }
    }
    free(pushes), free(done), free(pending);
}

/* ---- both ------------------------------------------------------------------------------------ */

static void ps_finish(ExchangeState *st, float *params) {
    if (st->server_index < 0) {
        PushHeader h = {st->pushes, 0, 0, 0};
        for (int j = 0; j < st->nservers; j++)
            MPI_CHECK(MPI_Send(&h, sizeof h, MPI_BYTE, st->nworkers + j, TAG_DONE, st->cfg.comm));
    }
    /* Every rank gets every server's final shard. */
    for (int j = 0; j < st->nservers; j++)
        MPI_CHECK(MPI_Bcast(params + st->lo[j], (int)shard_len(st, j), MPI_FLOAT, st->nworkers + j,
                            st->cfg.comm));
}

static void ps_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = st->server_index < 0 ? st->pushes : 0;
    *applied = st->applied;
}

static void ps_destroy(ExchangeState *st) {
    for (int j = 0; st->sendbufs && j < st->nservers; j++)
        free(st->sendbufs[j]), free(st->recvbufs[j]);
    free(st->sendbufs), free(st->recvbufs), free(st->msg), free(st->grad), free(st->versions_seen);
    free(st->lo), free(st->hi), free(st);
}

const ExchangeOps async_exchange = {
    .name = "async",
    .reads = "ps-ranks,staleness,grad-dtype",
    .lockstep = 0,
    .device_ok = 0,
    .create = ps_create,
    .role = ps_role,
    .exchange = ps_exchange,
    .serve = ps_serve,
    .finish = ps_finish,
    .counts = ps_counts,
    .destroy = ps_destroy,
};
