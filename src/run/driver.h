/* driver.h - the one training loop of dtbench, whatever the parallelism: each iteration loads
 * the data, runs this rank's forward and backward steps in the order its schedule gives
 * (src/run/schedule.h; data parallelism is the one-stage, one-micro-batch pipeline), exchanges the
 * gradients among the ranks holding the same layers (comm/exchange.h), and applies the update.
 * The driver alone marks the phases on the backend's timeline, records, evaluates, injects
 * straggler delays, checks --target-acc and handles stop requests (signals.h), so that every
 * schedule records the same fields with the same meaning:
 *   data      loading this replica's batch (first stage: samples, last stage: labels) and
 *             uploading it; with --prefetch (src/run/prefetch.h) the batch was loaded and
 *             its upload queued during the previous step, and `data` is the time the compute
 *             stream waits for it;
 *   forward   from there until the stage's first backward step starts (GPipe: every forward;
 *             1F1B: the warm-up forwards; data: the forward);
 *   backward  from there until every step has run and every send has completed, the straggler
 *             delay included (1F1B: the forwards of the steady phase too);
 *   exchange  averaging the gradients among the stage's replicas (all ranks in data
 *             parallelism), update: the optimizer step; total: data to update.
 *   pipe_*    (pipelines, K > 1; 0 with one stage) where the stage's time went: compute, send,
 *             receive, idle (the bubble), bytes sent; see src/run/driver_stage.c.
 *   tp_*      (--parallel tensor) the tensor group's allreduces inside forward and backward.
 * A stop request (a signal, or --target-acc reached) is a vote: it travels through the pipeline
 * in the message headers and then through the exchange, so every rank stops after the same
 * iteration (lock-step strategies; see exchange.h for the others). */
#ifndef DTBENCH_DRIVER_H
#define DTBENCH_DRIVER_H

#include "data.h"
#include "exchange.h"
#include "model.h"
#include "pipeline.h"
#include "recorder.h"
#include "schedule.h"
#include "straggler.h"
#include "topology.h"

#include <stdint.h>

/* What the loop needs; numbers only, resolved from the options (src/run/resolve.h). */
typedef struct {
    int64_t warmup, iters; /* warm-up then measured iterations */
    int batch;             /* global batch */
    int eval_every;        /* 0: only at the end */
    double target_acc;     /* 0: none */
    double duration;       /* s after the run's start (t0) to stop at, 0: none */
    int overlap;           /* hand gradients to the exchange during the last backward step */
    Optimizer optim;       /* --optimizer (sgd or adamw), --lr, ... (the model knows its decay) */
    int loss_scaling;   /* --precision fp16: dynamic loss scaling (src/run/precision.h) */
    int prefetch;       /* load and upload the next batch during the step (src/run/prefetch.h) */
    int loader_threads; /* threads making the batches with prefetch (src/data/loader.h) */
    int graph_parts;    /* parts of a step replayed from graphs (src/run/step_graph.h), 0: none */
} DriverSettings;

typedef struct {
    DriverSettings set;
    const Topology *topo;
    Dataset *data;
    Model *model; /* this rank's stage (the whole model in data parallelism) */
    const Pipeline *pipe;
    const ScheduleOps *sched;
    const ExchangeOps *xops;
    ExchangeState *xstate;
    const RecorderOps *rops;
    Recorder *rec;
    double clock_offset;      /* this rank's clock minus rank 0's */
    double t0;                /* rank 0's clock at the start of the run */
    int shard, nshards;       /* data parallelism: the batch is sharded over the workers */
    Straggler straggler;
    struct LayerProfile *profile; /* --profile-layers (src/results/profile.h), NULL: off */
    struct StepGraphs *graphs;    /* made by driver_run from set.graph_parts; NULL: none */
    /* The optimizer's updates applied to this rank's parameters (AdamW's step t: 1 at the first,
     * warm-up included), shared with the strategy (ExchangeConfig.steps), which counts those it
     * applies itself; and the gradient scale AdamW's moments hold (the first update's
     * ExchangeStep.grad_scale, folded into eps; 0: none yet). */
    int64_t *optim_steps;
    double adamw_scale;
    struct TensorGroup *tensor; /* --parallel tensor: the group's allreduces, recorded as
                                   tp_comm and tp_bytes (tensor_group.h); NULL: none */
} Driver;

typedef struct {
    int64_t iterations;   /* completed */
    int stopped;          /* stopped early: a rank received SIGTERM / SIGUSR1 */
    int target_reached;   /* stopped because --target-acc was reached */
    int duration_reached; /* stopped because --duration had passed (on this rank's clock) */
    double median_total;  /* this rank, measured iterations, s */
    double last_accuracy; /* -1 when never evaluated */
} TrainResult;

/* Evaluations the run will make (0 without a test split): every eval_every iterations and at the
 * end. Needed up front, since the file is created at its final size. */
int driver_eval_count(const DriverSettings *s, const Dataset *data);

/* Workers only (ranks whose exchange role is EXCHANGE_WORKER). */
TrainResult driver_run(Driver *d);

#endif
