/* outputs.c - the run's output files (results, saved model) claimed before any work (see
 * outputs.h): resolved and checked against each other, opened (so an unwritable place is found
 * before training), and locked so that a second job writing the same path is refused,
 * --overwrite included. The lock is an open-file-description lock (fcntl F_OFD_SETLK) on one byte
 * far beyond any file's end: it does not conflict with HDF5's own flock (h5py can read a running
 * job's file) nor with the byte-range locks MPI-IO takes on the data, it is not dropped when MPI-IO
 * closes its own descriptors, and it works across nodes on NFS. The results file is built under a hidden partial name and
 * renamed into place once it describes itself, so a run killed while creating it never leaves a
 * half-made file under the results' name. What a failed run created and never filled is removed. */
#define _GNU_SOURCE
#include "outputs.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUTS_LOCK_BYTE ((off_t)1 << 62)

enum { OUT_RESULTS, OUT_PARTIAL, OUT_MODEL, OUT_N };

static struct {
    int fd;         /* open and locked, -1 if none */
    int created;    /* this run made the file (removed if the run fails before filling it) */
    char path[PATH_MAX + 64];
} claims[OUT_N] = {{-1, 0, ""}, {-1, 0, ""}, {-1, 0, ""}};
static int results_committed; /* the results file holds a written block */
static char results_path[PATH_MAX + 64]; /* where the partial file is renamed to */

void outputs_partial_path(const char *path, char *buf, size_t len) {
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(buf, len, "%.*s/.%s.partial", (int)(slash - path), path, slash + 1);
    else
        snprintf(buf, len, ".%s.partial", path);
}

/* realpath of the folder + the name: two spellings of one file compare equal. */
static int resolve(const char *option, const char *path, char *out, size_t len, char *err,
                   size_t errlen) {
    char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX];
    snprintf(a, sizeof a, "%s", path);
    snprintf(b, sizeof b, "%s", path);
    const char *base = basename(a), *folder = dirname(b);
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/' || !strcmp(base, ".") || !strcmp(base, "..")) {
        snprintf(err, errlen, "%s: %s is a directory; expected a file name", option, path);
        return -1;
    }
    if (!realpath(folder, dir)) {
        snprintf(err, errlen, "%s: cannot create %s: folder %s: %s", option, path, folder,
                 strerror(errno));
        return -1;
    }
    snprintf(out, len, "%s/%s", strcmp(dir, "/") ? dir : "", base);
    return 0;
}

/* Opens and locks `path`. An existing file is accepted only with overwrite, or when it is empty
 * (what a run killed before writing leaves). */
static int claim(int which, const char *option, const char *path, const char *shown, int overwrite,
                 char *err, size_t errlen) {
    struct stat st;
    int existed = stat(path, &st) == 0;
    if (existed && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s is a directory; expected a file name", option, shown);
        return -1;
    }
    if (existed && !S_ISREG(st.st_mode)) { /* a device, FIFO or socket is never replaced */
        snprintf(err, errlen, "%s: %s is not a regular file; expected a file name", option, shown);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", option, shown, strerror(errno));
        return -1;
    }
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = OUTPUTS_LOCK_BYTE,
                       .l_len = 1};
    if (fcntl(fd, F_OFD_SETLK, &lk) != 0) {
        snprintf(err, errlen,
                 "%s: %s is being written by another running job (it holds the file's lock); "
                 "choose another file",
                 option, shown);
        close(fd);
        return -1;
    }
    /* Checked under the lock: a job that just finished writing it has released the lock. */
    if (fstat(fd, &st) == 0 && st.st_size > 0 && !overwrite && which != OUT_PARTIAL) {
        snprintf(err, errlen,
                 "%s: %s exists; results are never overwritten silently (pass --overwrite to "
                 "replace it, or choose another file)",
                 option, path);
        close(fd);
        return -1;
    }
    claims[which].fd = fd;
    claims[which].created = !existed;
    snprintf(claims[which].path, sizeof claims[which].path, "%s", path);
    return 0;
}

