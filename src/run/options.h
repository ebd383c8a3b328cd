/* options.h - the resolved run configuration. Every field is set from ONE option table
 * (options.c): --help prints that table with the defaults, rank 0 prints the resolved values,
 * and the recorder stores the same key/value pairs in the HDF5 file. */
#ifndef DTBENCH_OPTIONS_H
#define DTBENCH_OPTIONS_H

#include "backend.h"   /* defines: Precision, ConvAlgoChoice, ActLayoutChoice and their names */
#include "data.h"      /* defines: DataSource, DATASET_NAMES */
#include "grad_cast.h" /* defines: GradDtype, GRAD_DTYPE_NAMES */
#include "optimizer.h" /* defines: OptimizerKind, OPTIMIZER_NAMES */
#include "transport.h" /* defines: ProgressMode, PROGRESS_NAMES */

#include <stddef.h>
#include <stdio.h>

/* --parallel (src/run/pipeline.h), named in the enum's order (base/names.h). */
typedef enum { PARALLEL_DATA, PARALLEL_MODEL, PARALLEL_HYBRID, PARALLEL_TENSOR } ParallelMode;
#define PARALLEL_NAMES "data,model,hybrid,tensor"

/* --prefetch and --graphs: where the backend and the run allow it, always (refused where it
 * cannot), or never. */
typedef enum { TOGGLE_AUTO = 0, TOGGLE_ON, TOGGLE_OFF } Toggle;
#define TOGGLE_NAMES "auto,on,off"

/* --param-prefetch (--exchange zero3, comm/zero3.c): the next group's all-gather issued while
 * the current layer computes, or each group gathered when its layer starts. */
typedef enum { PARAM_PREFETCH_ON = 0, PARAM_PREFETCH_OFF } ParamPrefetch;
#define PARAM_PREFETCH_NAMES "on,off"

/* A choice among fixed names is held as its enum (the row's names in the enum's order); a choice
 * among the registry's components (model, device, exchange, transport, schedule) by its name. */
typedef struct {
    char *model;        /* lenet fcn5 fcn8 alexnet vgg16 googlenet resnet50 lstm32 lstm64 */
    DataSource dataset; /* synthetic | fashion-mnist | mnist | cifar10 | text | tokens */
    char *data_dir;  /* "" = the data set's default folder */
    int seq_len;     /* language models: tokens per sample; 0 = the model's context (resolve.c) */
    char *device;    /* cpu (cuda when built with it) */
    char *exchange;  /* sync */
    char *transport; /* mpi | nccl | hier */
    char *output;    /* HDF5 result file */
    char *tag;
    char *save_model; /* "" = do not save */
    int batch;        /* global batch, split evenly across ranks */
    int iters;        /* measured iterations */
    int warmup;
    int threads;
    int flush_every;
    int eval_every;     /* 0 = only at the end */
    int ranks_per_node; /* 0 = from MPI_COMM_TYPE_SHARED */
    int ps_ranks;       /* async: parameter-server ranks */
    int staleness;      /* async: clock bound; ssp: delay of the allreduce */
    int sync_period;    /* mixed: iterations between exchanges across nodes */
    char *straggler;    /* "RANK:FACTOR" or "RANK:+MS", "" = none */
    double straggler_random;
    double target_acc;   /* 0 = none */
    double duration;     /* s of training before stopping (0 = none) */
    double peer_timeout; /* s of a peer's silence before it is lost (0 = off), watchdog.h */
    int gpus_per_node;   /* 0 = every visible GPU */
    ConvAlgoChoice conv_algo;   /* find | heuristic: how the GPU chooses convolution algorithms */
    ActLayoutChoice act_layout; /* auto | nchw | nhwc: how the GPU stores activations */
    Toggle prefetch;            /* auto | on | off: the next batch uploaded during the step */
    Toggle graphs;              /* auto | on | off: steps replayed from captured graphs */
    int overlap;                /* exchange buckets while backward runs */
    ProgressMode progress;      /* poll | thread: how in-flight MPI collectives advance */
    /* on | off: zero3 all-gathers the next group of parameters while a layer computes */
    ParamPrefetch param_prefetch;
    double sample_hz;    /* sampler rate, 0 = off */
    double sample_max_s; /* sampler capacity in seconds of run */
    OptimizerKind optimizer; /* sgd | adamw | auto (the model's; resolve.c sets sgd or adamw) */
    double lr, momentum, weight_decay;
    double beta1, beta2, eps; /* AdamW */
    double bucket_mb;
    int calibrate_iters; /* exchange calibration repetitions, 0 = off */
    GradDtype grad_dtype; /* fp32 | bf16 | fp16: gradients on the wire (comm/grad_cast.h) */
    long seed;
    int overwrite;
    int dry_run;
    int ranks; /* --dry-run as on this many ranks (0: the job's) */
    /* model parallelism (src/run/pipeline.h) */
    ParallelMode parallel; /* data | model | hybrid */
    int stages;       /* pipeline stages; 0 = model: one per rank, hybrid: 2 */
    int tp;           /* tensor: ranks per tensor group; 0 = every rank */
    int tp_across_nodes; /* tensor: a group may span nodes */
    char *split;      /* first layer of stages 2..K, comma-separated; "" = balanced by FLOPs */
    int microbatches; /* per replica batch, pipelined */
    char *schedule;   /* data | gpipe | 1f1b (src/run/schedule.h) */
    Precision precision; /* fp32 | tf32 | bf16 | fp16 */
    int profile_layers;  /* measured iterations profiled layer by layer (src/results/profile.h), 0:
                            off */
    /* Bit i: the i-th option of the table was given on the command line (options_given). */
    unsigned long long given;
} Options;

