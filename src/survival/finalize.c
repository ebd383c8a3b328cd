/* finalize.c - the serial finalizer of a run that lost a peer or that a failed collective write
 * left half-way (watchdog.h): reopens the result file with HDF5's POSIX driver while the
 * survivors still hold it through MPI-IO, writes the iteration records the survivor that started it
 * hands it (`--records`: its own unwritten ones and those it kept for ranks on other hosts,
 * finalize_records.h), and closes it marked as the survivors could not (they cannot close it
 * collectively with a dead rank): stop_reason=peer_lost, stop_detail "rank R on HOST silent for S s
 * (...)", lost_ranks, failed_nodes, end_time, finished=1; /ranks/status 2 (stopped early) for every
 * rank that was not lost, 0 (never finished) kept for the lost ones. Survivors told by their
 * neighbours that the run is over start it with `--records` alone: it writes their records and
 * leaves the marks as they are. With `--write-error DETAIL` (a write that failed inside a
 * collective extension, recorder_grow.h) the marks are those of a write error:
 * stop_reason=write_error, stop_detail DETAIL, every rank stopped early; the space reserved beyond
 * the file's end is given back first so that they find room on a full disk. Why this is safe: after
 * creation the run changes no metadata until its collective close (only raw data goes to
 * preallocated space), so what is on disk is a consistent file, and the survivors end with _exit,
 * never flushing their view of it over the finalizer's. Several survivors may detect the loss: an
 * open-file-description lock on one byte far beyond the end makes their finalizers take turns (each
 * adds the ranks it saw lost), independent of HDF5's own flock, which is switched off here so that
 * readers (h5py) never block the finalizer. A rank whose node is lost too (`silent`: nothing of the
 * run answers there; `down`: its process ended with the node's other processes while its network
 * stack answers) makes its host a failed node, every rank on it counted lost. A rank whose process
 * ended (`gone`) or froze (`frozen`) on a live host is lost alone. With DTBENCH_STATE_FILE set
 * (slurm/dtbench.sbatch), the loss is also appended there: peer_lost=DETAIL, lost_ranks=...,
 * node_failed=HOSTS. */
#define _GNU_SOURCE
#include "finalize.h"
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_iso_time */
#include "fail.h"  /* defines: dt_hostname */

#include "h5_check.h" /* h5_error_message */
#include "finalize_records.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_LOST  64
#define HOST_LEN  64 /* /ranks/host: fixed 64-byte strings (recorder_create.c) */
#define LOCK_BYTE (((off_t)1 << 62) - 1) /* outputs.c locks the byte after it */

/* The first failed HDF5 call: file:line, the call and HDF5's message (no MPI here, so no
 * H5_CHECK: it would abort a job this process is not part of). */
static char failure[700];
#define FZ(call)                                                                                   \
    __extension__({                                                                                \
        __typeof__(call) fz_rc_ = (call);                                                          \
        if (fz_rc_ < 0 && !failure[0])                                                             \
            snprintf(failure, sizeof failure, "%s:%d: %s: %s", __FILE__, __LINE__, #call,          \
                     h5_error_message());                                                          \
        fz_rc_;                                                                                    \
    })

/* How a rank was lost (the watchdog's verdict, watchdog.h): its process ended or it fell silent,
 * on a node that lives or not. */
static const char *const KINDS[] = {"silent", "gone", "frozen", "down"};
enum { K_SILENT, K_GONE, K_FROZEN, K_DOWN, K_N };
#define KIND_LIST "silent|gone|frozen|down"

typedef struct {
    int rank;
    double silent;
    int kind;
} Lost;

/* What the command line asks for. */
typedef struct {
    int by;                  /* the rank whose watchdog (or failure) started it, -1 */
    int records;             /* --records: read the records on stdin */
    const char *write_error; /* --write-error DETAIL: close as a write error, not a lost peer */
    Lost lost[MAX_LOST];
    int nlost;
} Request;

static int usage(const char *why) {
    fprintf(stderr,
            "dtbench: --finalize: %s; usage: dtbench --finalize FILE [--by RANK] [--records] "
            "--lost RANK:SECONDS:" KIND_LIST " ... | --write-error DETAIL\n",
            why);
    return 2;
}

static int kind_of(const char *text) {
    for (int k = 0; k < K_N; k++)
        if (!strcmp(text, KINDS[k])) return k;
    return -1;
}

