/* resolve.c - from parsed options to a run plan (see resolve.h). First the components are looked
 * up; then every option given explicitly that some component of the registry reads must be read
 * by one of the components chosen; then the capabilities each component declares are checked
 * against the others and the ranks. */
#include "resolve.h"
#include "mpi_check.h"
#include "count_device.h" /* defines: count_device_wrap */
#include "names.h"        /* defines: names_find, NAME_OF */
#include "registry.h"
#include "profile.h" /* defines: PROFILE_MAX_LAYERS */
#include "fail.h"    /* defines: check_fail, dt_hostname */

#include <stdio.h>
#include <string.h>

/* One component: how an error message names it, and what it reads. */
typedef struct {
    char label[64]; /* "--exchange sync" */
    const char *reads;
} Reader;

enum { MAX_READERS = 64 };

/* Modes chosen by an option's value rather than by a component of the registry, and the options
 * each reads: a data folder is read only for data sets made of files, the size of /samples only
 * when sampling. */
static int on_files(const Options *o) {
    return o->dataset != DATA_SYNTHETIC;
}
static int generated(const Options *o) {
    return !on_files(o);
}
static int sampling(const Options *o) {
    return o->sample_hz > 0;
}
static int not_sampling(const Options *o) {
    return !sampling(o);
}
static int sgd(const Options *o) {
    return o->optimizer == OPTIMIZER_SGD;
}
static int adamw(const Options *o) {
    return o->optimizer == OPTIMIZER_ADAMW;
}
static const struct {
    const char *label, *reads;
    int (*chosen)(const Options *o);
} MODES[] = {
    {"--dataset synthetic", NULL, generated},
    {"--dataset fashion-mnist, mnist, cifar10, text or tokens", "data-dir", on_files},
    {"--sample-hz 0", NULL, not_sampling},
    {"--sample-hz above 0", "sample-max-s", sampling},
    {"--optimizer sgd", "momentum", sgd}, /* auto: resolved before (choose_optimizer) */
    {"--optimizer adamw", "beta1,beta2,eps", adamw},
};
#define NMODES ((int)(sizeof MODES / sizeof MODES[0]))

/* The modes that are (chosen 1) or are not (0) this run's, appended to r from n; returns n. */
static int add_modes(const Options *o, int chosen, Reader *r, int n) {
    for (int i = 0; i < NMODES && n < MAX_READERS; i++)
        if (!MODES[i].chosen(o) == !chosen)
            snprintf(r[n].label, sizeof r[n].label, "%s", MODES[i].label),
                r[n++].reads = MODES[i].reads;
    return n;
}

/* Every registered component and mode, then those this build left out; the chosen ones first
 * (*nchosen of them, the schedule last). */
static int all_readers(const Options *o, const RunPlan *p, Reader *r, int *nchosen) {
    int n = 0, k;
    snprintf(r[n].label, sizeof r[n].label, "--device %s", p->be->name), r[n++].reads = p->be->reads;
    snprintf(r[n].label, sizeof r[n].label, "--exchange %s", p->xops->name),
        r[n++].reads = p->xops->reads;
    snprintf(r[n].label, sizeof r[n].label, "--transport %s", p->tops->name),
        r[n++].reads = p->tops->reads;
    n = add_modes(o, 1, r, n);
    if (p->sched->pipeline)
        snprintf(r[n].label, sizeof r[n].label, "--schedule %s", p->sched->name);
    else if (p->mode == PARALLEL_TENSOR)
        snprintf(r[n].label, sizeof r[n].label, "--parallel tensor without --stages");
    else
        snprintf(r[n].label, sizeof r[n].label, "--parallel data");
    r[n++].reads = p->sched->reads;
    *nchosen = n;
    const BackendOps *const *be = registry_backends(&k);
    for (int i = 0; i < k && n < MAX_READERS; i++, n++)
        snprintf(r[n].label, sizeof r[n].label, "--device %s", be[i]->name), r[n].reads = be[i]->reads;
    const ExchangeOps *const *x = registry_exchanges(&k);
    for (int i = 0; i < k && n < MAX_READERS; i++, n++)
        snprintf(r[n].label, sizeof r[n].label, "--exchange %s", x[i]->name), r[n].reads = x[i]->reads;
    const TransportOps *const *t = registry_transports(&k);
    for (int i = 0; i < k && n < MAX_READERS; i++, n++)
        snprintf(r[n].label, sizeof r[n].label, "--transport %s", t[i]->name), r[n].reads = t[i]->reads;
    const ScheduleOps *const *s = registry_schedules(&k);
    for (int i = 0; i < k && n < MAX_READERS; i++, n++) {
        if (s[i]->pipeline)
            snprintf(r[n].label, sizeof r[n].label, "--schedule %s", s[i]->name);
        else
            snprintf(r[n].label, sizeof r[n].label, "--parallel data");
        r[n].reads = s[i]->reads;
    }
    n = add_modes(o, 0, r, n);
    for (const RegistryUnbuilt *u = registry_unbuilt(); u->label && n < MAX_READERS; u++, n++)
        snprintf(r[n].label, sizeof r[n].label, "%s", u->label), r[n].reads = u->reads;
    return n;
}

