/* main.c - dtbench's entry point: one SPMD program, launched by mpirun or srun.
 *   options -> run plan (resolve.c) -> topology -> data -> model (or this rank's pipeline stage)
 *   -> backend -> exchange -> clocks -> result file (run_setup.c) -> the training driver
 *   (driver.c) or the parameter server -> close
 * Bad input is found before the result file is created (exit status 2, nothing written). */
#include <config.h>
#include "calibrate.h" /* defines: calibrate_interrupted */
#include "mpi_check.h"
#include "driver.h"
#include "finalize.h"
#include "names.h"      /* defines: NAME_OF */
#include "prefetch.h"   /* defines: prefetch_why_not (--prefetch) */
#include "profile.h"    /* defines: profile_create (--profile-layers) */
#include "step_graph.h" /* defines: step_graphs_parts (--graphs) */
#include "tensor_group.h" /* defines: tensor_group_create (--parallel tensor) */
#include "registry.h"
#include "run.h"
#include "run_limits.h"
#include "sampler.h"
#include "signals.h"
#include "alloc.h"   /* defines: xcalloc */
#include "fail.h"    /* defines: check_fail */
#include "outputs.h" /* defines: dt_exit_status */
#include "watchdog.h"
#include "watchdog_witness.h" /* defines: witness_exec_main */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The process's peak resident memory so far, bytes (Linux counts ru_maxrss in KiB); NaN when
 * getrusage fails. */
static double peak_resident_bytes(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? (double)u.ru_maxrss * 1024.0 : NAN;
}

/* The model for a data set's shape (a small-image variant where there is one), planned; bad input
 * when the input does not fit it, or when the backend lacks a function one of its layers needs. */
static const ModelDesc *plan_model(Model *plan, const ModelDesc *md, const BackendOps *be,
                                   int microbatches, int c, int h, int w, int classes) {
    md = model_for_input(md, c, h, w);
    model_plan(plan, md, c, h, w, classes, 1);
    usage_check_all(!plan->problem[0], "--model: %s", plan->problem);
    const char *layer = NULL, *op = model_missing_op(plan, be, microbatches, &layer);
    usage_check_all(!op, "--device: the %s backend has no %s, needed by layer %s of %s", be->name,
                    op ? op : "", layer ? layer : "", md->name);
    return md;
}

/* --prefetch and --graphs for this backend, the planned whole model and the pipeline: what runs,
 * and why not; 'on' where it cannot is bad input. */
static void decide_step(Run *r, const Model *plan, const Pipeline *pipe) {
    const Options *o = &r->opt;
    const BackendOps *be = r->plan.be;
    r->prefetch = o->prefetch != TOGGLE_OFF &&
                  !prefetch_why_not(be, r->prefetch_why, sizeof r->prefetch_why)[0];
    if (o->prefetch == TOGGLE_OFF)
        snprintf(r->prefetch_why, sizeof r->prefetch_why, "--prefetch off");
    usage_check_all(o->prefetch != TOGGLE_ON || r->prefetch,
                    "--prefetch: 'on' is not accepted with --device %s: %s; expected auto or off",
                    o->device, r->prefetch_why);
    r->graph_parts =
        step_graphs_parts(o->graphs, be, plan, pipe->stages, pipe->microbatches, o->overlap,
                          o->profile_layers > 0, r->graphs_why, sizeof r->graphs_why);
    usage_check_all(o->graphs != TOGGLE_ON || !r->graphs_why[0],
                    "--graphs: 'on' is not accepted with --device %s --model %s: %s; expected auto "
                    "or off",
                    o->device, o->model, r->graphs_why);
}

/* Each stage's steps in the schedule's order ("F0 F1 B0 ..."), for --dry-run. */
static void print_steps(const ScheduleOps *s, const Pipeline *p) {
    const int K = p->stages, M = p->microbatches;
    if (M > 64) return; /* too long to read */
    ScheduleStep *steps = xcalloc((size_t)2 * M, sizeof *steps);
    printf("schedule %s:\n", s->name);
    for (int k = 0; k < K; k++) {
        s->steps(k, K, M, steps);
        printf("  stage %d:", k);
        for (int i = 0; i < 2 * M; i++)
            printf(" %c%d", steps[i].kind == STEP_FORWARD ? 'F' : 'B', steps[i].microbatch);
        printf("\n");
    }
    free(steps);
}

/* --dry-run: the model and how it would be split, on the nominal input shape. */
/* --dry-run --ranks N: this process stands for rank 0 of N, grouped into nodes as
 * --ranks-per-node says (one node otherwise), so that every rule that depends on the ranks
 * (servers, stages, batch shares) is checked as in the real run. */
