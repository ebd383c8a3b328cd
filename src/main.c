/* main.c - dtbench's driver: one SPMD program, launched by mpirun or srun.
 *   options -> topology -> backend -> data -> model (or this rank's pipeline stage) -> clocks ->
 *   result file -> training (trainer.c, or pipeline.c for --parallel model/hybrid) -> close
 * Bad input is found before the result file is created (exit status 2, nothing written). */
#include <config.h>
#include "check.h"
#include "clocksync.h"
#include "options.h"
#include "pipeline.h"
#include "registry.h"
#include "signals.h"
#include "trainer.h"
#include "util.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif

#define CLOCK_SYNC_ROUNDS 20

static void print_option(const char *key, const char *value, void *user)
{
    (void)user;
    printf("  %-16s %s\n", key, value);
}

typedef struct {
    RunAttr *rows;
    int n;
} ConfigRows;

static void collect_option(const char *key, const char *value, void *user)
{
    ConfigRows *c = user;
    c->rows[c->n++] = (RunAttr){strdup(key), strdup(value), 0};
}

/* Median cost of one phase mark on the backend's timeline. */
static double timer_overhead(const BackendOps *be, BackendCtx *ctx)
{
    enum { N = 1001 };
    static double cost[N];
    for (int i = 0; i < N; i++) {
        double t = dt_now();
        be->timer_record(ctx, 0);
        cost[i] = dt_now() - t;
    }
    for (int i = 1; i < N; i++) /* insertion sort: N is small */
        for (int j = i; j > 0 && cost[j] < cost[j - 1]; j--) {
            double s = cost[j];
            cost[j] = cost[j - 1], cost[j - 1] = s;
        }
    return cost[N / 2];
}

