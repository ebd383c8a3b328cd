/* finalize_records.h - the iteration records a survivor hands to the finalizer
 * (src/survival/finalize.c,
 * `--records`) on its standard input: the stream of RecordsBlock headers and records of
 * src/survival/watchdog_records.h, read whole, then written where the run would have written them.
 * No MPI. */
#ifndef DTBENCH_FINALIZE_RECORDS_H
#define DTBENCH_FINALIZE_RECORDS_H

#include "watchdog_records.h" /* defines: RecordsBlock, IterRecord */

#include <hdf5.h>
#include <stddef.h>

typedef struct {
    RecordsBlock head;
    IterRecord *rec; /* [head.n] */
} HeldBlock;

typedef struct {
    HeldBlock *block;
    int n;
} HeldRecords;

/* Reads the stream from fd until its end (a block cut short, as a sender killed while writing
 * leaves it, is dropped). 0, or -1 with errno. */
int held_read(int fd, HeldRecords *out);

/* Writes every block into /iterations (rows 0..nranks-1; what lies beyond a growing file's
 * extent is not written), then raises /ranks/completed (a block that starts at or before a rank's
 * completed count extends it: the rows stay whole) and /ranks/iterations_done (the most any block
 * says the rank completed). 0, or -1 with HDF5's message in why. */
int held_write(hid_t file, const HeldRecords *in, int nranks, char *why, size_t whylen);

void held_free(HeldRecords *h);

#endif