static void as_ranks(Run *r) {
    const Options *o = &r->opt;
    usage_check_all(o->dry_run, "--ranks: %d is only accepted with --dry-run (a run has the "
                    "ranks its launcher starts)", o->ranks);
    usage_check_all(o->ranks >= 1, "--ranks: %d is not accepted: expected 1 or more", o->ranks);
    Topology *t = &r->topo;
    int per = o->ranks_per_node > 0 ? o->ranks_per_node : o->ranks;
    t->nranks = o->ranks, t->rank = 0, t->node = 0, t->local_rank = 0;
    t->nnodes = (o->ranks + per - 1) / per, t->local_size = per < o->ranks ? per : o->ranks;
}

static int dry_run(Run *r) {
    const RunPlan *p = &r->plan;
    Model plan;
    ActFormat act;
    plan_model(&plan, p->md, p->be, r->opt.microbatches, p->in_c, p->in_h, p->in_w, p->classes);
    resolve_act_layout(&r->opt, p, &plan, &act); /* refuses what the run would refuse */
    Pipeline pipe;
    pipeline_setup(&pipe, &r->opt, p->mode, &plan, &r->topo, r->opt.ranks ? 2 : 1);
    decide_step(r, &plan, &pipe);
    if (r->topo.rank == 0) {
        model_print(&plan, stdout);
        if (pipe.mode == PARALLEL_DATA)
            printf("  batch: %d global, %d per rank on %d ranks\n", r->opt.batch,
                   r->opt.batch / p->nworkers, r->topo.nranks);
        else
            pipeline_print(&pipe, &plan, stdout), print_steps(p->sched, &pipe);
    }
    pipeline_free(&pipe);
    model_free(&plan);
    topology_free(&r->topo);
    MPI_Finalize();
    return 0;
}

/* A stop asked for while the run sets up, on any rank (one small allreduce at the end of each
 * phase; the long loops inside a phase look at the signals themselves: dataset_interrupted,
 * model_interrupted, calibrate_interrupted): nothing has been recorded yet, so every rank removes
 * what the run created (fatal_hook_run: outputs_abandon) and exits 0. */
static void setup_stop_point(const Run *r) {
    int stop = signals_stop_requested() != 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (!stop) return;
    if (r->topo.rank == 0)
        printf("stopped during set-up (signal): nothing was recorded and no file was created\n");
    fatal_hook_run();
    MPI_Finalize();
    exit(0);
}

/* A language model's corpus may have no evaluation split (data_tokens.c): then nothing is
 * evaluated, and options that need it are bad input. */
static void check_test_split(const Options *o, const Dataset *ds) {
    const char *name = NAME_OF(DATASET_NAMES, o->dataset);
    const char *dir = o->data_dir[0] ? o->data_dir : dataset_default_dir(name);
    const char *why = "it has no evaluation data (a folder's *val* files, or the last 10% of one "
                      "file long enough to split)";
    usage_check_all(ds->ntest > 0 || !options_given(o, "eval-every"),
                    "--eval-every: %d is not accepted with --dataset %s --data-dir %s: %s",
                    o->eval_every, name, dir, why);
    usage_check_all(ds->ntest > 0 || o->target_acc == 0,
                    "--target-acc: %g is not accepted with --dataset %s --data-dir %s: %s",
                    o->target_acc, name, dir, why);
}

/* The calibration figures the file records, each taken at its maximum over the ranks (the
 * slowest exchanging group's, so that the attributes are the same on every rank): all doubles,
 * reduced in one message. */
typedef struct {
    double seconds, seconds_lo, seconds_hi;
    double bytes, bucket_bytes, busbw_factor;
    double iters;
} CalibrationMax;
_Static_assert(sizeof(CalibrationMax) == 7 * sizeof(double), "CalibrationMax: doubles only");

static void calibration_max(ExchangeCalibration *cal) {
    CalibrationMax v = {.seconds = cal->seconds,
                        .seconds_lo = cal->seconds_lo,
                        .seconds_hi = cal->seconds_hi,
                        .bytes = cal->bytes,
                        .bucket_bytes = cal->bucket_bytes,
                        .busbw_factor = cal->busbw_factor,
                        .iters = cal->iters};
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, (int)(sizeof v / sizeof(double)), MPI_DOUBLE,
                            MPI_MAX, MPI_COMM_WORLD));
    cal->seconds = v.seconds, cal->seconds_lo = v.seconds_lo, cal->seconds_hi = v.seconds_hi;
    cal->bytes = v.bytes, cal->bucket_bytes = v.bucket_bytes, cal->busbw_factor = v.busbw_factor;
    cal->iters = (int)v.iters;
}

