/* options.c - the option table. One row per option: name, type, where it goes, accepted values
 * or lower bound, help. getopt_long's table, --help, the printed configuration and the HDF5
 * /config group are all generated from these rows, so a default can never go stale. A choice
 * among fixed names (T_ENUM) names them in its enum's order, with the names its component
 * declares (PRECISION_NAMES, ...), and is held as that enum. */
#define _GNU_SOURCE
#include <config.h>
#include "options.h" /* with the choices' enums and names */
#include "names.h"   /* defines: names_find, names_at */
#include "registry.h"
#include "mpi_check.h" /* defines: usage_check_all */

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif
#ifndef DTBENCH_GIT_COMMIT
#define DTBENCH_GIT_COMMIT "unknown"
#endif

/* T_CHOICE: a name among `choices`, kept as text (char *); T_ENUM: a name among `choices`, kept
 * as its position there, the value of the enum field it names (names.h). */
typedef enum { T_INT, T_LONG, T_DOUBLE, T_STRING, T_CHOICE, T_ENUM, T_FLAG } OptType;

typedef struct {
    const char *name;
    OptType type;
    size_t offset;       /* into Options */
    const char *choices; /* T_CHOICE, T_ENUM: comma-separated; NULL = ask the registry */
    double min;          /* numbers: smallest accepted value */
    double max;          /* numbers: largest accepted value (0: no limit) */
    const char *help;
} OptSpec;

