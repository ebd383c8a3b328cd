/* recorder_grow.c - /iterations datasets that grow with the run (see recorder_grow.h and
 * docs/hdf5-layout.md): the step plan, the datasets' creation and the collective extension. */
#define _GNU_SOURCE
#include "recorder_grow.h"
#include "h5_check.h"
#include "h5_objects.h"
#include "outputs.h"
#include "alloc.h" /* defines: xrealloc */
#include "clock.h" /* defines: dt_now */

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void grow_plan(GrowState *g, int lockstep, int64_t iters_total, int nranks, int nsets,
               int flush_every) {
    memset(g, 0, sizeof *g);
    g->nranks = nranks, g->nsets = nsets, g->total = iters_total;
    int64_t block = flush_every > 0 ? flush_every : 1;
    double per_iter = (double)nsets * nranks * 8.0; /* bytes of one iteration, all ranks */
    int64_t step = (int64_t)ceil(GROW_STEP_BYTES / per_iter);
    if (step < GROW_MIN_ITERS) step = GROW_MIN_ITERS;
    const char *test = getenv("DTBENCH_TEST_GROW_STEP");
    if (test && *test) step = atoll(test);
    g->growing = lockstep && step > 0 && iters_total > 0;
    if (!g->growing) {
        g->step = g->extent = iters_total;
        return;
    }
    int64_t fewest = (iters_total + GROW_MAX_CHUNKS - 1) / GROW_MAX_CHUNKS; /* one index node */
    if (step < fewest) step = fewest;
    step = (step + block - 1) / block * block; /* whole blocks */
    /* One chunk is nranks x step doubles; HDF5 caps a chunk at 4 GiB. */
    int64_t most = ((int64_t)1 << 31) / 8 / nranks / block * block;
    if (step > most) step = most > block ? most : block;
    g->step = step < iters_total ? step : iters_total;
    g->extent = g->step;
}

unsigned grow_istore_k(const GrowState *g) {
    if (!g->growing) return 0;
    int64_t chunks = (g->total + g->step - 1) / g->step;
    int64_t k = (chunks + 1) / 2;
    return k <= 32 ? 0 : (unsigned)(k < GROW_MAX_CHUNKS / 2 ? k : GROW_MAX_CHUNKS / 2);
}

hid_t grow_create_set(const GrowState *g, hid_t loc, const char *name) {
    double nan = NAN;
    hsize_t dims[2] = {(hsize_t)g->nranks, (hsize_t)g->extent};
    hsize_t maxdims[2] = {(hsize_t)g->nranks, (hsize_t)g->total};
    hsize_t chunk[2] = {(hsize_t)g->nranks, (hsize_t)g->step};
    hid_t dcpl = H5_CHECK(H5Pcreate(H5P_DATASET_CREATE));
    if (g->growing) {
        H5_CHECK(H5Pset_chunk(dcpl, 2, chunk)); /* one chunk per step: a rank's block is
                                                   one contiguous run of bytes in it */
    } else {
        H5_CHECK(H5Pset_layout(dcpl, H5D_CONTIGUOUS));
    }
    /* Allocated and NaN-filled when created or extended (never by a rank's independent write,
     * which could not change metadata). */
    H5_CHECK(H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY));
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_ALLOC));
    H5_CHECK(H5Pset_obj_track_times(dcpl, 0));
    H5_CHECK(H5Pset_fill_value(dcpl, H5T_NATIVE_DOUBLE, &nan));
    hid_t space = H5_CHECK(H5Screate_simple(2, dims, maxdims));
    hid_t set =
        H5_CHECK(H5Dcreate2(loc, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT));
    H5Sclose(space), H5Pclose(dcpl);
    return set;
}

int grow_extend(GrowState *g, int64_t iter, hid_t file, const hid_t *sets, MPI_Comm comm,
                const char *path, char *err, size_t errlen) {
    if (g->refused || !g->growing) return -1;
    double t0 = dt_now();
    int64_t next = g->extent;
    while (next <= iter && next < g->total)
        next = next + g->step < g->total ? next + g->step : g->total;
    double bytes = (double)g->nsets * g->nranks * (double)(next - g->extent) * 8.0;
    int rank = 0;
    MPI_CHECK(MPI_Comm_rank(comm, &rank));
    char why[1024] = "";
    int verdict =
        rank == 0 ? outputs_reserve_more(path, bytes + GROW_SLACK_BYTES, "--iters", why, sizeof why)
                  : 0;
    MPI_CHECK(MPI_Bcast(&verdict, 1, MPI_INT, 0, comm));
    if (verdict) {
        snprintf(err, errlen, "rank 0: extending %s (/iterations) to iteration %lld failed: %s",
                 path, (long long)iter + 1, why);
        MPI_CHECK(MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, comm));
        if (rank == 0) {
            fprintf(stderr,
                    "dtbench: error: %s; stopping the run (blocks written before stay readable)\n",
                    err);
            fflush(stderr);
        }
        g->refused = 1;
        return -1;
    }
    hsize_t dims[2] = {(hsize_t)g->nranks, (hsize_t)next};
    /* The new extent and chunks on disk before any rank writes into them: a killed run reads
     * every block written after this (the flush). A write that fails inside these collective
     * calls (the space was reserved, yet the file system refused) leaves the other ranks inside
     * HDF5, where no stop vote reaches them: the caller ends the run out of band. */
    const char *call = NULL;
    errno = 0;
    for (int i = 0; i < g->nsets && !call; i++)
        if (H5Dset_extent(sets[i], dims) < 0) call = "H5Dset_extent";
    if (!call && H5Fflush(file, H5F_SCOPE_GLOBAL) < 0) call = "H5Fflush";
    if (call) {
        int e = errno ? errno : outputs_write_errno(path, bytes); /* MPI-IO: a short write */
        snprintf(err, errlen,
                 "rank %d: extending %s (/iterations) to iteration %lld failed: %s: %s (errno %d: "
                 "%s)",
                 rank, path, (long long)iter + 1, call, h5_error_message(), e, strerror(e));
        g->refused = 1;
        return -2;
    }
    g->extent = next;
    if (g->extensions == g->capacity) {
        g->capacity = g->capacity ? 2 * g->capacity : 64;
        g->seconds = xrealloc(g->seconds, (size_t)g->capacity * sizeof(double));
    }
    g->seconds[g->extensions++] = dt_now() - t0;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void grow_describe(const GrowState *g, hid_t group) {
    long long step = g->growing ? g->step : 0;
    attr_number(group, "grow_step", H5T_NATIVE_LLONG, &step);
}

void grow_finish(GrowState *g, hid_t file, MPI_Comm comm) {
    if (g->growing) {
        double median = 0.0; /* of the extensions' durations, s */
        if (g->extensions > 0) {
            qsort(g->seconds, (size_t)g->extensions, sizeof(double), cmp_double);
            median = g->seconds[g->extensions / 2];
        }
        MPI_CHECK(MPI_Bcast(&median, 1, MPI_DOUBLE, 0, comm));
        long long n = g->extensions;
        hid_t group = H5_CHECK(H5Gopen2(file, "iterations", H5P_DEFAULT));
        attr_number(group, "extensions", H5T_NATIVE_LLONG, &n);
        attr_number(group, "extension_s_median", H5T_NATIVE_DOUBLE, &median);
        H5Gclose(group);
    }
    free(g->seconds);
    g->seconds = NULL;
}
