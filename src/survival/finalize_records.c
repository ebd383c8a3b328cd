/* finalize_records.c - the survivors' iteration records written by the finalizer (see
 * finalize_records.h). */
#define _GNU_SOURCE
#include "finalize_records.h"
#include "h5_check.h" /* h5_error_message */
#include "alloc.h" /* defines: xcalloc, xmalloc, xrealloc */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* n bytes from fd; 1 read, 0 at the end, -1 on a short read or an error. */
static int read_all(int fd, void *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return got == 0 && k == 0 ? 0 : -1;
        got += (size_t)k;
    }
    return 1;
}

int held_read(int fd, HeldRecords *out) {
    out->block = NULL, out->n = 0;
    for (;;) {
        HeldBlock b = {0};
        int rc = read_all(fd, &b.head, sizeof b.head);
        if (rc == 0) return 0;
        if (rc < 0 || b.head.n < 0 || b.head.n > ((int64_t)1 << 32) || b.head.first < 0) return 0;
        b.rec = xmalloc((size_t)b.head.n * sizeof *b.rec);
        if (read_all(fd, b.rec, (size_t)b.head.n * sizeof *b.rec) != 1 && b.head.n > 0) {
            free(b.rec); /* cut short: what came before stands */
            return 0;
        }
        out->block = xrealloc(out->block, (size_t)(out->n + 1) * sizeof *out->block);
        out->block[out->n++] = b;
    }
}

void held_free(HeldRecords *h) {
    for (int i = 0; i < h->n; i++)
        free(h->block[i].rec);
    free(h->block);
    h->block = NULL, h->n = 0;
}

static int fail(char *why, size_t len, const char *what) {
    snprintf(why, len, "%s: %s", what, h5_error_message());
    return -1;
}

/* A whole /ranks dataset of int64 read (or written). */
static int rank_counts(hid_t file, const char *name, long long *v, int write) {
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    if (d < 0) return -1;
    herr_t rc = write ? H5Dwrite(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, v)
                      : H5Dread(d, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d);
    return rc < 0 ? -1 : 0;
}

/* Iterations first .. first+n-1 of rank r, every quantity of ITER_FIELDS. */
static int write_rows(hid_t file, int r, int64_t first, int64_t n, const IterRecord *rec, char *why,
                      size_t len) {
    double *col = xmalloc((size_t)n * sizeof *col);
    hsize_t start[2] = {(hsize_t)r, (hsize_t)first}, count[2] = {1, (hsize_t)n}, m = (hsize_t)n;
    hid_t mspace = H5Screate_simple(1, &m, NULL);
    int rc = 0;
    for (int f = 0; f < ITER_NFIELDS && rc == 0; f++) {
        char name[128];
        snprintf(name, sizeof name, "iterations/%s", ITER_FIELDS[f].name);
        for (int64_t i = 0; i < n; i++)
            col[i] = *(const double *)((const char *)&rec[i] + ITER_FIELDS[f].offset);
        hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
        hid_t fspace = d < 0 ? -1 : H5Dget_space(d);
        if (fspace < 0 ||
            H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
            H5Dwrite(d, H5T_NATIVE_DOUBLE, mspace, fspace, H5P_DEFAULT, col) < 0)
            rc = fail(why, len, name);
        if (fspace >= 0) H5Sclose(fspace);
        if (d >= 0) H5Dclose(d);
    }
    H5Sclose(mspace);
    free(col);
    return rc;
}

/* Columns of /iterations (a growing file's extent). */
static int64_t extent(hid_t file) {
    char name[128];
    snprintf(name, sizeof name, "iterations/%s", ITER_FIELDS[0].name);
    hid_t d = H5Dopen2(file, name, H5P_DEFAULT);
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    hsize_t dims[2] = {0, 0};
    if (s >= 0) H5Sget_simple_extent_dims(s, dims, NULL), H5Sclose(s);
    if (d >= 0) H5Dclose(d);
    return (int64_t)dims[1];
}

static int by_rank_first(const void *a, const void *b) {
    const RecordsBlock *x = &((const HeldBlock *)a)->head, *y = &((const HeldBlock *)b)->head;
    if (x->rank != y->rank) return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->first > y->first) - (x->first < y->first);
}

int held_write(hid_t file, const HeldRecords *in, int nranks, char *why, size_t whylen) {
    /* in order of rank and first iteration: a block that closes the gap before another comes
     * first */
    if (in->n > 1) qsort(in->block, (size_t)in->n, sizeof *in->block, by_rank_first);
    long long *kept = xcalloc((size_t)nranks, sizeof *kept);
    long long *done = xcalloc((size_t)nranks, sizeof *done);
    int rc = rank_counts(file, "ranks/completed", kept, 0);
    int has_done = rc == 0 && rank_counts(file, "ranks/iterations_done", done, 0) == 0;
    if (rc < 0) rc = fail(why, whylen, "ranks/completed");
    int64_t cols = extent(file);
    for (int i = 0; i < in->n && rc == 0; i++) {
        const HeldBlock *b = &in->block[i];
        int r = b->head.rank;
        if (r < 0 || r >= nranks) continue;
        int64_t first = b->head.first, n = b->head.n;
        if (first + n > cols) n = cols - first; /* beyond the extent: not written */
        if (first <= kept[r] && n > 0) {        /* rows stay whole from 0 */
            rc = write_rows(file, r, first, n, b->rec, why, whylen);
            if (rc == 0 && first + n > kept[r]) kept[r] = first + n;
        }
        if (b->head.done > done[r]) done[r] = b->head.done;
    }
    for (int r = 0; r < nranks; r++)
        if (kept[r] > done[r]) done[r] = kept[r];
    if (rc == 0 && rank_counts(file, "ranks/completed", kept, 1) < 0)
        rc = fail(why, whylen, "ranks/completed");
    if (rc == 0 && has_done && rank_counts(file, "ranks/iterations_done", done, 1) < 0)
        rc = fail(why, whylen, "ranks/iterations_done");
    free(kept), free(done);
    return rc;
}