/* Every name in every reads list is an option of the table: a misspelt one would silently switch
 * off that option's refusal, so it ends the run as a defect of the build. */
static void check_reads_exist(const Reader *r, int n) {
    for (int i = 0; i < n; i++)
        for (const char *q = r[i].reads; q && *q;) {
            char key[64];
            size_t len = strcspn(q, ",");
            snprintf(key, sizeof key, "%.*s", (int)len, q);
            q += len + (q[len] == ',');
            if (!options_exists(key)) {
                char what[160];
                snprintf(what, sizeof what, "%s's list of options read", r[i].label);
                check_fail(__FILE__, __LINE__, what, "names an option the table lacks");
            }
        }
}

/* Every option in some component's reads list that was given explicitly must be read by a
 * chosen component: "--staleness: 2 is not accepted with --exchange sync (read by --exchange
 * async, --exchange ssp)". */
static void check_reads(const Options *opt, const RunPlan *p) {
    Reader r[MAX_READERS];
    int nchosen, n = all_readers(opt, p, r, &nchosen);
    check_reads_exist(r, n);
    for (int i = nchosen; i < n; i++) {
        for (const char *q = r[i].reads; q && *q;) {
            char key[64];
            size_t len = strcspn(q, ",");
            snprintf(key, sizeof key, "%.*s", (int)len, q);
            q += len + (q[len] == ',');
            if (!options_given(opt, key)) continue;
            int read = 0;
            for (int c = 0; c < nchosen; c++)
                read |= names_find(r[c].reads, key) >= 0;
            if (read) continue;
            char by[512] = "", value[300];
            for (int j = nchosen; j < n; j++)
                if (names_find(r[j].reads, key) >= 0 && !strstr(by, r[j].label) &&
                    strlen(by) + strlen(r[j].label) + 3 < sizeof by)
                    strcat(strcat(by, by[0] ? ", " : ""), r[j].label);
            options_value_text(opt, key, value, sizeof value);
            const char *with = r[nchosen - 1].label; /* the schedule, or --parallel data */
            for (int c = 0; c < nchosen - 1; c++) /* else the first chosen one of the same kind */
                if (!strncmp(r[c].label, by, strcspn(r[c].label, " ") + 1)) with = r[c].label;
            if (value[0])
                usage_check_all(0, "--%s: %s is not accepted with %s (read only by %s)", key,
                                value, with, by);
            usage_check_all(0, "--%s: not accepted with %s (read only by %s)", key, with, by);
        }
    }
}

/* Names of the registered strategies that can serve pipelines ("sync"). */
static const char *pipeline_exchanges(void) {
    static char names[256];
    int k;
    const ExchangeOps *const *x = registry_exchanges(&k);
    names[0] = '\0';
    for (int i = 0; i < k; i++)
        if (x[i]->pipeline_ok && strlen(names) + strlen(x[i]->name) + 2 < sizeof names)
            strcat(strcat(names, names[0] ? "," : ""), x[i]->name);
    return names;
}

