/* run_setup.c - what a run records besides its iterations (see run.h): the start-up lines, the
 * clock offsets, the sampler, and the result file with its metadata (versions, configuration
 * generated from the option table, the plan's numbers). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <config.h>
#include "run.h"
#include "calibrate.h"  /* defines: calibrate_method */
#include "step_graph.h" /* defines: STEP_GRAPH_FORWARD, STEP_GRAPH_BACKWARD */
#include "mpi_check.h"
#include "nvml.h"
#include "outputs.h"
#include "names.h"     /* defines: NAME_OF */
#include "precision.h" /* defines: precision_loss_scaling */
#include "profile.h"   /* defines: profile_amounts (--profile-layers' roofline) */
#include "registry.h"
#include "roofline.h"
#include "watchdog.h" /* defines: watchdog_keeper */
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_now */
#include "fail.h"  /* defines: dt_hostname */

#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif

Optimizer run_optimizer(const Options *o) {
    return (Optimizer){.kind = o->optimizer,
                       .lr = (float)o->lr,
                       .weight_decay = (float)o->weight_decay,
                       .momentum = (float)o->momentum,
                       .beta1 = (float)o->beta1,
                       .beta2 = (float)o->beta2,
                       .eps = (float)o->eps};
}

DriverSettings run_driver_settings(const Options *o) {
    return (DriverSettings){
        .warmup = o->warmup,
        .iters = o->iters,
        .batch = o->batch,
        .eval_every = o->eval_every,
        .target_acc = o->target_acc,
        .duration = o->duration,
        .overlap = o->overlap,
        .optim = run_optimizer(o),
        .loss_scaling = precision_loss_scaling(o->precision),
    };
}

static int has_env(const char *name) {
    const char *v = getenv(name);
    return v && *v;
}

const char *run_launcher(void) {
    static const char *launcher;
    if (!launcher)
        launcher = has_env("OMPI_COMM_WORLD_SIZE") || has_env("MPI_LOCALNRANKS") ? "mpirun"
                   : has_env("SLURM_STEP_ID") || has_env("SLURM_STEPID")         ? "srun"
                   : has_env("PMIX_RANK") || has_env("PMI_RANK")                 ? "other"
                                                                                 : "none";
    return launcher;
}

void run_check_outputs(Run *r) {
    char err[1024] = "";
    const Options *o = &r->opt;
    /* rank 0 claims (resolves, compares, opens, locks) the output files: outputs.h */
    usage_check_all(r->topo.rank != 0 ||
                        outputs_claim(o->output, o->save_model, o->overwrite, err, sizeof err) == 0,
                    "%s", err);
}

static void print_option(const char *key, const char *value, void *user) {
    (void)user;
    printf("  %-16s %s\n", key, value);
}

static void collect_option(const char *key, const char *value, void *user) {
    Run *r = user;
    r->config_rows[r->nconfig++] = (RunAttr)RUN_TEXT(strdup(key), strdup(value));
}

/* Median cost of one phase mark on the backend's timeline (on the last phase slot, which no
 * phase uses: slot 0 opens an iteration, and a backend may count on that). */