/* Data (every rank reads; a missing or malformed file is bad input), the model for its shape,
 * this rank's stage of it on the backend, and the exchange among the stage's replicas. A language
 * model's samples are p->in_w tokens long (--seq-len, resolve.c). */
static void build(Run *r) {
    const Options *o = &r->opt;
    const RunPlan *p = &r->plan;
    char err[1024] = "";
    int ok =
        p->md->vocab && o->dataset == DATA_SYNTHETIC
            ? dataset_open_tokens(&r->data, p->in_w, p->md->vocab, (uint64_t)o->seed) == 0
            : dataset_open(&r->data, NAME_OF(DATASET_NAMES, o->dataset), o->data_dir, p->in_c,
                           p->in_h, p->in_w, p->classes, (uint64_t)o->seed, err, sizeof err) == 0;
    setup_stop_point(r); /* before the verdict: a stopped read is no bad input */
    usage_check_all(ok, "%s", err);
    const Dataset *ds = &r->data;
    if (o->dataset != DATA_SYNTHETIC) check_test_split(o, ds);
    r->md = plan_model(&r->plan_model, p->md, p->be, o->microbatches, ds->c, ds->h, ds->w,
                       ds->classes);
    pipeline_setup(&r->pipe, o, p->mode, &r->plan_model, &r->topo, 0);
    decide_step(r, &r->plan_model, &r->pipe);
    r->batch = o->batch / (r->pipe.mode == PARALLEL_DATA ? p->nworkers : r->pipe.replicas);
    /* memory, before any allocation (run_limits.h): of this rank's slice of the split rows
     * under --parallel tensor (planned as model_build_tensor builds them) */
    Model split = {0};
    const ModelTensor part = {.size = r->pipe.tp, .rank = r->pipe.tp_rank};
    if (r->pipe.tp > 1) model_plan_tensor(&split, r->md, ds->c, ds->h, ds->w, ds->classes, 1, &part);
    usage_check_all(limits_check(o, p->xops, r->pipe.tp > 1 ? &split : &r->plan_model,
                                 r->pipe.first[r->pipe.stage], r->pipe.first[r->pipe.stage + 1],
                                 r->batch,
                                 r->pipe.mode == PARALLEL_DATA ? p->nworkers : r->pipe.replicas,
                                 r->topo.local_size, err, sizeof err) == 0,
                    "%s", err);
    if (r->pipe.tp > 1) model_free(&split);

    ActFormat act;
    BackendConfig bcfg = {
        .threads = o->threads,
        .local_rank = r->topo.host_local_rank,
        .gpus_per_node = o->gpus_per_node,
        .verbose = r->topo.rank == 0,
        .precision = p->precision,
        .conv_algo = o->conv_algo,
        .act_layout = resolve_act_layout(o, p, &r->plan_model, &act),
    };
    if (p->be->init(&bcfg, &r->ctx) != 0) check_fail(__FILE__, __LINE__, "backend init", o->device);
    ModelTensor tp = {0}; /* --parallel tensor: the group's allreduce */
    if (r->pipe.tp > 1) r->tensor = tensor_group_create(r->pipe.tp_comm, p->be, r->ctx, &tp);
    model_build_tensor(&r->model, r->md, ds->c, ds->h, ds->w, ds->classes, r->batch,
                       r->pipe.microbatches, r->pipe.first[r->pipe.stage],
                       r->pipe.first[r->pipe.stage + 1], p->be, r->ctx, (uint64_t)o->seed, &tp);
    /* the optimizer's state: the driver's, or a sharding exchange's (for its shard, at create) */
    if (!p->xops->shards_optimizer)
        model_use_optimizer(&r->model, o->optimizer == OPTIMIZER_ADAMW);
    setup_stop_point(r);
    Optimizer optim = run_optimizer(o); /* with the runs of its decay, for the strategy */
    r->ndecay = model_decay_ranges(&r->model, NULL, 0);
    r->decay = xcalloc((size_t)r->ndecay + 1, sizeof(DecayRange));
    optim.nranges = model_decay_ranges(&r->model, r->decay, r->ndecay), optim.ranges = r->decay;

    double bucket = o->bucket_mb * 1048576.0 / sizeof(float);
    ExchangeConfig xcfg = {
        .comm = r->pipe.stage_comm, /* COMM_WORLD in data parallelism */
        .topo = &r->topo,
        .nparams = r->model.nparams,
        .bucket_floats = bucket < 1 ? 1 : (bucket > 1 << 30 ? (size_t)1 << 30 : (size_t)bucket),
        .be = p->be,
        .ctx = r->ctx,
        .host_be = registry_host_backend(), /* staged strategies on GPUs (comm/staged.c) */
        .optim = optim,
        .velocity = r->model.momentum,
        .variance = r->model.variance,
        .steps = &r->optim_steps,
        .staleness = o->staleness,
        .ps_ranks = o->ps_ranks,
        .sync_period = o->sync_period,
        .transport = p->tops,
        .device_coll = registry_coll("nccl"),
        .overlap = o->overlap,
        .progress_thread = o->progress == PROGRESS_THREAD,
        .param_prefetch = o->param_prefetch == PARAM_PREFETCH_ON,
        .grad_dtype = o->grad_dtype,
    };
    r->xstate = p->xops->create(&xcfg, err, sizeof err);
    usage_check_all(r->xstate != NULL, "%s", err);
    setup_stop_point(r);
    /* The transport's collectives alone on this run's buckets (comm/calibrate.c); the slowest
     * exchanging group's figures, so that the attributes are the same on every rank. Called with
     * --calibrate-iters 0 too: one unmeasured exchange then makes the transport allocate what it
     * keeps, so that iteration 0 does not pay for it. */
    ExchangeCalibration *cal = &r->calibration;
    if (p->xops->calibrate)
        p->xops->calibrate(r->xstate, r->model.grads, o->calibrate_iters, cal);
    calibration_max(cal);
    setup_stop_point(r);
    r->worker_index = 0, r->worker_count = 1;
    r->role = p->xops->role(r->xstate, &r->worker_index, &r->worker_count);
}