#define F(field) offsetof(Options, field)
static const OptSpec SPECS[] = {
    {"model", T_CHOICE, F(model), NULL, 0, 0, "network to train"},
    {"dataset", T_ENUM, F(dataset), DATASET_NAMES, 0, 0,
     "training data (synthetic: seeded random samples of the model's input shape, the default "
     "of language models; text and tokens, for language models: any file read as bytes, a "
     "token per byte value, or llm.c's uint16 token shards)"},
    {"data-dir", T_STRING, F(data_dir), NULL, 0, 0,
     "folder with the IDX files, or CIFAR-10's data_batch_N.bin and test_batch.bin; text and "
     "tokens: one file (its last 10% evaluates) or a folder of *train* and *val* files (tokens: "
     "*train*.bin, *val*.bin; text without *train* files: every file trains) (default: "
     "/usr/share/datasets/<dataset>)"},
    {"seq-len", T_INT, F(seq_len), NULL, 0, 0,
     "tokens per sample of a language model (lstm32, lstm64, the transformers): 1 to the "
     "model's context, its "
     "input length (0: the context); the labels are the next tokens"},
    {"device", T_CHOICE, F(device), NULL, 0, 0,
     "compute backend (cuda: one GPU per rank, see --gpus-per-node)"},
    {"exchange", T_CHOICE, F(exchange), NULL, 0, 0,
     "gradient exchange strategy: sync (allreduce), ssp, async, mixed; zero1, zero2 and zero3, "
     "ZeRO's stages: zero1 shards the optimizer's state (reduce-scatter, update of the rank's "
     "shard, all-gather), zero2 also the reduced gradients, reduce-scattered during backward "
     "(FSDP's SHARD_GRAD_OP), zero3 also the parameters, gathered before each layer's forward and "
     "backward and released after (FSDP's FULL_SHARD; CPU only); with --transport hier they "
     "shard inside a node and replicate across nodes (HYBRID_SHARD)"},
    {"transport", T_CHOICE, F(transport), NULL, 0, 0,
     "how gradients are averaged: mpi (MPI_Allreduce; GPU buffers staged through the host), "
     "nccl (ncclAllReduce on the GPUs), hier (reduce-scatter inside each node, allreduce across "
     "nodes, all-gather inside the node; NCCL inside the node on GPUs)"},
    {"overlap", T_FLAG, F(overlap), NULL, 0, 0,
     "exchange gradient buckets while backward still runs; the part hidden behind backward is "
     "recorded per iteration (exchange_hidden)"},
    {"progress", T_ENUM, F(progress), PROGRESS_NAMES, 0, 0,
     "how MPI collectives in flight advance while compute runs (--overlap, ssp --staleness >= "
     "1): poll (non-blocking collectives, tested between layers) or thread (a progress thread "
     "per communicator runs each bucket's blocking collective as it is started; "
     "MPI_THREAD_MULTIPLE)"},
    {"param-prefetch", T_ENUM, F(param_prefetch), PARAM_PREFETCH_NAMES, 0, 0,
     "--exchange zero3: on (FSDP's forward_prefetch and backward_prefetch BACKWARD_PRE): while "
     "a layer computes, the next group of parameters (forward order in forward, backward order "
     "in backward; the order the first iteration ran) is all-gathered without waiting, one group "
     "held beside the current one; the time it was in flight is exchange_hidden. off: each "
     "group gathered when its layer starts, blocking"},
    {"gpus-per-node", T_INT, F(gpus_per_node), NULL, 0, 0,
     "GPUs to use per node with --device cuda: a rank takes GPU (local rank mod N) among those "
     "CUDA_VISIBLE_DEVICES shows (0: all of them)"},
    {"conv-algo", T_ENUM, F(conv_algo), CONV_ALGO_NAMES, 0, 0,
     "how --device cuda chooses each convolution shape's cuDNN algorithms when the model is "
     "built: find (time the candidates once, as PyTorch's cudnn.benchmark; the choice and its "
     "time land in /ranks/kernel_choices) or heuristic (cuDNN's ranking, nothing run: quicker "
     "set-up, the same choice on every run); both within a workspace budget of the free device "
     "memory"},
    {"act-layout", T_ENUM, F(act_layout), ACT_LAYOUT_NAMES, 0, 0,
     "how --device cuda stores activations and their gradients: nhwc (channels-last, in the "
     "16-bit type of --precision bf16 or fp16, as PyTorch's autocast with channels_last; "
     "refused in fp32 and tf32, and for models with embedding or LSTM layers), nchw (fp32 NCHW "
     "in every precision: 16-bit modes round copies at each convolution and GEMM), or auto "
     "(nhwc where it runs, else nchw); the format used is in the backend description"},
    {"prefetch", T_ENUM, F(prefetch), TOGGLE_NAMES, 0, 0,
     "make the next batch on loader threads (1-4: the file's loader_threads) into page-locked "
     "memory and upload it on a copy stream while the current step computes; the data phase is "
     "then the time compute waits for its batch, /iterations/load_wait the part spent waiting "
     "for the loader (auto: where the backend has a copy stream, i.e. on GPUs; the decision is "
     "the file's prefetch attribute)"},
    {"graphs", T_ENUM, F(graphs), TOGGLE_NAMES, 0, 0,
     "replay each step's forward and backward passes from graphs captured once (CUDA Graphs: "
     "one launch instead of one per kernel; auto: where the backend, the mode and every layer "
     "allow it; what is replayed and why not is the file's graphs and graphs_reason)"},
    {"sample-hz", T_DOUBLE, F(sample_hz), NULL, 0, 0,
     "samples per second of GPU power, memory and utilisation (CPU runs: the process's CPU "
     "utilisation and resident memory), stored in /samples (0: no sampling; else 0.001 to 1000)"},
    {"sample-max-s", T_DOUBLE, F(sample_max_s), NULL, 0.01, 0,
     "seconds of run the /samples datasets hold; sampling stops when they are full (with "
     "--sample-hz above 0)"},
    {"batch", T_INT, F(batch), NULL, 1, 0, "global batch per iteration, split evenly across ranks"},
    {"iters", T_INT, F(iters), NULL, 1, 0, "measured training iterations"},
    {"warmup", T_INT, F(warmup), NULL, 0, 0,
     "warm-up iterations run before the measured ones, recorded and flagged"},
    {"optimizer", T_ENUM, F(optimizer), OPTIMIZER_NAMES, 0, 0,
     "the update: sgd (PyTorch's SGD with --momentum, --weight-decay added to the gradient), "
     "adamw (PyTorch's AdamW with --beta1, --beta2, --eps, --weight-decay decoupled and only on "
     "tensors of 2 or more dimensions, nanoGPT's rule: the weights of convolutions, fully "
     "connected, embedding and LSTM layers, not biases or normalisation parameters), or auto "
     "(the model's own: adamw for the transformers, sgd for the others)"},
    {"lr", T_DOUBLE, F(lr), NULL, 0, 0, "learning rate"},
    {"momentum", T_DOUBLE, F(momentum), NULL, 0, 0, "SGD momentum"},
    {"beta1", T_DOUBLE, F(beta1), NULL, 0, 1, "AdamW: decay rate of the gradient's mean"},
    {"beta2", T_DOUBLE, F(beta2), NULL, 0, 1,
     "AdamW: decay rate of the gradient's uncentred variance (0.95: nanoGPT's and llm.c's GPT-2)"},
    {"eps", T_DOUBLE, F(eps), NULL, 0, 0,
     "AdamW: added to the square root of the variance estimate"},
    {"weight-decay", T_DOUBLE, F(weight_decay), NULL, 0, 0,
     "weight decay: sgd adds it times the parameters to the gradient (L2); adamw multiplies the "
     "weights it decays by 1 - lr x it before each step (decoupled; nanoGPT uses 0.1)"},
    {"seed", T_LONG, F(seed), NULL, 0, 0,
     "seed for initial parameters, data order and synthetic data"},
    {"threads", T_INT, F(threads), NULL, 1, 0, "BLAS threads per rank"},
    {"bucket-mb", T_DOUBLE, F(bucket_mb), NULL, 0.001, 0,
     "gradient bucket size for the exchange, MiB"},
    {"calibrate-iters", T_INT, F(calibrate_iters), NULL, 0, 0,
     "before training, time the transport's collectives alone on the run's buckets this many "
     "times (at most ~2 s), stored as calibration_* attributes (0: off)"},
    {"grad-dtype", T_ENUM, F(grad_dtype), GRAD_DTYPE_NAMES, 0, 0,
     "type of the gradients on the wire, every strategy and transport: bf16 and fp16 halve the "
     "bytes exchanged (round to nearest even, summed in that type; fp16 overflows to inf, "
     "no loss scaling); parameters stay fp32"},
    {"ps-ranks", T_INT, F(ps_ranks), NULL, 1, 0,
     "async: ranks that serve parameters (the last ones); the others train"},
    {"staleness", T_INT, F(staleness), NULL, 0, 0,
     "async: a worker gets parameters only when every worker has pushed at least its own count "
     "minus S gradients; ssp: the allreduce of iteration t is applied at t+S"},
    {"sync-period", T_INT, F(sync_period), NULL, 1, 0,
     "mixed: iterations between asynchronous exchanges of node leaders"},
    {"straggler", T_STRING, F(straggler), NULL, 0, 0,
     "slow one rank: RANK:FACTOR (compute x FACTOR) or RANK:+MS (\"\": none)"},
    {"straggler-random", T_DOUBLE, F(straggler_random), NULL, 0, 1,
     "probability per rank and iteration of a hiccup (compute x 3)"},
    {"duration", T_DOUBLE, F(duration), NULL, 0, 0,
     "stop after this many seconds of training, agreed by every rank after the same iteration, "
     "the file closed with stop_reason=duration (0: no limit; for runs meant to last until a "
     "time limit, with a large --iters)"},
    {"peer-timeout", T_DOUBLE, F(peer_timeout), NULL, 0, 0,
     "seconds a rank may be silent (UDP heartbeats between neighbouring ranks, outside MPI) "
     "before the others take it for lost: they close the file with stop_reason=peer_lost naming "
     "the rank and host, and exit with status 75 (a rank whose process ended on a live host: "
     "after 1 s; 0: off, else at least 1)"},
    {"target-acc", T_DOUBLE, F(target_acc), NULL, 0, 1,
     "stop when the test accuracy reaches this (0: never); see --eval-every"},
    {"ranks-per-node", T_INT, F(ranks_per_node), NULL, 0, 0,
     "group ranks into nodes of K consecutive ranks (0: detect shared-memory nodes)"},
    {"eval-every", T_INT, F(eval_every), NULL, 0, 0,
     "evaluate test accuracy every N iterations (0: only at the end)"},
    {"flush-every", T_INT, F(flush_every), NULL, 1, 0,
     "iterations buffered per block written to the HDF5 file"},
    {"output", T_STRING, F(output), NULL, 0, 0, "HDF5 result file"},
    {"overwrite", T_FLAG, F(overwrite), NULL, 0, 0, "replace the output file if it exists"},
    {"tag", T_STRING, F(tag), NULL, 0, 0, "free text stored with the results"},
    {"save-model", T_STRING, F(save_model), NULL, 0, 0,
     "write the final parameters to this file (raw float32 after a 64-byte header; \"\": don't)"},
    {"dry-run", T_FLAG, F(dry_run), NULL, 0, 0,
     "print the model (layers, shapes, parameters, FLOPs) and exit"},
    {"ranks", T_INT, F(ranks), NULL, 0, 0,
     "with --dry-run: check the run as it will be on N ranks, every rule included, from one "
     "process (0: the ranks it runs on); refused without --dry-run"},
    {"parallel", T_ENUM, F(parallel), PARALLEL_NAMES, 0, 0,
     "data: every rank trains the whole model on its share of the batch; model: the layers are "
     "split into --stages consecutive stages, one per rank, a pipeline; hybrid: data-parallel "
     "replicas of such a pipeline; tensor: each transformer block's matrices split over a group "
     "of --tp ranks (Megatron-LM), with --stages a pipeline of such groups (3D), data-parallel "
     "replicas on the other ranks"},
    {"tp", T_INT, F(tp), NULL, 0, 0,
     "with --parallel tensor: ranks per tensor group, consecutive ranks (0: every rank). The "
     "QKV projection and the MLP's first fc are split by columns (heads / N each), the output "
     "projections by rows, with one allreduce of activations per split pair in forward and one "
     "of input gradients in backward (so are fc-ReLU-fc pairs: FCN-5/8, LeNet's classifier); "
     "embeddings, layer norms, the tied head and every other row are replicated on every rank "
     "of the group"},
    {"tp-across-nodes", T_FLAG, F(tp_across_nodes), NULL, 0, 0,
     "with --parallel tensor: let a tensor group span nodes (refused otherwise: its allreduces "
     "sit on the critical path and would cross the network; users place a group inside a node)"},
    {"stages", T_INT, F(stages), NULL, 0, 0,
     "pipeline stages (0: one per rank with --parallel model, 2 with hybrid, 1 with tensor)"},
    {"split", T_STRING, F(split), NULL, 0, 0,
     "first layer of stages 2..K as --dry-run numbers the layers, comma-separated (\"\": "
     "balanced by FLOPs)"},
    {"microbatches", T_INT, F(microbatches), NULL, 1, 0,
     "micro-batches each replica's batch is cut into and pipelined through the stages"},
    {"schedule", T_CHOICE, F(schedule), NULL, 0, 0,
     "order of a pipeline stage's forward and backward micro-batch steps: gpipe (all forwards, "
     "then all backwards), 1f1b (PipeDream-Flush: warm-up forwards, then one forward, one "
     "backward); data parallelism runs 'data' (one stage, one micro-batch)"},
    {"precision", T_ENUM, F(precision), PRECISION_NAMES, 0, 0,
     "arithmetic of GEMMs and convolutions: fp32 (strict), tf32 (GPU tensor cores on fp32 "
     "data), bf16 or fp16 (inputs rounded, fp32 accumulation; fp32 master weights, optimizer and "
     "reductions; fp16 with dynamic loss scaling, GPU only); bf16 on CPUs with AVX512-BF16"},
    {"profile-layers", T_INT, F(profile_layers), NULL, 0, 0,
     "time each layer's forward and backward in the first N measured iterations (GPU: CUDA "
     "events; CPU: the clock) into /profile, with each layer's FLOPs and least bytes moved and "
     "the device's peaks (a table of GPUs, else measured at start) for a roofline in "
     "dtbench-analyze summary; the marks' host time is /iterations/profile_cost (0: off; one "
     "micro-batch only)"},
};
#undef F
#define NSPECS ((int)(sizeof SPECS / sizeof SPECS[0]))
_Static_assert(sizeof SPECS / sizeof SPECS[0] <= 64, "Options.given has one bit per option");
_Static_assert(sizeof(DataSource) == sizeof(int) && sizeof(ProgressMode) == sizeof(int) &&
                   sizeof(ConvAlgoChoice) == sizeof(int) &&
                   sizeof(ActLayoutChoice) == sizeof(int) && sizeof(Toggle) == sizeof(int) &&
                   sizeof(GradDtype) == sizeof(int) && sizeof(ParallelMode) == sizeof(int) &&
                   sizeof(Precision) == sizeof(int) && sizeof(OptimizerKind) == sizeof(int),
               "T_ENUM fields are set and read as int");

