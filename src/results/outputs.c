/* outputs.c - the one path every file dtbench writes goes through (see outputs.h): the results
 * file and the saved model are resolved to the files they name in the end (symbolic links
 * followed, also ones that point nowhere yet), checked against each other, and claimed before any
 * work: each is built under a hidden name of its own, created exclusively (O_EXCL, a random
 * suffix: no user file can hold it), and moved into place only when whole; an existing file is
 * locked for the whole run. The lock is an open-file-description lock (fcntl F_OFD_SETLK) on one
 * byte far beyond any file's end: it does not conflict with HDF5's own flock (h5py can read a
 * running job's file) nor with the byte-range locks MPI-IO takes on the data, it is not dropped
 * when MPI-IO closes its own descriptors, and it works across nodes on NFS. A failed run removes
 * only what it created itself, by name and inode. */
#define _GNU_SOURCE
#include "outputs.h"
#include "mpi_check.h" /* defines: fatal_hook_set */

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define OUTPUTS_LOCK_BYTE ((off_t)1 << 62)
#define MAX_LINKS         40 /* symbolic links followed, as the kernel does */

int dt_exit_status = 0;

/* results: the existing results file (claimed to be replaced), then the published one;
 * partial: the results under construction; model: an existing model file (to be replaced);
 * model_tmp: the model under construction. */
enum { OUT_RESULTS, OUT_PARTIAL, OUT_MODEL, OUT_MODEL_TMP, OUT_N };

static struct {
    int fd;      /* open and locked, -1 if none */
    int created; /* this run made the file: only such a file is ever removed */
    char path[PATH_MAX + 64];
} claims[OUT_N] = {{-1, 0, ""}, {-1, 0, ""}, {-1, 0, ""}, {-1, 0, ""}};
static int results_committed; /* the results file holds a written block */
static int overwrite_ok;      /* --overwrite */
static char results_real[PATH_MAX + 8], model_real[PATH_MAX + 8];
static char results_shown[PATH_MAX], model_shown[PATH_MAX]; /* as the user wrote them */

/* The file `path` names in the end: the real path of its folder and its name, following a
 * symbolic link at the name to where it points (also when nothing is there yet). 0, or -1 with a
 * reason naming `option`. */
static int resolve(const char *option, const char *path, char *out, size_t len, char *err,
                   size_t errlen) {
    char cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop <= MAX_LINKS; hop++) {
        char a[PATH_MAX], b[PATH_MAX], dir[PATH_MAX], target[PATH_MAX];
        snprintf(a, sizeof a, "%s", cur);
        snprintf(b, sizeof b, "%s", cur);
        const char *base = basename(a), *folder = dirname(b);
        size_t n = strlen(cur);
        if (n == 0 || cur[n - 1] == '/' || !strcmp(base, ".") || !strcmp(base, "..")) {
            snprintf(err, errlen, "%s: %s is a directory; expected a file name", option, path);
            return -1;
        }
        if (!realpath(folder, dir)) {
            snprintf(err, errlen, "%s: cannot create %s: folder %s: %s", option, path, folder,
                     strerror(errno));
            return -1;
        }
        snprintf(out, len, "%s/%s", strcmp(dir, "/") ? dir : "", base);
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
        ssize_t k = readlink(out, target, sizeof target - 1);
        if (k < 0) break;
        target[k] = '\0';
        if (target[0] == '/')
            snprintf(cur, sizeof cur, "%s", target);
        else
            snprintf(cur, sizeof cur, "%.2000s/%.2000s", strcmp(dir, "/") ? dir : "", target);
    }
    snprintf(err, errlen, "%s: %s: %s", option, path, strerror(errno ? errno : ELOOP));
    return -1;
}

static int lock(int fd) {
    struct flock lk = {
        .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = OUTPUTS_LOCK_BYTE, .l_len = 1};
    return fcntl(fd, F_OFD_SETLK, &lk);
}

static void busy(const char *option, const char *shown, char *err, size_t errlen) {
    snprintf(err, errlen,
             "%s: %s is being written by another running job (it holds the file's lock); "
             "choose another file",
             option, shown);
}

static void exists(const char *option, const char *shown, char *err, size_t errlen) {
    snprintf(err, errlen,
             "%s: %s exists; results are never overwritten silently (pass --overwrite to replace "
             "it, or choose another file)",
             option, shown);
}

/* Opens and locks the existing file `real` that this run will replace: refused without
 * --overwrite (an empty file, as a run killed before writing leaves, excepted), or when it is
 * not a regular file or another job holds it. */
