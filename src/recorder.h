/* recorder.h - the results seam: one const struct of function pointers per recorder
 * (src/recorder_hdf5.c: one shared parallel HDF5 file).
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
    double bytes_sent;
    double record; /* the recorder's own cost just before this iteration, s */
    /* pipeline stages (--parallel model / hybrid; 0 in data parallelism), s and bytes */
    double pipe_compute, pipe_send, pipe_recv, pipe_idle, pipe_bytes;
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

/* Key/value pairs stored as root attributes (strings or integers) and in /config. */
typedef struct {
    const char *key;
    const char *text; /* NULL for an integer */
    long long value;
} RunAttr;

typedef struct {
    const char *path;
    int overwrite;
    MPI_Comm comm;
    int64_t iters_total, warmup;
    int flush_every;
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
    long long pid;
    double clock_offset_start, clock_rtt;
} RecorderConfig;

typedef enum { RUN_RUNNING = 0, RUN_COMPLETED = 1, RUN_STOPPED = 2, RUN_FAILED = 3 } RunStatus;

/* How this rank ended, written at close. */
typedef struct {
    RunStatus status;
    const char *stop_reason;   /* completed | signal | error */
    double clock_offset_end;   /* clock offset to rank 0 measured after the run */
    uint64_t param_hash;       /* FNV-1a of the final parameters' bytes */
} RunEnd;

typedef struct Recorder Recorder;

typedef struct RecorderOps {
    const char *name;
    /* Collective. Creates the output with every dataset at its final size; never replaces an
     * existing file unless cfg->overwrite (the driver has checked the path, see
     * output_path_problem, but creation is exclusive all the same). Returns NULL with a
     * one-line reason in err if the output cannot be created (same verdict on every rank). */
    Recorder *(*create)(const RecorderConfig *cfg, char *err, size_t errlen);
    /* Buffers iteration `iter`; writes the block when flush_every iterations are buffered.
     * Independent (no rank waits for another). */
    void (*record_iteration)(Recorder *r, int64_t iter, const IterRecord *rec);
    /* Rank 0 only: evaluation number `index`. */
    void (*record_eval)(Recorder *r, int index, const EvalRecord *rec);
    /* Collective. Writes what is buffered, the final status and end attributes, and closes. */
    void (*close)(Recorder *r, const RunEnd *end);
} RecorderOps;

#endif
