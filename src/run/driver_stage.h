/* driver_stage.h - the driver's (driver.c) work on one stage: running an iteration's forward and
 * backward steps in the schedule's order, with the messages to and from the neighbouring stages
 * (src/run/pipeline_p2p.c) and the accounting of the stage's time, and evaluating the test set
 * through the pipeline. Internal to the driver. */
#ifndef DTBENCH_DRIVER_STAGE_H
#define DTBENCH_DRIVER_STAGE_H

#include "driver.h"
#include "pipeline_p2p.h"
#include "pipeline_tied.h"

/* Phase marks on the backend's timeline (BackendOps.timer_record slots). */
enum { MARK_START, MARK_DATA, MARK_FORWARD, MARK_BACKWARD, MARK_EXCHANGE, MARK_UPDATE,
       MARK_COMPUTED /* device backends, one stage: the end of this iteration's compute */ };

/* Time accounting of one stage and iteration (s, bytes): IterRecord's pipe_* fields. */
typedef struct {
    double compute, send, recv, idle, bytes;
} StageTimes;

typedef struct {
    ScheduleStep *steps;                        /* [2M], the schedule's order for this stage */
    P2pMessage *fwd_in, *fwd_out, *bwd_in, *bwd_out; /* [M] each */
    double *losses;                             /* [M] each micro-batch's mean loss */
    StageTimes st;
    int vote;       /* in: this rank's stop vote; OR-ed with the upstream stages' votes */
    int decision;   /* out: the replica's stop decision (the same on all its stages) */
    double straggler_delay; /* s slept this iteration */
    /* Device backends: host copies of what crosses stages (made at stage_init), [M x floats]:
     * activations in (in_floats each) and out (out_floats), gradients in (out) and out (in).
     * NULL on host backends (the messages use the model's buffers directly). */
    float *h_x, *h_y, *h_dy, *h_dx;
    TiedLink tied; /* a table the first and last stage share (pipeline_tied.h) */
} StageRun;

void stage_init(StageRun *s, const Driver *d);
void stage_free(StageRun *s);

/* Runs the iteration's steps; records MARK_FORWARD before the first backward step; returns once
 * every send has completed. Sets s->decision, s->losses (except with one stage and one
 * micro-batch: the loss is then queued on the backend). */
void stage_iteration(Driver *d, StageRun *s, int64_t it);

/* The iteration's mean loss on the last stage, after stage_iteration and the update (with one
 * stage and one micro-batch it reads the queued loss, waiting for the backend). */
double stage_loss(const Driver *d, const StageRun *s);

/* Test accuracy and mean loss of the current parameters. Lock-step exchanges: every replica
 * takes a share of the test set through its pipeline in chunks of a micro-batch, collective
 * over MPI_COMM_WORLD. Otherwise (data parallelism, ranks drifting apart): this rank alone, on
 * all of it. */
void stage_evaluate(Driver *d, StageRun *s, double *accuracy, double *loss);

#endif