static int claim_existing(int which, const char *option, const char *real, const char *shown,
                          char *err, size_t errlen) {
    struct stat st;
    if (stat(real, &st) != 0) return 0;
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s is a directory; expected a file name", option, shown);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) { /* a device, FIFO or socket is never replaced */
        snprintf(err, errlen, "%s: %s is not a regular file; expected a file name", option, shown);
        return -1;
    }
    int fd = open(real, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open %s: %s", option, shown, strerror(errno));
        return -1;
    }
    if (lock(fd) != 0) {
        busy(option, shown, err, errlen);
        close(fd);
        return -1;
    }
    /* Checked under the lock: a job that just finished writing it has released the lock. */
    if (fstat(fd, &st) == 0 && st.st_size > 0 && !overwrite_ok) {
        exists(option, shown, err, errlen);
        close(fd);
        return -1;
    }
    claims[which].fd = fd, claims[which].created = 0;
    snprintf(claims[which].path, sizeof claims[which].path, "%s", real);
    return 0;
}

/* A new file beside `real` under a hidden name of its own, ".NAME.XXXXXX.SUFFIX", created
 * exclusively and locked, with the permissions a plain creation would give. */
static int claim_hidden(int which, const char *option, const char *real, const char *shown,
                        const char *suffix, char *err, size_t errlen) {
    char path[PATH_MAX + 64];
    const char *slash = strrchr(real, '/');
    snprintf(path, sizeof path, "%.*s/.%s.XXXXXX.%s", (int)(slash - real), real, slash + 1, suffix);
    int fd = mkostemps(path, (int)strlen(suffix) + 1, O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", option, shown, strerror(errno));
        return -1;
    }
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || lock(fd) != 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", option, shown, strerror(errno));
        unlink(path), close(fd);
        return -1;
    }
    claims[which].fd = fd, claims[which].created = 1;
    snprintf(claims[which].path, sizeof claims[which].path, "%s", path);
    return 0;
}

static int same_file(const char *a, const char *b) {
    struct stat x, y;
    return !strcmp(a, b) ||
           (stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino);
}

int outputs_claim(const char *output, const char *save_model, int overwrite, char *err,
                  size_t errlen) {
    overwrite_ok = overwrite;
    snprintf(results_shown, sizeof results_shown, "%s", output);
    if (resolve("--output", output, results_real, sizeof results_real, err, errlen)) return -1;
    if (save_model && *save_model) {
        snprintf(model_shown, sizeof model_shown, "%s", save_model);
        if (resolve("--save-model", save_model, model_real, sizeof model_real, err, errlen))
            return -1;
        if (same_file(results_real, model_real)) {
            snprintf(err, errlen,
                     "--save-model: %s is the results file (--output %s); expected another file",
                     save_model, output);
            return -1;
        }
    }
    if (claim_existing(OUT_RESULTS, "--output", results_real, output, err, errlen) ||
        claim_hidden(OUT_PARTIAL, "--output", results_real, output, "partial", err, errlen))
        goto fail;
    if (save_model && *save_model &&
        (claim_existing(OUT_MODEL, "--save-model", model_real, save_model, err, errlen) ||
         claim_hidden(OUT_MODEL_TMP, "--save-model", model_real, save_model, "tmp", err, errlen)))
        goto fail;
    fatal_hook_set(outputs_abandon);
    return 0;
fail:
    outputs_abandon();
    return -1;
}

const char *outputs_partial(void) {
    return claims[OUT_PARTIAL].path;
}

/* Renames `from` to `to`; with `replace` 0, only where nothing is at `to` (EEXIST otherwise). */
static int move(const char *from, const char *to, int replace) {
    if (replace) return rename(from, to);
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    if (link(from, to) != 0) return -1; /* a file system without RENAME_NOREPLACE */
    unlink(from);
    return 0;
}

int outputs_publish(char *err, size_t errlen) {
    /* Replaced only where this run holds the lock of the file there: a file that appeared since
     * the claim (another job published first) is never overwritten unless --overwrite allows it
     * and no running job holds it. */
    if (move(claims[OUT_PARTIAL].path, results_real, claims[OUT_RESULTS].fd >= 0) != 0) {
        int fd = errno == EEXIST ? open(results_real, O_RDWR | O_CLOEXEC | O_NOFOLLOW) : -1;
        struct stat st;
        if (fd < 0)
            snprintf(err, errlen, "--output: cannot create %s: %s", results_shown, strerror(errno));
        else if (lock(fd) != 0)
            busy("--output", results_shown, err, errlen);
        else if (!overwrite_ok && fstat(fd, &st) == 0 && st.st_size > 0)
            exists("--output", results_shown, err, errlen);
        else if (rename(claims[OUT_PARTIAL].path, results_real) != 0)
            snprintf(err, errlen, "--output: cannot create %s: %s", results_shown, strerror(errno));
        else
            claims[OUT_RESULTS].fd = fd, fd = -1, err[0] = '\0';
        if (fd >= 0) close(fd);
        if (err[0]) return -1;
    }
    /* The partial file is now the results file: its lock (same inode) guards that name. */
    if (claims[OUT_RESULTS].fd >= 0) close(claims[OUT_RESULTS].fd);
    claims[OUT_RESULTS] = claims[OUT_PARTIAL];
    snprintf(claims[OUT_RESULTS].path, sizeof claims[OUT_RESULTS].path, "%s", results_real);
    claims[OUT_PARTIAL].fd = -1, claims[OUT_PARTIAL].created = 0, claims[OUT_PARTIAL].path[0] = 0;
    return 0;
}

