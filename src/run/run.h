/* run.h - the state of one dtbench run, shared by main.c (plan, build, train, close) and
 * run_setup.c (the result paths, clocks, start-up lines, sampler and result file). */
#ifndef DTBENCH_RUN_H
#define DTBENCH_RUN_H

#include "clocksync.h"
#include "data.h"
#include "devinfo.h"
#include "driver.h"
#include "exchange.h"
#include "model.h"
#include "options.h"
#include "pipeline.h"
#include "recorder.h"
#include "resolve.h"
#include "sampler.h"
#include "topology.h"

#include <mpi.h>

#define CLOCK_SYNC_ROUNDS 20

typedef struct {
    int argc;
    char **argv;
    Options opt;
    Topology topo;
    RunPlan plan;
    Dataset data;
    const ModelDesc *md; /* the variant for the data's shape */
    Model plan_model;    /* the whole model, planned (shapes only) */
    Pipeline pipe;
    BackendCtx *ctx;
    Model model; /* this rank's stage (the whole model in data parallelism) */
    struct TensorGroup *tensor; /* --parallel tensor: this rank's group (tensor_group.h) */
    /* The optimizer's updates applied to model (Driver.optim_steps, ExchangeConfig.steps), and
     * its weight decay's runs (model_decay_ranges, for ExchangeConfig.optim) */
    int64_t optim_steps;
    DecayRange *decay;
    int ndecay;
    int batch;   /* samples per iteration of this rank's replica */
    ExchangeState *xstate;
    ExchangeCalibration calibration; /* --calibrate-iters (comm/calibrate.c) */
    int role, worker_index, worker_count;
    ClockOffset off; /* at the start */
    double t0;       /* rank 0's clock at the start */
    /* ranks x threads on the busiest host against its cores (run_setup.c check_cores) */
    int host_cores, host_ranks_max, oversubscribed;
    int loader_threads; /* --prefetch's batch loader threads (check_cores in run_setup.c) */
    /* --prefetch and --graphs as decided for this backend, model and mode (main.c), and why not */
    int prefetch, graph_parts;
    char prefetch_why[200], graphs_why[200];
    Sampler *sampler;
    Recorder *rec;
    /* text kept until the end of the run */
    RunAttr config_rows[64];
    int nconfig;
    char *cmdline, *config_json;
} Run;

/* Rank 0 checks --output and --save-model before any work (bad input: exit 2 on every rank). */
void run_check_outputs(Run *r);
/* Clocks, the start-up lines (rank 0), the sampler and the result file (collective). */
void run_open_records(Run *r);
void run_free_records(Run *r);
/* Rank 0, once nothing can be refused any more: the warning that ranks share cores. */
void run_warn_cores(const Run *r);
/* The driver's numbers from the options. */
DriverSettings run_driver_settings(const Options *o);
/* The optimizer the options describe (resolved: sgd or adamw), without its decay's runs. */
Optimizer run_optimizer(const Options *o);
/* How the ranks were started, as the root attribute `launcher` records it: "mpirun" (Open MPI's
 * mpirun/mpiexec, also inside a Slurm job; MPICH's Hydra), "srun" (a Slurm step, direct launch),
 * "other" (another PMI launcher) or "none" (started alone). Read from the environment the launcher
 * gave this process: main calls it once before MPI_Init, which adds variables of its own. */
const char *run_launcher(void);

#endif