static int parse(int argc, char **argv, Request *q) {
    *q = (Request){.by = -1};
    for (int i = 3; i < argc; i += 2) {
        if (!strcmp(argv[i], "--records")) {
            q->records = 1, i--;
            continue;
        }
        if (i + 1 >= argc) return usage("an option without its value");
        char kind[16] = "";
        Lost *l = &q->lost[q->nlost];
        if (!strcmp(argv[i], "--by")) {
            q->by = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--write-error") && argv[i + 1][0]) {
            q->write_error = argv[i + 1];
        } else if (!strcmp(argv[i], "--lost") && q->nlost < MAX_LOST &&
                   sscanf(argv[i + 1], "%d:%lf:%15s", &l->rank, &l->silent, kind) == 3 &&
                   (l->kind = kind_of(kind)) >= 0 && l->rank >= 0) {
            q->nlost++;
        } else {
            char why[256];
            snprintf(
                why, sizeof why, "%s: '%.100s' is not accepted (expected %s)", argv[i], argv[i + 1],
                !strcmp(argv[i], "--lost")          ? "RANK:SECONDS:" KIND_LIST
                : !strcmp(argv[i], "--write-error") ? "the error's text"
                                                    : "--by, --records, --lost or --write-error");
            return usage(why);
        }
    }
    if (q->nlost && q->write_error) return usage("--lost and --write-error together");
    return q->nlost || q->records || q->write_error ? 0
                                                    : usage("no --lost RANK:SECONDS:" KIND_LIST);
}

/* A string attribute, malloc'd ("" when absent). */
static char *attr_string(hid_t loc, const char *name) {
    char *out = NULL;
    if (FZ(H5Aexists(loc, name)) > 0) {
        hid_t a = FZ(H5Aopen(loc, name, H5P_DEFAULT)), t = FZ(H5Aget_type(a));
        if (FZ(H5Tis_variable_str(t)) > 0) { /* read as stored (HDF5 converts no cset) */
            char *v = NULL;
            if (FZ(H5Aread(a, t, &v)) >= 0 && v) out = strdup(v), H5free_memory(v);
        }
        H5Tclose(t), H5Aclose(a);
    }
    return out ? out : strdup("");
}

static int set_text(hid_t loc, const char *name, const char *value) {
    if (FZ(H5Aexists(loc, name)) > 0 && FZ(H5Adelete(loc, name)) < 0) return -1;
    hid_t type = FZ(H5Tcopy(H5T_C_S1)), space = FZ(H5Screate(H5S_SCALAR));
    FZ(H5Tset_size(type, H5T_VARIABLE)), FZ(H5Tset_cset(type, H5T_CSET_UTF8));
    hid_t a = FZ(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT));
    herr_t rc = a < 0 ? -1 : FZ(H5Awrite(a, type, &value));
    if (a >= 0) H5Aclose(a);
    H5Sclose(space), H5Tclose(type);
    return rc < 0 ? -1 : 0;
}

static int set_ll(hid_t loc, const char *name, long long v) {
    if (FZ(H5Aexists(loc, name)) > 0 && FZ(H5Adelete(loc, name)) < 0) return -1;
    hid_t space = FZ(H5Screate(H5S_SCALAR));
    hid_t a = FZ(H5Acreate2(loc, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT));
    herr_t rc = a < 0 ? -1 : FZ(H5Awrite(a, H5T_NATIVE_LLONG, &v));
    if (a >= 0) H5Aclose(a);
    H5Sclose(space);
    return rc < 0 ? -1 : 0;
}

/* A whole 1-D dataset read into (or written from) buf, as memtype; -1 on failure. */
static int rw_set(hid_t file, const char *name, hid_t memtype, void *buf, int write) {
    hid_t d = FZ(H5Dopen2(file, name, H5P_DEFAULT));
    if (d < 0) return -1;
    herr_t rc = write ? FZ(H5Dwrite(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf))
                      : FZ(H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf));
    H5Dclose(d);
    return rc < 0 ? -1 : 0;
}

/* Waits (at most 60 s) for the other finalizers of this file; the descriptor holds the lock. */
static int take_turn(const char *path) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = LOCK_BYTE, .l_len = 1};
    for (int i = 0; i < 600; i++) {
        if (fcntl(fd, F_OFD_SETLK, &l) == 0) return fd;
        if (errno != EAGAIN && errno != EACCES) break;
        usleep(100000);
    }
    close(fd);
    return -1;
}

