/* driver_stage.c - one stage's steps of an iteration, and evaluation through the pipeline (see
 * driver_stage.h).
 *
 * Every receive of the iteration is posted up front (each micro-batch has its own slice of the
 * buffers), so any order the schedule gives progresses as long as the stages' orders agree. With
 * more than one stage, each compute step ends with the backend's synchronize() (a stage has to
 * finish a micro-batch before it can send it) and the stage's time is split, on the host clock:
 *   pipe_compute  its layers' forward and backward (and loss) computation;
 *   pipe_send     handing activations/gradients over, and waiting for those sends to finish;
 *   pipe_recv     receiving, from the moment the neighbour started sending (its header says when,
 *                 on the aligned clock);
 *   pipe_idle     waiting for a neighbour that had not started sending: the pipeline bubble.
 * With one stage nothing is sent or waited for and nothing is synchronised (a GPU keeps queuing):
 * the pipe_* fields stay 0.
 * On a backend with device memory the messages go through host copies made at stage_init: a
 * send downloads the micro-batch's slice after the step's synchronize() (counted in pipe_send),
 * a receive is uploaded into the device slice once it has arrived (counted in pipe_recv).
 *
 * A straggler's delay (--straggler) follows its compute time; with one stage on a device backend
 * that time is read from the device's marks after synchronize() (the host only queued the work),
 * and the delay is slept with the device idle, so it delays the device as it delays a CPU.
 *
 * The stop vote travels forward in the headers (each stage ORs its own in); the last stage's
 * decision travels back in the backward headers. Every schedule ends every stage with the
 * backward of the same micro-batch, whose header carries the last stage's final decision, so all
 * stages of a replica hold the same decision after the iteration's steps. */
#include "driver_stage.h"
#include "mpi_check.h"
#include "model_sync.h"
#include "signals.h"
#include "step_graph.h" /* defines: step_graphs_forward, step_graphs_backward (--graphs) */
#include "alloc.h"      /* defines: xcalloc, xmalloc */
#include "clock.h"      /* defines: dt_now */

#include <stdlib.h>
#include <string.h>

void stage_init(StageRun *s, const Driver *d) {
    const Pipeline *p = d->pipe;
    const int M = p->microbatches;
    memset(s, 0, sizeof *s);
    s->steps = xcalloc((size_t)2 * M, sizeof(ScheduleStep));
    d->sched->steps(p->stage, p->stages, M, s->steps);
    s->losses = xcalloc((size_t)M, sizeof(double));
    s->fwd_in = xcalloc((size_t)M, sizeof(P2pMessage));
    s->fwd_out = xcalloc((size_t)M, sizeof(P2pMessage));
    s->bwd_in = xcalloc((size_t)M, sizeof(P2pMessage));
    s->bwd_out = xcalloc((size_t)M, sizeof(P2pMessage));
    for (int j = 0; j < M; j++)
        for (int q = 0; q < 2; q++)
            s->fwd_in[j].req[q] = s->fwd_out[j].req[q] = s->bwd_in[j].req[q] =
                s->bwd_out[j].req[q] = MPI_REQUEST_NULL;
    const Model *m = d->model;
    if (m->be->device_memory && p->stages > 1) {
        size_t in = (size_t)M * m->chunk * m->x_size;
        size_t out = (size_t)M * m->chunk * m->layers[m->last - 1].out_size;
        s->h_x = xcalloc(in ? in : 1, sizeof(float)), s->h_dx = xcalloc(in ? in : 1, sizeof(float));
        s->h_y = xcalloc(out ? out : 1, sizeof(float));
        s->h_dy = xcalloc(out ? out : 1, sizeof(float));
    }
    tied_init(&s->tied, p, m);
}

/* Where a message's payload lives on the host: the device slice's host copy, or the slice. */
static float *host_side(float *host, float *dev, size_t offset) {
    return host ? host + offset : dev + offset;
}

