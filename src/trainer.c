/* trainer.c - the timed loop (see trainer.h). Phase boundaries are marks on the backend's
 * timeline (slots below); they are read back only after the iteration's update, so reading them
 * adds nothing to any timed phase. */
#include "trainer.h"
#include "check.h"
#include "model_sync.h"
#include "signals.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

enum { MARK_START, MARK_DATA, MARK_FORWARD, MARK_BACKWARD, MARK_EXCHANGE, MARK_UPDATE };

int trainer_eval_count(const Options *opt, const Dataset *data) {
    if (data->ntest == 0) return 0;
    int total = opt->warmup + opt->iters, e = opt->eval_every;
    return e > 0 ? total / e + (total % e != 0) : 1;
}

/* model_backward_hook's callback: hands the final gradients to an overlapping exchange. */
static void grads_ready(void *user, size_t first) {
    Trainer *t = user;
    t->xops->grads_ready(t->xstate, t->model->grads, first);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void trainer_evaluate(Trainer *t, MPI_Comm comm, double *accuracy, double *loss) {
    Model *m = t->model;
    const Dataset *ds = t->data;
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    MPI_CHECK(MPI_Comm_size(comm, &size));
    size_t first = ds->ntest * (size_t)rank / (size_t)size;
    size_t last = ds->ntest * (size_t)(rank + 1) / (size_t)size;
    float *x = xmalloc((size_t)m->batch * ds->sample_size * sizeof(float));
    int32_t *labels = xmalloc((size_t)m->batch * sizeof(int32_t));
    double sums[2] = {0, 0};                  /* correct, loss * samples */
    model_average_buffers(m, MPI_COMM_WORLD); /* batch-norm running statistics */
    for (size_t i = first; i < last; i += (size_t)m->batch) {
        int n = (int)(last - i < (size_t)m->batch ? last - i : (size_t)m->batch);
        dataset_test_batch(ds, i, n, x, labels);
        m->be->upload(m->ctx, m->x, x, (size_t)n * ds->sample_size * sizeof(float));
        m->be->upload(m->ctx, m->labels, labels, (size_t)n * sizeof(int32_t));
        int correct = 0;
        float l = model_forward(m, n, 0, &correct);
        sums[0] += correct, sums[1] += (double)l * n;
    }
    free(x), free(labels);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm));
    *accuracy = sums[0] / (double)ds->ntest;
    *loss = sums[1] / (double)ds->ntest;
}