static void append_state(const char *detail, const char *ranks, const char *nodes) {
    const char *state = getenv("DTBENCH_STATE_FILE");
    FILE *f = state && state[0] ? fopen(state, "a") : NULL;
    if (!f) return;
    fprintf(f, "peer_lost=%s\nlost_ranks=%s\n", detail, ranks);
    if (nodes[0]) fprintf(f, "node_failed=%s\n", nodes);
    fclose(f);
}

/* 1 if `name` is one of the comma-separated `list`'s entries (n1 is not in "n10,n11"). */
static int in_list(const char *list, const char *name) {
    size_t n = strnlen(name, HOST_LEN);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

/* Which ranks are lost, the text naming them, and the hosts lost whole. */
static void describe(const Lost *lost, int nlost, int nranks, const char (*host)[HOST_LEN], int by,
                     char *is_lost, char *detail, size_t dlen, char *nodes, size_t nlen) {
    static const char *const said[K_N] = {
        "silent", "ended (process gone), silent", "silent",
        "ended with its node (nothing of the run answers there), silent"};
    size_t n = strlen(detail), before = n;
    for (int k = 0; k < nlost; k++) {
        int r = lost[k].rank, kind = lost[k].kind;
        if (r >= nranks || is_lost[r]) continue;
        is_lost[r] = 1;
        n += (size_t)snprintf(detail + n, n < dlen ? dlen - n : 0,
                              "%srank %d on %.64s %s for %.1f s%s", n ? "; " : "", r, host[r],
                              said[kind], lost[k].silent,
                              kind == K_FROZEN ? " (its node answers)" : "");
        /* a live node (the finalizer runs on its own host, so that one lives too) */
        if (kind == K_GONE || kind == K_FROZEN || !strncmp(host[r], dt_hostname(), HOST_LEN - 1))
            continue;
        if (!in_list(nodes, host[r]))
            snprintf(nodes + strlen(nodes), nlen - strlen(nodes), "%s%.64s", nodes[0] ? "," : "",
                     host[r]);
        for (int q = 0; q < nranks; q++) /* the node is lost: its other ranks too */
            if (!strncmp(host[q], host[r], HOST_LEN)) is_lost[q] = 1;
    }
    if (by >= 0 && by < nranks && n < dlen && n > before) /* it named a rank */
        snprintf(detail + n, dlen - n, " (seen by the watchdog of rank %d, %.64s)", by, host[by]);
}

/* Ranks in the file (the length of /ranks/status), 0 if unknown. */
static int file_ranks(hid_t file) {
    hid_t d = FZ(H5Dopen2(file, "ranks/status", H5P_DEFAULT)),
          space = d < 0 ? -1 : FZ(H5Dget_space(d));
    hssize_t nr = space < 0 ? -1 : FZ(H5Sget_simple_extent_npoints(space));
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
    return nr > 0 ? (int)nr : 0;
}

/* The marks of a lost peer: /ranks/status, stop_reason, stop_detail, lost_ranks, failed_nodes,
 * end_time, finished, and the state file. 0, or 1 on failure. */
static int mark_lost(hid_t file, int nranks, const Lost *lost, int nlost, int by, const char *path,
                     int again) {
    char detail[4096] = "", nodes[1024] = "", ranks[1024] = "";
    int *status = xcalloc((size_t)nranks, sizeof *status);
    char(*host)[HOST_LEN] = xcalloc((size_t)nranks, HOST_LEN);
    char *is_lost = xcalloc((size_t)nranks, 1);
    if (again) { /* another survivor's finalizer came first: what it found lost stays lost */
        char *d = attr_string(file, "stop_detail"), *nd = attr_string(file, "failed_nodes"),
             *lr = attr_string(file, "lost_ranks");
        snprintf(detail, sizeof detail, "%s", d), snprintf(nodes, sizeof nodes, "%s", nd);
        for (char *p = lr, *end; *p; p = *end ? end + 1 : end) {
            long r = strtol(p, &end, 10);
            if (end == p) break;
            if (r >= 0 && r < nranks) is_lost[r] = 1;
        }
        free(d), free(nd), free(lr);
    }
    hid_t htype = H5Tcopy(H5T_C_S1);
    H5Tset_size(htype, HOST_LEN);
    int rc = rw_set(file, "ranks/status", H5T_NATIVE_INT, status, 0) ||
             rw_set(file, "ranks/host", htype, host, 0);
    for (int r = 0; r < nranks; r++)
        host[r][HOST_LEN - 1] = '\0';
    if (!rc) {
        describe(lost, nlost, nranks, (const char(*)[HOST_LEN])host, by, is_lost, detail,
                 sizeof detail, nodes, sizeof nodes);
        for (int r = 0; r < nranks; r++) {
            if (is_lost[r])
                status[r] = 0; /* never finished */
            else if (status[r] == 0)
                status[r] = 2; /* stopped early: see stop_reason */
            if (is_lost[r])
                snprintf(ranks + strlen(ranks), sizeof ranks - strlen(ranks), "%s%d",
                         ranks[0] ? "," : "", r);
        }
        char now[64];
        dt_iso_time(now, sizeof now);
        rc = rw_set(file, "ranks/status", H5T_NATIVE_INT, status, 1) ||
             set_text(file, "stop_reason", "peer_lost") || set_text(file, "stop_detail", detail) ||
             set_text(file, "lost_ranks", ranks) || set_text(file, "failed_nodes", nodes) ||
             set_text(file, "end_time", now) || set_ll(file, "finished", 1);
    }
    H5Tclose(htype);
    free(status), free(host), free(is_lost);
    if (rc) return 1;
    append_state(detail, ranks, nodes);
    fprintf(stderr, "dtbench: --finalize: %s closed as stop_reason=peer_lost: %s\n", path, detail);
    return 0;
}

/* The marks of a write error that left the other ranks inside a collective call: every rank
 * stopped early, stop_reason=write_error with the failing rank's detail (the first one's, when
 * several failed), end_time, finished. 0, or 1 on failure. */
static int mark_write_error(hid_t file, int nranks, const char *detail, int again) {
    int *status = xcalloc((size_t)nranks, sizeof *status);
    int rc = rw_set(file, "ranks/status", H5T_NATIVE_INT, status, 0);
    for (int r = 0; r < nranks; r++)
        if (status[r] == 0) status[r] = 2; /* stopped early: see stop_reason */
    char now[64];
    dt_iso_time(now, sizeof now);
    if (!rc)
        rc = rw_set(file, "ranks/status", H5T_NATIVE_INT, status, 1) ||
             set_text(file, "stop_reason", "write_error") ||
             (!again && set_text(file, "stop_detail", detail)) || set_text(file, "end_time", now) ||
             set_ll(file, "finished", 1);
    free(status);
    return rc ? 1 : 0;
}

/* The records handed over, then the marks (--lost, --write-error). 0, FINALIZE_ALREADY_CLOSED
 * when the run had closed the file itself (left as it is), 1 on failure. */
static int mark(hid_t file, const Request *q, const char *path, const HeldRecords *held) {
    char *reason = attr_string(file, "stop_reason");
    int finished = H5Aexists(file, "finished") > 0;
    /* closed by an earlier finalizer (older ones marked peer_lost only): this one adds to it */
    int again =
        finished && (H5Aexists(file, "closed_by_finalizer") > 0 || !strcmp(reason, "peer_lost"));
    if (finished && !again)
        fprintf(stderr,
                "dtbench: --finalize: %s was closed by the run itself (stop_reason=%s); left as "
                "it is\n",
                path, reason);
    int write_error_before = again && !strcmp(reason, "write_error");
    free(reason);
    if (finished && !again) return FINALIZE_ALREADY_CLOSED;
    int nranks = file_ranks(file);
    if (nranks == 0) return 1;
    char why[600];
    if (held->n && held_write(file, held, nranks, why, sizeof why) != 0) {
        snprintf(failure, sizeof failure, "writing the records handed over: %s", why);
        return 1;
    }
    int rc = 0;
    if (q->write_error)
        rc = mark_write_error(file, nranks, q->write_error, again);
    else if (q->nlost && !write_error_before) /* a write error's ranks leaving are no lost peers */
        rc = mark_lost(file, nranks, q->lost, q->nlost, q->by, path, again);
    if (!rc && (q->write_error || q->nlost) && set_ll(file, "closed_by_finalizer", 1)) rc = 1;
    if (!rc && q->write_error)
        fprintf(stderr, "dtbench: --finalize: %s closed as stop_reason=write_error\n", path);
    return rc;
}

/* A write error on a full disk: the space reserved beyond the file's end and never used is given
 * back first (truncating to the same size releases it), so that the marks find room. */
static void release_reserve(const char *path) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) (void)!ftruncate(fd, st.st_size);
    if (fd >= 0) close(fd);
}