/* Names of the registered backends on device memory ("cuda"), or a description. */
static const char *device_backends(void) {
    static char names[256];
    int k;
    const BackendOps *const *b = registry_backends(&k);
    names[0] = '\0';
    for (int i = 0; i < k; i++)
        if (b[i]->device_memory && strlen(names) + strlen(b[i]->name) + 2 < sizeof names)
            strcat(strcat(names, names[0] ? "," : ""), b[i]->name);
    return names[0] ? names : "a GPU backend (not built)";
}

/* A language model's samples are [1, 1, seq] token ids, its classes its vocabulary, whatever the
 * data set (synthetic, text or tokens); seq is --seq-len, or the model's context (its in_w). */
static void nominal_shape(const Options *opt, RunPlan *p) {
    if (p->md->vocab)
        p->in_c = 1, p->in_h = 1, p->in_w = opt->seq_len ? opt->seq_len : p->md->in_w,
        p->classes = p->md->vocab;
    else if (opt->dataset == DATA_SYNTHETIC)
        p->in_c = p->md->in_c, p->in_h = p->md->in_h, p->in_w = p->md->in_w,
        p->classes = p->md->classes;
    else if (opt->dataset == DATA_CIFAR10)
        p->in_c = 3, p->in_h = 32, p->in_w = 32, p->classes = 10;
    else
        p->in_c = 1, p->in_h = 28, p->in_w = 28, p->classes = 10;
}

/* --optimizer auto: the model's own (ModelDesc.adamw_default), decided here once; the options of
 * the other optimizer are then refused by check_reads (MODES). */
static void choose_optimizer(Options *opt, const RunPlan *p) {
    if (opt->optimizer == OPTIMIZER_AUTO)
        opt->optimizer = p->md->adamw_default ? OPTIMIZER_ADAMW : OPTIMIZER_SGD;
}

/* AdamW: a backend that has its update, betas below 1 (bias correction divides by 1 - beta^t) and
 * an eps a float holds above 0 (a parameter whose gradient is 0 would take 0/0: NaN). */
static void check_optimizer(const Options *opt, const RunPlan *p) {
    if (opt->optimizer != OPTIMIZER_ADAMW) return;
    usage_check_all(p->be->adamw_update != NULL,
                    "--optimizer: 'adamw' is not accepted with --device %s: it has no AdamW "
                    "update; expected sgd",
                    opt->device);
    usage_check_all(opt->beta1 < 1,
                    "--beta1: %g is not accepted: expected a number from 0 to below 1", opt->beta1);
    usage_check_all(opt->beta2 < 1,
                    "--beta2: %g is not accepted: expected a number from 0 to below 1", opt->beta2);
    usage_check_all((float)opt->eps > 0,
                    "--eps: %g is not accepted: expected a number above 0 that a float holds (with "
                    "0, a parameter whose gradient is 0 would become NaN)",
                    opt->eps);
}

/* The components, by name, and the parallel mode with its schedule. */
static void choose(Options *opt, RunPlan *p) {
    memset(p, 0, sizeof *p);
    p->md = registry_model(opt->model);
    if (p->md->vocab > 0 && !options_given(opt, "dataset")) /* a language model reads tokens */
        opt->dataset = DATA_SYNTHETIC;
    p->be = count_device_wrap(registry_backend(opt->device)); /* tests: DTBENCH_COUNT_DEVICE */
    usage_check_all(p->be != NULL, "--device: '%s' is not accepted on %s: %s", opt->device,
                    dt_hostname(), registry_load_error());
    p->xops = registry_exchange(opt->exchange);
    p->tops = registry_transport(opt->transport);
    usage_check_all(p->tops != NULL, "--transport: '%s' is not accepted on %s: %s", opt->transport,
                    dt_hostname(), registry_load_error());
    p->rops = registry_recorder("hdf5");
    p->mode = opt->parallel;
    const ScheduleOps *named = registry_schedule(opt->schedule);
    /* one stage: data parallelism, and tensor groups without --stages */
    if (p->mode == PARALLEL_DATA || (p->mode == PARALLEL_TENSOR && opt->stages <= 1)) {
        p->sched = registry_schedule("data");
        usage_check_all(!options_given(opt, "schedule") || named == p->sched,
                        "--schedule: '%s' is not accepted with --parallel %s: expected data "
                        "(pipeline schedules need --parallel model, hybrid, or tensor with "
                        "--stages)",
                        opt->schedule, NAME_OF(PARALLEL_NAMES, opt->parallel));
        opt->schedule = (char *)p->sched->name;
    } else {
        p->sched = named;
        usage_check_all(p->sched->pipeline,
                        "--schedule: '%s' is not accepted with --parallel %s: expected a pipeline "
                        "schedule (gpipe or 1f1b)",
                        opt->schedule, NAME_OF(PARALLEL_NAMES, opt->parallel));
    }
    nominal_shape(opt, p);
    choose_optimizer(opt, p);
}

