/* calibrate.c - the transport's collectives alone on the run's buckets (see calibrate.h).
 * First, always (also with --calibrate-iters 0), one unmeasured exchange shaped as a training
 * iteration's (backward_done, every bucket started, finish; with --overlap also once with the
 * buckets started before backward_done, the non-blocking form): it makes the transport allocate
 * what it keeps across iterations (operation slots, host staging of device buffers, tail
 * scratch, pinned shards) and the library open its connections, so that iteration 0's exchange
 * does not pay for them. Then each repetition starts as a training iteration's exchange starts:
 * untimed, a pass over other memory (the update's parameters and momentum, 2x the gradients, at
 * most 32 MiB: what compute leaves in the caches instead of the library's buffers) and a write
 * of the whole gradient buffer from its end to its start (backward writes the last layers'
 * gradients first); then a barrier, and every bucket through buckets_alone (the library's
 * blocking collectives, summing) or, for engines without a blocking level (NCCL), start/finish,
 * timed. Back to back on warm buffers the same collectives cost less than in training (LeNet,
 * 2 ranks: 0.26 against 0.41 ms), a cost any program pays, and bench/exchange_alone.c's peer
 * does the same work between its collectives. The result is the median over the repetitions of this
 * rank's time, then the mean over the ranks; the fastest and the slowest repetition likewise
 * (the spread a recorded transfer must leave before it says anything about dtbench). Bounded: it
 * stops after about 2 s of measuring (decided together). calibrate_method() says all this in one
 * line for the result file. */
#include "calibrate.h"
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "alloc.h"     /* defines: xmalloc, xcalloc */
#include "clock.h"     /* defines: dt_now */

#include <stdio.h>
#include <stdlib.h>

int (*calibrate_interrupted)(void) = NULL;

#define STATE_MAX_BYTES  ((size_t)32 << 20) /* beyond the caches, more changes nothing */
#define WRITE_CHUNK_FLTS ((size_t)64 << 10) /* backward's order: chunks from the end */

/* The parameters and momentum an iteration streams through besides the gradients: 2n floats, at
 * most STATE_MAX_BYTES. */
static size_t state_floats(size_t n) {
    const size_t most = STATE_MAX_BYTES / sizeof(float);
    return 2 * n < most ? 2 * n : most;
}

/* What a training iteration does before its exchange (untimed): compute's memory traffic over
 * `state`, then backward's write of the gradient buffer, last layers first. */
static void as_after_backward(const BackendOps *be, BackendCtx *ctx, float *state, size_t m,
                              float *buf, size_t n) {
    for (size_t i = 0; i < m; i++)
        state[i] = state[i] * 0.999f + 1e-3f;
    for (size_t hi = n; hi > 0; hi = bucket_lo(hi, WRITE_CHUNK_FLTS))
        be->zero(ctx, buf + bucket_lo(hi, WRITE_CHUNK_FLTS),
                 (hi - bucket_lo(hi, WRITE_CHUNK_FLTS)) * sizeof(float));
    be->synchronize(ctx);
}

void calibrate_method(const ExchangeCalibration *cal, char *buf, size_t len) {
    if (cal->iters <= 0) {
        snprintf(buf, len, "none");
        return;
    }
    snprintf(buf, len,
             "after-backward: before each repetition, untimed, other memory streamed (twice the "
             "gradients, at most %zu MiB) and the gradient buffer written from its end, as an "
             "iteration does before its exchange; then a barrier and the buckets' collectives "
             "alone, timed; median over %d repetitions, mean over ranks",
             STATE_MAX_BYTES >> 20, cal->iters);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every bucket as an iteration runs them: all started after backward (the blocking
 * collectives), or, overlapped, started before its end (the non-blocking ones). */
static void iteration_pass(BucketEngine *e, float *buf, size_t n, size_t bucket, int overlapped) {
    if (!overlapped) buckets_backward_done(e);
    for (size_t hi = n; hi > 0; hi = bucket_lo(hi, bucket))
        buckets_start(e, buf + bucket_lo(hi, bucket), hi - bucket_lo(hi, bucket));
    if (overlapped) buckets_backward_done(e);
    buckets_finish(e);
}

static double one_pass(BucketEngine *e, MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                       float *buf, size_t n, size_t bucket) {
    const int alone = buckets_can_block(e);
    MPI_CHECK(MPI_Barrier(comm));
    double t0 = dt_now();
    if (alone) {
        for (size_t hi = n; hi > 0; hi = bucket_lo(hi, bucket))
            buckets_alone(e, buf + bucket_lo(hi, bucket), hi - bucket_lo(hi, bucket));
    } else {
        iteration_pass(e, buf, n, bucket, 0);
    }
    be->synchronize(ctx);
    double t = dt_now() - t0;
    if (!alone) (void)buckets_hidden(e);
    return t;
}

void transport_calibrate(BucketEngine *e, MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                         float *buf, size_t n, size_t bucket, int iters, int overlap,
                         ExchangeCalibration *out) {
    int P;
    MPI_CHECK(MPI_Comm_size(comm, &P));
    out->nbuckets = (int)((n + bucket - 1) / bucket);
    out->bucket_bytes = (double)(n < bucket ? n : bucket) * sizeof(float);
    out->bytes = (double)n * sizeof(float);
    out->busbw_factor = buckets_busbw_factor(e);
    out->iters = 0, out->seconds = out->algbw = out->busbw = 0.0;
    out->seconds_lo = out->seconds_hi = 0.0;
    if (P < 2 || n == 0) return;
    for (int form = overlap; form >= 0; form--) { /* warm-up: see the file's comment */
        iteration_pass(e, buf, n, bucket, form);
        be->synchronize(ctx);
        (void)buckets_hidden(e);
    }
    if (iters <= 0) return;

    double *t = xmalloc((size_t)iters * sizeof(double)), spent = 0.0;
    const size_t m = state_floats(n);
    float *state = xcalloc(m, sizeof(float));
    one_pass(e, comm, be, ctx, buf, n, bucket); /* warm-up of the measured form */
    int k = 0;
    while (k < iters) {
        as_after_backward(be, ctx, state, m, buf, n);
        t[k] = one_pass(e, comm, be, ctx, buf, n, bucket);
        spent += t[k++];
        /* every rank stops after the same repetition: 2 s spent, or a stop asked for */
        double mine[2] = {spent, calibrate_interrupted && calibrate_interrupted()}, most[2];
        MPI_CHECK(MPI_Allreduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, comm));
        if (most[0] > 2.0 || most[1] > 0) break;
    }
    qsort(t, (size_t)k, sizeof(double), cmp_double);
    double mine[3] = {k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]), t[0], t[k - 1]}, sum[3];
    MPI_CHECK(MPI_Allreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, comm));
    free(t), free(state);
    out->iters = k;
    out->seconds = sum[0] / P, out->seconds_lo = sum[1] / P, out->seconds_hi = sum[2] / P;
    out->algbw = out->seconds > 0 ? out->bytes / out->seconds : 0.0;
    out->busbw = out->algbw * out->busbw_factor;
}
