/* recorder_hdf5.c - every rank writes into ONE parallel HDF5 file over MPI-IO.
 *
 * Survival of killed jobs (docs/hdf5-layout.md): all groups, datasets and attributes are created
 * collectively (recorder_create.c: allocated early, NaN-filled), then the file is flushed. From
 * then on each rank only writes raw data - its own row, one block of flush_every iterations at a
 * time, with independent I/O - and then its /ranks/completed entry. Raw writes go straight to the
 * file through MPI-IO, so a SIGKILL leaves every written block readable. The one metadata change
 * is the collective extension of /iterations at a block boundary of lock-step runs
 * (recorder_grow.c), flushed before any rank writes into it. */
#define _GNU_SOURCE
#include "h5_check.h"
#include "h5_objects.h"
#include "outputs.h"
#include "recorder_hdf5.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */
#include "clock.h" /* defines: dt_iso_time, dt_now */
#include "fail.h"  /* defines: check_fail */

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every dataset the recorder holds open, closed. */
static void close_sets(Recorder *r) {
    for (int i = 0; i < ITER_NFIELDS; i++)
        H5Dclose(r->iter_sets[i]);
    for (int i = 0; i < R_N; i++)
        H5Dclose(r->rank_sets[i]);
    for (int i = 0; i < 4; i++)
        if (r->eval_sets[i] > 0) H5Dclose(r->eval_sets[i]);
    for (int i = 0; i < NSAMPLE_SETS; i++)
        if (r->sample_sets[i] > 0) H5Dclose(r->sample_sets[i]);
    profile_sets_close(r->profile);
}

static Recorder *hdf5_create(const RecorderConfig *c, char *err, size_t errlen) {
    Recorder *r = xcalloc(1, sizeof *r);
    r->comm = c->comm, r->keeper = c->keeper;
    MPI_CHECK(MPI_Comm_rank(c->comm, &r->rank));
    MPI_CHECK(MPI_Comm_size(c->comm, &r->nranks));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported by H5_CHECK, once */
    snprintf(r->path, sizeof r->path, "%s", c->path);
    r->inject_rank = -1;
    if (ITER_NFIELDS > (int)(sizeof r->iter_sets / sizeof r->iter_sets[0]))
        check_fail(__FILE__, __LINE__, "hdf5_create", "more ITER_FIELDS than iter_sets");
    grow_plan(&r->grow, c->grow, c->iters_total, r->nranks, ITER_NFIELDS, c->flush_every);

    /* Built under the hidden name rank 0 claimed, renamed into place once it describes itself
     * (outputs.h). */
    char partial[PATH_MAX + 64] = "";
    if (r->rank == 0) snprintf(partial, sizeof partial, "%s", outputs_partial());
    MPI_CHECK(MPI_Bcast(partial, sizeof partial, MPI_CHAR, 0, c->comm));
    hid_t file = rec_create_file(r, c, partial, err, errlen);
    if (file < 0) {
        free(r);
        return NULL;
    }
    r->file = file;
    r->flush_every = c->flush_every;
    r->iters_total = c->iters_total;
    /* A block never holds more than the run's iterations (--flush-every may be larger). */
    if (r->flush_every > r->iters_total)
        r->flush_every = (int)(r->iters_total > 0 ? r->iters_total : 1);
    r->buf = xcalloc((size_t)r->flush_every, sizeof(IterRecord));
    r->column = xcalloc((size_t)r->flush_every, sizeof(double));

    rec_describe(r, file, c);

    /* Everything that describes the file is now on disk; from here on only raw data. */
    H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
    int refused = r->rank == 0 ? outputs_publish(err, errlen) != 0 : 0;
    MPI_CHECK(MPI_Bcast(&refused, 1, MPI_INT, 0, c->comm));
    if (refused) { /* another job published first: its file stays, this one goes */
        MPI_CHECK(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, c->comm));
        close_sets(r);
        H5_CHECK(H5Fclose(r->file));
        free(r->buf), free(r->column), free(r);
        return NULL;
    }
    rec_read_injection(r);
    return r;
}

/* ---- per iteration -------------------------------------------------------------------------- */

/* The samples taken since the last call, appended to this rank's row of /samples (what does not
 * fit is left to the sampler, which counts it as dropped). */
