/* pipeline.c - model and hybrid parallelism (see pipeline.h): checking the configuration and
 * choosing the stages, the timed GPipe loop of one stage, evaluation through the pipeline, and
 * gathering the stages' parameters into one file.
 *
 * Per iteration each stage records, besides the usual phases, where its time went:
 *   pipe_compute  its layers' forward and backward (and loss) computation;
 *   pipe_send     handing activations/gradients over, and waiting for those sends to finish;
 *   pipe_recv     receiving, from the moment the neighbour started sending (its header says when,
 *                 on the aligned clock);
 *   pipe_idle     waiting for a neighbour that had not started sending: the pipeline bubble.
 * Phase boundaries here are host clock reads after the backend's synchronize(), since a stage
 * has to have finished computing a micro-batch before it can send it anyway.
 *
 * Graceful stop: a rank's stop request (signals.h) is its vote; the vote travels forward in the
 * headers (each stage ORs its own in), the last stage's OR of all of them travels back in the
 * backward headers, so every stage of a replica knows the same decision at the end of the
 * backward pass; the exchange among the replicas then ORs the replicas' decisions, as in data
 * parallelism (ExchangeStep.stop_requested / stop). Every rank stops after the same iteration. */
#include "pipeline.h"
#include "check.h"
#include "model_sync.h"
#include "partition.h"
#include "pipeline_p2p.h"
#include "signals.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration -------------------------------------------------------------------------- */

void pipeline_setup(Pipeline *p, const Options *opt, const Model *plan, const Topology *topo,
                    int dry_run) {
    memset(p, 0, sizeof *p);
    p->pipe_comm = p->stage_comm = MPI_COMM_NULL;
    const int nranks = topo->nranks, n = plan->nlayers;
    p->mode = !strcmp(opt->parallel, "model")    ? PARALLEL_MODEL
              : !strcmp(opt->parallel, "hybrid") ? PARALLEL_HYBRID
                                                 : PARALLEL_DATA;
    p->microbatches = opt->microbatches;

    if (p->mode == PARALLEL_DATA) {
        usage_check_all(opt->stages <= 1,
                        "--stages: %d is not accepted with --parallel data (pipeline stages need "
                        "--parallel model or hybrid)",
                        opt->stages);
        usage_check_all(!opt->split[0],
                        "--split: '%s' is not accepted with --parallel data (it places pipeline "
                        "stages: --parallel model or hybrid)",
                        opt->split);
        usage_check_all(opt->microbatches == 1,
                        "--microbatches: %d is not accepted with --parallel data (micro-batches "
                        "are pipelined: --parallel model or hybrid)",
                        opt->microbatches);
        p->stages = 1;
        p->replicas = nranks, p->replica = topo->rank;
    } else {
        int K = opt->stages ? opt->stages : (p->mode == PARALLEL_MODEL ? nranks : 2);
        p->stages = K;
        char cuts[400];
        partition_cuts_text(plan, cuts, sizeof cuts);
        int *cut_ok = xcalloc((size_t)n, sizeof(int));
        int ncuts = partition_cuts(plan, cut_ok);
        free(cut_ok);
        usage_check_all(
            K <= ncuts + 1,
            "--stages: %d is not accepted: %s can be split into at most %d stages (cuts "
            "are possible before layers %s)",
            K, plan->desc->name, ncuts + 1, cuts);
        if (!dry_run && p->mode == PARALLEL_MODEL)
            usage_check_all(K == nranks,
                            "--stages: %d is not accepted with --parallel model on %d ranks: it "
                            "runs one stage per rank (--parallel hybrid runs replicas of a "
                            "pipeline)",
                            K, nranks);
        if (!dry_run && p->mode == PARALLEL_HYBRID)
            usage_check_all(nranks % K == 0,
                            "--stages: %d is not accepted with --parallel hybrid on %d ranks: the "
                            "ranks must be a multiple of the stages (replicas x stages)",
                            K, nranks);
        p->replicas = dry_run ? (nranks % K == 0 ? nranks / K : 1) : nranks / K;
        p->stage = topo->rank % K, p->replica = topo->rank / K;
    }
    const int K = p->stages, R = p->replicas, M = p->microbatches;
    usage_check_all(M <= P2P_MAX_MICROBATCHES, "--microbatches: %d is not accepted: at most %d", M,
                    P2P_MAX_MICROBATCHES);
    if (p->mode != PARALLEL_DATA) {
        usage_check_all(opt->batch % R == 0,
                        "--batch: %d is not accepted with %d replicas of the pipeline: the global "
                        "batch must be a multiple of the replicas",
                        opt->batch, R);
        usage_check_all((opt->batch / R) % M == 0,
                        "--microbatches: %d is not accepted: it must divide the batch of each "
                        "replica (%d = --batch %d / %d replica(s))",
                        M, opt->batch / R, opt->batch, R);
    }

    p->first = xcalloc((size_t)K + 1, sizeof(int));
    char err[1024] = "";
    int ok = 1;
    if (opt->split[0])
        ok = partition_parse(plan, opt->split, K, p->first, err, sizeof err) == 0;
    else if (K == 1)
        p->first[0] = 0, p->first[1] = n;
    else
        ok = partition_balance(plan, K, p->first) == 0;
    usage_check_all(ok, "%s", err);
    size_t used = 0;
    for (int s = 0; s < K && used < sizeof p->split_text; s++)
        used += (size_t)snprintf(p->split_text + used, sizeof p->split_text - used,
                                 s ? ",%d" : "%d", p->first[s]);

    if (dry_run) return;
    if (p->mode == PARALLEL_DATA) {
        p->stage_comm = MPI_COMM_WORLD;
        return;
    }
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->replica, p->stage, &p->pipe_comm));
    MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, p->stage, p->replica, &p->stage_comm));
    MPI_CHECK(MPI_Comm_set_errhandler(p->pipe_comm, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_set_errhandler(p->stage_comm, MPI_ERRORS_RETURN));
}