TrainResult trainer_run(Trainer *t) {
    const Options *o = t->opt;
    Model *m = t->model;
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    int b = o->batch / t->worker_count, nevals = trainer_eval_count(o, t->data), evals = 0;
    /* Lock-step strategies evaluate together, sharded; the others let the first worker do it. */
    int evaluates = t->xops->lockstep || t->worker_index == 0, target_stop = 0;
    MPI_Comm eval_comm = t->xops->lockstep ? MPI_COMM_WORLD : MPI_COMM_SELF;
    int64_t total = (int64_t)o->warmup + o->iters;
    float *x = xmalloc((size_t)b * t->data->sample_size * sizeof(float));
    int32_t *labels = xmalloc((size_t)b * t->data->label_size * sizeof(int32_t));
    double *totals = xmalloc((size_t)o->iters * sizeof(double));
    double record_cost = 0.0;
    TrainResult res = {.last_accuracy = -1.0};

    for (int64_t it = 0; it < total; it++) {
        IterRecord r;
        memset(&r, 0, sizeof r);
        double start = dt_now();
        be->timer_record(ctx, MARK_START);

        dataset_train_batch(t->data, it, o->batch, t->worker_index, t->worker_count, x, labels);
        be->upload(ctx, m->x, x, (size_t)b * t->data->sample_size * sizeof(float));
        be->upload(ctx, m->labels, labels, (size_t)b * t->data->label_size * sizeof(int32_t));
        /* dropout masks follow the global sample index: the same on any number of ranks */
        model_set_sample_origin(m, (uint64_t)it * (uint64_t)o->batch + (uint64_t)t->topo->rank * b);
        be->timer_record(ctx, MARK_DATA);
        double compute_start = dt_now();

        model_forward_queue(m, b, 1); /* the loss is read after the update */
        be->timer_record(ctx, MARK_FORWARD);

        if (o->overlap && t->xops->grads_ready)
            model_backward_hook(m, b, grads_ready, t);
        else
            model_backward(m, b);
        r.straggler_delay =
            straggler_delay(&t->straggler, t->topo->rank, it, dt_now() - compute_start);
        straggler_sleep(r.straggler_delay);
        be->timer_record(ctx, MARK_BACKWARD);

        ExchangeStep xs = {.iteration = it,
                           .stop_requested = signals_stop_requested() != 0 || target_stop};
        int done = t->xops->exchange(t->xstate, m->params, m->grads, &xs);
        be->timer_record(ctx, MARK_EXCHANGE);

        if (done == EXCHANGE_APPLY_UPDATE) { /* grads x s: folded into lr and weight decay */
            double s = xs.grad_scale > 0 ? xs.grad_scale : 1.0;
            model_sgd(m, (float)(o->lr * s), (float)o->momentum, (float)(o->weight_decay / s));
        }
        be->timer_record(ctx, MARK_UPDATE);

        /* Outside the timed phases from here on. */
        r.start = start - t->clock_offset - t->t0;
        r.data = be->timer_elapsed(ctx, MARK_START, MARK_DATA);
        r.forward = be->timer_elapsed(ctx, MARK_DATA, MARK_FORWARD);
        r.backward = be->timer_elapsed(ctx, MARK_FORWARD, MARK_BACKWARD);
        r.exchange = be->timer_elapsed(ctx, MARK_BACKWARD, MARK_EXCHANGE);
        r.update = be->timer_elapsed(ctx, MARK_EXCHANGE, MARK_UPDATE);
        r.total = be->timer_elapsed(ctx, MARK_START, MARK_UPDATE);
        if (t->xops->report) t->xops->report(t->xstate, &xs);
        r.exchange_hidden = xs.hidden;
        r.loss = model_read_loss(m, NULL);
        r.bytes_sent = xs.bytes_sent, r.bytes_recv = xs.bytes_recv;
        r.staleness = xs.staleness, r.version = xs.version, r.exchange_wait = xs.wait;
        r.record = record_cost;
        if (it >= o->warmup) totals[it - o->warmup] = r.total;

        double rec_start = dt_now();
        t->rops->record_iteration(t->rec, it, &r);
        record_cost = dt_now() - rec_start;
        res.iterations = it + 1;
        if (xs.stop) { /* agreed (or heard) stop: end after this iteration, skip evaluations */
            res.stopped = !target_stop;
            res.target_reached = target_stop;
            break;
        }

        int eval_due = o->eval_every > 0 ? (it + 1) % o->eval_every == 0 : 0;
        if (evaluates && nevals > 0 && evals < nevals && (eval_due || it + 1 == total)) {
            double acc, eloss;
            trainer_evaluate(t, eval_comm, &acc, &eloss);
            EvalRecord e = {(double)(it + 1), dt_now() - t->clock_offset - t->t0, acc, eloss};
            if (t->topo->rank == 0) t->rops->record_eval(t->rec, evals, &e);
            evals++;
            res.last_accuracy = acc;
            if (o->target_acc > 0 && acc >= o->target_acc) target_stop = 1;
        }
    }
    t->xops->finish(t->xstate, m->params);
    int64_t measured = res.iterations - o->warmup;
    if (measured > 0) {
        qsort(totals, (size_t)measured, sizeof(double), cmp_double);
        res.median_total = totals[measured / 2];
    }
    free(x), free(labels), free(totals);
    return res;
}
