/* recorder_write.c - the HDF5 recorder's raw writes (see recorder_hdf5.h): independent writes of
 * a rank's values into datasets the file already holds, which recorder_create.c (the file's
 * description) and recorder_hdf5.c (per iteration, at the end) both make; a failed one stops the
 * run as a signal does. And the write errors tests inject (DTBENCH_TEST_WRITE_ERROR). */
#define _GNU_SOURCE
#include "h5_check.h"
#include "outputs.h" /* defines: outputs_write_errno */
#include "recorder_hdf5.h"

#include <errno.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INJECT_ALL (-2) /* DTBENCH_TEST_WRITE_ERROR=all:... */

/* A raw write failed on this rank: one line naming the file and the reason, nothing more is
 * written by this rank, and the run stops the way a signal stops it (the stop vote every rank
 * exchanges anyway, so no rank waits on one that gave up). */
void rec_write_failed(Recorder *r, int err_no, const char *what) {
    if (r->failed) return;
    r->failed = 1;
    snprintf(r->failure, sizeof r->failure, "rank %d: writing %s (%s) failed: %s (errno %d: %s)",
             r->rank, r->path, what, h5_error_message(), err_no, strerror(err_no));
    fprintf(stderr, "dtbench: error: %s; stopping the run (blocks written before stay readable)\n",
            r->failure);
    fflush(stderr);
    raise(SIGUSR1); /* the stop request of signals.h */
}

/* recorder_hdf5.h; a failure goes to rec_write_failed. */
int rec_write_at(Recorder *r, hid_t set, hid_t memtype, int ndims, const hsize_t *start, hsize_t n,
                 const void *data) {
    if (r && r->failed) return -1;
    hsize_t count[2] = {1, 1};
    count[ndims - 1] = n;
    hid_t fspace = H5_CHECK(H5Dget_space(set));
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5_CHECK(H5Screate_simple(1, &n, NULL));
    errno = 0;
    herr_t rc = H5Dwrite(set, memtype, mspace, fspace, H5P_DEFAULT, data);
    int err_no = errno;
    if (rc < 0 && !err_no) /* MPI-IO reports a short write without errno */
        err_no = outputs_write_errno(r ? r->path : ".", (double)n * (double)H5Tget_size(memtype));
    if (r && (r->inject_rank == r->rank || r->inject_rank == INJECT_ALL) &&
        r->blocks == r->inject_block)
        rc = -1, err_no = r->inject_errno; /* DTBENCH_TEST_WRITE_ERROR */
    H5Sclose(mspace), H5Sclose(fspace);
    if (rc < 0) {
        if (!r) check_fail(__FILE__, __LINE__, "H5Dwrite", h5_error_message());
        char name[128] = "";
        H5Iget_name(set, name, sizeof name);
        rec_write_failed(r, err_no, name);
        return -1;
    }
    return 0;
}

void rec_write_rank_value(Recorder *r, int which, hid_t memtype, const void *value) {
    hsize_t start = (hsize_t)r->rank;
    rec_write_at(r, r->rank_sets[which], memtype, 1, &start, 1, value);
}

/* Tests only: DTBENCH_TEST_WRITE_ERROR=RANK:BLOCK:ERRNO makes RANK's (all: every rank's) writes
 * of its block BLOCK (0: the first) fail with ERRNO, as a full or failing disk would. */
void rec_read_injection(Recorder *r) {
    r->inject_rank = -1;
    const char *inject = getenv("DTBENCH_TEST_WRITE_ERROR");
    long long b = 0;
    if (inject && !strncmp(inject, "all:", 4)) {
        if (sscanf(inject + 4, "%lld:%d", &b, &r->inject_errno) == 2) r->inject_rank = INJECT_ALL;
    } else if (inject && sscanf(inject, "%d:%lld:%d", &r->inject_rank, &b, &r->inject_errno) != 3)
        r->inject_rank = -1;
    r->inject_block = b;
}
