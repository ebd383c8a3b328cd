/* recorder.h - the results seam: one const struct of function pointers per recorder
 * (src/results/recorder_hdf5.c, created by src/results/recorder_create.c: one shared parallel HDF5
 * file).
 *
 * Per-iteration values are a struct of doubles described by ITER_FIELDS (name, units, meaning):
 * adding a measured quantity is one struct member and one row, and every recorder and the file
 * layout pick it up. */
#ifndef DTBENCH_RECORDER_H
#define DTBENCH_RECORDER_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    double start; /* aligned clock, s since rank 0's t0 */
    double data, forward, backward, exchange, update, total; /* s */
    double loss;
    double bytes_sent, bytes_recv;
    double staleness, version; /* see ExchangeStep */
    double exchange_wait;      /* s of `exchange` spent waiting for other ranks */
    double straggler_delay;    /* s of injected delay (--straggler), inside `backward` */
    double record;             /* the recorder's own cost just before this iteration, s */
    double exchange_hidden;    /* exchange work that ran while backward still ran (--overlap), s */
    /* pipeline stages (--parallel model / hybrid; 0 in data parallelism), s and bytes */
    double pipe_compute, pipe_send, pipe_recv, pipe_idle, pipe_bytes;
    /* --precision fp16 (src/run/precision.h): the loss scale this iteration's backward ran with (1
     * without loss scaling), and 1 if its optimizer step was skipped (inf/NaN gradients) */
    double loss_scale, step_skipped;
    /* --profile-layers: host time the per-layer timer marks took in this iteration (0 when it
     * was not profiled), s */
    double profile_cost;
    /* the batch: the time spent making it (by the loader's threads with --prefetch, else inside
     * `data` on the driver's thread) and the part of `data` the step waited for it, s */
    double load, load_wait;
    /* sharding exchanges (--exchange zero1|zero2; 0 elsewhere): the gradients' reduce-scatters
     * completed after backward and the parameters' all-gathers, s (inside `exchange`), and the
     * payload handed to each, bytes */
    double exchange_reduce_scatter, exchange_allgather;
    double bytes_reduce_scatter, bytes_allgather;
    /* and with --transport hier, the shards' allreduce across the nodes, s and bytes */
    double exchange_allreduce, bytes_allreduce;
    /* host seconds from the previous iteration's record (the first: the loop's start) to this
     * one's, evaluations left out: total and the host's time outside it (see iter_fields.c) */
    double wall;
    /* tensor parallelism (--parallel tensor; 0 otherwise): the tensor group's allreduces inside
     * forward and backward, s, their payload, bytes, and how many there were */
    double tp_comm, tp_bytes, tp_calls;
} IterRecord;

typedef struct {
    const char *name;
    size_t offset;
    const char *units;
    const char *description;
} IterField;

extern const IterField ITER_FIELDS[];
extern const int ITER_NFIELDS;

typedef struct {
    double iteration, time, accuracy, loss;
} EvalRecord;

/* One reading of the sampler (src/results/sampler.h). */
typedef struct {
    double time;        /* aligned clock, s since rank 0's t0 */
    double power_w;     /* GPU board power, W (NaN on CPU runs) */
    double memory_mib;  /* GPU memory in use, or the process's resident memory, MiB */
    double utilization; /* GPU utilisation, or the process's CPU use (% of one core), % */
} SampleRecord;

/* What keeps this rank's records beside the file until they are written, so that a lost peer or a
 * failed write loses none of them: the watchdog of --peer-timeout (src/survival/watchdog.h), which
 * stands above the recorder and is handed to it in its configuration. */
typedef struct RecordKeeper {
    /* iteration `iter` was recorded; iterations 0 .. written-1 are in the file */
    void (*record)(int64_t iter, const IterRecord *rec);
    void (*written)(int64_t written);
    /* 1 once a finalizer writes this rank's records: the recorder must write no more */
    int (*leaving)(void);
    /* a failed extension of the file that may leave the other ranks inside a collective call: a
     * finalizer closes the file at `path` marked write_error with `detail`; never returns */
    void (*abandon_run)(const char *path, const char *detail, MPI_Comm comm);
} RecordKeeper;

/* Key/value pairs stored as root attributes (strings or integers) and in /config. */
typedef struct {
    const char *key;
    const char *text; /* NULL for a number */
    long long value;
    int is_real; /* the number is `real`, not `value` */
    double real;
} RunAttr;
#define RUN_TEXT(key, text)                                                                        \
    { key, text, 0, 0, 0.0 }
#define RUN_INT(key, value)                                                                        \
    { key, NULL, value, 0, 0.0 }
#define RUN_REAL(key, value)                                                                       \
    { key, NULL, 0, 1, value }

