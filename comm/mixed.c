/* mixed.c - mixed-asynchronous exchange (--exchange mixed --sync-period P): synchronous inside a
 * node, asynchronous across nodes: an intra-node transport plus an asynchronous ring between the
 * node leaders.
 *
 * Inside a node (the node_comm of the communicator's topology, from MPI_COMM_TYPE_SHARED or
 * --ranks-per-node) the ranks average their gradients every iteration through the transport
 * (--transport, over the node's ranks: MPI's blocking collectives on host memory), as in sync,
 * and so hold identical parameters.
 * Across nodes the leaders (local rank 0) do asynchronous elastic averaging on a ring, with no
 * global barrier: every P iterations a leader sends its parameters to the next node's leader
 * (nonblocking; skipped if its previous message is still in flight) and, if parameters from the
 * previous leader have arrived, moves halfway towards them: x = x + alpha (x_prev - x), alpha 1/2.
 * It then broadcasts the result inside its node. Nobody waits for another node; a slow node only
 * means its neighbour blends older parameters. Every rank of the node records as staleness how
 * many iterations the parameters blended in trail its own: the node's iteration minus the one
 * they were sent at, or 0 when the sender is as far or further on (the nodes' iteration counts
 * drift apart, so the bare difference is negative whenever the sender runs ahead: its parameters
 * are then not stale at all); 0 where nothing was blended.
 * A stop request is voted inside the node every iteration and carried to the next node in the
 * ring messages. On a device backend the node's average runs on the device buffers through the
 * transport (nccl inside the node where chosen) and the ring on a host copy of the parameters
 * made at create (downloaded on the leaders every P iterations, uploaded where they changed).
 * finish(): leaders receive every message still addressed to them (counts are
 * exchanged), then all nodes average their parameters once, so every rank ends with one model. */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "exchange.h"
#include "calibrate.h"
#include "communicator.h"
#include "grad_cast.h"

#include <stdlib.h>
#include <string.h>

enum { TAG_RING = 7201 };

typedef struct {
    int64_t iteration;
    int32_t stop;
    int32_t pad;
} RingHeader;

struct ExchangeState {
    ExchangeConfig cfg;
    Communicator comm;
    BucketEngine *intra;    /* averages over the node's ranks */
    MPI_Comm node, leaders; /* leaders: MPI_COMM_NULL on other ranks */
    int local_size, nleaders, leader_rank, next, prev;
    char *sendbuf, *recvbuf; /* header + params */
    float *mirror;           /* device backends: host copy of the params for the ring, or NULL */
    MPI_Request send_req, recv_req;
    int64_t sent, received, updates;
    int stop_heard;
};

static size_t msg_bytes(const ExchangeState *st) {
    return sizeof(RingHeader) + st->cfg.nparams * sizeof(float);
}

static ExchangeState *mixed_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    communicator_init(&st->comm, cfg->comm, cfg->topo);
    st->node = st->comm.topo.node_comm;
    st->leaders = st->comm.topo.leader_comm;
    st->local_size = st->comm.topo.local_size;
    st->intra = exchange_engine(cfg, st->node, &st->comm.topo, 1, NULL);
    st->send_req = st->recv_req = MPI_REQUEST_NULL;
    if (cfg->be->device_memory && st->comm.topo.nnodes > 1)
        st->mirror = xmalloc((cfg->nparams ? cfg->nparams : 1) * sizeof(float));
    if (st->leaders != MPI_COMM_NULL) {
        MPI_CHECK(MPI_Comm_size(st->leaders, &st->nleaders));
        MPI_CHECK(MPI_Comm_rank(st->leaders, &st->leader_rank));
        st->next = (st->leader_rank + 1) % st->nleaders;
        st->prev = (st->leader_rank + st->nleaders - 1) % st->nleaders;
        if (st->nleaders > 1) {
            st->sendbuf = xmalloc(msg_bytes(st));
            st->recvbuf = xmalloc(msg_bytes(st));
            communicator_irecv(st->leaders, st->recvbuf, msg_bytes(st), st->prev, TAG_RING,
                               &st->recv_req);
        }
    }
    return st;
}