int outputs_claim(const char *output, const char *save_model, int overwrite, char *err,
                  size_t errlen) {
    char out_real[PATH_MAX + 8], model_real[PATH_MAX + 8], partial[PATH_MAX + 64];
    if (resolve("--output", output, out_real, sizeof out_real, err, errlen)) return -1;
    if (save_model && *save_model) {
        if (resolve("--save-model", save_model, model_real, sizeof model_real, err, errlen))
            return -1;
        struct stat a, b;
        int same = !strcmp(out_real, model_real) ||
                   (stat(output, &a) == 0 && stat(save_model, &b) == 0 && a.st_dev == b.st_dev &&
                    a.st_ino == b.st_ino);
        outputs_partial_path(out_real, partial, sizeof partial);
        if (same || !strcmp(partial, model_real)) {
            snprintf(err, errlen,
                     "--save-model: %s is the results file (--output %s); expected another file",
                     save_model, output);
            return -1;
        }
    }
    /* The partial name first, then the results' own name: a job that renamed its partial file
     * into place still holds its lock on it, so a second job is refused either way. */
    snprintf(results_path, sizeof results_path, "%s", output);
    outputs_partial_path(output, partial, sizeof partial);
    if (claim(OUT_PARTIAL, "--output", partial, output, 1, err, errlen)) goto fail;
    struct stat st;
    if (stat(output, &st) == 0 && claim(OUT_RESULTS, "--output", output, output, overwrite, err, errlen))
        goto fail;
    if (save_model && *save_model &&
        claim(OUT_MODEL, "--save-model", save_model, save_model, overwrite, err, errlen))
        goto fail;
    dt_fatal_hook = outputs_abandon;
    return 0;
fail:
    outputs_abandon();
    return -1;
}

void outputs_published(void) {
    /* The partial file is now the results file: its lock (same inode) now guards that name. */
    if (claims[OUT_RESULTS].fd >= 0) close(claims[OUT_RESULTS].fd);
    claims[OUT_RESULTS] = claims[OUT_PARTIAL];
    claims[OUT_RESULTS].created = 1;
    /* the file now has the results' name: abandoning it must remove that name (same inode) */
    snprintf(claims[OUT_RESULTS].path, sizeof claims[OUT_RESULTS].path, "%s", results_path);
    claims[OUT_PARTIAL].fd = -1, claims[OUT_PARTIAL].path[0] = '\0';
}

void outputs_committed(void) {
    results_committed = 1;
}

/* Removes `which` if it is still the file this run holds (same inode) and `keep` is false. */
static void drop(int which, int remove_it) {
    if (claims[which].fd < 0) return;
    struct stat a, b;
    if (remove_it && fstat(claims[which].fd, &a) == 0 && stat(claims[which].path, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(claims[which].path);
    close(claims[which].fd);
    claims[which].fd = -1;
}

void outputs_abandon(void) {
    struct stat st;
    drop(OUT_PARTIAL, 1);
    drop(OUT_RESULTS, claims[OUT_RESULTS].created && !results_committed);
    int empty = claims[OUT_MODEL].fd >= 0 && fstat(claims[OUT_MODEL].fd, &st) == 0 &&
                st.st_size == 0;
    drop(OUT_MODEL, claims[OUT_MODEL].created && empty);
}

/* Rank 0: is there room for `need` bytes where `path` goes? Reserves them in the (created) file
 * where the file system allows it (fallocate, size unchanged), so that no write of this run can
 * meet a full disk. 0, or -1 with a reason. */
int outputs_reserve_space(const char *path, const char *shown, double need, const char *option,
                          int created, char *err, size_t errlen) {
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        strcpy(dir, ".");
    struct statvfs vfs;
    if (!created) {
        if (statvfs(dir, &vfs) == 0 && (double)vfs.f_bavail * (double)vfs.f_frsize < need) {
            snprintf(err, errlen,
                     "%s: the results file %s needs about %.1f MB, and its file system has %.1f MB "
                     "free",
                     option, shown, need / 1e6, (double)vfs.f_bavail * (double)vfs.f_frsize / 1e6);
            return -1;
        }
        return 0;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 0; /* H5Fcreate's own check reports it */
    int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)need);
    int e = errno;
    close(fd);
    if (rc != 0 && (e == ENOSPC || e == EDQUOT || e == EFBIG)) {
        snprintf(err, errlen, "%s: the results file %s needs about %.1f MB: %s (errno %d)", option,
                 shown, need / 1e6, strerror(e), e);
        return -1;
    }
    return 0;
}

/* Rank 0: reserves `bytes` more beyond the end of `path` (fallocate, size unchanged) for a step
 * of a growing file; where the file system cannot reserve, checks its free space instead.
 * 0, or -1 with a one-line reason naming `option`. */
int outputs_reserve_more(const char *path, double bytes, const char *option, char *err,
                         size_t errlen) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot reserve %.1f MB more for %s: %s", option, bytes / 1e6,
                 path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, st.st_size, (off_t)bytes);
    int e = errno;
    struct statvfs vfs;
    /* Only a full disk or quota is an answer; a file system that cannot reserve is asked. */
    if (rc != 0 && e != ENOSPC && e != EDQUOT && e != EFBIG && fstatvfs(fd, &vfs) == 0) {
        rc = (double)vfs.f_bavail * (double)vfs.f_frsize < bytes ? -1 : 0;
        e = ENOSPC;
    }
    close(fd);
    if (rc != 0) {
        snprintf(err, errlen, "%s: no room for the next %.1f MB of the results file %s: %s (errno %d)",
                 option, bytes / 1e6, path, strerror(e), e);
        return -1;
    }
    return 0;
}