/* Device backends: a received slice into the device buffer. */
static void arrived(const Model *m, float *host, float *dev, size_t offset, size_t floats) {
    if (host) m->be->upload(m->ctx, dev + offset, host + offset, floats * sizeof(float));
}

/* Device backends: a slice to send onto the host (the compute step has been synchronised). */
static void to_send(const Model *m, float *host, const float *dev, size_t offset, size_t floats) {
    if (host) m->be->download(m->ctx, host + offset, dev + offset, floats * sizeof(float));
}

void stage_free(StageRun *s) {
    free(s->steps), free(s->losses);
    free(s->fwd_in), free(s->fwd_out), free(s->bwd_in), free(s->bwd_out);
    free(s->h_x), free(s->h_y), free(s->h_dy), free(s->h_dx);
    tied_free(&s->tied);
    memset(s, 0, sizeof *s);
}

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

/* model_backward_part_hook's callback: hands the final gradients to an overlapping exchange. */
static void grads_ready(void *user, size_t first) {
    Driver *d = user;
    d->xops->grads_ready(d->xstate, d->model->grads, first);
}

/* One stage and one micro-batch: the loss is queued with the step and read after the update
 * (stage_loss), so reading it waits for nothing in the timed phases. With more, each
 * micro-batch's loss is read when it is computed: the stage synchronises there anyway. */
static int loss_queued(const Pipeline *p) {
    return p->stages == 1 && p->microbatches == 1;
}

double stage_loss(const Driver *d, const StageRun *s) {
    if (loss_queued(d->pipe)) return model_read_loss(d->model, NULL);
    double loss = 0.0;
    for (int j = 0; j < d->pipe->microbatches; j++)
        loss += s->losses[j];
    return loss / d->pipe->microbatches;
}

/* The end of a compute step: with neighbours the work must be done before it is sent. */
static double compute_end(const Model *m, int piped) {
    if (piped) m->be->synchronize(m->ctx);
    return dt_now();
}

static void forward_step(Driver *d, StageRun *s, int j) {
    Model *m = d->model;
    const Pipeline *p = d->pipe;
    const int K = p->stages, k = p->stage, M = p->microbatches, mb = m->chunk;
    const Layer *out = &m->layers[m->last - 1];
    const size_t out_floats = (size_t)mb * out->out_size;
    if (k > 0) {
        const size_t in_floats = (size_t)mb * m->x_size;
        wait_timed(&s->fwd_in[j], &s->st, d->clock_offset, d->t0);
        double u0 = dt_now();
        arrived(m, s->h_x, m->x, (size_t)j * in_floats, in_floats);
        s->st.recv += dt_now() - u0;
        s->vote |= s->fwd_in[j].header.stop != 0.0;
    }
    double c0 = dt_now();
    if (!step_graphs_forward(d->graphs, mb)) { /* not replayed from a graph: run it */
        model_forward_part(m, j * mb, mb, j, 1);
        if (k == K - 1) {
            if (loss_queued(p))
                model_loss_queue(m, 0, mb, 1, 1.0f); /* read by stage_loss after the update */
            else
                s->losses[j] = model_loss_part(m, j * mb, mb, 1, 1.0f / (float)M, NULL);
        }
    }
    double c1 = compute_end(m, K > 1);
    s->st.compute += c1 - c0;
    if (k < K - 1) {
        s->fwd_out[j].header = (P2pHeader){c1 - d->clock_offset - d->t0, s->vote, 0.0, 0.0};
        to_send(m, s->h_y, out->y, (size_t)j * out_floats, out_floats);
        p2p_send(&s->fwd_out[j], host_side(s->h_y, out->y, (size_t)j * out_floats), out_floats,
                 k + 1, 0, j, p->pipe_comm);
        p2p_progress(s->fwd_out, M);
        s->st.bytes += (double)out_floats * sizeof(float);
        s->st.send += dt_now() - c1;
    }
}