static int mixed_role(ExchangeState *st, int *index, int *count) {
    MPI_CHECK(MPI_Comm_rank(st->cfg.comm, index));
    MPI_CHECK(MPI_Comm_size(st->cfg.comm, count));
    return EXCHANGE_WORKER;
}

/* Blends a received message into params; returns how many iterations the parameters blended in
 * trail ours (0 when the sender was as far or further on). */
static double blend(ExchangeState *st, float *params, int64_t now) {
    RingHeader h;
    memcpy(&h, st->recvbuf, sizeof h);
    const float *theirs = (const float *)(st->recvbuf + sizeof h);
    for (size_t i = 0; i < st->cfg.nparams; i++)
        params[i] += 0.5f * (theirs[i] - params[i]);
    st->stop_heard |= h.stop;
    st->received++;
    return now > h.iteration ? (double)(now - h.iteration) : 0.0;
}

/* Leader: the ring step. Returns 1 if params changed. */
static int ring_step(ExchangeState *st, float *params, ExchangeStep *step, int stop_local) {
    int changed = 0, flag = 0;
    /* Send ours, unless the previous message is still on its way. */
    MPI_CHECK(MPI_Test(&st->send_req, &flag, MPI_STATUS_IGNORE));
    if (flag) {
        RingHeader h = {step->iteration, stop_local || st->stop_heard, 0};
        memcpy(st->sendbuf, &h, sizeof h);
        memcpy(st->sendbuf + sizeof h, params, st->cfg.nparams * sizeof(float));
        communicator_isend(st->leaders, st->sendbuf, msg_bytes(st), st->next, TAG_RING,
                           &st->send_req);
        st->sent++;
        step->bytes_sent += (double)st->cfg.nparams * sizeof(float);
    }
    /* Blend what has arrived, oldest first (the staleness recorded is the newest's), then listen
     * again. */
    MPI_CHECK(MPI_Test(&st->recv_req, &flag, MPI_STATUS_IGNORE));
    while (flag) {
        step->staleness = blend(st, params, step->iteration);
        step->bytes_recv += (double)st->cfg.nparams * sizeof(float);
        changed = 1;
        communicator_irecv(st->leaders, st->recvbuf, msg_bytes(st), st->prev, TAG_RING,
                           &st->recv_req);
        MPI_CHECK(MPI_Test(&st->recv_req, &flag, MPI_STATUS_IGNORE));
    }
    return changed;
}

static int mixed_step(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    const ExchangeConfig *c = &st->cfg;
    step->bytes_sent = step->bytes_recv = 0, step->staleness = 0;
    /* Inside the node: the stop vote (which also measures the arrival imbalance), then the
     * gradient average. A stop heard from another node counts as this leader's own request. */
    int mine = step->stop_requested || st->stop_heard;
    step->wait = communicator_vote(st->node, mine, &step->stop);
    if (st->local_size > 1) {
        buckets_backward_done(st->intra);
        for (size_t hi = c->nparams; hi > 0; hi = bucket_lo(hi, c->bucket_floats))
            buckets_start(st->intra, grads + bucket_lo(hi, c->bucket_floats),
                          hi - bucket_lo(hi, c->bucket_floats));
        buckets_finish(st->intra);
        (void)buckets_hidden(st->intra);
    }
    if (st->local_size > 1)
        step->bytes_sent = step->bytes_recv = (double)c->nparams * grad_dtype_size(c->grad_dtype);

    /* Across nodes, every P iterations: the parameters to be updated are this iteration's
     * starting point, so the blend happens before the local optimizer step. */
    int period = c->sync_period > 0 ? c->sync_period : 1;
    if (st->comm.topo.nnodes > 1) { /* the same decision on every rank of every node */
        if ((step->iteration + 1) % period == 0) {
            int lead = st->leaders != MPI_COMM_NULL && st->nleaders > 1;
            float *hp = st->mirror ? st->mirror : params; /* device: the ring works on a copy */
            if (lead && st->mirror) c->be->download(c->ctx, hp, params, c->nparams * sizeof(float));
            /* the leader's outcome for the node: parameters changed, and their staleness */
            double ring[2] = {lead ? ring_step(st, hp, step, step->stop) : 0, 0};
            ring[1] = step->staleness;
            MPI_CHECK(MPI_Bcast(ring, 2, MPI_DOUBLE, 0, st->node));
            int changed = ring[0] != 0.0;
            step->staleness = ring[1];
            if (changed) {
                MPI_CHECK(MPI_Bcast(hp, (int)c->nparams, MPI_FLOAT, 0, st->node));
                if (st->mirror) c->be->upload(c->ctx, params, hp, c->nparams * sizeof(float));
            }
        }
    }
    step->version = (double)++st->updates;
    return EXCHANGE_APPLY_UPDATE;
}