static void set_defaults(Options *o) {
    memset(o, 0, sizeof *o);
    o->model = "lenet";
    o->dataset = DATA_FASHION_MNIST;
    o->data_dir = "";
    o->seq_len = 0;
    o->device = "cpu";
    o->exchange = "sync";
    o->transport = "mpi";
    o->output = "dtbench.h5";
    o->tag = "";
    o->save_model = "";
    o->batch = 64;
    o->iters = 100;
    o->warmup = 10;
    o->threads = 1;
    o->flush_every = 50;
    o->eval_every = 0;
    o->ranks_per_node = 0;
    o->ranks = 0;
    o->ps_ranks = 1;
    o->staleness = 1;
    o->sync_period = 2;
    o->straggler = "";
    o->straggler_random = 0.0;
    o->target_acc = 0.0;
    o->duration = 0.0;
    o->peer_timeout = 10.0;
    o->gpus_per_node = 0;
    o->conv_algo = CONV_ALGO_FIND;
    o->act_layout = ACT_LAYOUT_AUTO;
    o->prefetch = TOGGLE_AUTO;
    o->graphs = TOGGLE_AUTO;
    o->overlap = 0;
    o->progress = PROGRESS_POLL;
    o->param_prefetch = PARAM_PREFETCH_ON;
    o->sample_hz = 10.0;
    o->sample_max_s = 3600.0;
    o->lr = 0.01;
    o->momentum = 0.9;
    o->weight_decay = 0.0;
    o->optimizer = OPTIMIZER_AUTO;
    o->beta1 = 0.9;
    o->beta2 = 0.95;
    o->eps = 1e-8;
    o->bucket_mb = 25.0;
    o->calibrate_iters = 5;
    o->grad_dtype = GRAD_FP32;
    o->seed = 42;
    o->parallel = PARALLEL_DATA;
    o->stages = 0;
    o->split = "";
    o->microbatches = 1;
    o->schedule = "gpipe";
    o->precision = PRECISION_FP32;
    o->profile_layers = 0;
}