void pipeline_free(Pipeline *p) {
    if (p->pipe_comm != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&p->pipe_comm));
    if (p->stage_comm != MPI_COMM_NULL && p->stage_comm != MPI_COMM_WORLD)
        MPI_CHECK(MPI_Comm_free(&p->stage_comm));
    free(p->first);
    memset(p, 0, sizeof *p);
}

void pipeline_print(const Pipeline *p, const Model *plan, FILE *out) {
    double total = model_flops_per_sample(plan);
    fprintf(out,
            "pipeline: %d stages x %d replicas (%d ranks), %d micro-batches per replica batch\n",
            p->stages, p->replicas, p->stages * p->replicas, p->microbatches);
    for (int s = 0; s < p->stages; s++) {
        int a = p->first[s], b = p->first[s + 1];
        size_t params = 0;
        for (int i = a; i < b; i++)
            params += plan->layers[i].nparams;
        double f = partition_flops(plan, a, b);
        fprintf(out, "  stage %d: layers %d-%d (%s .. %s), %zu parameters, %.1f%% of the FLOPs\n",
                s, a, b - 1, plan->layers[a].d.name, plan->layers[b - 1].d.name, params,
                total > 0 ? 100.0 * f / total : 0.0);
    }
}

/* ---- parameters --------------------------------------------------------- */

int pipeline_save_model(const Pipeline *p, const Model *m, const char *path) {
    if (p->mode == PARALLEL_DATA) {
        if (p->replica != 0) return 0;
        return model_save(m, path);
    }
    if (p->replica != 0) return 0; /* replica 0's pipeline holds the same parameters as the rest */
    const int K = p->stages;
    float *mine = xmalloc((m->nparams + 1) * sizeof(float));
    m->be->download(m->ctx, mine, m->params, m->nparams * sizeof(float));
    int *counts = NULL, *displs = NULL;
    float *all = NULL;
    if (p->stage == 0) {
        counts = xcalloc((size_t)K, sizeof(int)), displs = xcalloc((size_t)K, sizeof(int));
        for (int s = 0; s < K; s++) {
            size_t a = m->layers[p->first[s]].w_off;
            size_t b =
                p->first[s + 1] < m->nlayers ? m->layers[p->first[s + 1]].w_off : m->total_params;
            counts[s] = (int)(b - a), displs[s] = (int)a;
        }
        all = xmalloc((m->total_params + 1) * sizeof(float));
    }
    MPI_CHECK(MPI_Gatherv(mine, (int)m->nparams, MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0,
                          p->pipe_comm));
    int rc = 0;
    if (p->stage == 0) rc = model_save_params(m, all, path);
    free(mine), free(counts), free(displs), free(all);
    return rc;
}