static void write_samples(Recorder *r) {
    enum { CHUNK = 512 };
    SampleRecord s[CHUNK];
    double col[CHUNK];
    int n;
    if (r->sample_capacity <= 0 || !r->sample_pull || r->failed) return;
    while (r->samples_written < r->sample_capacity) {
        int64_t room = r->sample_capacity - r->samples_written;
        n = r->sample_pull(r->sample_user, s, room < CHUNK ? (int)room : CHUNK);
        if (n <= 0) break;
        hsize_t start[2] = {(hsize_t)r->rank, (hsize_t)r->samples_written};
        for (int f = 0; f < NSAMPLE_SETS; f++) {
            for (int i = 0; i < n; i++)
                col[i] = f == 0   ? s[i].time
                         : f == 1 ? s[i].power_w
                         : f == 2 ? s[i].memory_mib
                                  : s[i].utilization;
            rec_write_at(r, r->sample_sets[f], H5T_NATIVE_DOUBLE, 2, start, (hsize_t)n, col);
        }
        r->samples_written += n;
        long long done = r->samples_written; /* after the data, as for /ranks/completed */
        rec_write_rank_value(r, R_SAMPLES, H5T_NATIVE_LLONG, &done);
    }
}

static void write_block(Recorder *r) {
    if (r->keeper->leaving()) return; /* a finalizer writes this rank's records (watchdog.h) */
    write_samples(r);
    if (r->nbuf == 0) return;
    hsize_t start[2] = {(hsize_t)r->rank, (hsize_t)r->next_to_write};
    r->nbuf_written = r->nbuf;
    for (int f = 0; f < ITER_NFIELDS; f++) {
        for (int i = 0; i < r->nbuf; i++)
            r->column[i] = *(const double *)((const char *)&r->buf[i] + ITER_FIELDS[f].offset);
        rec_write_at(r, r->iter_sets[f], H5T_NATIVE_DOUBLE, 2, start, (hsize_t)r->nbuf, r->column);
    }
    r->nbuf = 0;
    if (r->failed) return; /* this block is lost; /ranks/completed keeps the last good one */
    r->next_to_write += r->nbuf_written;
    /* Only after the block's data: a killed run never claims iterations it did not write. */
    long long kept = r->next_to_write, done = r->done;
    rec_write_rank_value(r, R_DONE, H5T_NATIVE_LLONG, &kept);
    rec_write_rank_value(r, R_ITERS_DONE, H5T_NATIVE_LLONG, &done);
    r->keeper->written(r->next_to_write);
    if (!r->failed && r->blocks++ == 0 && r->rank == 0) outputs_committed();
}

/* Collective (every rank of a lock-step run records the same iterations): room for `iter`. A step
 * that cannot be reserved stops the run as a write error does, on every rank, with rank 0's
 * reason; the blocks written before stay readable. */
static void extend(Recorder *r, int64_t iter) {
    char why[sizeof r->failure];
    int refused =
        grow_extend(&r->grow, iter, r->file, r->iter_sets, r->comm, r->path, why, sizeof why);
    if (!refused || (r->failed && refused != -2)) return;
    r->failed = 1;
    snprintf(r->failure, sizeof r->failure, "%s", why);
    if (refused == -2) { /* the other ranks may wait inside HDF5: no stop vote reaches them */
        fprintf(stderr,
                "dtbench: error: %s; stopping the run (blocks written before stay "
                "readable)\n",
                r->failure);
        r->keeper->abandon_run(r->path, r->failure, r->comm);
    }
    raise(SIGUSR1); /* the stop request of signals.h */
}

static void hdf5_record_iteration(Recorder *r, int64_t iter, const IterRecord *rec) {
    if (!r->failed && (iter != r->next_to_write + r->nbuf || iter >= r->iters_total))
        check_fail(__FILE__, __LINE__, "record_iteration", "iterations must be recorded in order");
    /* A rank that failed still takes part: the others are extending with it. */
    if (iter >= r->grow.extent && r->grow.growing && !r->grow.refused) extend(r, iter);
    r->done = iter + 1;
    if (r->failed) return;      /* the stop is on its way; nothing more is written by this rank */
    r->keeper->record(iter, rec); /* held twice until written: a dead node loses none of it */
    r->buf[r->nbuf++] = *rec;
    if (r->nbuf == r->flush_every) write_block(r);
}

static void hdf5_record_eval(Recorder *r, int index, const EvalRecord *e) {
    hsize_t start = (hsize_t)index;
    const double v[4] = {e->iteration, e->time, e->accuracy, e->loss};
    for (int i = 0; i < 4; i++)
        rec_write_at(r, r->eval_sets[i], H5T_NATIVE_DOUBLE, 1, &start, 1, &v[i]);
}

/* Collective, after a write error: the iterations completed by ranks that can no longer write,
 * written by the first rank that still can (/ranks/iterations_done). */