/* --precision: the backend must run it on this machine (a CPU bf16 needs AVX512-BF16 or an
 * OpenBLAS with cblas_sbgemm); fp16's loss scaler skips a step on every rank together, which needs
 * the same averaged gradients everywhere: the sync exchange of data parallelism. */
static void check_precision(const Options *opt, RunPlan *p) {
    char why[256] = "expected fp32";
    p->precision = opt->precision;
    int ok = p->precision == PRECISION_FP32 ||
             (p->be->precision_ok &&
              p->be->precision_ok(p->precision, opt->threads, why, sizeof why));
    usage_check_all(ok, "--precision: '%s' is not accepted with --device %s: %s",
                    PRECISION_NAME(opt->precision), opt->device, why);
    usage_check_all(p->precision == PRECISION_FP32 || p->mode != PARALLEL_TENSOR,
                    "--precision: '%s' is not accepted with --parallel tensor: its group sums "
                    "fp32 activations; expected fp32",
                    PRECISION_NAME(opt->precision));
    usage_check_all(p->precision != PRECISION_FP16 ||
                        (p->xops->same_update && p->mode == PARALLEL_DATA),
                    "--precision: 'fp16' is not accepted with --exchange %s --parallel %s: its "
                    "loss scaling needs --exchange sync --parallel data",
                    opt->exchange, NAME_OF(PARALLEL_NAMES, opt->parallel));
    usage_check_all(p->precision != PRECISION_FP16 || p->be->all_finite,
                    "--precision: 'fp16' is not accepted with --device %s: no overflow check for "
                    "its loss scaling; expected fp32",
                    opt->device);
}

/* --progress thread: only where MPI collectives are in flight while compute runs (sync with
 * --overlap, ssp with --staleness >= 1; the strategies that read it), through an MPI level of
 * the transport (not nccl alone), and with the thread level MPI granted. Whether the thread has
 * a core of its own is run_setup.c's core check (a warning, not a refusal). */
static void check_progress(const Options *opt, const RunPlan *p) {
    if (opt->progress != PROGRESS_THREAD) return;
    const int how = p->xops->in_flight;
    usage_check_all(how == IN_FLIGHT_OVERLAP     ? opt->overlap
                    : how == IN_FLIGHT_STALENESS ? opt->staleness >= 1
                                                 : 0,
                    "--progress: 'thread' is not accepted with --exchange %s %s: no collective is "
                    "in flight while compute runs; expected poll",
                    opt->exchange,
                    how == IN_FLIGHT_OVERLAP     ? "without --overlap"
                    : how == IN_FLIGHT_STALENESS ? "--staleness 0"
                                                 : "");
    usage_check_all(p->tops->mpi_levels,
                    "--progress: 'thread' is not accepted with --transport nccl (NCCL runs on "
                    "its own stream); expected poll");
    int level = MPI_THREAD_SINGLE;
    MPI_CHECK(MPI_Query_thread(&level));
    usage_check_all(level >= MPI_THREAD_MULTIPLE,
                    "--progress: 'thread' is not accepted: this MPI grants thread level %d, "
                    "below MPI_THREAD_MULTIPLE; expected poll",
                    level);
}

