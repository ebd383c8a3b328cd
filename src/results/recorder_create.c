/* recorder_create.c - the HDF5 recorder's file, created and described once, collectively, before
 * the first iteration (docs/hdf5-layout.md): the room check, the hidden file, root attributes and
 * /config, every dataset allocated and NaN-filled, this rank's row of /ranks. recorder_hdf5.c
 * writes into it from then on. */
#define _GNU_SOURCE
#include "h5_check.h"
#include "h5_objects.h"
#include "outputs.h"
#include "recorder_hdf5.h"
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_iso_time */
#include "fail.h"  /* defines: check_fail */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOST_LEN      64  /* /ranks/host: fixed-size strings */
#define RANK_TEXT_LEN 128 /* /ranks/<key> strings (device name, versions) */

static const struct {
    const char *name, *description;
} RANK_SETS[R_N] = {
    {"rank", "MPI rank in COMM_WORLD"},
    {"host", "host name"},
    {"node", "node index"},
    {"local_rank", "rank within its node"},
    {"pid", "process id"},
    {"clock_offset_start", "this rank's clock minus rank 0's, s, before the run"},
    {"clock_offset_end", "this rank's clock minus rank 0's, s, after the run"},
    {"clock_rtt", "smallest ping-pong round trip when measuring the offset, s"},
    {"completed", "iterations kept: the rank's first `completed` iterations are in /iterations "
                  "(warm-up included)"},
    {"status", "0 never finished (killed), 1 completed, 2 stopped early by a signal, 3 error"},
    {"param_hash",
     "FNV-1a hash of the final parameters (equal on all ranks in sync data parallelism)"},
    {"role", "0 worker (trains), 1 parameter server (serves, no iterations)"},
    {"updates_pushed", "gradient updates this rank sent to the exchange"},
    {"updates_applied", "updates this rank applied (a server: the pushes it applied)"},
    {"samples_written", "entries of this rank's row of /samples written so far"},
    {"iterations_done", "iterations the rank completed, kept or not (warm-up included): more than "
                        "completed when some could not be written"},
    {"memory_params", "bytes of parameters this rank holds (the plan: its layers' parameters)"},
    {"memory_grads", "bytes of gradients this rank holds (the model's gradient buffer)"},
    {"memory_optimizer",
     "bytes of optimizer state this rank holds (SGD's momentum, AdamW's two moments): the "
     "whole model's, or its shard's with --exchange zero1, zero2 or zero3"},
    {"memory_peak_resident",
     "bytes: the process's peak resident memory (getrusage's ru_maxrss) at the end of the run, "
     "measured: everything the rank touched, libraries and buffers included"},
};

static const struct {
    const char *name, *units, *description;
} SAMPLE_SETS[NSAMPLE_SETS] = {
    {"time", "s", "aligned clock (s since rank 0's t0), as /iterations/start"},
    {"power_w", "W", "GPU board power (NVML); NaN on CPU runs"},
    {"memory_mib", "MiB", "GPU memory in use, all processes (NVML); CPU runs: resident memory"},
    {"utilization", "%",
     "GPU utilisation (NVML); CPU runs: process CPU time over wall time, % of "
     "one core"},
};

/* /ranks/kernel_choices: one string per rank, as long as the longest rank's text (collective);
 * not created when no rank has any (CPU backend). */
static void write_kernel_choices(Recorder *r, hid_t file, const char *text, const hsize_t *dims) {
    long long len = text ? (long long)strlen(text) : 0;
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &len, 1, MPI_LONG_LONG, MPI_MAX, r->comm));
    if (len == 0) return;
    hid_t type = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(type, (size_t)len + 1));
    hid_t set = create_set(file, "ranks/kernel_choices", type, 1, dims, NULL);
    attr_text(set, "description",
              "the backend's kernel choice per layer shape, one line each (CUDA: cuDNN forward, "
              "backward-data and backward-filter algorithms with their math modes), then the "
              "number of plans made inside a step");
    char *row = xcalloc((size_t)len + 1, 1);
    if (text) memcpy(row, text, strlen(text));
    hsize_t start = (hsize_t)r->rank;
    rec_write_at(r, set, type, 1, &start, 1, row);
    free(row);
    H5Dclose(set);
    H5Tclose(type);
}