static double timer_overhead(const BackendOps *be, BackendCtx *ctx) {
    enum { N = 1001 };
    static double cost[N];
    for (int i = 0; i < N; i++) {
        double t = dt_now();
        be->timer_record(ctx, BACKEND_PHASE_SLOTS - 1);
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

/* The root attribute `graphs`: the parts of a step replayed from graphs. */
static const char *graphs_text(int parts) {
    return parts == (STEP_GRAPH_FORWARD | STEP_GRAPH_BACKWARD) ? "forward,backward"
           : parts                                             ? "forward"
                                                               : "off";
}

static void print_start(const Run *r, const char *backend_info) {
    const Options *o = &r->opt;
    printf("dtbench %s (%s): %d ranks on %d nodes, %s\n", PACKAGE_VERSION, DTBENCH_GIT_COMMIT,
           r->topo.nranks, r->topo.nnodes, backend_info);
    printf("configuration:\n");
    options_visit(o, print_option, NULL);
    printf("model %s: %zu parameters, %.3f GFLOP forward per sample; data %s [%d,%d,%d], "
           "%zu training samples\n",
           r->md->name, r->plan_model.total_params, model_flops_per_sample(&r->plan_model) / 1e9,
           r->data.name, r->data.c, r->data.h, r->data.w, r->data.ntrain);
    if (r->pipe.mode != PARALLEL_DATA) pipeline_print(&r->pipe, &r->plan_model, stdout);
    const int parts = r->graph_parts;
    printf("step: prefetch %s%s%s%s; graphs %s%s%s%s\n", r->prefetch ? "on" : "off",
           r->prefetch ? "" : " (", r->prefetch ? "" : r->prefetch_why, r->prefetch ? "" : ")",
           graphs_text(parts), r->graphs_why[0] ? " (" : "", r->graphs_why,
           r->graphs_why[0] ? ")" : "");
    fflush(stdout);
    /* graphs are captured in the first iterations that need them: keep that out of the figures */
    if (parts && o->warmup < 1 + (r->prefetch ? 2 : 1))
        fprintf(stderr,
                "dtbench: warning: --graphs captures its graphs in iterations 1%s, measured with "
                "--warmup %d: use --warmup %d or more to keep the captures out of the figures\n",
                r->prefetch ? " and 2" : "", o->warmup, 1 + (r->prefetch ? 2 : 1));
}

/* The sampler (/samples), when --sample-hz is set; its capacity. */
static int64_t start_sampler(Run *r, const DeviceInfo *dev) {
    const Options *o = &r->opt;
    if (o->sample_hz <= 0) return 0;
    char note[320];
    int64_t cap = (int64_t)ceil(o->sample_hz * o->sample_max_s);
    r->sampler = sampler_create(o->sample_hz, cap, r->plan.be->device_memory ? dev->pci_bus_id : NULL,
                                r->off.offset, r->t0, note, sizeof note);
    if (note[0] && r->topo.local_rank == 0)
        fprintf(stderr,
                "dtbench: warning: node %d: no GPU sampling (%s); /samples holds the "
                "process's CPU use and resident memory instead\n",
                r->topo.node, note);
    return cap;
}

/* Threads of a rank that compute or progress: --threads, plus the --progress thread. */
static int rank_threads(const Options *o) {
    return o->threads + (o->progress == PROGRESS_THREAD);
}

/* Ranks x threads against cores: more than a host has online, or more threads than a rank's
 * affinity mask holds (mpirun binds a rank to one core by default), and threads share cores: a
 * rank's recorded phases then hold other ranks' compute (a rank waiting in the exchange for its
 * core-mate's backward records that backward as exchange), and a progress thread waits for the
 * scheduler at every step of a collective. Stored as the root attributes host_cores,
 * host_ranks_max and oversubscribed; warned by run_warn_cores once every refusal is past.
 * Collective. */
static void check_cores(Run *r) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t mask;
    int bound = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 0;
    int threads = rank_threads(&r->opt), on_host = r->topo.host_local_size;
    int shared = on_host * threads > online || (bound > 0 && bound < threads);
    /* --prefetch's batch loader (src/data/loader.h): the cores this rank may use and its share of
     * the host's, 1 to 4 threads (a batch is a copy: memory-bound beyond a few threads); the same
     * on every rank, the fewest any rank may use */
    int share = online > 0 ? (int)(online / on_host) : 1, may = bound > 0 ? bound : share;
    int loader = may < share ? may : share;
    loader = loader < 1 ? 1 : loader > 4 ? 4 : loader;
    int mine[4] = {shared, on_host, online > 0 ? -(int)online : 0, -loader}, all[4];
    MPI_CHECK(MPI_Allreduce(mine, all, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    r->oversubscribed = all[0], r->host_ranks_max = all[1], r->host_cores = -all[2];
    r->loader_threads = -all[3];
}

void run_warn_cores(const Run *r) {
    if (r->topo.rank != 0 || !r->oversubscribed) return;
    const int thread = r->opt.progress == PROGRESS_THREAD;
    fprintf(stderr,
            "dtbench: warning: up to %d ranks x %d thread(s)%s on a host of %d cores, or more "
            "threads than a rank's bound cores: threads share cores, and each rank's phase times "
            "(the exchange above all) include other ranks' compute%s; recorded as "
            "oversubscribed=1\n",
            r->host_ranks_max, rank_threads(&r->opt), thread ? " (one a progress thread)" : "",
            r->host_cores,
            thread ? ", and the progress threads wait for the scheduler (poll is faster there)"
                   : "");
}

/* ---- the result file: root attributes, /config, this rank's device and clocks ---------------- */

/* The MPI library's version line and HDF5's version, for the file's root attributes. */
static void library_versions(char mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING], char *hdf5_ver,
                             size_t len) {
    int n = 0;
    MPI_Get_library_version(mpi_lib, &n);
    mpi_lib[strcspn(mpi_lib, "\n")] = '\0';
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    snprintf(hdf5_ver, len, "%u.%u.%u", maj, min, rel);
}

/* The backend's per-layer choices (the model is built: all planned), malloc'd; NULL if none. */
static char *kernel_choices(const BackendOps *be, BackendCtx *ctx) {
    if (!be->describe_kernels) return NULL;
    size_t n = be->describe_kernels(ctx, NULL, 0);
    char *text = xcalloc(n + 1, 1);
    be->describe_kernels(ctx, text, n + 1);
    return text;
}

/* --profile-layers' roofline in the result file: this rank's amounts (to free; NULL for a rank
 * that runs no layer); its peaks are device_peak's. */
static double *roofline_config(const Run *r) {
    if (r->opt.profile_layers <= 0 || r->role == EXCHANGE_SERVER) return NULL;
    double *amounts = xcalloc(PROFILE_AMOUNTS * (size_t)r->model.nlayers, sizeof *amounts);
    profile_amounts(&r->model, amounts);
    return amounts;
}

/* This rank's device peaks (roofline.h), found before training where the table does not know the
 * device (a fraction of a second): both with --profile-layers (its roofline), else the compute
 * alone (the root attribute peak_flops, for MFU). */
static void measure_peak(const Run *r, const DeviceInfo *dev, RooflinePeak *peak) {
    if (r->opt.profile_layers > 0)
        roofline_peak(r->plan.be, r->ctx, dev->name, r->plan.precision, r->model.act, peak);
    else
        roofline_peak_flops(r->plan.be, r->ctx, dev->name, r->plan.precision, r->model.act, peak);
}

/* device_peak for every rank of the node: a GPU rank finds its own device's; the host ranks
 * (CPU backend) share one measurement, made by the node's first such rank while the others wait,
 * so that it is neither repeated nor slowed by the others measuring on the same cores at once; a
 * parameter server computes no step: NaN. Collective over the node. */
static void device_peak(const Run *r, const DeviceInfo *dev, RooflinePeak *peak) {
    const int worker = r->role != EXCHANGE_SERVER, host = worker && !r->plan.be->device_memory;
    MPI_Comm node = r->topo.node_comm;
    int mine = host ? r->topo.local_rank : INT_MAX, measurer, hosts = host;
    MPI_CHECK(MPI_Allreduce(&mine, &measurer, 1, MPI_INT, MPI_MIN, node));
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &hosts, 1, MPI_INT, MPI_SUM, node));
    memset(peak, 0, sizeof *peak);
    peak->bandwidth = peak->flops = NAN;
    if (worker && !host) measure_peak(r, dev, peak);
    if (!worker) {
        snprintf(peak->flops_how, ROOFLINE_HOW_LEN, "unknown: a parameter server");
        snprintf(peak->bandwidth_how, ROOFLINE_HOW_LEN, "unknown: a parameter server");
    }
    if (measurer == INT_MAX) return;
    RooflinePeak shared;
    if (r->topo.local_rank == measurer) {
        measure_peak(r, dev, &shared);
        if (hosts > 1) {
            char *hows[2] = {shared.flops_how, shared.bandwidth_how};
            for (int i = 0; i < 2; i++)
                if (!strncmp(hows[i], "measured", 8)) {
                    size_t n = strlen(hows[i]);
                    snprintf(hows[i] + n, ROOFLINE_HOW_LEN - n,
                             "; once for the node's %d ranks, by its local rank %d", hosts, measurer);
                }
        }
    }
    MPI_CHECK(MPI_Bcast(&shared, (int)sizeof shared, MPI_BYTE, measurer, node));
    if (host) *peak = shared;
}

