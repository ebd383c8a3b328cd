/* recorder_hdf5.h - what the HDF5 recorder's files share (private to them): the recorder's
 * state, the /ranks columns, and the raw writes. recorder_hdf5.c writes (per iteration, at the
 * end); recorder_create.c creates and describes the file (collective, once); both write through
 * recorder_write.c, which calls neither. */
#ifndef DTBENCH_RECORDER_HDF5_H
#define DTBENCH_RECORDER_HDF5_H

#include "recorder.h"
#include "recorder_grow.h"
#include "recorder_profile.h"

#include <hdf5.h>
#include <limits.h>
#include <stdint.h>

enum {
    R_RANK,
    R_HOST,
    R_NODE,
    R_LOCAL,
    R_PID,
    R_OFF0,
    R_OFF1,
    R_RTT,
    R_DONE,
    R_STATUS,
    R_HASH,
    R_ROLE,
    R_PUSHED,
    R_APPLIED,
    R_SAMPLES,
    R_ITERS_DONE,
    R_MEM_PARAMS,
    R_MEM_GRADS,
    R_MEM_OPTIM,
    R_MEM_PEAK,
    R_N
};

#define NSAMPLE_SETS 4

struct Recorder {
    MPI_Comm comm;
    const RecordKeeper *keeper; /* RecorderConfig.keeper */
    hid_t file;
    hid_t iter_sets[48]; /* one per ITER_FIELDS row, shape (nranks, iters_total) */
    hid_t rank_sets[R_N];
    hid_t eval_sets[4];
    int rank, nranks, flush_every;
    int64_t iters_total, next_to_write;
    int64_t done;    /* iterations recorded (/ranks/iterations_done), written or not */
    IterRecord *buf; /* [flush_every] */
    int nbuf, nbuf_written;
    double *column; /* [flush_every] scratch */
    hid_t sample_sets[NSAMPLE_SETS];
    int64_t sample_capacity, samples_written;
    int (*sample_pull)(void *user, SampleRecord *out, int max);
    void *sample_user;
    char path[PATH_MAX];
    /* A failed write: this rank writes nothing more and asks for the agreed stop. */
    int failed;
    char failure[PATH_MAX + 1024];
    int64_t blocks;                /* blocks written */
    int inject_rank, inject_errno; /* DTBENCH_TEST_WRITE_ERROR (tests only) */
    int64_t inject_block;
    GrowState grow;       /* the extent of /iterations (recorder_grow.h) */
    ProfileSets *profile; /* /profile (--profile-layers), NULL: none */
};

/* A raw write failed on this rank (`what`: the dataset): one line naming the file and the reason;
 * this rank writes nothing more and raises the stop request (signals.h). */
void rec_write_failed(Recorder *r, int err_no, const char *what);
/* Independent write of n elements at `start` of a 1-D or 2-D dataset; 0, or -1 after a failed
 * write (this rank then writes nothing more and asks for the agreed stop). */
int rec_write_at(Recorder *r, hid_t set, hid_t memtype, int ndims, const hsize_t *start, hsize_t n,
                 const void *data);
/* This rank's entry of /ranks/<RANK_SETS[which]>. */
void rec_write_rank_value(Recorder *r, int which, hid_t memtype, const void *value);
/* Tests only: DTBENCH_TEST_WRITE_ERROR read into r (see recorder_write.c). */
void rec_read_injection(Recorder *r);

/* Collective. Checks the room for the whole file (every iteration), creates it under its hidden
 * name `partial` and reserves the space of its first extent (recorder_grow.h: the rest is
 * reserved step by step); returns the file, or -1 with err set (the same verdict on every rank,
 * no file left). */
hid_t rec_create_file(Recorder *r, const RecorderConfig *c, const char *partial, char *err,
                      size_t errlen);
/* Collective. Everything that describes the run: root attributes and /config, /iterations at its
 * first extent, /samples, /eval, /profile, /ranks with this rank's row. */
void rec_describe(Recorder *r, hid_t file, const RecorderConfig *c);

#endif
