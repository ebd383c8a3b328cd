/* recorder_grow.h - /iterations datasets that grow with the run (src/results/recorder_grow.c), for
 * the HDF5 recorder (src/results/recorder_hdf5.c).
 *
 * Lock-step strategies (every rank records the same iterations at about the same time) get
 * chunked datasets of shape (nranks, extent), max (nranks, iters_total), created at one step and
 * extended collectively by one step whenever an iteration beyond the extent is recorded: the
 * step's space reserved first (rank 0's fallocate, the verdict broadcast), then H5Dset_extent on
 * every dataset, then H5Fflush, so a killed run still reads every flushed block. Strategies whose
 * ranks drift apart (async, mixed) keep datasets allocated whole at creation. */
#ifndef DTBENCH_RECORDER_GROW_H
#define DTBENCH_RECORDER_GROW_H

#include <hdf5.h>
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of /iterations one step adds (all datasets, all ranks), unless a step of
 * GROW_MIN_ITERS iterations is larger; a step is a whole number of blocks (--flush-every). */
#define GROW_STEP_BYTES (2.0 * 1024 * 1024)
#define GROW_MIN_ITERS  256
/* Reserved with each step beyond its datasets' bytes: the chunk index and object headers. */
#define GROW_SLACK_BYTES (256.0 * 1024)
/* The most chunks a dataset is cut into (more iterations per step beyond): its chunk index is
 * one B-tree node of GROW_MAX_CHUNKS entries at most (grow_istore_k), ~200 KB, rewritten by
 * each extension's flush. Runs under ~1M iterations keep the steps above; longer ones take
 * steps of iters_total / 4096 (the last one at most that much more file). */
#define GROW_MAX_CHUNKS 4096

typedef struct {
    int growing;        /* 1: chunked, extended in steps; 0: allocated whole at creation */
    int nranks, nsets;  /* rows, and datasets extended together */
    int64_t total;      /* iters_total: the most the datasets hold */
    int64_t step;       /* iterations one extension adds (a multiple of flush_every) */
    int64_t extent;     /* iterations the datasets hold now */
    int refused;        /* an extension could not be reserved: none is tried again */
    int64_t extensions; /* extensions done */
    double *seconds;    /* [capacity] duration of each extension (rank's clock), s */
    int64_t capacity;
} GrowState;

/* The plan: step and first extent. DTBENCH_TEST_GROW_STEP=N (tests and bench/ only) sets the
 * step to N iterations (rounded up to a block); 0 allocates whole, as a non-lock-step run. */
void grow_plan(GrowState *g, int lockstep, int64_t iters_total, int nranks, int nsets,
               int flush_every);

/* The chunk B-tree rank (H5Pset_istore_k) of a growing file, 0 for HDF5's default (32): half
 * the chunks a dataset ends with, so its index is one node allocated at creation and rewritten
 * in place. Why: HDF5 flushes the superblock (and its end-of-allocation address) after every
 * other piece of metadata, so a run killed inside an extension's flush can leave an index that
 * names space past the end the file records; a node split would put chunks already written
 * behind such an address, a single node keeps them readable (docs/hdf5-layout.md). */
unsigned grow_istore_k(const GrowState *g);

/* Collective: one /iterations dataset (float64, NaN until written) at the planned extent. */
hid_t grow_create_set(const GrowState *g, hid_t loc, const char *name);

/* Attribute grow_step of the /iterations group (0: allocated whole). */
void grow_describe(const GrowState *g, hid_t group);

/* Collective: makes room for iteration `iter` (>= extent). Returns 0; -1 when the step's space
 * could not be reserved: the datasets keep their extent, g->refused is set, and err holds the
 * same one-line reason on every rank ("rank 0: extending PATH (/iterations) to iteration N
 * failed: ..."), which rank 0 has printed as dtbench's error line; -2 on this rank when HDF5
 * failed inside the extension (err: "rank R: extending ... failed: CALL: HDF5's message (errno
 * E: ...)", not printed), where the other ranks may be left inside HDF5's collective calls. */
int grow_extend(GrowState *g, int64_t iter, hid_t file, const hid_t *sets, MPI_Comm comm,
                const char *path, char *err, size_t errlen);

/* Collective, at close: attributes extensions and extension_s_median (rank 0's) of the
 * /iterations group of a growing file; frees g. */
void grow_finish(GrowState *g, hid_t file, MPI_Comm comm);

#endif