static void mixed_finish(ExchangeState *st, float *dev_params) {
    const ExchangeConfig *c = &st->cfg;
    float *params = st->mirror ? st->mirror : dev_params;
    if (st->mirror) c->be->download(c->ctx, params, dev_params, c->nparams * sizeof(float));
    if (st->leaders != MPI_COMM_NULL && st->nleaders > 1) {
        /* Receive everything still addressed to us: the previous leader says how much it sent. */
        int64_t *sent = xcalloc((size_t)st->nleaders, sizeof(int64_t));
        MPI_CHECK(MPI_Allgather(&st->sent, 1, MPI_INT64_T, sent, 1, MPI_INT64_T, st->leaders));
        while (st->received < sent[st->prev]) {
            MPI_CHECK(MPI_Wait(&st->recv_req, MPI_STATUS_IGNORE));
            st->received++; /* drained, not blended: the final average below supersedes it */
            if (st->received < sent[st->prev])
                communicator_irecv(st->leaders, st->recvbuf, msg_bytes(st), st->prev, TAG_RING,
                                   &st->recv_req);
        }
        if (st->recv_req != MPI_REQUEST_NULL) {
            MPI_CHECK(MPI_Cancel(&st->recv_req));
            MPI_CHECK(MPI_Wait(&st->recv_req, MPI_STATUS_IGNORE));
        }
        MPI_CHECK(MPI_Wait(&st->send_req, MPI_STATUS_IGNORE));
        free(sent);
        /* One model: the average of the nodes' parameters. */
        MPI_CHECK(
            MPI_Allreduce(MPI_IN_PLACE, params, (int)c->nparams, MPI_FLOAT, MPI_SUM, st->leaders));
        float scale = 1.0f / (float)st->nleaders;
        for (size_t i = 0; i < c->nparams; i++)
            params[i] *= scale;
    }
    MPI_CHECK(MPI_Bcast(params, (int)c->nparams, MPI_FLOAT, 0, st->node));
    if (st->mirror) {
        c->be->upload(c->ctx, dev_params, params, c->nparams * sizeof(float));
        c->be->synchronize(c->ctx);
    }
}

static void mixed_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = st->sent;
    *applied = st->received;
}

static void mixed_destroy(ExchangeState *st) {
    buckets_destroy(st->intra);
    communicator_free(&st->comm);
    free(st->sendbuf), free(st->recvbuf), free(st->mirror), free(st);
}

const ExchangeOps mixed_exchange = {
    .name = "mixed",
    .reads = "sync-period,bucket-mb,transport,grad-dtype",
    .lockstep = 0,
    .device_ok = 1, /* gradients through the transport; the ring on a host copy (mirror) */
    .create = mixed_create,
    .role = mixed_role,
    .exchange = mixed_step,
    .serve = NULL,
    .finish = mixed_finish,
    .counts = mixed_counts,
    .destroy = mixed_destroy,
};