/* Parses argv into opts (defaults first). Prints --help / --version on rank 0 and exits 0;
 * on bad input every rank exits 2 after one line from rank 0. Collective over COMM_WORLD. */
void options_parse(int argc, char **argv, Options *opts);

/* Before MPI_Init: when argv asks for --help or --version (as options_parse would read it),
 * prints it (on the launcher's rank 0 only) and returns 1: the caller exits 0 without starting
 * MPI. 0 otherwise, nothing printed. */
int options_info(int argc, char **argv);

/* Before MPI_Init: the MPI thread level the command line needs (MPI_THREAD_MULTIPLE for
 * --progress thread, else MPI_THREAD_SINGLE). Reads argv with the same table and rules as
 * options_parse (abbreviations, --opt=value), prints nothing; bad input is left to it. */
int options_thread_level(int argc, char **argv);

/* Calls fn(key, value) for every option in table order with its resolved value as text. */
typedef void (*OptionVisitor)(const char *key, const char *value, void *user);
void options_visit(const Options *opts, OptionVisitor fn, void *user);

/* The resolved configuration as a JSON object (malloc'd; options_json.c). */
char *options_to_json(const Options *opts);

/* One option of the table, as --help and --options-json describe it: type "int", "float",
 * "text", "choice" (choices: comma-separated) or "flag"; its default as the printed configuration
 * shows it; min and max its bounds (numbers; max 0: none). */
typedef struct {
    const char *name, *type, *choices, *default_text, *help;
    double min, max;
} OptionInfo;
typedef void (*OptionDescriber)(const OptionInfo *info, void *user);
/* Calls fn for every option of the table, in order. */
void options_describe(OptionDescriber fn, void *user);

/* --options-json: the table as a JSON array of objects, one per option (options_json.c), for
 * tools that build dtbench command lines (the campaign tool). */
void options_print_json(FILE *out);

/* 1 when the option `key` (long name) was given on the command line. */
int options_given(const Options *opts, const char *key);

/* The value of option `key` as an error message shows it: 'text' for text and choices, the
 * number for numbers, "" for flags. */
void options_value_text(const Options *opts, const char *key, char *buf, size_t len);

/* 1 when `key` is the long name of an option of the table. */
int options_exists(const char *key);

/* Comma-separated accepted values of a choice option, e.g. "lenet,fcn5,fcn8". */
const char *options_choices(const char *key);

#endif