int finalize_main(int argc, char **argv) {
    /* A job being torn down signals whatever it can reach: finish the file first. */
    signal(SIGTERM, SIG_IGN), signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN), signal(SIGUSR1, SIG_IGN), signal(SIGUSR2, SIG_IGN);
    if (argc < 3) return usage("no FILE");
    const char *path = argv[2];
    Request q;
    if (parse(argc, argv, &q)) return 2;
    HeldRecords held = {0};
    if (q.records) held_read(STDIN_FILENO, &held); /* whole, before waiting for the lock */
    int lock = take_turn(path);
    if (lock < 0) {
        fprintf(stderr, "dtbench: --finalize: %s: %s\n", path, strerror(errno ? errno : EAGAIN));
        held_free(&held);
        return 1;
    }
    if (q.write_error) release_reserve(path);
    setenv("HDF5_USE_FILE_LOCKING", "FALSE", 1); /* see the header comment */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_sec2(fapl);
    hid_t file = H5Fopen(path, H5F_ACC_RDWR, fapl);
    if (file < 0) { /* a version 2/3 superblock marks a file open for writing (the survivors
                       still hold it): clear that mark as h5clear does, then open */
        hbool_t clear = 1;
        if (H5Pexist(fapl, "clear_status_flags") > 0 &&
            H5Pset(fapl, "clear_status_flags", &clear) >= 0)
            file = H5Fopen(path, H5F_ACC_RDWR, fapl);
    }
    if (file < 0)
        snprintf(failure, sizeof failure, "%s:%d: H5Fopen(RDWR, POSIX driver): %s", __FILE__,
                 __LINE__, h5_error_message());
    H5Pclose(fapl);
    int rc = 1;
    if (file >= 0) {
        rc = mark(file, &q, path, &held);
        if (FZ(H5Fclose(file)) < 0) rc = 1;
    }
    if (rc == 1)
        fprintf(stderr,
                "dtbench: --finalize on %s: %s: cannot mark it: %s; every written block "
                "stays readable\n",
                dt_hostname(), path, failure[0] ? failure : "no /ranks/status");
    if (rc == 0) fdatasync(lock);
    close(lock);
    held_free(&held);
    return rc;
}