ActLayout resolve_act_layout(const Options *opt, const RunPlan *p, const Model *plan,
                             ActFormat *f) {
    char why[320] = "";
    ActLayout layout = ACT_NCHW;
    const int piped = p->mode != PARALLEL_DATA;
    usage_check_all(!piped || opt->act_layout != ACT_LAYOUT_NHWC,
                    "--act-layout: 'nhwc' is not accepted with --parallel %s: pipeline stages "
                    "and tensor groups exchange fp32 NCHW activations; expected auto or nchw",
                    NAME_OF(PARALLEL_NAMES, opt->parallel));
    const int ok =
        model_choose_layout(plan, p->be, p->precision, piped ? ACT_LAYOUT_NCHW : opt->act_layout,
                            &layout, f, why, sizeof why) == 0;
    usage_check_all(ok, "--act-layout: 'nhwc' is not accepted with --device %s --precision %s: %s",
                    opt->device, PRECISION_NAME(opt->precision), why);
    return layout;
}

/* A backend on GPUs needs one visible to every rank (a dry run does not: it plans on the
 * login node), and no more per node than are visible. */
static void check_devices(const Options *opt, const RunPlan *p) {
    int n = opt->dry_run ? -1 : registry_device_count(p->be);
    usage_check_all(n != 0,
                    "--device: '%s' is not accepted on %s: no GPU is visible to this process (no "
                    "GPU, no driver, or CUDA_VISIBLE_DEVICES is empty)",
                    opt->device, dt_hostname());
    usage_check_all(n < 0 || opt->gpus_per_node <= n,
                    "--gpus-per-node: %d is not accepted on %s: %d GPU(s) are visible there",
                    opt->gpus_per_node, dt_hostname(), n);
}

/* --seq-len: a language model's, at most its context (the model's in_w). The resolved length is
 * written back, so that the printed and recorded configuration say what runs. */
static void check_seq_len(Options *opt, RunPlan *p) {
    const ModelDesc *md = p->md;
    usage_check_all(!opt->seq_len || md->vocab,
                    "--seq-len: %d is not accepted with --model %s: not a language model (its "
                    "input is an image); expected 0",
                    opt->seq_len, md->name);
    usage_check_all(opt->seq_len <= md->in_w,
                    "--seq-len: %d is not accepted with --model %s: expected 1 to %d (its "
                    "context), or 0 for the context",
                    opt->seq_len, md->name, md->in_w);
    if (md->vocab) opt->seq_len = p->in_w;
}

/* --dataset against the model, and the options that need a test split. */
static void check_dataset(const Options *opt, const RunPlan *p) {
    const int lm = p->md->vocab > 0;
    const int corpus = opt->dataset == DATA_TEXT || opt->dataset == DATA_TOKENS;
    usage_check_all(!lm || opt->dataset == DATA_SYNTHETIC || corpus,
                    "--dataset: '%s' is not accepted with %s, a language model on token "
                    "sequences: expected synthetic, text or tokens",
                    NAME_OF(DATASET_NAMES, opt->dataset), p->md->name);
    usage_check_all(lm || !corpus,
                    "--dataset: '%s' is not accepted with %s, a model of images: expected "
                    "synthetic, fashion-mnist, mnist or cifar10",
                    NAME_OF(DATASET_NAMES, opt->dataset), p->md->name);
    usage_check_all(opt->dataset != DATA_TEXT || p->md->vocab >= 256,
                    "--dataset: 'text' is not accepted with %s: its vocabulary of %d tokens is "
                    "below the 256 byte values",
                    p->md->name, p->md->vocab);
    /* Synthetic data have no test split: nothing would be evaluated, no target reached. */
    int no_test = opt->dataset == DATA_SYNTHETIC;
    const char *with_test = lm ? "text or tokens" : "fashion-mnist, mnist or cifar10";
    usage_check_all(!no_test || opt->target_acc == 0,
                    "--target-acc: %g is not accepted with --dataset synthetic (no test split): "
                    "expected %s",
                    opt->target_acc, with_test);
    usage_check_all(!no_test || !options_given(opt, "eval-every"),
                    "--eval-every: %d is not accepted with --dataset synthetic (no test split): "
                    "expected %s",
                    opt->eval_every, with_test);
}

/* The exchange, the parallel mode, the device and the transport against each other and the
 * ranks. */