typedef struct {
    const char *path;
    int overwrite;
    MPI_Comm comm;
    const RecordKeeper *keeper; /* never NULL */
    int64_t iters_total, warmup;
    int flush_every;
    /* 1: every rank records the same iterations in step (ExchangeOps.lockstep): /iterations
     * grows with the run (recorder_grow.h); 0: allocated whole at creation */
    int grow;
    int n_evals;
    /* root attributes (same on every rank) and the /config group */
    const RunAttr *attrs;
    int nattrs;
    const RunAttr *config;
    int nconfig;
    double timer_overhead;
    /* this rank's row of /ranks */
    const char *host;
    int node, local_rank;
    int role; /* EXCHANGE_WORKER (0) or EXCHANGE_SERVER (1) */
    long long pid;
    double clock_offset_start, clock_rtt;
    /* bytes this rank holds for parameters, gradients and the optimizer's state (the plan's) */
    double memory_params, memory_grads, memory_optimizer;
    /* /ranks/<key>: one fixed-length string per rank (the same keys on every rank), e.g. the
     * device name and library versions */
    const RunAttr *rank_text;
    int nrank_text;
    /* /ranks/kernel_choices: this rank's kernel choices (BackendOps.describe_kernels: cuDNN
     * algorithms and math modes), any length; NULL or "" on every rank: no such dataset (CPU) */
    const char *kernel_choices;
    /* /samples: datasets of sample_capacity entries per rank (0: no /samples group); the
     * recorder pulls new samples with sample_pull(sample_user, ...) when it writes a block */
    int64_t sample_capacity;
    double sample_hz;
    int (*sample_pull)(void *user, SampleRecord *out, int max);
    void *sample_user;
    /* /profile (--profile-layers): profile_iters rows of profile_layers forward and backward
     * times per rank, from iteration profile_first; the layers' names, kinds and forward FLOPs
     * per sample [profile_layers]. profile_iters 0: no /profile group. */
    int profile_iters, profile_layers;
    int64_t profile_first;
    const char *const *profile_names, *const *profile_kinds;
    const double *profile_flops;
    /* and this rank's roofline: one call's FLOPs and least bytes of each layer on its batch,
     * [PROFILE_AMOUNTS][profile_layers] (src/results/profile.h's profile_amounts), and its device's
     * peaks (src/results/roofline.h); NULL: none (a rank that runs no layer: NaN) */
    const double *profile_amounts;
    const struct RooflinePeak *profile_peak;
} RecorderConfig;

typedef enum { RUN_RUNNING = 0, RUN_COMPLETED = 1, RUN_STOPPED = 2, RUN_FAILED = 3 } RunStatus;

/* How this rank ended, written at close. */
typedef struct {
    RunStatus status;
    const char *stop_reason; /* completed | signal | error (the recorder stores write_error
                                after a failed write, see recorder_hdf5.c) */
    double clock_offset_end; /* clock offset to rank 0 measured after the run */
    uint64_t param_hash;     /* FNV-1a of the final parameters' bytes */
    int64_t updates_pushed;  /* gradient updates this rank sent to the exchange */
    int64_t updates_applied; /* updates this rank applied (servers: pushes it applied) */
    double signal_time;      /* dt_now() when this rank got SIGTERM/SIGUSR1, 0 if it did not */
    double peak_resident;    /* bytes: the process's peak resident memory (ru_maxrss) */
} RunEnd;

typedef struct Recorder Recorder;

typedef struct RecorderOps {
    const char *name;
    /* Collective. Creates the output under a hidden partial name renamed into place once it
     * describes itself (the driver has claimed and locked the path, see outputs.h): every dataset
     * at its final size but /iterations of a growing run (cfg->grow), created at one step;
     * refuses a file whose every iteration cannot fit on its file system, and reserves the space
     * of what it creates. Returns NULL with a one-line reason in err if the output cannot be created (same
     * verdict on every rank). */
    Recorder *(*create)(const RecorderConfig *cfg, char *err, size_t errlen);
    /* Buffers iteration `iter`; writes the block when flush_every iterations are buffered.
     * Independent (no rank waits for another), except in a growing run: the iteration beyond the
     * extent is a block boundary where every rank extends /iterations together. A failed write is reported on this rank and
     * raises the stop request (signals.h); the reason is agreed and stored at close. */
    void (*record_iteration)(Recorder *r, int64_t iter, const IterRecord *rec);
    /* Rank 0 only: evaluation number `index`. */
    void (*record_eval)(Recorder *r, int index, const EvalRecord *rec);
    /* This rank's row `index` of /profile: forward[profile_layers], backward[profile_layers] s.
     * Independent, like record_iteration. */
    void (*record_profile)(Recorder *r, int index, const double *forward, const double *backward);
    /* Collective. Writes what is buffered, the final status and end attributes, and closes. */
    void (*close)(Recorder *r, const RunEnd *end);
} RecorderOps;

#endif