const char *options_choices(const char *key) {
    if (!strcmp(key, "model")) return registry_model_names();
    if (!strcmp(key, "device")) return registry_backend_names();
    if (!strcmp(key, "exchange")) return registry_exchange_names();
    if (!strcmp(key, "transport")) return registry_transport_names();
    if (!strcmp(key, "schedule")) return registry_schedule_names();
    for (int i = 0; i < NSPECS; i++)
        if (!strcmp(SPECS[i].name, key)) return SPECS[i].choices;
    return NULL;
}

static void value_text(const Options *o, const OptSpec *s, char *buf, size_t len) {
    const char *base = (const char *)o + s->offset;
    switch (s->type) {
    case T_INT:
        snprintf(buf, len, "%d", *(const int *)base);
        break;
    case T_LONG:
        snprintf(buf, len, "%ld", *(const long *)base);
        break;
    case T_DOUBLE:
        snprintf(buf, len, "%g", *(const double *)base);
        break;
    case T_FLAG:
        snprintf(buf, len, "%s", *(const int *)base ? "yes" : "no");
        break;
    case T_ENUM:
        names_at(s->choices, *(const int *)base, buf, len);
        break;
    default:
        snprintf(buf, len, "%s", *(char *const *)base);
        break;
    }
}

static void print_help(const Options *defaults) {
    printf("Usage: mpirun -np N dtbench [options]\n"
           "       dtbench --finalize FILE --lost RANK:SECONDS:silent|gone... [--by RANK]  (what a\n"
           "       survivor runs after a lost peer, see --peer-timeout: closes FILE as peer_lost)\n"
           "Trains a network, data-parallel on every rank or pipelined across ranks, and records\n"
           "per-iteration timings of every rank into one HDF5 file.\n\nOptions (default in "
           "brackets):\n");
    for (int i = 0; i < NSPECS; i++) {
        const OptSpec *s = &SPECS[i];
        char val[256], arg[160] = "";
        value_text(defaults, s, val, sizeof val);
        if (s->type == T_CHOICE || s->type == T_ENUM)
            snprintf(arg, sizeof arg, " {%s}", options_choices(s->name));
        else if (s->type != T_FLAG)
            snprintf(arg, sizeof arg, " %s",
                     s->type == T_STRING ? "TEXT" : (s->type == T_DOUBLE ? "X" : "N"));
        printf("  --%s%s\n      %s [%s]\n", s->name, arg, s->help, val);
    }
    printf("  --help\n      print this help and exit\n  --version\n      print the version and "
           "exit\n  --options-json\n      print this table as JSON (name, type, choices, default, "
           "bounds, help) and exit\n");
}