static void check_combination(const Options *opt, const Topology *topo, const RunPlan *p) {
    const BackendOps *be = p->be;
    const ExchangeOps *x = p->xops;
    usage_check_all(p->mode == PARALLEL_DATA || x->pipeline_ok,
                    "--exchange: '%s' is not accepted with --parallel %s: the replicas of a "
                    "pipeline stage or tensor group exchange with %s",
                    opt->exchange, NAME_OF(PARALLEL_NAMES, opt->parallel), pipeline_exchanges());
    usage_check_all(!be->device_memory || p->mode != PARALLEL_TENSOR,
                    "--parallel: 'tensor' is not accepted with --device %s yet: the tensor "
                    "group sums host buffers; expected --device cpu",
                    opt->device);
    usage_check_all(!be->device_memory || p->sched->device_memory,
                    "--parallel: '%s' is not accepted with --device %s yet: pipeline stages pass "
                    "host buffers; expected data",
                    NAME_OF(PARALLEL_NAMES, opt->parallel), opt->device);
    usage_check_all(opt->ranks_per_node == 0 || topo->nranks % opt->ranks_per_node == 0,
                    "--ranks-per-node: %d does not divide the %d ranks", opt->ranks_per_node,
                    topo->nranks);
    usage_check_all(!x->transports || names_find(x->transports, p->tops->name) >= 0,
                    "--transport: '%s' is not accepted with --exchange %s: expected %s",
                    opt->transport, opt->exchange, x->transports ? x->transports : "");
    usage_check_all(!p->tops->device_only || be->device_memory,
                    "--transport %s: it averages GPU buffers; it needs --device %s (with --device "
                    "%s use mpi or hier)",
                    opt->transport, device_backends(), opt->device);
    usage_check_all(!opt->overlap || x->grads_ready != NULL,
                    "--overlap: the %s exchange cannot start buckets during backward",
                    opt->exchange);
    /* zero3 gathers each layer's parameters from the model's per-layer observer and releases
     * host pages between uses (comm/zero3.c) */
    usage_check_all(!x->shards_params || !be->device_memory,
                    "--exchange: '%s' is not accepted with --device %s yet: it releases the host "
                    "pages of the parameters it does not hold, and this backend's are device "
                    "memory; expected --device cpu",
                    opt->exchange, opt->device);
    usage_check_all(!x->shards_params || opt->profile_layers == 0,
                    "--profile-layers: not accepted with --exchange %s (its parameters are "
                    "gathered from the per-layer hook the profile would take)",
                    opt->exchange);
}

/* A strategy that always starts its buckets during backward (ExchangeOps.overlaps): --overlap
 * is what runs, and what the printed and recorded configuration say. */
static void imply_overlap(Options *opt, const RunPlan *p) {
    if (p->xops->overlaps) opt->overlap = 1;
}

/* --profile-layers: within the measured iterations, one micro-batch, the layers it can time. */
static void check_profile(const Options *opt, const RunPlan *p) {
    usage_check_all(opt->profile_layers <= opt->iters,
                    "--profile-layers: %d is not accepted with --iters %d: expected at most the "
                    "measured iterations",
                    opt->profile_layers, opt->iters);
    usage_check_all(opt->profile_layers == 0 || opt->microbatches == 1,
                    "--profile-layers: not accepted with --microbatches %d (a layer runs once per "
                    "micro-batch): expected --microbatches 1",
                    opt->microbatches);
    usage_check_all(opt->profile_layers == 0 || p->md->nlayers <= PROFILE_MAX_LAYERS,
                    "--profile-layers: %s has %d layers, more than the %d it can time",
                    p->md->name, p->md->nlayers, PROFILE_MAX_LAYERS);
}