/* The root attribute peak_flops: the mean over the ranks that compute (all but parameter servers)
 * of their devices' peaks, so that peak_flops x nworkers is the run's whole compute (NaN when
 * some rank's is unknown); `how` (peak_flops_source): the first such rank's method. Collective. */
static double run_peak_flops(const Run *r, const RooflinePeak *peak, char *how, size_t len) {
    const int worker = r->role != EXCHANGE_SERVER;
    double mine[3] = {worker && isfinite(peak->flops) ? peak->flops : 0.0,
                      worker && isfinite(peak->flops), worker},
           all[3];
    MPI_CHECK(MPI_Allreduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    int first = worker ? r->topo.rank : r->topo.nranks;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    char text[ROOFLINE_HOW_LEN];
    snprintf(text, sizeof text, "%s", peak->flops_how);
    if (first < r->topo.nranks)
        MPI_CHECK(MPI_Bcast(text, sizeof text, MPI_CHAR, first, MPI_COMM_WORLD));
    const int n = (int)all[2], known = (int)all[1];
    if (n > 1)
        snprintf(how, len, "rank %d: %s; the mean over %d ranks%s", first, text, n,
                 known < n ? " (some unknown)" : "");
    else
        snprintf(how, len, "%s", text);
    return n > 0 && known == n ? all[0] / n : NAN;
}

/* /profile's columns (--profile-layers): the whole model's layers, malloc'd into rcfg. */
static void profile_columns(const Model *pm, const Options *o, RecorderConfig *rcfg) {
    const char **names = xcalloc((size_t)pm->nlayers, sizeof *names);
    const char **kinds = xcalloc((size_t)pm->nlayers, sizeof *kinds);
    double *flops = xcalloc((size_t)pm->nlayers, sizeof *flops);
    for (int i = 0; i < pm->nlayers; i++) {
        names[i] = pm->layers[i].d.name, kinds[i] = model_layer_kind_name(pm, i);
        flops[i] = pm->layers[i].flops;
    }
    rcfg->profile_iters = o->profile_layers, rcfg->profile_layers = pm->nlayers;
    rcfg->profile_first = o->warmup;
    rcfg->profile_names = names, rcfg->profile_kinds = kinds, rcfg->profile_flops = flops;
}

/* The result file with the root attributes attrs[nattrs]: /config, this rank's device, clocks
 * and kernels, the sampler's datasets and /profile's columns. One line and exit 2 when it cannot
 * be made. */
static void open_file(Run *r, const RunAttr *attrs, int nattrs, const DeviceInfo *dev,
                      const RooflinePeak *peak, int64_t sample_cap) {
    const Options *o = &r->opt;
    const RunPlan *p = &r->plan;
    char err[1024] = "";
    char *kernels = kernel_choices(p->be, r->ctx);
    RunAttr rank_text[] = {
        RUN_TEXT("device_name", dev->name),
        RUN_TEXT("device_uuid", dev->uuid),
        RUN_TEXT("device_pci_bus_id", dev->pci_bus_id),
        RUN_TEXT("driver_version", dev->driver_version),
        RUN_TEXT("cuda_runtime_version", dev->cuda_runtime),
        RUN_TEXT("cuda_driver_api_version", dev->cuda_driver_api),
        RUN_TEXT("cudnn_version", dev->cudnn),
        RUN_TEXT("cublas_version", dev->cublas),
        RUN_TEXT("nccl_version", dev->nccl),
        RUN_TEXT("sample_source", r->sampler ? sampler_source(r->sampler) : ""),
    };
    DriverSettings set = run_driver_settings(o);
    /* the memory held for the model's parameters, gradients and optimizer state: the state of
     * this rank's shard where the exchange shards it */
    const double moments = o->optimizer == OPTIMIZER_ADAMW ? 2.0 : 1.0;
    const double updated =
        p->xops->shard_size ? (double)p->xops->shard_size(r->xstate) : (double)r->model.nparams;
    size_t held_p = r->model.nparams, held_g = r->model.nparams; /* zero3: the shard and a group */
    if (p->xops->held_floats) p->xops->held_floats(r->xstate, &held_p, &held_g);
    RecorderConfig rcfg = {
        .path = o->output,
        .overwrite = o->overwrite,
        .comm = MPI_COMM_WORLD,
        .keeper = &watchdog_keeper, /* a lost peer loses none of this rank's records */
        .iters_total = (int64_t)o->warmup + o->iters,
        .warmup = o->warmup,
        .flush_every = o->flush_every,
        .grow = p->xops->lockstep, /* /iterations grows at the block boundaries ranks share */
        .n_evals = driver_eval_count(&set, &r->data),
        .attrs = attrs,
        .nattrs = nattrs,
        .config = r->config_rows,
        .nconfig = r->nconfig,
        .timer_overhead = timer_overhead(p->be, r->ctx),
        .host = dt_hostname(),
        .node = r->topo.node,
        .local_rank = r->topo.local_rank,
        .role = r->role,
        .pid = (long long)getpid(),
        .clock_offset_start = r->off.offset,
        .clock_rtt = r->off.rtt,
        .memory_params = (double)held_p * sizeof(float),
        .memory_grads = (double)held_g * sizeof(float),
        .memory_optimizer = moments * updated * sizeof(float),
        .rank_text = rank_text,
        .nrank_text = (int)(sizeof rank_text / sizeof rank_text[0]),
        .kernel_choices = kernels,
        .sample_capacity = sample_cap,
        .sample_hz = o->sample_hz,
        .sample_pull = r->sampler ? sampler_pull : NULL,
        .sample_user = r->sampler,
    };
    profile_columns(&r->plan_model, o, &rcfg);
    double *amounts = roofline_config(r);
    rcfg.profile_amounts = amounts, rcfg.profile_peak = amounts ? peak : NULL;
    r->rec = p->rops->create(&rcfg, err, sizeof err);
    free(kernels), free((void *)rcfg.profile_names), free((void *)rcfg.profile_kinds);
    free((void *)rcfg.profile_flops), free(amounts);
    usage_check_all(r->rec != NULL, "%s", err);
}

/* The file's root attributes: versions, where and how the run was started, its plan and
 * calibration, and the configuration (/config); the texts they name live to the end of this
 * function, which opens the file with them. */
static void create_recorder(Run *r, const DeviceInfo *dev, const char *backend_info,
                            int64_t sample_cap) {
    const Options *o = &r->opt;
    const RunPlan *p = &r->plan;
    char mpi_lib[MPI_MAX_LIBRARY_VERSION_STRING] = "", hdf5_ver[64];
    library_versions(mpi_lib, hdf5_ver, sizeof hdf5_ver);
    char cal_method[512];
    calibrate_method(&r->calibration, cal_method, sizeof cal_method);
    r->cmdline = join_args(r->argc, r->argv), r->config_json = options_to_json(o);
    const char *slurm = getenv("SLURM_JOB_ID");
    /* The batch template (slurm/) and dtbench-campaign set DTBENCH_SUBMIT_LINE. */
    const char *nodelist = getenv("SLURM_JOB_NODELIST"), *submit = getenv("DTBENCH_SUBMIT_LINE");
    /* tokens/s and MFU (dtbench-analyze): tokens per sample, training FLOPs, the device's peak */
    RooflinePeak peak;
    device_peak(r, dev, &peak);
    char peak_how[2 * ROOFLINE_HOW_LEN];
    const double peak_flops = run_peak_flops(r, &peak, peak_how, sizeof peak_how);
    RunAttr attrs[] = {
        RUN_TEXT("dtbench_version", PACKAGE_VERSION),
        RUN_TEXT("git_commit", DTBENCH_GIT_COMMIT),
        RUN_TEXT("command_line", r->cmdline),
        RUN_TEXT("config_json", r->config_json),
        RUN_TEXT("mpi_library", mpi_lib),
        RUN_TEXT("hdf5_version", hdf5_ver),
        RUN_TEXT("backend_info", backend_info),
        RUN_TEXT("slurm_job_id", slurm ? slurm : ""),
        RUN_TEXT("slurm_nodelist", nodelist ? nodelist : ""),
        RUN_TEXT("submit_line", submit ? submit : ""),
        RUN_TEXT("launcher", run_launcher()),
        RUN_TEXT("model", o->model),
        RUN_TEXT("dataset", NAME_OF(DATASET_NAMES, o->dataset)),
        RUN_TEXT("exchange", o->exchange),
        RUN_TEXT("transport", o->transport),
        RUN_TEXT("grad_dtype", NAME_OF(GRAD_DTYPE_NAMES, o->grad_dtype)),
        RUN_TEXT("device", o->device),
        RUN_TEXT("precision", PRECISION_NAME(o->precision)),
        RUN_TEXT("prefetch", r->prefetch ? "on" : "off"),
        RUN_TEXT("prefetch_reason", r->prefetch_why),
        RUN_INT("loader_threads", r->prefetch ? r->loader_threads : 0),
        RUN_TEXT("graphs", graphs_text(r->graph_parts)),
        RUN_TEXT("graphs_reason", r->graphs_why),
        RUN_TEXT("tag", o->tag),
        RUN_INT("nranks", r->topo.nranks),
        RUN_INT("nnodes", r->topo.nnodes),
        RUN_INT("iters", o->iters),
        RUN_INT("batch_global", o->batch),
        RUN_INT("batch_per_rank", r->batch),
        RUN_INT("param_count", (long long)r->plan_model.total_params), /* the whole model's */
        RUN_INT("tokens_per_sample", r->md->vocab > 0 ? r->plan_model.label_size : 0),
        RUN_REAL("train_flops_per_sample", model_train_flops_per_sample(&r->plan_model)),
        RUN_REAL("peak_flops", peak_flops),
        RUN_TEXT("peak_flops_source", peak_how),
        RUN_INT("clock_sync_rounds", CLOCK_SYNC_ROUNDS),
        RUN_INT("host_cores", r->host_cores),
        RUN_INT("host_ranks_max", r->host_ranks_max),
        RUN_INT("oversubscribed", r->oversubscribed),
        RUN_INT("nworkers", p->nworkers),
        RUN_INT("staleness_bound", o->staleness),
        RUN_INT("ps_ranks", p->ps_ranks),
        RUN_INT("sync_period", o->sync_period),
        RUN_TEXT("straggler", o->straggler),
        RUN_REAL("target_accuracy", o->target_acc > 0 ? o->target_acc : NAN),
        RUN_TEXT("parallel", NAME_OF(PARALLEL_NAMES, o->parallel)),
        RUN_INT("stages", r->pipe.stages),
        RUN_INT("replicas", r->pipe.replicas),
        RUN_INT("tp", r->pipe.tp), /* ranks per tensor group, 1: none */
        RUN_INT("microbatches", r->pipe.microbatches),
        RUN_TEXT("stage_first_layers", r->pipe.split_text),
        RUN_INT("calibration_iters", r->calibration.iters),
        RUN_TEXT("calibration_method", cal_method),
        RUN_REAL("calibration_exchange_s", r->calibration.iters ? r->calibration.seconds : NAN),
        RUN_REAL("calibration_exchange_lo_s",
                 r->calibration.iters ? r->calibration.seconds_lo : NAN),
        RUN_REAL("calibration_exchange_hi_s",
                 r->calibration.iters ? r->calibration.seconds_hi : NAN),
        RUN_REAL("calibration_bucket_bytes", r->calibration.bucket_bytes),
        RUN_REAL("calibration_busbw_factor", r->calibration.busbw_factor),
        RUN_REAL("calibration_busbw",
                 r->calibration.iters
                     ? r->calibration.bytes / r->calibration.seconds * r->calibration.busbw_factor
                     : NAN),
    };
    options_visit(o, collect_option, r);
    open_file(r, attrs, (int)(sizeof attrs / sizeof attrs[0]), dev, &peak, sample_cap);
}

void run_open_records(Run *r) {
    const BackendOps *be = r->plan.be;
    char backend_info[512] = "";
    be->describe(r->ctx, backend_info, sizeof backend_info);
    if (r->topo.rank == 0) print_start(r, backend_info);

    /* Clocks: offset of every rank to rank 0, and rank 0's start time. */
    r->off = clocksync_measure(MPI_COMM_WORLD, CLOCK_SYNC_ROUNDS);
    r->t0 = dt_now();
    MPI_CHECK(MPI_Bcast(&r->t0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));

    /* What this rank runs on (/ranks/device_* and versions), and the sampler (/samples). */
    DeviceInfo dev;
    registry_device_info(be, r->ctx, &dev);
    if (be->device_memory) nvml_driver_version(dev.driver_version, sizeof dev.driver_version);
    int64_t cap = start_sampler(r, &dev);
    check_cores(r);
    create_recorder(r, &dev, backend_info, cap);
}

void run_free_records(Run *r) {
    for (int i = 0; i < r->nconfig; i++)
        free((char *)r->config_rows[i].key), free((char *)r->config_rows[i].text);
    free(r->cmdline), free(r->config_json);
}