/* Writes len bytes to fd (a pipe): 0, or -1 (the reader is gone). */
static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t k = write(fd, buf, len);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        buf += k, len -= (size_t)k;
    }
    return 0;
}

int finalize_start(char **argv, const void *input, size_t len) {
    int status[2], in[2] = {-1, -1};
    if (pipe2(status, O_CLOEXEC) != 0) return -1;
    if (input && pipe2(in, O_CLOEXEC) != 0) in[0] = in[1] = -1;
    pid_t child = fork();
    if (child == 0) { /* only async-signal-safe calls until exec */
        setsid();
        if (fork() == 0) { /* the keeper: starts the finalizer, passes its status on */
            pid_t f = fork();
            if (f == 0) {
                if (in[0] >= 0) dup2(in[0], STDIN_FILENO); /* the copy is not close-on-exec */
                execv("/proc/self/exe", argv);
                _exit(127);
            }
            if (in[0] >= 0) close(in[0]), close(in[1]); /* the finalizer sees the end */
            int st = 0;
            unsigned char code = 255;
            if (f > 0 && waitpid(f, &st, 0) == f && WIFEXITED(st))
                code = (unsigned char)WEXITSTATUS(st);
            (void)!write(status[1], &code, 1);
            _exit(0);
        }
        _exit(0);
    }
    close(status[1]);
    if (in[0] >= 0) close(in[0]);
    if (child > 0) waitpid(child, NULL, 0);
    if (in[1] >= 0) { /* a finalizer that died before reading: EPIPE (signals.c) */
        if (child > 0) (void)write_all(in[1], input, len);
        close(in[1]);
    }
    struct pollfd p = {status[0], POLLIN, 0};
    unsigned char code = 255;
    int got = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (t = t0; !got && t.tv_sec - t0.tv_sec < 60 && poll(&p, 1, 1000) >= 0;
         clock_gettime(CLOCK_MONOTONIC, &t))
        if (p.revents) got = read(status[0], &code, 1) == 1 ? 1 : -1;
    close(status[0]);
    return got == 1 && code != 255 ? code : -1;
}