/* ---- evaluation ----------------------------------------------------------------------------- */

/* Test accuracy and mean loss through the pipeline: each replica takes a share of the test set
 * and sends it through its stages in chunks of a micro-batch; the last stages' sums are reduced
 * over all ranks. Collective over MPI_COMM_WORLD. */
static void pipeline_evaluate(Trainer *t, const Pipeline *p, double *accuracy, double *loss) {
    Model *m = t->model;
    const Dataset *ds = t->data;
    const int first_stage = p->stage == 0, last_stage = p->stage == p->stages - 1;
    model_average_buffers(m, p->stage_comm);
    size_t begin = ds->ntest * (size_t)p->replica / (size_t)p->replicas;
    size_t end = ds->ntest * (size_t)(p->replica + 1) / (size_t)p->replicas;
    float *x = xmalloc((size_t)m->chunk * ds->sample_size * sizeof(float));
    int32_t *labels = xmalloc((size_t)m->chunk * sizeof(int32_t));
    const Layer *out = &m->layers[m->last - 1];
    double sums[2] = {0, 0}; /* correct, loss * samples */
    for (size_t i = begin; i < end; i += (size_t)m->chunk) {
        int n = (int)(end - i < (size_t)m->chunk ? end - i : (size_t)m->chunk);
        if (first_stage || last_stage) {
            dataset_test_batch(ds, i, n, x, labels);
            if (first_stage)
                m->be->upload(m->ctx, m->x, x, (size_t)n * ds->sample_size * sizeof(float));
            if (last_stage) m->be->upload(m->ctx, m->labels, labels, (size_t)n * sizeof(int32_t));
        }
        P2pMessage msg = {0};
        if (!first_stage) {
            p2p_post_recv(&msg, m->x, (size_t)n * m->x_size, p->stage - 1, 0, 0, p->pipe_comm);
            p2p_wait(&msg);
        }
        model_forward_part(m, 0, n, 0, 0);
        if (last_stage) {
            int correct = 0;
            float l = model_loss_part(m, 0, n, 0, 1.0f, &correct);
            sums[0] += correct, sums[1] += (double)l * n;
        } else {
            m->be->synchronize(m->ctx);
            p2p_send(&msg, out->y, (size_t)n * out->out_size, p->stage + 1, 0, 0, p->pipe_comm);
            p2p_wait(&msg);
        }
    }
    free(x), free(labels);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    *accuracy = sums[0] / (double)ds->ntest;
    *loss = sums[1] / (double)ds->ntest;
}

/* ---- the timed loop ----------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Time accounting of one stage and iteration (s, bytes). */
typedef struct {
    double compute, send, recv, idle, bytes;
} StageTimes;

/* Waits for msg; the wait counts as idle until the sender's send_time (converted to this rank's
 * clock), as receiving after it. */
static void wait_timed(P2pMessage *msg, StageTimes *st, double clock_offset, double t0) {
    double w0 = dt_now();
    p2p_wait(msg);
    double w1 = dt_now();
    double sent = msg->header.send_time + t0 + clock_offset; /* on this rank's clock */
    double idle = sent - w0;
    idle = idle < 0 ? 0 : (idle > w1 - w0 ? w1 - w0 : idle);
    st->idle += idle;
    st->recv += (w1 - w0) - idle;
}

