/* outputs.h - claiming the run's output files before any work (rank 0): results (--output) and
 * saved model (--save-model) resolved (realpath of the folder + name) and compared, opened, and
 * locked (an fcntl lock, see outputs.c) for the whole run, so that nothing a run or another job wrote is destroyed. */
#ifndef DTBENCH_OUTPUTS_H
#define DTBENCH_OUTPUTS_H

#include <stddef.h>

/* Rank 0, before any work: 0, or -1 with one line naming the option (one file named twice, a
 * folder, an unwritable place, an existing file without overwrite, a path another running job
 * holds). Holds the locks until the process ends; installs outputs_abandon as dt_fatal_hook. */
int outputs_claim(const char *output, const char *save_model, int overwrite, char *err,
                  size_t errlen);

/* The hidden name the results file is built under: "<dir>/.<name>.partial". */
void outputs_partial_path(const char *path, char *buf, size_t len);

/* Rank 0: the partial file was renamed to the results' name. */
void outputs_published(void);
/* Rank 0: the results file holds at least one written block (it is kept whatever happens). */
void outputs_committed(void);
/* A failed run: removes the files this run created and never filled (no block, empty model). */
void outputs_abandon(void);

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

#endif