/* Workers train through the driver; servers serve. */
static TrainResult train(Run *r) {
    const Options *o = &r->opt;
    TrainResult res = {.last_accuracy = -1.0};
    /* A stop asked for during start-up (on any rank): no iteration runs; servers still serve
     * until every worker has said it is done, and the file is closed as stopped. */
    int before = signals_stop_requested() != 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &before, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (r->sampler) sampler_start(r->sampler);
    if (before && r->role != EXCHANGE_SERVER) {
        r->plan.xops->finish(r->xstate, r->model.params);
        res.stopped = 1;
    } else if (r->role == EXCHANGE_SERVER) {
        r->plan.xops->serve(r->xstate, r->model.params);
        r->plan.xops->finish(r->xstate, r->model.params);
    } else {
        int piped = r->pipe.mode != PARALLEL_DATA;
        Driver d = {
            .set = run_driver_settings(o),
            .topo = &r->topo,
            .data = &r->data,
            .model = &r->model,
            .pipe = &r->pipe,
            .sched = r->plan.sched,
            .xops = r->plan.xops,
            .xstate = r->xstate,
            .rops = r->plan.rops,
            .rec = r->rec,
            .clock_offset = r->off.offset,
            .t0 = r->t0,
            .shard = piped ? r->pipe.replica : r->worker_index,
            .nshards = piped ? r->pipe.replicas : r->worker_count,
            .straggler = r->plan.straggler,
            .profile = profile_create(&r->model, o->warmup, o->profile_layers),
            .optim_steps = &r->optim_steps,
            .tensor = r->tensor,
        };
        d.set.prefetch = r->prefetch, d.set.graph_parts = r->graph_parts;
        d.set.loader_threads = r->prefetch ? r->loader_threads : 0;
        res = driver_run(&d);
        profile_free(d.profile);
    }
    if (r->sampler) sampler_stop(r->sampler); /* close() writes what it took */
    return res;
}