/* --peer-timeout and --sample-hz (with --sample-max-s): rates a run can keep. */
static void check_rates(const Options *opt) {
    /* heartbeats every timeout/5: below 1 s a busy host would lose live peers (watchdog.h) */
    usage_check_all(opt->peer_timeout == 0 || opt->peer_timeout >= 1,
                    "--peer-timeout: %g is not accepted: expected 0 (off) or at least 1 second",
                    opt->peer_timeout);
    /* Above 1 kHz the sampling thread costs the rank more (a reading takes 10-100 us of its
     * cores) while NVML's and the process's figures change no faster; below one sample per
     * 1000 s a run of hours gets a handful of points, no time series (and the period overflowed
     * the sampler's wait: a run with --sample-hz 1e-300 never ended). */
    usage_check_all(opt->sample_hz == 0 || (opt->sample_hz >= 1e-3 && opt->sample_hz <= 1e3),
                    "--sample-hz: %g is not accepted: expected 0 (no sampling) or a rate from "
                    "0.001 to 1000 samples per second",
                    opt->sample_hz);
    usage_check_all(opt->sample_hz * opt->sample_max_s <= 1e7,
                    "--sample-hz %g with --sample-max-s %g: more than 10 million samples per rank",
                    opt->sample_hz, opt->sample_max_s);
}

/* A strategy on host memory runs on a device backend through host mirrors (comm/staged.c);
 * transports on device memory cannot serve those mirrors. */
static void stage_exchange(const Options *opt, RunPlan *p) {
    if (p->be->device_memory && !p->xops->device_ok) {
        usage_check_all(!p->tops->device_only,
                        "--transport: '%s' is not accepted with --exchange %s on --device %s (the "
                        "strategy runs on host copies): expected mpi or hier",
                        opt->transport, opt->exchange, opt->device);
        p->xops = exchange_staged(p->xops);
        if (!p->xops) check_fail(__FILE__, __LINE__, "exchange_staged", opt->exchange);
    }
}

/* Workers train; a strategy with servers gives them the last --ps-ranks ranks. */
static void plan_workers(const Options *opt, const Topology *topo, RunPlan *p) {
    p->ps_ranks = p->xops->serve ? opt->ps_ranks : 0;
    p->nworkers = topo->nranks - p->ps_ranks;
    /* A dry run on one process without --ranks cannot know the job's ranks: it plans one
     * worker beside the servers, as --ranks-per-node is not judged. With --ranks N (what
     * dtbench-campaign runs) the ranks are known and judged. */
    if (opt->dry_run && !opt->ranks && topo->nranks == 1 && p->nworkers < 1) p->nworkers = 1;
    usage_check_all(p->nworkers >= 1 || topo->nranks > 1,
                    "--exchange: '%s' is not accepted on 1 rank: it needs at least %d ranks (%d "
                    "parameter server%s, --ps-ranks, and a worker)",
                    opt->exchange, p->ps_ranks + 1, p->ps_ranks, p->ps_ranks > 1 ? "s" : "");
    usage_check_all(p->nworkers >= 1,
                    "--ps-ranks: %d is not accepted with %d ranks for --exchange %s: expected 1 "
                    "to %d (the other ranks are workers)",
                    opt->ps_ranks, topo->nranks, opt->exchange, topo->nranks - 1);
    int all = p->nworkers == topo->nranks;
    usage_check_all(p->mode != PARALLEL_DATA || opt->batch % p->nworkers == 0,
                    "--batch: %d is not accepted with %d %s: the global batch must be a "
                    "multiple of the number of %s",
                    opt->batch, p->nworkers, all ? "ranks" : "workers",
                    all ? "ranks" : "workers (ranks minus --ps-ranks)");
}

void resolve_plan(Options *opt, const Topology *topo, RunPlan *p) {
    choose(opt, p);
    check_seq_len(opt, p);
    check_reads(opt, p);
    check_devices(opt, p);
    check_precision(opt, p);
    check_optimizer(opt, p);
    check_dataset(opt, p);
    imply_overlap(opt, p);
    check_combination(opt, topo, p);
    check_progress(opt, p);
    check_profile(opt, p);
    check_rates(opt);
    stage_exchange(opt, p);
    plan_workers(opt, topo, p);
    char serr[256] = "";
    int ok = straggler_parse(opt->straggler, topo->nranks, &p->straggler, serr, sizeof serr) == 0;
    usage_check_all(ok, "%s", serr);
    p->straggler.random_p = opt->straggler_random;
    p->straggler.seed = (uint64_t)opt->seed;
}
