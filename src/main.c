/* main.c - dtbench's driver: one SPMD program, launched by mpirun or srun.
 *   options -> topology -> backend -> data -> model (or this rank's pipeline stage) -> clocks ->
 *   result file -> training (trainer.c, or pipeline.c for --parallel model/hybrid) -> close
 * Bad input is found before the result file is created (exit status 2, nothing written). */
#include <config.h>
#include "check.h"
#include "clocksync.h"
#include "nvml.h"
#include "run_limits.h"
#include "options.h"
#include "outputs.h"
#include "pipeline.h"
#include "registry.h"
#include "sampler.h"
#include "signals.h"
#include "straggler.h"
#include "trainer.h"
#include "util.h"

#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif

#define CLOCK_SYNC_ROUNDS 20

static void print_option(const char *key, const char *value, void *user) {
    (void)user;
    printf("  %-16s %s\n", key, value);
}

typedef struct {
    RunAttr *rows;
    int n;
} ConfigRows;

static void collect_option(const char *key, const char *value, void *user) {
    ConfigRows *c = user;
    c->rows[c->n++] = (RunAttr)RUN_TEXT(strdup(key), strdup(value));
}

/* Median cost of one phase mark on the backend's timeline. */
static double timer_overhead(const BackendOps *be, BackendCtx *ctx) {
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

static char *join_args(int argc, char **argv) {
    size_t len = 1;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *s = xcalloc(len, 1);
    for (int i = 0; i < argc; i++) {
        if (i) strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

/* Input shape of a data set without reading it (for --dry-run and validation). */
static void nominal_shape(const char *dataset, const ModelDesc *md, int *c, int *h, int *w,
                          int *classes) {
    if (!strcmp(dataset, "synthetic"))
        *c = md->in_c, *h = md->in_h, *w = md->in_w, *classes = md->classes;
    else if (!strcmp(dataset, "cifar10"))
        *c = 3, *h = 32, *w = 32, *classes = 10;
    else
        *c = 1, *h = 28, *w = 28, *classes = 10;
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

int main(int argc, char **argv) {
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
    const TransportOps *tops = registry_transport(opt.transport);
    const RecorderOps *rops = registry_recorder("hdf5");

    usage_check_all(!md->vocab || !strcmp(opt.dataset, "synthetic"),
                    "--dataset: '%s' is not accepted with %s, a language model on token "
                    "sequences: expected synthetic",
                    opt.dataset, md->name);
    usage_check_all(!strcmp(opt.parallel, "data") || !strcmp(opt.exchange, "sync"),
                    "--exchange: '%s' is not accepted with --parallel %s: the stage replicas of a "
                    "pipeline exchange with sync",
                    opt.exchange, opt.parallel);
    usage_check_all(!strcmp(opt.parallel, "data") || !be->device_memory,
                    "--parallel: '%s' is not accepted with --device %s yet: pipeline stages pass "
                    "host buffers; expected data",
                    opt.parallel, opt.device);
    usage_check_all(opt.ranks_per_node == 0 || topo.nranks % opt.ranks_per_node == 0,
                    "--ranks-per-node: %d does not divide the %d ranks", opt.ranks_per_node,
                    topo.nranks);
    usage_check_all(strcmp(opt.transport, "nccl") != 0 || be->device_memory,
                    "--transport nccl: NCCL averages GPU buffers; it needs --device cuda (with "
                    "--device %s use mpi or hier)",
                    opt.device);
    usage_check_all(!opt.overlap || xops->grads_ready != NULL,
                    "--overlap: the %s exchange cannot start buckets during backward",
                    opt.exchange);
    usage_check_all(opt.sample_hz * opt.sample_max_s <= 1e7,
                    "--sample-hz %g with --sample-max-s %g: more than 10 million samples per rank",
                    opt.sample_hz, opt.sample_max_s);
    usage_check_all(!be->device_memory || xops->device_ok,
                    "--exchange %s: this strategy works on host memory; with --device %s use "
                    "--exchange sync",
                    opt.exchange, opt.device);
    /* Workers train; with --exchange async the last --ps-ranks ranks serve parameters. */
    int nworkers = !strcmp(opt.exchange, "async") ? topo.nranks - opt.ps_ranks : topo.nranks;
    usage_check_all(nworkers >= 1,
                    "--ps-ranks: %d is not accepted with %d ranks for --exchange async: expected 1 "
                    "to %d (the other ranks are workers)",
                    opt.ps_ranks, topo.nranks, topo.nranks - 1);
    usage_check_all(strcmp(opt.parallel, "data") || opt.batch % nworkers == 0,
                    "--batch: %d is not accepted with %d %s: the global batch must be a "
                    "multiple of the number of %s",
                    opt.batch, nworkers, nworkers == topo.nranks ? "ranks" : "workers",
                    nworkers == topo.nranks ? "ranks" : "workers (ranks minus --ps-ranks)");
    Straggler straggler;
    char serr[256] = "";
    int straggler_ok =
        straggler_parse(opt.straggler, topo.nranks, &straggler, serr, sizeof serr) == 0;
    usage_check_all(straggler_ok, "%s", serr);
    straggler.random_p = opt.straggler_random;
    straggler.seed = (uint64_t)opt.seed;
    int b = opt.batch / nworkers;

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

    /* Results: rank 0 claims the output files before any work is done (outputs.h). */
    char err[1024] = "";
    usage_check_all(topo.rank != 0 ||
                        outputs_claim(opt.output, opt.save_model, opt.overwrite, err, sizeof err) == 0,
                    "%s", err);

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
    if (pipe.mode != PARALLEL_DATA) b = opt.batch / pipe.replicas;
    usage_check_all(limits_check(&opt, &plan, pipe.first[pipe.stage], pipe.first[pipe.stage + 1], b,
                                 topo.local_size, err, sizeof err) == 0,
                    "%s", err); /* memory, before any allocation (run_limits.h) */

    BackendCtx *ctx = NULL;
    BackendConfig bcfg = {opt.threads, topo.local_rank, opt.gpus_per_node, topo.rank == 0};
    if (be->init(&bcfg, &ctx) != 0) check_fail(__FILE__, __LINE__, "backend init", opt.device);
    Model model;
    model_build_part(&model, md, data.c, data.h, data.w, data.classes, b, pipe.microbatches,
                     pipe.first[pipe.stage], pipe.first[pipe.stage + 1], be, ctx,
                     (uint64_t)opt.seed);

    double bucket = opt.bucket_mb * 1048576.0 / sizeof(float);
    ExchangeConfig xcfg = {
        .comm = pipe.stage_comm, /* COMM_WORLD in data parallelism */
        .topo = &topo,
        .nparams = model.nparams,
        .bucket_floats = bucket < 1 ? 1 : (bucket > 1 << 30 ? (size_t)1 << 30 : (size_t)bucket),
        .be = be,
        .ctx = ctx,
        .lr = (float)opt.lr,
        .momentum = (float)opt.momentum,
        .weight_decay = (float)opt.weight_decay,
        .velocity = model.momentum,
        .staleness = opt.staleness,
        .ps_ranks = opt.ps_ranks,
        .sync_period = opt.sync_period,
        .transport = tops,
        .overlap = opt.overlap,
    };
    ExchangeState *xstate = xops->create(&xcfg, err, sizeof err);
    usage_check_all(xstate != NULL, "%s", err);
    int worker_index = 0, worker_count = 1;
    int role = xops->role(xstate, &worker_index, &worker_count);

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

    /* What this rank runs on (/ranks/device_* and versions), and the sampler (/samples). */
    DeviceInfo dev;
    registry_device_info(be, ctx, &dev);
    if (be->device_memory) nvml_driver_version(dev.driver_version, sizeof dev.driver_version);
    Sampler *sampler = NULL;
    int64_t sample_cap = 0;
    if (opt.sample_hz > 0) {
        char note[320];
        sample_cap = (int64_t)ceil(opt.sample_hz * opt.sample_max_s);
        sampler =
            sampler_create(opt.sample_hz, sample_cap, be->device_memory ? dev.pci_bus_id : NULL,
                           off.offset, t0, note, sizeof note);
        if (note[0] && topo.local_rank == 0)
            fprintf(stderr,
                    "dtbench: warning: node %d: no GPU sampling (%s); /samples holds the "
                    "process's CPU use and resident memory instead\n",
                    topo.node, note);
    }
    RunAttr rank_text[] = {
        RUN_TEXT("device_name", dev.name),
        RUN_TEXT("device_uuid", dev.uuid),
        RUN_TEXT("device_pci_bus_id", dev.pci_bus_id),
        RUN_TEXT("driver_version", dev.driver_version),
        RUN_TEXT("cuda_runtime_version", dev.cuda_runtime),
        RUN_TEXT("cuda_driver_api_version", dev.cuda_driver_api),
        RUN_TEXT("cudnn_version", dev.cudnn),
        RUN_TEXT("cublas_version", dev.cublas),
        RUN_TEXT("nccl_version", dev.nccl),
        RUN_TEXT("sample_source", sampler ? sampler_source(sampler) : ""),
    };

    /* The result file. */
    char *cmdline = join_args(argc, argv), *config_json = options_to_json(&opt);
    const char *slurm = getenv("SLURM_JOB_ID");
    /* The batch template (slurm/) and dtbench-campaign set DTBENCH_SUBMIT_LINE. */
    const char *nodelist = getenv("SLURM_JOB_NODELIST"), *submit = getenv("DTBENCH_SUBMIT_LINE");
    RunAttr attrs[] = {
        RUN_TEXT("dtbench_version", PACKAGE_VERSION),
        RUN_TEXT("git_commit", DTBENCH_GIT_COMMIT),
        RUN_TEXT("command_line", cmdline),
        RUN_TEXT("config_json", config_json),
        RUN_TEXT("mpi_library", mpi_lib),
        RUN_TEXT("hdf5_version", hdf5_ver),
        RUN_TEXT("backend_info", backend_info),
        RUN_TEXT("slurm_job_id", slurm ? slurm : ""),
        RUN_TEXT("slurm_nodelist", nodelist ? nodelist : ""),
        RUN_TEXT("submit_line", submit ? submit : ""),
        RUN_TEXT("model", opt.model),
        RUN_TEXT("dataset", opt.dataset),
        RUN_TEXT("exchange", opt.exchange),
        RUN_TEXT("transport", opt.transport),
        RUN_TEXT("device", opt.device),
        RUN_TEXT("tag", opt.tag),
        RUN_INT("nranks", topo.nranks),
        RUN_INT("nnodes", topo.nnodes),
        RUN_INT("iters", opt.iters),
        RUN_INT("batch_global", opt.batch),
        RUN_INT("batch_per_rank", b),
        RUN_INT("param_count", (long long)model.total_params),
        RUN_INT("clock_sync_rounds", CLOCK_SYNC_ROUNDS),
        RUN_INT("nworkers", nworkers),
        RUN_INT("staleness_bound", opt.staleness),
        RUN_INT("ps_ranks", !strcmp(opt.exchange, "async") ? opt.ps_ranks : 0),
        RUN_INT("sync_period", opt.sync_period),
        RUN_TEXT("straggler", opt.straggler),
        RUN_REAL("target_accuracy", opt.target_acc > 0 ? opt.target_acc : NAN),
        RUN_TEXT("parallel", opt.parallel),
        RUN_INT("stages", pipe.stages),
        RUN_INT("replicas", pipe.replicas),
        RUN_INT("microbatches", pipe.microbatches),
        RUN_TEXT("stage_first_layers", pipe.split_text),
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
        .role = role,
        .pid = (long long)getpid(),
        .clock_offset_start = off.offset,
        .clock_rtt = off.rtt,
        .rank_text = rank_text,
        .nrank_text = (int)(sizeof rank_text / sizeof rank_text[0]),
        .sample_capacity = sample_cap,
        .sample_hz = opt.sample_hz,
        .sample_pull = sampler ? sampler_pull : NULL,
        .sample_user = sampler,
    };
    Recorder *rec = rops->create(&rcfg, err, sizeof err);
    usage_check_all(rec != NULL, "%s", err);

    Trainer tr = {&opt, &topo,      &data, &model,       xops,         xstate,   rops,
                  rec,  off.offset, t0,    worker_index, worker_count, straggler};
    TrainResult res = {.last_accuracy = -1.0};
    if (sampler) sampler_start(sampler);
    if (role == EXCHANGE_SERVER) {
        xops->serve(xstate, model.params);
        xops->finish(xstate, model.params);
    } else {
        res = pipe.mode == PARALLEL_DATA ? trainer_run(&tr) : pipeline_run(&tr, &pipe);
    }
    if (sampler) sampler_stop(sampler); /* close() writes what it took */
    int64_t pushed = 0, applied = 0;
    xops->counts(xstate, &pushed, &applied);

    ClockOffset off_end = clocksync_measure(MPI_COMM_WORLD, CLOCK_SYNC_ROUNDS);
    /* One verdict for the run: stopped early on any rank (servers included) means on all. */
    int why = res.target_reached ? 2 : (res.stopped ? 1 : 0), why_all = why;
    MPI_CHECK(MPI_Allreduce(&why, &why_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    int early = why_all > 0;
    RunEnd end = {early ? RUN_STOPPED : RUN_COMPLETED,
                  why_all == 2 ? "target" : (why_all == 1 ? "signal" : "completed"),
                  off_end.offset,
                  model_param_hash(&model),
                  pushed,
                  applied,
                  signals_time()};
    rops->close(rec, &end);
    if (sampler && sampler_dropped(sampler) > 0)
        fprintf(stderr,
                "dtbench: warning: rank %d: /samples was full after %lld samples "
                "(--sample-max-s %g); %lld later samples were not recorded\n",
                topo.rank, (long long)sampler_taken(sampler), opt.sample_max_s,
                (long long)sampler_dropped(sampler));
    sampler_free(sampler);
    if (opt.save_model[0] && pipeline_save_model(&pipe, &model, opt.save_model) != 0)
        fprintf(stderr, "dtbench: rank 0: cannot write --save-model %s: %s\n", opt.save_model,
                strerror(errno));

    double worst = res.median_total;
    MPI_CHECK(MPI_Reduce(&res.median_total, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (topo.rank == 0 && early && !dt_exit_status) /* a write error has printed its own line */
        printf("stopped early (%s) after %lld of %lld iterations; the file is closed and "
               "marked stop_reason=%s\n",
               end.stop_reason, (long long)res.iterations, (long long)rcfg.iters_total,
               end.stop_reason);
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
    for (int i = 0; i < cr.n; i++)
        free((char *)config_rows[i].key), free((char *)config_rows[i].text);
    free(cmdline), free(config_json);
    topology_free(&topo);
    MPI_Finalize();
    return dt_exit_status; /* 1 after a write error (recorder) */
}