void outputs_committed(void) {
    results_committed = 1;
}

/* Removes `which` if this run created it and its name still holds the file this run holds
 * (same inode), and lets it go. */
static void drop(int which, int remove_it) {
    if (claims[which].fd < 0) return;
    struct stat a, b;
    if (remove_it && claims[which].created && fstat(claims[which].fd, &a) == 0 &&
        stat(claims[which].path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(claims[which].path);
    close(claims[which].fd);
    claims[which].fd = -1;
}

void outputs_drop_results(void) {
    drop(OUT_RESULTS, !results_committed);
}

void outputs_abandon(void) {
    drop(OUT_PARTIAL, 1);
    drop(OUT_RESULTS, !results_committed);
    drop(OUT_MODEL_TMP, 1);
    drop(OUT_MODEL, 0);
}

/* n bytes at the current offset of fd. */
static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        p += k, n -= (size_t)k;
    }
    return 0;
}

/* The model into its hidden file, made durable, then renamed onto the file --save-model names
 * (resolved again: it must not have become the results file). */
static int save_model(const void *head, size_t hlen, const void *data, size_t dlen, char *why,
                      size_t whylen) {
    int fd = claims[OUT_MODEL_TMP].fd;
    char now_real[PATH_MAX + 8], err[512];
    if (fd < 0) return snprintf(why, whylen, "it was not claimed by this rank"), -1;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0 || write_all(fd, head, hlen) != 0 ||
        write_all(fd, data, dlen) != 0 || fsync(fd) != 0)
        return snprintf(why, whylen, "%s (errno %d)", strerror(errno), errno), -1;
    if (resolve("--save-model", model_shown, now_real, sizeof now_real, err, sizeof err) != 0)
        return snprintf(why, whylen, "%s", err), -1;
    struct stat a, b;
    if (!strcmp(now_real, results_real) ||
        (claims[OUT_RESULTS].fd >= 0 && fstat(claims[OUT_RESULTS].fd, &a) == 0 &&
         stat(now_real, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
        return snprintf(why, whylen, "it has become the results file (--output %.500s)",
                        results_shown),
               -1;
    if (rename(claims[OUT_MODEL_TMP].path, now_real) != 0)
        return snprintf(why, whylen, "%s (errno %d)", strerror(errno), errno), -1;
    close(fd);
    claims[OUT_MODEL_TMP].fd = -1;
    return 0;
}

int outputs_save_model(const void *head, size_t hlen, const void *data, size_t dlen) {
    char why[1024];
    if (save_model(head, hlen, data, dlen, why, sizeof why) == 0) return 0;
    drop(OUT_MODEL_TMP, 1);
    fprintf(stderr,
            "dtbench: error: rank 0: --save-model %s was not saved: %s; no model file "
            "left\n",
            model_shown[0] ? model_shown : "(none)", why);
    fflush(stderr);
    dt_exit_status = 1;
    return -1;
}

int outputs_write_errno(const char *path, double bytes) {
    char dir[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        strcpy(dir, ".");
    struct statvfs vfs;
    if (statvfs(dir, &vfs) == 0 && (double)vfs.f_bavail * (double)vfs.f_frsize < bytes)
        return ENOSPC;
    return EIO;
}

/* Tests only: DTBENCH_TEST_NO_RESERVE=1 reserves nothing and answers yes, as a file system whose
 * reservations do not hold would (the writes that follow then meet the full disk themselves). */
static int reserve_nothing(void) {
    const char *v = getenv("DTBENCH_TEST_NO_RESERVE");
    return v && !strcmp(v, "1");
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
    if (reserve_nothing()) return 0;
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
    if (reserve_nothing()) return 0;
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
        snprintf(err, errlen,
                 "%s: no room for the next %.1f MB of the results file %s: %s (errno %d)", option,
                 bytes / 1e6, path, strerror(e), e);
        return -1;
    }
    return 0;
}