/* Returns NULL when fine, else an error text in err. */
static const char *set_value(Options *o, const OptSpec *s, const char *arg, char *err, size_t len) {
    char *base = (char *)o + s->offset, *end = NULL;
    errno = 0;
    switch (s->type) {
    case T_INT:
    case T_LONG: {
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < (long)s->min || (s->type == T_INT && v > 1 << 30) ||
            (s->max > 0 && v > (long)s->max)) {
            /* Every refusal names the whole accepted range, the bound passed or not. */
            long top = s->max > 0 ? (long)s->max : (s->type == T_INT ? 1L << 30 : LONG_MAX);
            snprintf(err, len, "--%s: '%s' is not accepted: expected an integer from %ld to %ld",
                     s->name, arg, (long)s->min, top);
            return err;
        }
        if (s->type == T_INT)
            *(int *)base = (int)v;
        else
            *(long *)base = v;
        return NULL;
    }
    case T_DOUBLE: {
        double v = strtod(arg, &end);
        if (errno || end == arg || *end || !isfinite(v) || v < s->min ||
            (s->max > 0 && v > s->max)) {
            if (s->max > 0)
                snprintf(err, len, "--%s: '%s' is not accepted: expected a number from %g to %g",
                         s->name, arg, s->min, s->max);
            else
                snprintf(err, len, "--%s: '%s' is not accepted: expected a number >= %g", s->name,
                         arg, s->min);
            return err;
        }
        *(double *)base = v;
        return NULL;
    }
    case T_CHOICE:
    case T_ENUM: {
        const char *choices = options_choices(s->name);
        const int i = names_find(choices, arg);
        if (i < 0) {
            snprintf(err, len, "--%s: '%s' is not accepted: expected one of %s", s->name, arg,
                     choices);
            return err;
        }
        if (s->type == T_ENUM)
            *(int *)base = i;
        else
            *(char **)base = strdup(arg);
        return NULL;
    }
    case T_STRING:
        if (!strcmp(s->name, "output") && !*arg) {
            snprintf(err, len, "--output: an empty file name is not accepted");
            return err;
        }
        *(char **)base = strdup(arg);
        return NULL;
    case T_FLAG:
        *(int *)base = 1;
        return NULL;
    }
    return NULL;
}