/* Bytes the file takes with `extent` iterations in /iterations (every other dataset is allocated
 * whole at creation), plus room for the metadata (attributes, /config, object headers). Sets
 * *option to the option that drives it. */
static double file_estimate(const RecorderConfig *c, int nranks, int64_t extent,
                            unsigned istore_k, const char **option) {
    double iters = (double)ITER_NFIELDS * nranks * (double)extent * 8;
    /* a growing file's chunk indexes, one B-tree node of 2K entries per dataset (40 B each, 48 counted) */
    double index = (double)ITER_NFIELDS * 2.0 * istore_k * 48;
    double samples = (double)NSAMPLE_SETS * nranks * (double)c->sample_capacity * 8;
    double rows = (double)nranks * (R_N * 8 + HOST_LEN + (double)c->nrank_text * RANK_TEXT_LEN);
    double meta = 4 << 20;
    /* Tests only: DTBENCH_TEST_META_BYTES=N keeps N bytes for the metadata instead (a full disk
     * then meets the growing file's extensions sooner: tests/test_grow_disk.sh). */
    const char *test_meta = getenv("DTBENCH_TEST_META_BYTES");
    if (test_meta && *test_meta) meta = atof(test_meta);
    for (int i = 0; i < c->nattrs; i++)
        meta += c->attrs[i].text ? 2.0 * (double)strlen(c->attrs[i].text) + 256 : 256;
    for (int i = 0; i < c->nconfig; i++)
        meta += 2.0 * (double)strlen(c->config[i].text) + 256;
    *option = iters >= samples ? "--iters" : "--sample-max-s";
    return iters + index + samples + rows + (double)c->n_evals * 32 + meta;
}

/* Collective (recorder_hdf5.h). */
hid_t rec_create_file(Recorder *r, const RecorderConfig *c, const char *partial, char *err,
                      size_t errlen) {
    const char *option = "--output";
    unsigned istore_k = grow_istore_k(&r->grow);
    double need = file_estimate(c, r->nranks, c->iters_total, istore_k, &option);
    int verdict =
        r->rank == 0 ? outputs_reserve_space(c->path, c->path, need, option, 0, err, errlen) : 0;
    MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, c->comm));
    if (verdict) {
        MPI_CHECK(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, c->comm));
        return -1;
    }
    hid_t fapl = H5_CHECK(H5Pcreate(H5P_FILE_ACCESS));
    H5_CHECK(H5Pset_fapl_mpio(fapl, c->comm, MPI_INFO_NULL));
    hid_t fcpl = H5_CHECK(H5Pcreate(H5P_FILE_CREATE));
    if (istore_k) H5_CHECK(H5Pset_istore_k(fcpl, istore_k));
    errno = 0;
    hid_t file = H5Fcreate(partial, H5F_ACC_TRUNC, fcpl, fapl);
    int create_errno = errno;
    char reason[700];
    snprintf(reason, sizeof reason, "%s%s%s", h5_error_message(), create_errno ? ": " : "",
             create_errno ? strerror(create_errno) : ""); /* before H5Pclose clears the stack */
    H5Pclose(fapl), H5Pclose(fcpl);
    int ok = file >= 0, all_ok = 0;
    MPI_CHECK(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->comm));
    if (!all_ok) {
        if (ok) check_fail(__FILE__, __LINE__, "H5Fcreate", "created on some ranks only");
        snprintf(err, errlen, "--output: cannot create %s: %s", c->path, reason);
        return -1;
    }
    const char *unused;
    need = file_estimate(c, r->nranks, r->grow.extent, istore_k, &unused);
    verdict =
        r->rank == 0 ? outputs_reserve_space(partial, c->path, need, option, 1, err, errlen) : 0;
    MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, c->comm));
    if (verdict) { /* the hidden file goes with the run's other claims (outputs_abandon) */
        MPI_CHECK(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, c->comm));
        H5Fclose(file);
        return -1;
    }
    return file;
}