static char *join_args(int argc, char **argv)
{
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += strlen(argv[i]) + 1;
    char *s = xcalloc(len, 1);
    for (int i = 0; i < argc; i++) {
        if (i) strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

/* Input shape of a data set without reading it (for --dry-run and validation). */
static void nominal_shape(const char *dataset, const ModelDesc *md, int *c, int *h, int *w,
                          int *classes)
{
    if (!strcmp(dataset, "synthetic")) *c = md->in_c, *h = md->in_h, *w = md->in_w,
                                       *classes = md->classes;
    else if (!strcmp(dataset, "cifar10"))
        *c = 3, *h = 32, *w = 32, *classes = 10;
    else *c = 1, *h = 28, *w = 28, *classes = 10;
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

int main(int argc, char **argv)
{
    MPI_CHECK(MPI_Init(&argc, &argv));
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    signals_install();
    Options opt;
    options_parse(argc, argv, &opt);

    Topology topo;
    topology_init(&topo, opt.ranks_per_node);
    const ModelDesc *md = registry_model(opt.model);
    const BackendOps *be = registry_backend(opt.device);
    const ExchangeOps *xops = registry_exchange(opt.exchange);
    const RecorderOps *rops = registry_recorder("hdf5");

    usage_check_all(strcmp(opt.parallel, "data") || opt.batch % topo.nranks == 0,
                    "--batch: %d is not accepted with %d ranks: the global batch must be a "
                    "multiple of the number of ranks",
                    opt.batch, topo.nranks);
    usage_check_all(!md->vocab || !strcmp(opt.dataset, "synthetic"),
                    "--dataset: '%s' is not accepted with %s, a language model on token "
                    "sequences: expected synthetic",
                    opt.dataset, md->name);
    usage_check_all(opt.ranks_per_node == 0 || topo.nranks % opt.ranks_per_node == 0,
                    "--ranks-per-node: %d does not divide the %d ranks", opt.ranks_per_node,
                    topo.nranks);
    int b = opt.batch / topo.nranks;

    if (opt.dry_run) {
        int c, h, w, k;
        nominal_shape(opt.dataset, md, &c, &h, &w, &k);
        Model plan;
        md = plan_model(&plan, md, be, opt.microbatches, c, h, w, k);
        Pipeline pipe;
        pipeline_setup(&pipe, &opt, &plan, &topo, 1);
        if (topo.rank == 0) {
            model_print(&plan, stdout);
            if (pipe.mode == PARALLEL_DATA)
                printf("  batch: %d global, %d per rank on %d ranks\n", opt.batch, b, topo.nranks);
            else
                pipeline_print(&pipe, &plan, stdout);
        }
        pipeline_free(&pipe);
        model_free(&plan);
        topology_free(&topo);
        MPI_Finalize();
        return 0;
    }

    /* Results: rank 0 looks at the paths before any work is done. */
    char err[1024] = "";
    const char *problem = NULL;
    if (topo.rank == 0) {
        problem = output_path_problem("--output", opt.output, opt.overwrite, err, sizeof err);
        if (!problem && opt.save_model[0])
            problem = output_path_problem("--save-model", opt.save_model, opt.overwrite, err,
                                          sizeof err);
    }
    usage_check_all(problem == NULL, "%s", err);

    /* Data (every rank reads; a missing or malformed file is bad input). */
    Dataset data;
    int c, h, w, k;
    nominal_shape(opt.dataset, md, &c, &h, &w, &k);
    int data_ok = md->vocab
                      ? dataset_open_tokens(&data, md->in_w, md->vocab, (uint64_t)opt.seed) == 0
                      : dataset_open(&data, opt.dataset, opt.data_dir, c, h, w, k,
                                     (uint64_t)opt.seed, err, sizeof err) == 0;
    usage_check_all(data_ok, "%s", err);

    /* The model for the data's shape, and this rank's part of it. */
    Model plan;
    md = plan_model(&plan, md, be, opt.microbatches, data.c, data.h, data.w, data.classes);
    Pipeline pipe;
    pipeline_setup(&pipe, &opt, &plan, &topo, 0);
    b = opt.batch / pipe.replicas;

    BackendCtx *ctx = NULL;
    BackendConfig bcfg = {opt.threads, topo.local_rank, 0, topo.rank == 0};
    if (be->init(&bcfg, &ctx) != 0)
        check_fail(__FILE__, __LINE__, "backend init", opt.device);
    Model model;
    model_build_part(&model, md, data.c, data.h, data.w, data.classes, b, pipe.microbatches,
                     pipe.first[pipe.stage], pipe.first[pipe.stage + 1], be, ctx,
                     (uint64_t)opt.seed);

    ExchangeConfig xcfg = {pipe.stage_comm, &topo, model.nparams, 0, be, ctx};
    double bucket = opt.bucket_mb * 1048576.0 / sizeof(float);
    xcfg.bucket_floats = bucket < 1 ? 1 : (bucket > 1 << 30 ? (size_t)1 << 30 : (size_t)bucket);
    ExchangeState *xstate = xops->create(&xcfg);

    char backend_info[512] = "", mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", hdf5_ver[64];
    be->describe(ctx, backend_info, sizeof backend_info);
    int len = 0;
    MPI_Get_library_version(mpi_lib, &len);
    mpi_lib[strcspn(mpi_lib, "\n")] = '\0';
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(hdf5_ver, sizeof hdf5_ver, "%u.%u.%u", maj, min, rel);

    if (topo.rank == 0) {
        printf("dtbench %s (%s): %d ranks on %d nodes, %s\n", PACKAGE_VERSION, DTBENCH_GIT_COMMIT,
               topo.nranks, topo.nnodes, backend_info);
        printf("configuration:\n");
        options_visit(&opt, print_option, NULL);
        printf("model %s: %zu parameters, %.3f GFLOP forward per sample; data %s [%d,%d,%d], "
               "%zu training samples\n",
               md->name, model.total_params, model_flops_per_sample(&model) / 1e9, data.name,
               data.c, data.h, data.w, data.ntrain);
        if (pipe.mode != PARALLEL_DATA) pipeline_print(&pipe, &plan, stdout);
        fflush(stdout);
    }

    /* Clocks: offset of every rank to rank 0, and rank 0's start time. */
    ClockOffset off = clocksync_measure(MPI_COMM_WORLD, CLOCK_SYNC_ROUNDS);
    double t0 = dt_now();
    MPI_CHECK(MPI_Bcast(&t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));

    /* The result file. */
    char *cmdline = join_args(argc, argv), *config_json = options_to_json(&opt);
    const char *slurm = getenv("SLURM_JOB_ID");
    RunAttr attrs[] = {
        {"dtbench_version", PACKAGE_VERSION, 0},
        {"git_commit", DTBENCH_GIT_COMMIT, 0},
        {"command_line", cmdline, 0},
        {"config_json", config_json, 0},
        {"mpi_library", mpi_lib, 0},
        {"hdf5_version", hdf5_ver, 0},
        {"backend_info", backend_info, 0},
        {"slurm_job_id", slurm ? slurm : "", 0},
        {"model", opt.model, 0},
        {"dataset", opt.dataset, 0},
        {"exchange", opt.exchange, 0},
        {"device", opt.device, 0},
        {"tag", opt.tag, 0},
        {"nranks", NULL, topo.nranks},
        {"nnodes", NULL, topo.nnodes},
        {"iters", NULL, opt.iters},
        {"batch_global", NULL, opt.batch},
        {"batch_per_rank", NULL, b},
        {"param_count", NULL, (long long)model.total_params},
        {"clock_sync_rounds", NULL, CLOCK_SYNC_ROUNDS},
        {"parallel", opt.parallel, 0},
        {"stages", NULL, pipe.stages},
        {"replicas", NULL, pipe.replicas},
        {"microbatches", NULL, pipe.microbatches},
        {"stage_first_layers", pipe.split_text, 0},
    };
    RunAttr config_rows[64];
    ConfigRows cr = {config_rows, 0};
    options_visit(&opt, collect_option, &cr);
    RecorderConfig rcfg = {
        .path = opt.output,
        .overwrite = opt.overwrite,
        .comm = MPI_COMM_WORLD,
        .iters_total = (int64_t)opt.warmup + opt.iters,
        .warmup = opt.warmup,
        .flush_every = opt.flush_every,
        .n_evals = trainer_eval_count(&opt, &data),
        .attrs = attrs,
        .nattrs = (int)(sizeof attrs / sizeof attrs[0]),
        .config = config_rows,
        .nconfig = cr.n,
        .timer_overhead = timer_overhead(be, ctx),
        .host = dt_hostname(),
        .node = topo.node,
        .local_rank = topo.local_rank,
        .pid = (long long)getpid(),
        .clock_offset_start = off.offset,
        .clock_rtt = off.rtt,
    };
    Recorder *rec = rops->create(&rcfg, err, sizeof err);
    usage_check_all(rec != NULL, "%s", err);

    Trainer tr = {&opt, &topo, &data, &model, xops, xstate, rops, rec, off.offset, t0};
    TrainResult res = pipe.mode == PARALLEL_DATA ? trainer_run(&tr) : pipeline_run(&tr, &pipe);

    ClockOffset off_end = clocksync_measure(MPI_COMM_WORLD, CLOCK_SYNC_ROUNDS);
    RunEnd end = {res.stopped ? RUN_STOPPED : RUN_COMPLETED, res.stopped ? "signal" : "completed",
                  off_end.offset, model_param_hash(&model)};
    rops->close(rec, &end);
    if (opt.save_model[0] && pipeline_save_model(&pipe, &model, opt.save_model) != 0)
        fprintf(stderr, "dtbench: rank 0: cannot write --save-model %s: %s\n", opt.save_model,
                strerror(errno));

    double worst = res.median_total;
    MPI_CHECK(MPI_Reduce(&res.median_total, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (topo.rank == 0 && res.stopped)
        printf("stopped early (signal) after %lld of %lld iterations; the file is closed and "
               "marked stop_reason=signal\n",
               (long long)res.iterations, (long long)rcfg.iters_total);
    if (topo.rank == 0 && res.iterations > opt.warmup) {
        printf("done: %lld iterations (%d warm-up); median iteration %.3f ms (slowest rank), "
               "%.1f samples/s",
               (long long)res.iterations, opt.warmup, worst * 1e3, opt.batch / worst);
        if (res.last_accuracy >= 0) printf("; test accuracy %.4f", res.last_accuracy);
        printf("\nresults: %s\n", opt.output);
    }

    xops->destroy(xstate);
    model_free(&model);
    model_free(&plan);
    pipeline_free(&pipe);
    be->finalize(ctx);
    dataset_close(&data);
    for (int i = 0; i < cr.n; i++) free((char *)config_rows[i].key), free((char *)config_rows[i].text);
    free(cmdline), free(config_json);
    topology_free(&topo);
    MPI_Finalize();
    return 0;
}