static void write_failed_counts(Recorder *r) {
    long long mine[2] = {r->failed, r->done}, *all = xmalloc(2 * (size_t)r->nranks * sizeof *all);
    MPI_CHECK(MPI_Allgather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, r->comm));
    int writer = 0;
    while (writer < r->nranks && all[2 * writer])
        writer++;
    for (int q = 0; q < r->nranks && r->rank == writer; q++) {
        hsize_t start = (hsize_t)q;
        if (all[2 * q])
            rec_write_at(r, r->rank_sets[R_ITERS_DONE], H5T_NATIVE_LLONG, 1, &start, 1,
                         &all[2 * q + 1]);
    }
    free(all);
}

static void hdf5_record_profile(Recorder *r, int index, const double *forward,
                                const double *backward) {
    errno = 0;
    if (!r->failed && profile_sets_write(r->profile, r->rank, index, forward, backward) < 0)
        rec_write_failed(r, errno ? errno : EIO, "/profile");
}

static void hdf5_close(Recorder *r, const RunEnd *end) {
    write_block(r);
    int st = (int)end->status;
    unsigned long long hash = end->param_hash;
    rec_write_rank_value(r, R_STATUS, H5T_NATIVE_INT, &st);
    rec_write_rank_value(r, R_OFF1, H5T_NATIVE_DOUBLE, &end->clock_offset_end);
    rec_write_rank_value(r, R_HASH, H5T_NATIVE_ULLONG, &hash);
    long long pushed = end->updates_pushed, applied = end->updates_applied;
    rec_write_rank_value(r, R_PUSHED, H5T_NATIVE_LLONG, &pushed);
    rec_write_rank_value(r, R_APPLIED, H5T_NATIVE_LLONG, &applied);
    rec_write_rank_value(r, R_MEM_PEAK, H5T_NATIVE_DOUBLE, &end->peak_resident);

    /* Collective from here (every rank reaches close): a write error anywhere, agreed here, is
     * the run's stop reason, with the first failing rank's file and errno. */
    int mine = r->failed ? r->rank : r->nranks, first_failed = r->nranks;
    MPI_CHECK(MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, r->comm));
    long long written = r->next_to_write, most_written = 0;
    MPI_CHECK(MPI_Allreduce(&written, &most_written, 1, MPI_LONG_LONG, MPI_MAX, r->comm));
    int write_error = first_failed < r->nranks;
    if (write_error) {
        MPI_CHECK(MPI_Bcast(r->failure, sizeof r->failure, MPI_CHAR, first_failed, r->comm));
        dt_exit_status = 1;
        write_failed_counts(r);
    }
    /* The end attributes, with rank 0's values. */
    int worst = st;
    MPI_CHECK(MPI_Allreduce(&st, &worst, 1, MPI_INT, MPI_MAX, r->comm));
    char now[64], reason[64];
    dt_iso_time(now, sizeof now);
    snprintf(reason, sizeof reason, "%s", end->stop_reason);
    MPI_CHECK(MPI_Bcast(now, sizeof now, MPI_CHAR, 0, r->comm));
    MPI_CHECK(MPI_Bcast(reason, sizeof reason, MPI_CHAR, 0, r->comm));
    attr_text(r->file, "end_time", now);
    attr_text(r->file, "stop_reason",
              write_error ? "write_error" : (worst == RUN_FAILED ? "error" : reason));
    if (write_error) attr_text(r->file, "stop_detail", r->failure);
    /* From a rank's signal to the file's last write: the max over ranks that got one. */
    double latency = end->signal_time > 0 ? dt_now() - end->signal_time : 0.0, worst_latency = 0;
    MPI_CHECK(MPI_Allreduce(&latency, &worst_latency, 1, MPI_DOUBLE, MPI_MAX, r->comm));
    if (worst_latency > 0)
        attr_number(r->file, "stop_latency_s", H5T_NATIVE_DOUBLE, &worst_latency);
    grow_finish(&r->grow, r->file, r->comm);
    attr_ll(r->file, "finished", 1);

    close_sets(r);
    H5_CHECK(H5Fclose(r->file));
    /* A run that failed before any rank wrote a block leaves no file. */
    if (write_error && most_written == 0 && r->rank == 0) outputs_drop_results();
    if (write_error && r->rank == 0)
        fprintf(stderr, "dtbench: error: the run stopped on a write error (%s); %s\n", r->failure,
                most_written ? "stop_reason=write_error in the file"
                             : "no block written, no file left");
    free(r->buf), free(r->column), free(r);
}

const RecorderOps hdf5_recorder = {
    .name = "hdf5",
    .create = hdf5_create,
    .record_iteration = hdf5_record_iteration,
    .record_eval = hdf5_record_eval,
    .record_profile = hdf5_record_profile,
    .close = hdf5_close,
};