/* Root attributes and /config. */
static void write_root_attrs(hid_t file, const RecorderConfig *c) {
    attr_ll(file, "schema_version", 1);
    for (int i = 0; i < c->nattrs; i++) {
        if (c->attrs[i].text)
            attr_text(file, c->attrs[i].key, c->attrs[i].text);
        else if (c->attrs[i].is_real)
            attr_number(file, c->attrs[i].key, H5T_NATIVE_DOUBLE, &c->attrs[i].real);
        else
            attr_ll(file, c->attrs[i].key, c->attrs[i].value);
    }
    attr_ll(file, "iters_total", c->iters_total);
    attr_ll(file, "warmup", c->warmup);
    attr_ll(file, "flush_every", c->flush_every);
    attr_number(file, "timer_overhead_s", H5T_NATIVE_DOUBLE, &c->timer_overhead);
    char now[64];
    dt_iso_time(now, sizeof now);
    MPI_CHECK(MPI_Bcast(now, sizeof now, MPI_CHAR, 0, c->comm));
    attr_text(file, "start_time", now);

    hid_t g = H5_CHECK(H5Gcreate2(file, "config", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    for (int i = 0; i < c->nconfig; i++)
        attr_text(g, c->config[i].key, c->config[i].text);
    H5Gclose(g);
}

/* /iterations at its first extent (recorder_grow.h), /samples and /eval at their final size
 * (NaN until written). */
static void create_data_sets(Recorder *r, hid_t file, const RecorderConfig *c) {
    double nan = NAN;
    hid_t g = H5_CHECK(H5Gcreate2(file, "iterations", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    attr_ll(g, "warmup", c->warmup);
    grow_describe(&r->grow, g);
    for (int i = 0; i < ITER_NFIELDS; i++) {
        r->iter_sets[i] = grow_create_set(&r->grow, g, ITER_FIELDS[i].name);
        attr_text(r->iter_sets[i], "units", ITER_FIELDS[i].units);
        attr_text(r->iter_sets[i], "description", ITER_FIELDS[i].description);
    }
    H5Gclose(g);

    r->sample_capacity = c->sample_capacity;
    r->sample_pull = c->sample_pull, r->sample_user = c->sample_user;
    if (c->sample_capacity > 0) {
        hsize_t sdims[2] = {(hsize_t)r->nranks, (hsize_t)c->sample_capacity};
        g = H5_CHECK(H5Gcreate2(file, "samples", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        attr_number(g, "sample_hz", H5T_NATIVE_DOUBLE, &c->sample_hz);
        attr_ll(g, "capacity", c->sample_capacity);
        for (int i = 0; i < NSAMPLE_SETS; i++) {
            r->sample_sets[i] = create_set(g, SAMPLE_SETS[i].name, H5T_IEEE_F64LE, 2, sdims, &nan);
            attr_text(r->sample_sets[i], "units", SAMPLE_SETS[i].units);
            attr_text(r->sample_sets[i], "description", SAMPLE_SETS[i].description);
        }
        H5Gclose(g);
    }

    if (c->n_evals > 0) {
        static const char *names[4] = {"iteration", "time", "accuracy", "loss"};
        hsize_t n = (hsize_t)c->n_evals;
        g = H5_CHECK(H5Gcreate2(file, "eval", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        for (int i = 0; i < 4; i++)
            r->eval_sets[i] = create_set(g, names[i], H5T_IEEE_F64LE, 1, &n, &nan);
        H5Gclose(g);
    }
}

/* /ranks: the data sets (collective), then this rank's row and its text (independent raw data). */
static void create_rank_sets(Recorder *r, hid_t file, const RecorderConfig *c) {
    double nan = NAN;
    hsize_t dims[2] = {(hsize_t)r->nranks, (hsize_t)c->iters_total};
    hid_t host_type = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(host_type, HOST_LEN));
    hid_t types[R_N] = {H5T_STD_I32LE, host_type,      H5T_STD_I32LE,  H5T_STD_I32LE,
                        H5T_STD_I64LE, H5T_IEEE_F64LE, H5T_IEEE_F64LE, H5T_IEEE_F64LE,
                        H5T_STD_I64LE, H5T_STD_I32LE,  H5T_STD_U64LE,  H5T_STD_I32LE,
                        H5T_STD_I64LE, H5T_STD_I64LE,  H5T_STD_I64LE,  H5T_STD_I64LE,
                        H5T_IEEE_F64LE, H5T_IEEE_F64LE, H5T_IEEE_F64LE, H5T_IEEE_F64LE};
    hid_t g = H5_CHECK(H5Gcreate2(file, "ranks", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    for (int i = 0; i < R_N; i++) {
        const void *fill = H5Tequal(types[i], H5T_IEEE_F64LE) > 0 ? (const void *)&nan : NULL;
        r->rank_sets[i] = create_set(g, RANK_SETS[i].name, types[i], 1, dims, fill);
        attr_text(r->rank_sets[i], "description", RANK_SETS[i].description);
    }
    H5Gclose(g);

    /* /ranks/<key>: this rank's text (device, library versions) */
    hid_t text_type = H5_CHECK(H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(text_type, RANK_TEXT_LEN));
    hid_t *text_sets = xcalloc((size_t)c->nrank_text + 1, sizeof(hid_t));
    for (int i = 0; i < c->nrank_text; i++) {
        char path[160];
        snprintf(path, sizeof path, "ranks/%s", c->rank_text[i].key);
        text_sets[i] = create_set(file, path, text_type, 1, dims, NULL);
    }

    char host[HOST_LEN] = {0};
    snprintf(host, sizeof host, "%s", c->host);
    int rank = r->rank;
    rec_write_rank_value(r, R_RANK, H5T_NATIVE_INT, &rank);
    rec_write_rank_value(r, R_HOST, host_type, host);
    rec_write_rank_value(r, R_NODE, H5T_NATIVE_INT, &c->node);
    rec_write_rank_value(r, R_LOCAL, H5T_NATIVE_INT, &c->local_rank);
    rec_write_rank_value(r, R_ROLE, H5T_NATIVE_INT, &c->role);
    rec_write_rank_value(r, R_PID, H5T_NATIVE_LLONG, &c->pid);
    rec_write_rank_value(r, R_OFF0, H5T_NATIVE_DOUBLE, &c->clock_offset_start);
    rec_write_rank_value(r, R_RTT, H5T_NATIVE_DOUBLE, &c->clock_rtt);
    rec_write_rank_value(r, R_MEM_PARAMS, H5T_NATIVE_DOUBLE, &c->memory_params);
    rec_write_rank_value(r, R_MEM_GRADS, H5T_NATIVE_DOUBLE, &c->memory_grads);
    rec_write_rank_value(r, R_MEM_OPTIM, H5T_NATIVE_DOUBLE, &c->memory_optimizer);
    H5Tclose(host_type);
    for (int i = 0; i < c->nrank_text; i++) {
        char text[RANK_TEXT_LEN] = {0};
        hsize_t start = (hsize_t)r->rank;
        snprintf(text, sizeof text, "%s", c->rank_text[i].text ? c->rank_text[i].text : "");
        rec_write_at(r, text_sets[i], text_type, 1, &start, 1, text);
        H5Dclose(text_sets[i]);
    }
    free(text_sets);
    H5Tclose(text_type);
    write_kernel_choices(r, file, c->kernel_choices, dims);
}

void rec_describe(Recorder *r, hid_t file, const RecorderConfig *c) {
    write_root_attrs(file, c);
    create_data_sets(r, file, c);
    r->profile = profile_sets_create(file, c, r->nranks);
    create_rank_sets(r, file, c);
}