/* getopt_long's table: option i of SPECS returns 1000 + i. */
static void long_options(struct option longopts[NSPECS + 4]) {
    for (int i = 0; i < NSPECS; i++)
        longopts[i] = (struct option){SPECS[i].name,
                                      SPECS[i].type == T_FLAG ? no_argument : required_argument,
                                      NULL, 1000 + i};
    longopts[NSPECS] = (struct option){"help", no_argument, NULL, 'h'};
    longopts[NSPECS + 1] = (struct option){"version", no_argument, NULL, 'V'};
    longopts[NSPECS + 2] = (struct option){"options-json", no_argument, NULL, 'J'};
    longopts[NSPECS + 3] = (struct option){0, 0, 0, 0};
}

/* One pass over argv with the table: fills o; stops at --help, --version or --options-json ('h',
 * 'V' or 'J' returned), or at the first bad option (-1, the reason in err); 0 when every option
 * is good. */
static int scan(int argc, char **argv, Options *o, char *err, size_t len) {
    struct option longopts[NSPECS + 4];
    long_options(longopts);
    int c;
    opterr = 0; /* we print our own, one line, from one rank */
    optind = 0; /* a fresh scan (GNU) */
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        if (c == 'h' || c == 'V' || c == 'J') return c;
        if (c >= 1000 && c < 1000 + NSPECS) {
            o->given |= 1ULL << (c - 1000);
            if (set_value(o, &SPECS[c - 1000], optarg, err, len)) return -1;
        } else if (c == ':') {
            snprintf(err, len, "%s: a value is required (see --help)", argv[optind - 1]);
            return -1;
        } else if (optopt > 0 && optopt < 1000) { /* a short option, e.g. -model (one dash) */
            const char *word = "";
            for (int i = 1; i < argc && !*word; i++)
                if (argv[i][0] == '-' && argv[i][1] != '-' && strchr(argv[i] + 1, optopt))
                    word = argv[i];
            snprintf(err, len,
                     "%s: unknown option (options start with two dashes, e.g. -%s; "
                     "see --help)",
                     word, word);
            return -1;
        } else {
            snprintf(err, len, "%s: unknown option (see --help for the accepted options)",
                     argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, len, "'%s': unexpected argument (options start with --)", argv[optind]);
        return -1;
    }
    return 0;
}