/* nth: backwards run before this one on this stage; final: the iteration's last step. */
static void backward_step(Driver *d, StageRun *s, int64_t it, int j, int nth, int final) {
    Model *m = d->model;
    const Pipeline *p = d->pipe;
    const int K = p->stages, k = p->stage, mb = m->chunk;
    const size_t in_floats = (size_t)mb * m->x_size;
    if (k < K - 1) {
        const Layer *out = &m->layers[m->last - 1];
        const size_t out_floats = (size_t)mb * out->out_size;
        wait_timed(&s->bwd_in[j], &s->st, d->clock_offset, d->t0);
        double u0 = dt_now();
        arrived(m, s->h_dy, out->dy, (size_t)j * out_floats, out_floats);
        s->st.recv += dt_now() - u0;
        s->decision = s->bwd_in[j].header.stop != 0.0;
        s->losses[j] = s->bwd_in[j].header.loss;
    } else {
        s->vote |= signals_stop_requested() != 0;
        s->decision = s->vote; /* the last stage's vote covers every stage */
    }
    if (final) { /* stage 0: the tied head's gradient of the table, added by this backward */
        double u0 = dt_now();
        tied_recv_grad(&s->tied, p, m);
        s->st.recv += dt_now() - u0;
    }
    double c0 = dt_now();
    if (final && d->set.overlap && d->xops->grads_ready)
        model_backward_part_hook(m, j * mb, mb, j, nth > 0, grads_ready, d);
    else if (!step_graphs_backward(d->graphs, mb)) /* not replayed from a graph: run it */
        model_backward_part(m, j * mb, mb, j, nth > 0);
    double c1 = compute_end(m, K > 1);
    s->st.compute += c1 - c0;
    if (final) { /* a straggler holds its last result back: its neighbours wait for it */
        double compute = s->st.compute;
        const Straggler *sg = &d->straggler;
        if (K == 1 && m->be->device_memory && (sg->rank == d->topo->rank || sg->random_p > 0)) {
            /* One stage on a device: the host only queued the work. The delay follows the
             * device's compute time (its marks), and the sleep starts once the device is idle. */
            m->be->timer_record(m->ctx, MARK_COMPUTED);
            m->be->synchronize(m->ctx);
            compute = m->be->timer_elapsed(m->ctx, MARK_DATA, MARK_COMPUTED);
        }
        s->straggler_delay = straggler_delay(&d->straggler, d->topo->rank, it, compute);
        straggler_sleep(s->straggler_delay);
        c1 = dt_now();
    }
    if (k > 0) {
        s->bwd_out[j].header = (P2pHeader){c1 - d->clock_offset - d->t0, s->decision, s->losses[j],
                                           0.0};
        to_send(m, s->h_dx, m->dx, (size_t)j * in_floats, in_floats);
        p2p_send(&s->bwd_out[j], host_side(s->h_dx, m->dx, (size_t)j * in_floats), in_floats,
                 k - 1, 1, j, p->pipe_comm);
        p2p_progress(s->bwd_out, p->microbatches);
        s->st.bytes += (double)in_floats * sizeof(float);
        if (final) tied_send_grad(&s->tied, p, m); /* the last stage: its head's, summed */
        s->st.send += dt_now() - c1;
    }
}

