/* driver.c - the one training loop (see driver.h): per iteration, data, this stage's steps in
 * the schedule's order (driver_stage.c), exchange, update, each phase marked on the backend's
 * timeline; the marks are read back only after the update, so reading them adds nothing to any
 * timed phase. Records, evaluations and the stop decision follow, outside the timed phases. */
#include "driver.h"
#include "driver_stage.h"
#include "precision.h" /* defines: LossScaler (--precision fp16) */
#include "prefetch.h"  /* defines: Prefetch (--prefetch) */
#include "profile.h"   /* defines: profile_begin, profile_end (--profile-layers) */
#include "signals.h"
#include "step_graph.h" /* defines: step_graphs_create (--graphs) */
#include "tensor_group.h" /* defines: tensor_group_take (--parallel tensor) */
#include "alloc.h"      /* defines: xmalloc */
#include "clock.h"      /* defines: dt_now */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int driver_eval_count(const DriverSettings *s, const Dataset *data) {
    if (data->ntest == 0) return 0;
    int64_t total = s->warmup + s->iters, e = s->eval_every;
    return (int)(e > 0 ? total / e + (total % e != 0) : 1);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The replica's batch of iteration `it`: the first stage needs the samples, the last one the
 * labels; prefetched (pf) or loaded and uploaded here. r->load: the time spent making it (by the
 * loader's threads, or here), r->load_wait: the part of it this thread waited. */
static void load_batch(Driver *d, Prefetch *pf, int64_t it, float *x, int32_t *labels,
                       IterRecord *r) {
    Model *m = d->model;
    const Pipeline *p = d->pipe;
    const int first = p->stage == 0, last = p->stage == p->stages - 1, b = m->batch;
    /* dropout masks follow the global sample index: the same on any number of ranks */
    model_set_sample_origin(m, (uint64_t)it * (uint64_t)d->set.batch + (uint64_t)p->replica * b);
    if (pf->on) {
        prefetch_take(pf, d, it, &r->load, &r->load_wait);
        return;
    }
    if (!first && !last) return;
    double t = dt_now();
    dataset_train_batch(d->data, it, d->set.batch, d->shard, d->nshards, first ? x : NULL, labels);
    r->load = r->load_wait = dt_now() - t;
    if (first) m->be->upload(m->ctx, m->x, x, (size_t)b * d->data->sample_size * sizeof(float));
    if (last)
        m->be->upload(m->ctx, m->labels, labels, (size_t)b * d->data->label_size * sizeof(int32_t));
}

/* The iteration's record, once its update is done (outside the timed phases). */
static void fill_record(Driver *d, const StageRun *s, ExchangeStep *xs, double start,
                        IterRecord *r) {
    Model *m = d->model;
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    const int K = d->pipe->stages;
    r->start = start - d->clock_offset - d->t0;
    /* Each mark's time since the start, then the phases as their differences: the phases add
     * up to the total exactly (a device's elapsed times are rounded one by one: CUDA's to float
     * milliseconds, so five of them summed could exceed the sixth by a few ns), and a phase is
     * never negative (the marks complete in order on one stream). */
    double at[MARK_UPDATE + 1];
    at[MARK_START] = 0.0;
    for (int k = MARK_START + 1; k <= MARK_UPDATE; k++)
        at[k] = be->timer_elapsed(ctx, MARK_START, k);
    r->data = at[MARK_DATA] - at[MARK_START];
    r->forward = at[MARK_FORWARD] - at[MARK_DATA];
    r->backward = at[MARK_BACKWARD] - at[MARK_FORWARD];
    r->exchange = at[MARK_EXCHANGE] - at[MARK_BACKWARD];
    r->update = at[MARK_UPDATE] - at[MARK_EXCHANGE];
    r->total = at[MARK_UPDATE];
    if (d->xops->report) d->xops->report(d->xstate, xs);
    r->exchange_hidden = xs->hidden;
    r->loss = stage_loss(d, s);
    r->bytes_sent = xs->bytes_sent, r->bytes_recv = xs->bytes_recv;
    r->staleness = xs->staleness, r->version = xs->version, r->exchange_wait = xs->wait;
    r->exchange_reduce_scatter = xs->reduce_scatter, r->exchange_allgather = xs->allgather;
    r->bytes_reduce_scatter = xs->reduce_scatter_bytes, r->bytes_allgather = xs->allgather_bytes;
    r->exchange_allreduce = xs->allreduce, r->bytes_allreduce = xs->allreduce_bytes;
    r->straggler_delay = s->straggler_delay;
    if (K > 1) {
        r->pipe_compute = s->st.compute, r->pipe_send = s->st.send, r->pipe_recv = s->st.recv;
        r->pipe_idle = s->st.idle, r->pipe_bytes = s->st.bytes;
    }
    if (d->tensor) tensor_group_take(d->tensor, &r->tp_comm, &r->tp_bytes, &r->tp_calls);
}

/* The optimizer step on gradients that still need the factor gs (ExchangeStep.grad_scale: sync
 * leaves the sum and 1/P), which costs no pass over them. SGD is linear in the gradient: lr x gs,
 * weight decay / gs. AdamW is not, but it is invariant to a constant scale s of the gradients save
 * for eps: its moments are then s and s^2 times PyTorch's, and m / (sqrt(v) + eps) is the same
 * step with eps x s, that is eps / gs (bit for bit when P is a power of two). The moments hold one
 * scale throughout: the first update's (d->adamw_scale); a later step with another (none of the
 * strategies makes one) has its gradients rescaled to it first. */
static void optimizer_step(Driver *d, double gs) {
    const Optimizer *o = &d->set.optim;
    Model *m = d->model;
    const int64_t t = ++*d->optim_steps;
    if (o->kind != OPTIMIZER_ADAMW) {
        model_sgd(m, (float)(o->lr * gs), o->momentum, (float)(o->weight_decay / gs));
        return;
    }
    if (d->adamw_scale == 0.0) d->adamw_scale = gs;
    if (gs != d->adamw_scale)
        m->be->scale(m->ctx, m->nparams, (float)(gs / d->adamw_scale), m->grads);
    AdamWStep a = optimizer_adamw_step(o, t);
    a.eps = (float)(o->eps / d->adamw_scale);
    model_adamw(m, &a);
}

/* After the exchange: fp16's averaged gradients are checked and unscaled, an overflow (the same
 * on every rank: the average carries it) skipping the step everywhere (src/run/precision.h);
 * then the optimizer step where the exchange left it to the driver. Returns 1 when the step is
 * skipped. */
static int update(Driver *d, LossScaler *scaler, int done, const ExchangeStep *xs) {
    const DriverSettings *o = &d->set;
    Model *m = d->model;
    int skip = done == EXCHANGE_APPLY_UPDATE && o->loss_scaling &&
               loss_scaler_update(scaler, !model_unscale_grads(m));
    if (done == EXCHANGE_APPLY_UPDATE && !skip) /* grads x s: folded into the step */
        optimizer_step(d, xs->grad_scale > 0 ? xs->grad_scale : 1.0);
    return skip;
}

/* A layer's parameter ranges in the buffer: its rows' (a fused group's: first..last), and the
 * table a tied head multiplies by. Returns how many (0 to 2) went to lohi. */
static int layer_ranges(const Model *m, const LayerEvent *e, size_t *lohi) {
    size_t lo = SIZE_MAX, hi = 0;
    for (int i = e->layer; i <= e->last; i++) {
        const Layer *L = &m->layers[i];
        if (!L->nparams) continue;
        const size_t a = L->w_off - m->param_base;
        if (a < lo) lo = a;
        if (a + L->nparams > hi) hi = a + L->nparams;
    }
    int n = 0;
    if (lo < hi) lohi[0] = lo, lohi[1] = hi, n = 1;
    const Layer *L = &m->layers[e->layer];
    if (L->tied >= m->first && L->tied < m->last) {
        const Layer *T = &m->layers[L->tied];
        lohi[2 * n] = T->w_off - m->param_base, lohi[2 * n + 1] = lohi[2 * n] + T->nw, n++;
    }
    return n;
}

/* A strategy that shards the parameters (zero3): each layer's are gathered before its forward
 * and its backward (the model's observer, the one hook before each layer). */
static void gather_for_layer(void *user, const Model *m, const LayerEvent *e) {
    if (e->kind != LAYER_FORWARD_BEGIN && e->kind != LAYER_BACKWARD_BEGIN) return;
    Driver *d = user;
    size_t lohi[4];
    const int n = layer_ranges(m, e, lohi);
    if (n) d->xops->params_needed(d->xstate, d->model->params, lohi, n);
}

/* Evaluation number n, after iteration it, recorded by rank 0; returns the test accuracy. */
static double evaluate(Driver *d, StageRun *s, int64_t it, int n) {
    double acc, eloss;
    /* sharded parameters: all held, the ranks' evaluations running different batch counts */
    if (d->xops->params_hold) d->xops->params_hold(d->xstate, d->model->params, 1);
    stage_evaluate(d, s, &acc, &eloss);
    if (d->xops->params_hold) d->xops->params_hold(d->xstate, d->model->params, 0);
    EvalRecord e = {(double)(it + 1), dt_now() - d->clock_offset - d->t0, acc, eloss};
    if (d->topo->rank == 0) d->rops->record_eval(d->rec, n, &e);
    return acc;
}

TrainResult driver_run(Driver *d) {
    const DriverSettings *o = &d->set;
    Model *m = d->model;
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    const int b = m->batch, nevals = driver_eval_count(o, d->data);
    /* Lock-step strategies evaluate together; the others let the first worker do it alone. */
    const int evaluates = d->xops->lockstep || d->shard == 0;
    const int64_t total = o->warmup + o->iters;
    int evals = 0, target_stop = 0, duration_stop = 0;
    float *x = xmalloc((size_t)b * d->data->sample_size * sizeof(float));
    int32_t *labels = xmalloc((size_t)b * d->data->label_size * sizeof(int32_t));
    double *totals = xmalloc((size_t)o->iters * sizeof(double));
    double *prow = xmalloc(2 * (size_t)m->nlayers * sizeof(double)); /* a /profile row */
    double record_cost = 0.0;
    StageRun s;
    stage_init(&s, d);
    TrainResult res = {.last_accuracy = -1.0};
    LossScaler scaler;
    loss_scaler_init(&scaler);
    if (o->loss_scaling) model_set_loss_scale(m, (float)scaler.scale); /* allocates: not timed */
    Prefetch pf;
    prefetch_init(&pf, d);
    d->graphs = step_graphs_create(m, o->graph_parts);
    LayerObserver gather = {gather_for_layer, d};
    if (d->xops->params_needed) model_set_observer(m, &gather);
    double recorded = dt_now(); /* the previous record handed over (IterRecord.wall) */

    for (int64_t it = 0; it < total; it++) {
        IterRecord r;
        memset(&r, 0, sizeof r);
        profile_begin(d->profile, it); /* marks each layer when `it` is profiled */
        if (d->tensor) tensor_group_take(d->tensor, NULL, NULL, NULL); /* not an evaluation's */
        double start = dt_now();
        be->timer_record(ctx, MARK_START);
        load_batch(d, &pf, it, x, labels, &r);
        be->timer_record(ctx, MARK_DATA);

        /* --duration: on the common clock, so every rank sees it at about the same iteration;
         * the vote makes it the same one. */
        if (o->duration > 0 && start - d->clock_offset - d->t0 >= o->duration) duration_stop = 1;
        s.vote = signals_stop_requested() != 0 || target_stop || duration_stop;
        if (o->loss_scaling) model_set_loss_scale(m, (float)scaler.scale);
        stage_iteration(d, &s, it); /* records MARK_FORWARD */
        /* the next batch uploads while this step's kernels run (on a device), if the loader
         * has made it; never a wait for the loader here, and before the backward mark: a
         * device that keeps up with the host (an eager launch-bound step) would sit idle in the
         * exchange phase while the host queues the copy (prefetch.h) */
        prefetch_release(&pf, d, it);
        prefetch_upload_next(&pf, d, it + 1);
        be->timer_record(ctx, MARK_BACKWARD);
        if (o->loss_scaling && d->topo->rank == 0 && precision_test_overflow(it)) {
            const float inf = INFINITY; /* tests: an overflow on one rank */
            be->upload(ctx, m->grads, &inf, sizeof inf);
        }
        /* On a device the host runs ahead of the device: wait for the compute stream, so that
         * the stop vote and every wait the strategy measures (exchange_wait) start when this
         * rank's device has finished backward, as they do on a CPU (no-op there). The exchange
         * phase itself is read from the device's marks (fill_record). Alone in the job there
         * is no one to vote with or wait for: the host goes on queueing, and the device runs
         * the update right after backward, as it would without an exchange. */
        if (be->device_memory && d->topo->nranks > 1) {
            prefetch_upload_during(&pf, d, it + 1, MARK_BACKWARD, 0); /* while backward runs */
            be->synchronize(ctx);
        }

        /* The stage's replicas average their gradients; the stop decision travels with them.
         * One stage reads the stop request again here, as late as the vote can still travel:
         * a signal that came during a long step (seconds on a CPU) ends the run after this
         * iteration, not after another one. (A pipeline's stages hold their replica's decision
         * from the step's messages: they must agree.) */
        if (d->pipe->stages == 1) s.decision |= signals_stop_requested() != 0;
        ExchangeStep xs = {.iteration = it, .stop_requested = s.decision};
        int done = d->xops->exchange(d->xstate, m->params, m->grads, &xs);
        be->timer_record(ctx, MARK_EXCHANGE);
        if (o->loss_scaling) /* fp16's overflow check waits for the device */
            prefetch_upload_during(&pf, d, it + 1, MARK_EXCHANGE, 0);
        int skip = update(d, &scaler, done, &xs);
        tied_refresh(&s.tied, d->pipe, m); /* the last stage's copy of a shared table */
        be->timer_record(ctx, MARK_UPDATE);

        /* Outside the timed phases from here on. The record waits for the device: the next
         * batch's upload is queued first, as soon as the loader has made it. */
        prefetch_upload_during(&pf, d, it + 1, MARK_UPDATE, 1);
        fill_record(d, &s, &xs, start, &r);
        r.record = record_cost;
        r.loss_scale = o->loss_scaling ? m->loss_scale : 1.0, r.step_skipped = skip;
        int prof = profile_end(d->profile, it, prow, prow + m->nlayers, &r.profile_cost);
        if (prof >= 0 && d->rops->record_profile)
            d->rops->record_profile(d->rec, prof, prow, prow + m->nlayers);
        if (it >= o->warmup) totals[it - o->warmup] = r.total;
        double rec_start = dt_now();
        r.wall = rec_start - recorded, recorded = rec_start;
        d->rops->record_iteration(d->rec, it, &r);
        record_cost = dt_now() - rec_start;
        res.iterations = it + 1;
        if (xs.stop) { /* agreed (or heard) stop: end after this iteration, skip evaluations */
            res.target_reached = target_stop;
            res.duration_reached = duration_stop && !target_stop;
            res.stopped = !target_stop && !duration_stop;
            break;
        }

        int eval_due = o->eval_every > 0 ? (it + 1) % o->eval_every == 0 : 0;
        if (evaluates && nevals > 0 && evals < nevals && (eval_due || it + 1 == total)) {
            double e0 = dt_now();
            res.last_accuracy = evaluate(d, &s, it, evals++);
            recorded += dt_now() - e0; /* not the next iteration's time */
            prefetch_release(&pf, d, it); /* it uploaded its test batches into this slot */
            if (o->target_acc > 0 && res.last_accuracy >= o->target_acc) target_stop = 1;
        }
    }
    d->xops->finish(d->xstate, m->params);
    if (d->xops->params_needed) model_set_observer(m, NULL);
    prefetch_free(&pf, d);
    step_graphs_free(d->graphs);
    d->graphs = NULL;
    int64_t measured = res.iterations - o->warmup;
    if (measured > 0) {
        qsort(totals, (size_t)measured, sizeof(double), cmp_double);
        res.median_total = totals[measured / 2];
    }
    stage_free(&s);
    free(x), free(labels), free(totals), free(prow);
    return res;
}
