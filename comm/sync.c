/* sync.c - synchronous data-parallel exchange: every iteration the gradients of all ranks are
 * averaged with MPI_Allreduce, bucket by bucket (--bucket-mb), in place, so every rank applies
 * the same update. Host memory only: the CUDA backend stages through, or uses NCCL (its own
 * strategy file). */
#include "check.h"
#include "exchange.h"
#include "util.h"

#include <stdlib.h>

struct ExchangeState {
    ExchangeConfig cfg;
    int nranks;
};

static ExchangeState *sync_create(const ExchangeConfig *cfg)
{
    ExchangeState *st = xcalloc(1, sizeof *st);
    st->cfg = *cfg;
    MPI_CHECK(MPI_Comm_size(cfg->comm, &st->nranks));
    return st;
}

static int sync_average(ExchangeState *st, float *params, float *grads, ExchangeStep *step)
{
    (void)params;
    size_t n = st->cfg.nparams, bucket = st->cfg.bucket_floats;
    /* The stop vote travels beside the gradients: one int, MAX over the ranks. */
    MPI_Request vote;
    int stop_local = step->stop_requested, stop_any = stop_local;
    MPI_CHECK(MPI_Iallreduce(&stop_local, &stop_any, 1, MPI_INT, MPI_MAX, st->cfg.comm, &vote));
    if (st->nranks > 1)
        for (size_t off = 0; off < n; off += bucket) {
            size_t count = n - off < bucket ? n - off : bucket; /* grads[off .. off+count) */
            MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads + off, (int)count, MPI_FLOAT, MPI_SUM,
                                    st->cfg.comm));
        }
    float scale = 1.0f / (float)st->nranks;
    if (st->nranks > 1)
        for (size_t i = 0; i < n; i++) grads[i] *= scale;
    MPI_CHECK(MPI_Wait(&vote, MPI_STATUS_IGNORE));
    step->stop = stop_any;
    step->bytes_sent = st->nranks > 1 ? (double)n * sizeof(float) : 0.0;
    return EXCHANGE_APPLY_UPDATE;
}

static void sync_finish(ExchangeState *st)
{
    (void)st; /* blocking allreduces: nothing in flight */
}

static void sync_destroy(ExchangeState *st)
{
    free(st);
}

const ExchangeOps sync_exchange = {
    .name = "sync",
    .create = sync_create,
    .exchange = sync_average,
    .finish = sync_finish,
    .destroy = sync_destroy,
};