TrainResult pipeline_run(Trainer *t, const Pipeline *p) {
    const Options *o = t->opt;
    Model *m = t->model;
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    const int K = p->stages, k = p->stage, M = p->microbatches, R = p->replicas;
    const int first_stage = k == 0, last_stage = k == K - 1;
    const int b = m->batch, mb = m->chunk;
    const Layer *out = &m->layers[m->last - 1];
    const size_t in_floats = (size_t)mb * m->x_size, out_floats = (size_t)mb * out->out_size;
    const int nevals = trainer_eval_count(o, t->data);
    int evals = 0;
    int64_t total = (int64_t)o->warmup + o->iters;
    float *x = xmalloc((size_t)b * t->data->sample_size * sizeof(float));
    int32_t *labels = xmalloc((size_t)b * t->data->label_size * sizeof(int32_t));
    double *totals = xmalloc((size_t)o->iters * sizeof(double));
    double *losses = xcalloc((size_t)M, sizeof(double));
    P2pMessage *fwd_in = xcalloc((size_t)M, sizeof(P2pMessage));
    P2pMessage *fwd_out = xcalloc((size_t)M, sizeof(P2pMessage));
    P2pMessage *bwd_in = xcalloc((size_t)M, sizeof(P2pMessage));
    P2pMessage *bwd_out = xcalloc((size_t)M, sizeof(P2pMessage));
    for (int j = 0; j < M; j++)
        for (int q = 0; q < 2; q++)
            fwd_in[j].req[q] = fwd_out[j].req[q] = bwd_in[j].req[q] = bwd_out[j].req[q] =
                MPI_REQUEST_NULL;
    double record_cost = 0.0;
    TrainResult res = {.last_accuracy = -1.0};

    for (int64_t it = 0; it < total; it++) {
        IterRecord r;
        memset(&r, 0, sizeof r);
        StageTimes st = {0};
        double start = dt_now();

        /* Data: the first stage needs the samples, the last one the labels. */
        model_set_sample_origin(m, (uint64_t)it * (uint64_t)o->batch + (uint64_t)p->replica * b);
        if (first_stage || last_stage) {
            dataset_train_batch(t->data, it, o->batch, p->replica, R, first_stage ? x : NULL,
                                labels);
            if (first_stage)
                be->upload(ctx, m->x, x, (size_t)b * t->data->sample_size * sizeof(float));
            if (last_stage)
                be->upload(ctx, m->labels, labels,
                           (size_t)b * t->data->label_size * sizeof(int32_t));
        }
        be->synchronize(ctx);
        double t_data = dt_now();
        int vote = signals_stop_requested() != 0;

        /* Every receive of the iteration is posted up front: each has its own buffer. */
        for (int j = 0; j < M; j++) {
            if (!first_stage)
                p2p_post_recv(&fwd_in[j], m->x + (size_t)j * in_floats, in_floats, k - 1, 0, j,
                              p->pipe_comm);
            if (!last_stage)
                p2p_post_recv(&bwd_in[j], out->dy + (size_t)j * out_floats, out_floats, k + 1, 1, j,
                              p->pipe_comm);
        }

        /* Forward, micro-batches 0..M-1. */
        for (int j = 0; j < M; j++) {
            if (!first_stage) {
                wait_timed(&fwd_in[j], &st, t->clock_offset, t->t0);
                vote |= fwd_in[j].header.stop != 0.0;
            }
            double c0 = dt_now();
            model_forward_part(m, j * mb, mb, j, 1);
            if (last_stage) losses[j] = model_loss_part(m, j * mb, mb, 1, 1.0f / (float)M, NULL);
            be->synchronize(ctx);
            double c1 = dt_now();
            st.compute += c1 - c0;
            if (!last_stage) {
                fwd_out[j].header = (P2pHeader){c1 - t->clock_offset - t->t0, vote, 0.0, 0.0};
                p2p_send(&fwd_out[j], out->y + (size_t)j * out_floats, out_floats, k + 1, 0, j,
                         p->pipe_comm);
                p2p_progress(fwd_out, j + 1);
                st.bytes += (double)out_floats * sizeof(float);
                st.send += dt_now() - c1;
            }
        }
        double t_fwd = dt_now();

        /* Backward, micro-batches M-1..0; the first one overwrites the gradients. */
        int decision = vote; /* the last stage's vote covers every stage */
        for (int j = M - 1; j >= 0; j--) {
            if (!last_stage) {
                wait_timed(&bwd_in[j], &st, t->clock_offset, t->t0);
                decision = bwd_in[j].header.stop != 0.0;
                losses[j] = bwd_in[j].header.loss;
            }
            double c0 = dt_now();
            model_backward_part(m, j * mb, mb, j, j != M - 1);
            be->synchronize(ctx);
            double c1 = dt_now();
            st.compute += c1 - c0;
            if (!first_stage) {
                bwd_out[j].header =
                    (P2pHeader){c1 - t->clock_offset - t->t0, decision, losses[j], 0.0};
                p2p_send(&bwd_out[j], m->dx + (size_t)j * in_floats, in_floats, k - 1, 1, j,
                         p->pipe_comm);
                p2p_progress(bwd_out + j, M - j);
                st.bytes += (double)in_floats * sizeof(float);
                st.send += dt_now() - c1;
            }
        }
        double s0 = dt_now();
        for (int j = 0; j < M; j++) {
            if (!last_stage) p2p_wait(&fwd_out[j]);
            if (!first_stage) p2p_wait(&bwd_out[j]);
        }
        double t_bwd = dt_now();
        st.send += t_bwd - s0;

        /* The stage's replicas average their gradients; the stop decision travels with them. */
        ExchangeStep xs = {.iteration = it, .stop_requested = decision};
        int done = t->xops->exchange(t->xstate, m->params, m->grads, &xs);
        be->synchronize(ctx);
        double t_xch = dt_now();
        if (done == EXCHANGE_APPLY_UPDATE) { /* grads x s: folded into lr and weight decay */
            double s = xs.grad_scale > 0 ? xs.grad_scale : 1.0;
            model_sgd(m, (float)(o->lr * s), (float)o->momentum, (float)(o->weight_decay / s));
        }
        be->synchronize(ctx);
        double t_upd = dt_now();

        /* Outside the timed phases from here on. */
        double loss = 0.0;
        for (int j = 0; j < M; j++)
            loss += losses[j];
        r.start = start - t->clock_offset - t->t0;
        r.data = t_data - start;
        r.forward = t_fwd - t_data;
        r.backward = t_bwd - t_fwd;
        r.exchange = t_xch - t_bwd;
        r.update = t_upd - t_xch;
        r.total = t_upd - start;
        r.loss = loss / M;
        r.bytes_sent = xs.bytes_sent;
        r.record = record_cost;
        r.pipe_compute = st.compute, r.pipe_send = st.send, r.pipe_recv = st.recv;
        r.pipe_idle = st.idle, r.pipe_bytes = st.bytes;
        if (it >= o->warmup) totals[it - o->warmup] = r.total;

        double rec_start = dt_now();
        t->rops->record_iteration(t->rec, it, &r);
        record_cost = dt_now() - rec_start;
        res.iterations = it + 1;
        if (xs.stop) { /* every rank agreed: stop after this iteration, skip evaluations */
            res.stopped = 1;
            break;
        }

        int eval_due = o->eval_every > 0 ? (it + 1) % o->eval_every == 0 : 0;
        if (nevals > 0 && evals < nevals && (eval_due || it + 1 == total)) {
            double acc, eloss;
            pipeline_evaluate(t, p, &acc, &eloss);
            EvalRecord e = {(double)(it + 1), dt_now() - t->clock_offset - t->t0, acc, eloss};
            if (t->topo->rank == 0) t->rops->record_eval(t->rec, evals, &e);
            evals++;
            res.last_accuracy = acc;
        }
    }
    t->xops->finish(t->xstate, m->params);
    int64_t measured = res.iterations - o->warmup;
    if (measured > 0) {
        qsort(totals, (size_t)measured, sizeof(double), cmp_double);
        res.median_total = totals[measured / 2];
    }
    free(x), free(labels), free(totals), free(losses);
    free(fwd_in), free(fwd_out), free(bwd_in), free(bwd_out);
    return res;
}
