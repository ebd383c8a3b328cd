/* sync.c - synchronous data-parallel exchange: every iteration the gradients of all ranks are
 * averaged with MPI_Allreduce, bucket by bucket (--bucket-mb), in place, so every rank applies
 * the same update. Host memory only.
 *
 * Wait versus transfer: a one-int allreduce (the stop vote) goes first; it cannot complete before
 * the last rank has arrived, so the time blocked in it is the arrival imbalance (wait), and the
 * bucket allreduces after it are the data movement (transfer). */
#include "check.h"
#include "exchange.h"
#include "exchange_util.h"
#include "util.h"

#include <stdlib.h>

struct ExchangeState {
    ExchangeConfig cfg;
    int nranks;
    int64_t updates;
};

static ExchangeState *sync_create(const ExchangeConfig *cfg, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &st->nranks));
    return st;
}

static int sync_role(ExchangeState *st, int *index, int *count) {
    MPI_CHECK(MPI_Comm_rank(st->cfg.comm, index));
    *count = st->nranks;
    return EXCHANGE_WORKER;
}

double exchange_vote(MPI_Comm comm, int mine, int *any) {
    double t = dt_now();
    MPI_CHECK(MPI_Allreduce(&mine, any, 1, MPI_INT, MPI_MAX, comm));
    return dt_now() - t;
}

void exchange_average(MPI_Comm comm, int nranks, float *grads, size_t n, size_t bucket) {
    if (nranks < 2) return;
    for (size_t off = 0; off < n; off += bucket) {
        size_t count = n - off < bucket ? n - off : bucket; /* grads[off .. off+count) */
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads + off, (int)count, MPI_FLOAT, MPI_SUM, comm));
    }
    float scale = 1.0f / (float)nranks;
    for (size_t i = 0; i < n; i++)
        grads[i] *= scale;
}

static int sync_average(ExchangeState *st, float *params, float *grads, ExchangeStep *step) {
    (void)params;
    step->wait = exchange_vote(st->cfg.comm, step->stop_requested, &step->stop);
    exchange_average(st->cfg.comm, st->nranks, grads, st->cfg.nparams, st->cfg.bucket_floats);
    double bytes = st->nranks > 1 ? (double)st->cfg.nparams * sizeof(float) : 0.0;
    step->bytes_sent = step->bytes_recv = bytes;
    step->staleness = 0;
    step->version = (double)++st->updates;
    return EXCHANGE_APPLY_UPDATE;
}

static void sync_finish(ExchangeState *st, float *params) {
    (void)st, (void)params; /* blocking allreduces: nothing in flight, parameters identical */
}

static void sync_counts(ExchangeState *st, int64_t *pushed, int64_t *applied) {
    *pushed = *applied = st->updates;
}

static void sync_destroy(ExchangeState *st) {
    free(st);
}

const ExchangeOps sync_exchange = {
    .name = "sync",
    .lockstep = 1,
    .create = sync_create,
    .role = sync_role,
    .exchange = sync_average,
    .serve = NULL,
    .finish = sync_finish,
    .counts = sync_counts,
    .destroy = sync_destroy,
};