/* The run's verdict, the file closed, the model saved, the summary printed. */
static void finish(Run *r, const TrainResult *res) {
    const Options *o = &r->opt;
    int64_t pushed = 0, applied = 0;
    r->plan.xops->counts(r->xstate, &pushed, &applied);
    ClockOffset off_end = clocksync_measure(MPI_COMM_WORLD, CLOCK_SYNC_ROUNDS);
    /* One verdict for the run: stopped early on any rank (servers included) means on all. */
    /* 3 duration, 2 target, 1 signal: a rank that only heard another's vote says signal. */
    int why = res->duration_reached ? 3 : res->target_reached ? 2 : (res->stopped ? 1 : 0);
    int why_all = why;
    MPI_CHECK(MPI_Allreduce(&why, &why_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    int early = why_all > 0;
    RunEnd end = {early ? RUN_STOPPED : RUN_COMPLETED,
                  why_all == 3   ? "duration"
                  : why_all == 2 ? "target"
                  : why_all == 1 ? "signal"
                                 : "completed",
                  off_end.offset,
                  model_param_hash(&r->model),
                  pushed,
                  applied,
                  signals_time(),
                  peak_resident_bytes()};
    r->plan.rops->close(r->rec, &end);
    if (r->sampler && sampler_dropped(r->sampler) > 0)
        fprintf(stderr,
                "dtbench: warning: rank %d: /samples was full after %lld samples "
                "(--sample-max-s %g); %lld later samples were not recorded\n",
                r->topo.rank, (long long)sampler_taken(r->sampler), o->sample_max_s,
                (long long)sampler_dropped(r->sampler));
    sampler_free(r->sampler);
    /* A failure to save is reported inside (one line, exit status 1, no file left). */
    if (o->save_model[0]) (void)pipeline_save_model(&r->pipe, &r->model, o->save_model);

    double worst = res->median_total;
    MPI_CHECK(MPI_Reduce(&res->median_total, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    int64_t total = (int64_t)o->warmup + o->iters;
    if (r->topo.rank == 0 && early && !dt_exit_status && res->iterations == 0)
        printf("stopped before training (%s): no iteration ran; the file is closed and marked "
               "stop_reason=%s\n",
               end.stop_reason, end.stop_reason);
    else if (r->topo.rank == 0 && early && !dt_exit_status) /* a write error printed its own line */
        printf("stopped early (%s) after %lld of %lld iterations; the file is closed and "
               "marked stop_reason=%s\n",
               end.stop_reason, (long long)res->iterations, (long long)total, end.stop_reason);
    if (r->topo.rank == 0 && res->iterations > o->warmup) {
        printf("done: %lld iterations (%d warm-up); median iteration %.3f ms (slowest rank), "
               "%.1f samples/s",
               (long long)res->iterations, o->warmup, worst * 1e3, o->batch / worst);
        if (res->last_accuracy >= 0) printf("; test accuracy %.4f", res->last_accuracy);
        printf("\nresults: %s\n", o->output);
    }
}

static void release(Run *r) {
    r->plan.xops->destroy(r->xstate);
    model_free(&r->model);
    tensor_group_free(r->tensor);
    free(r->decay);
    model_free(&r->plan_model);
    pipeline_free(&r->pipe);
    r->plan.be->finalize(r->ctx);
    dataset_close(&r->data);
    run_free_records(r);
    topology_free(&r->topo);
}

int main(int argc, char **argv) {
    /* the node witness of a rank (--peer-timeout), spawned by it: no signals, no MPI */
    if (argc > 1 && !strcmp(argv[1], "--witness")) return witness_exec_main(argc, argv);
    signals_install(); /* first: a stop asked for during start-up is kept, not fatal */
    /* the set-up's long loops end early on a stop (see setup_stop_point) */
    dataset_interrupted = model_interrupted = calibrate_interrupted = signals_stop_requested;
    if (argc > 1 && !strcmp(argv[1], "--finalize")) return finalize_main(argc, argv); /* no MPI */
    if (options_info(argc, argv)) return 0; /* --help, --version: no MPI either */
    (void)run_launcher();                   /* read before MPI_Init adds to the environment */
    int provided; /* MPI_THREAD_MULTIPLE only where asked for (--progress thread): it costs */
    MPI_CHECK(MPI_Init_thread(&argc, &argv, options_thread_level(argc, argv), &provided));
    mpi_check_start();
    static Run run; /* large; zeroed */
    Run *r = &run;
    r->argc = argc, r->argv = argv;
    options_parse(argc, argv, &r->opt);
    topology_init(&r->topo, r->opt.ranks_per_node);
    if (options_given(&r->opt, "ranks")) as_ranks(r);
    resolve_plan(&r->opt, &r->topo, &r->plan);
    if (r->opt.dry_run) return dry_run(r);
    setup_stop_point(r);

    run_check_outputs(r); /* rank 0 looks at the paths before any work is done */
    build(r);
    run_open_records(r); /* clocks, the start-up lines, the sampler, the result file */
    char err[512] = "";    /* heartbeats from here: a lost peer closes the file (watchdog.h) */
    usage_check_all(watchdog_start(MPI_COMM_WORLD, r->opt.peer_timeout, r->opt.output, err,
                                   sizeof err) == 0, "%s", err);
    run_warn_cores(r);
    TrainResult res = train(r);
    finish(r, &res);
    release(r);
    MPI_Finalize();
    watchdog_stop(); /* after MPI_Finalize: no rank says goodbye while another still needs it */
    return dt_exit_status; /* 1 after a write error (recorder) */
}
