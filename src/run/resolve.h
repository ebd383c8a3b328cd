/* resolve.h - the one place that turns the parsed options into a run plan: which backend,
 * exchange strategy, transport, schedule, model and parallel mode, and the numbers derived from
 * them. Every component declares the options it reads and what it supports (BackendOps.reads,
 * ExchangeOps.reads / pipeline_ok, TransportOps.reads / device_only, ScheduleOps.reads /
 * pipeline / device_memory); the resolver refuses, on every rank with one line from rank 0 and
 * exit status 2 (usage_check_all), each combination that would not do what it says: an option
 * given explicitly that no chosen component reads, or a component asked for something it does
 * not support. Nothing after it reads an option's text. */
#ifndef DTBENCH_RESOLVE_H
#define DTBENCH_RESOLVE_H

#include "backend.h"
#include "exchange.h"
#include "model.h"
#include "options.h"
#include "pipeline.h"
#include "recorder.h"
#include "schedule.h"
#include "straggler.h"
#include "topology.h"
#include "transport.h"

typedef struct {
    const ModelDesc *md;
    const BackendOps *be;
    const ExchangeOps *xops;
    const TransportOps *tops;
    const ScheduleOps *sched;
    const RecorderOps *rops;
    ParallelMode mode;
    int nworkers;       /* ranks that train: all but the parameter servers */
    int ps_ranks;       /* ranks that serve parameters (0: the strategy has none) */
    Straggler straggler; /* --straggler, --straggler-random */
    /* The data set's nominal input shape, without reading it (--dry-run, validation). */
    int in_c, in_h, in_w, classes;
    Precision precision; /* --precision, accepted by the backend on this machine */
} RunPlan;

/* Checks opt against the components and the ranks (collective over COMM_WORLD) and fills plan.
 * Sets opt->schedule to the schedule that will run (data with --parallel data) and
 * opt->optimizer to the optimizer (auto: the model's, ModelDesc.adamw_default). The stages and
 * micro-batches, which need the model, are checked by pipeline_setup. */
void resolve_plan(Options *opt, const Topology *topo, RunPlan *plan);

/* --act-layout for the planned model (model_choose_layout): the layout to ask the backend for
 * (BackendConfig.act_layout), and the format it will store in *f; refuses (exit 2, one line) an
 * explicit nhwc that the backend, the precision or the model cannot run. Pipelines keep NCHW. */
ActLayout resolve_act_layout(const Options *opt, const RunPlan *p, const Model *plan, ActFormat *f);

#endif