void stage_iteration(Driver *d, StageRun *s, int64_t it) {
    Model *m = d->model;
    const Pipeline *p = d->pipe;
    const int K = p->stages, k = p->stage, M = p->microbatches, mb = m->chunk;
    const Layer *out = &m->layers[m->last - 1];
    const size_t in_floats = (size_t)mb * m->x_size, out_floats = (size_t)mb * out->out_size;
    memset(&s->st, 0, sizeof s->st);
    s->straggler_delay = 0.0;
    s->decision = s->vote;

    /* Every receive of the iteration is posted up front: each has its own buffer. */
    for (int j = 0; j < M && K > 1; j++) {
        if (k > 0)
            p2p_post_recv(&s->fwd_in[j], host_side(s->h_x, m->x, (size_t)j * in_floats),
                          in_floats, k - 1, 0, j, p->pipe_comm);
        if (k < K - 1)
            p2p_post_recv(&s->bwd_in[j], host_side(s->h_dy, out->dy, (size_t)j * out_floats),
                          out_floats, k + 1, 1, j, p->pipe_comm);
    }

    int backwards = 0;
    for (int i = 0; i < 2 * M; i++) {
        const ScheduleStep step = s->steps[i];
        if (step.kind == STEP_FORWARD) {
            forward_step(d, s, step.microbatch);
        } else {
            if (backwards == 0) m->be->timer_record(m->ctx, MARK_FORWARD);
            backward_step(d, s, it, step.microbatch, backwards++, i == 2 * M - 1);
        }
    }

    double s0 = dt_now();
    for (int j = 0; j < M && K > 1; j++) {
        if (k < K - 1) p2p_wait(&s->fwd_out[j]);
        if (k > 0) p2p_wait(&s->bwd_out[j]);
    }
    tied_wait(&s->tied);
    if (K > 1) s->st.send += dt_now() - s0;
}

void stage_evaluate(Driver *d, StageRun *s, double *accuracy, double *loss) {
    Model *m = d->model;
    const Dataset *ds = d->data;
    const Pipeline *p = d->pipe;
    const int first_stage = p->stage == 0, last_stage = p->stage == p->stages - 1;
    const int together = d->xops->lockstep;
    const MPI_Comm comm = together ? MPI_COMM_WORLD : MPI_COMM_SELF;
    const int part = together ? p->replica : 0, parts = together ? p->replicas : 1;
    model_average_buffers(m, together ? p->stage_comm : MPI_COMM_SELF);
    size_t begin = ds->ntest * (size_t)part / (size_t)parts;
    size_t end = ds->ntest * (size_t)(part + 1) / (size_t)parts;
    float *x = xmalloc((size_t)m->chunk * ds->sample_size * sizeof(float));
    const size_t ls = (size_t)ds->label_size; /* a language model: a label per position */
    int32_t *labels = xmalloc((size_t)m->chunk * ls * sizeof(int32_t));
    const Layer *out = &m->layers[m->last - 1];
    double sums[2] = {0, 0}; /* correct, loss * samples */
    for (size_t i = begin; i < end; i += (size_t)m->chunk) {
        int n = (int)(end - i < (size_t)m->chunk ? end - i : (size_t)m->chunk);
        if (first_stage || last_stage) {
            dataset_test_batch(ds, i, n, x, labels);
            if (first_stage)
                m->be->upload(m->ctx, m->x, x, (size_t)n * ds->sample_size * sizeof(float));
            if (last_stage)
                m->be->upload(m->ctx, m->labels, labels, (size_t)n * ls * sizeof(int32_t));
        }
        P2pMessage msg = {0};
        if (!first_stage) {
            size_t floats = (size_t)n * m->x_size;
            p2p_post_recv(&msg, host_side(s->h_x, m->x, 0), floats, p->stage - 1, 0, 0,
                          p->pipe_comm);
            p2p_wait(&msg);
            arrived(m, s->h_x, m->x, 0, floats);
        }
        model_forward_part(m, 0, n, 0, 0);
        if (last_stage) {
            int correct = 0;
            float l = model_loss_part(m, 0, n, 0, 1.0f, &correct);
            sums[0] += correct, sums[1] += (double)l * n;
        } else {
            m->be->synchronize(m->ctx);
            size_t floats = (size_t)n * out->out_size;
            to_send(m, s->h_y, out->y, 0, floats);
            p2p_send(&msg, host_side(s->h_y, out->y, 0), floats, p->stage + 1, 0, 0,
                     p->pipe_comm);
            p2p_wait(&msg);
        }
    }
    free(x), free(labels);
    if (p->tp_rank > 0) /* a tensor group's ranks evaluated the same samples: counted once */
        sums[0] = sums[1] = 0.0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, comm));
    *accuracy = sums[0] / ((double)ds->ntest * (double)ls); /* of every position predicted */
    *loss = sums[1] / (double)ds->ntest;
}
