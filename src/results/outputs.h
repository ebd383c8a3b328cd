/* outputs.h - the one path every file dtbench writes goes through (rank 0; src/results/outputs.c):
 * the results file (--output) and the saved model (--save-model) are resolved to the files they
 * name in the end (symbolic links followed), compared, claimed before any work, built under hidden
 * names no user file can hold, moved into place when whole, and locked (an fcntl lock, see
 * outputs.c) for the whole run, so that nothing a run or another job wrote is destroyed. */
#ifndef DTBENCH_OUTPUTS_H
#define DTBENCH_OUTPUTS_H

#include <stddef.h>

/* The program's exit status once the run ended (1: results were lost to a write error: the
 * recorder's, or the saved model's below). */
extern int dt_exit_status;

/* Rank 0, before any work: 0, or -1 with one line naming the option (one file named twice, also
 * through links; a folder, a device or FIFO; an unwritable place; an existing file without
 * overwrite; a file another running job holds). Creates the hidden files ".NAME.XXXXXX.partial"
 * (results) and ".NAME.XXXXXX.tmp" (model) beside the files named, exclusively; locks them and
 * the existing files to be replaced until the process ends; installs outputs_abandon as
 * the fatal hook (fatal_hook_set, comm/mpi_check.h). */
int outputs_claim(const char *output, const char *save_model, int overwrite, char *err,
                  size_t errlen);

/* Rank 0: the hidden name the results file is built under (claimed). */
const char *outputs_partial(void);

/* Rank 0: the results file describes itself: it takes the name --output resolves to. A file
 * there is replaced only when this run claimed it, or when it appeared since, --overwrite is
 * given and no running job holds it. 0, or -1 with one line (the partial file stays claimed:
 * outputs_abandon removes it). */
int outputs_publish(char *err, size_t errlen);
/* Rank 0: the results file holds at least one written block (it is kept whatever happens). */
void outputs_committed(void);
/* Rank 0: removes the results file if this run published it and it holds no block. */
void outputs_drop_results(void);
/* A failed run: removes what this run created and did not fill (its hidden files, a results
 * file without a block); a file it did not create is never removed. */
void outputs_abandon(void);

/* Rank 0, the end of training: head and data, written to the model's hidden file, made durable
 * (fsync) and renamed onto the file --save-model names, which must not have become the results
 * file. 0, or -1 after one line on stderr (the hidden file removed, no model left, exit status
 * 1 through dt_exit_status). */
int outputs_save_model(const void *head, size_t hlen, const void *data, size_t dlen);

/* Rank 0: is there room for `need` bytes where `path` goes (created = 0: the free space of its
 * folder's file system; 1: reserved in the created file with fallocate, size unchanged, so that
 * no write of this run can meet a full disk)? 0, or -1 with a one-line reason naming `option`. */
int outputs_reserve_space(const char *path, const char *shown, double need, const char *option,
                          int created, char *err, size_t errlen);

/* Rank 0, for a file that grows with the run: reserves `bytes` more beyond its end (fallocate,
 * size unchanged; where the file system cannot, checks its free space). 0, or -1 with a one-line
 * reason naming `option` and the errno (ENOSPC, EDQUOT, ...). */
int outputs_reserve_more(const char *path, double bytes, const char *option, char *err,
                         size_t errlen);

/* The errno a failed write of `bytes` into `path` most likely met, where the library that failed
 * reports none (MPI-IO's short writes): ENOSPC when the file system has less room than that,
 * else EIO. */
int outputs_write_errno(const char *path, double bytes);

#endif