/* This process's rank as its launcher announces it, before MPI_Init; 0 when launched alone. */
static long launcher_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return strtol(v, NULL, 10);
    }
    return 0;
}

static void print_info(int c, const Options *defaults) {
    if (c == 'h')
        print_help(defaults);
    else if (c == 'J')
        options_print_json(stdout);
    else
        printf("dtbench %s (%s)\n", PACKAGE_VERSION, DTBENCH_GIT_COMMIT);
}

int options_thread_level(int argc, char **argv) {
    Options o;
    char err[512];
    set_defaults(&o);
    (void)scan(argc, argv, &o, err, sizeof err); /* bad input: options_parse says so */
    return o.progress == PROGRESS_THREAD ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE;
}

int options_info(int argc, char **argv) {
    Options o, defaults;
    set_defaults(&defaults), o = defaults;
    char err[512];
    int c = scan(argc, argv, &o, err, sizeof err);
    if (c != 'h' && c != 'V' && c != 'J') return 0;
    if (launcher_rank() == 0) print_info(c, &defaults);
    return 1;
}

void options_parse(int argc, char **argv, Options *o) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    set_defaults(o);
    Options defaults = *o;
    char err[512] = "";
    int c = scan(argc, argv, o, err, sizeof err);
    if (c == 'h' || c == 'V' || c == 'J') { /* main answers these before MPI_Init (options_info) */
        if (rank == 0) print_info(c, &defaults);
        MPI_Finalize();
        exit(0);
    }
    usage_check_all(c == 0, "%s", err);
}

static int spec_index(const char *key) {
    for (int i = 0; i < NSPECS; i++)
        if (!strcmp(SPECS[i].name, key)) return i;
    return -1;
}

int options_exists(const char *key) {
    return spec_index(key) >= 0;
}

int options_given(const Options *o, const char *key) {
    int i = spec_index(key);
    return i >= 0 && (o->given >> i & 1);
}

void options_value_text(const Options *o, const char *key, char *buf, size_t len) {
    int i = spec_index(key);
    char val[512] = "";
    if (i < 0 || SPECS[i].type == T_FLAG) {
        snprintf(buf, len, "%s", "");
        return;
    }
    value_text(o, &SPECS[i], val, sizeof val);
    if (SPECS[i].type == T_STRING || SPECS[i].type == T_CHOICE || SPECS[i].type == T_ENUM)
        snprintf(buf, len, "'%s'", val);
    else
        snprintf(buf, len, "%s", val);
}

void options_visit(const Options *o, OptionVisitor fn, void *user) {
    char val[64];
    for (int i = 0; i < NSPECS; i++) {
        if (SPECS[i].type == T_STRING || SPECS[i].type == T_CHOICE) { /* whole, never cut */
            fn(SPECS[i].name, *(char *const *)((const char *)o + SPECS[i].offset), user);
            continue;
        }
        value_text(o, &SPECS[i], val, sizeof val);
        fn(SPECS[i].name, val, user);
    }
}

static const char *type_name(OptType t) {
    switch (t) {
    case T_INT:
    case T_LONG:
        return "int";
    case T_DOUBLE:
        return "float";
    case T_STRING:
        return "text";
    case T_FLAG:
        return "flag";
    default:
        return "choice";
    }
}

void options_describe(OptionDescriber fn, void *user) {
    Options defaults;
    set_defaults(&defaults);
    char val[512];
    for (int i = 0; i < NSPECS; i++) {
        const OptSpec *s = &SPECS[i];
        value_text(&defaults, s, val, sizeof val);
        const int choice = s->type == T_CHOICE || s->type == T_ENUM;
        const OptionInfo info = {.name = s->name,
                                 .type = type_name(s->type),
                                 .choices = choice ? options_choices(s->name) : "",
                                 .default_text = val,
                                 .min = s->min,
                                 .max = s->max,
                                 .help = s->help};
        fn(&info, user);
    }
}
