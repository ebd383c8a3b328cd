/* finalize.c - the serial finalizer of a run that lost a peer (watchdog.h): reopens the result
 * file with HDF5's POSIX driver while the survivors still hold it through MPI-IO, and closes it
 * marked as the survivors could not (they cannot close it collectively with a dead rank):
 *   stop_reason=peer_lost, stop_detail "rank R on HOST silent for S s (...)", lost_ranks,
 *   failed_nodes, end_time, finished=1; /ranks/status 2 (stopped early) for every rank that was
 *   not lost, 0 (never finished) kept for the lost ones.
 * Why this is safe: after creation the run changes no metadata until its collective close (only
 * raw data goes to preallocated space), so what is on disk is a consistent file, and the
 * survivors end with _exit, never flushing their view of it over the finalizer's. Several
 * survivors may detect the loss: an open-file-description lock on one byte far beyond the end
 * makes their finalizers take turns (each adds the ranks it saw lost), independent of HDF5's own
 * flock, which is switched off here so that readers (h5py) never block the finalizer.
 * A silent rank (no heartbeat for --peer-timeout) means its node is lost: every rank on that host
 * is counted lost. A rank whose process ended on a live host is lost alone.
 * With DTBENCH_STATE_FILE set (slurm/dtbench.sbatch), the loss is also appended there:
 * peer_lost=DETAIL, lost_ranks=..., node_failed=HOSTS. */
#define _GNU_SOURCE
#include "finalize.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h" /* h5_error_message */

#define MAX_LOST  64
#define HOST_LEN  64                     /* /ranks/host: fixed 64-byte strings (recorder_hdf5.c) */
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

typedef struct {
    int rank;
    double silent;
    int gone; /* the process ended (its host lives on) */
} Lost;

static int usage(const char *why) {
    fprintf(stderr,
            "dtbench: --finalize: %s; usage: dtbench --finalize FILE [--by RANK] "
            "--lost RANK:SECONDS:silent|gone ...\n",
            why);
    return 2;
}

static int parse(int argc, char **argv, int *by, Lost *lost, int *nlost) {
    *by = -1, *nlost = 0;
    for (int i = 3; i < argc; i += 2) {
        if (i + 1 >= argc) return usage("an option without its value");
        char kind[16] = "";
        if (!strcmp(argv[i], "--by")) {
            *by = atoi(argv[i + 1]);
        } else if (!strcmp(argv[i], "--lost") && *nlost < MAX_LOST &&
                   sscanf(argv[i + 1], "%d:%lf:%15s", &lost[*nlost].rank, &lost[*nlost].silent,
                          kind) == 3 &&
                   (!strcmp(kind, "silent") || !strcmp(kind, "gone")) && lost[*nlost].rank >= 0) {
            lost[(*nlost)++].gone = !strcmp(kind, "gone");
        } else {
            char why[256];
            snprintf(why, sizeof why, "%s: '%.100s' is not accepted (expected %s)", argv[i],
                     argv[i + 1],
                     !strcmp(argv[i], "--lost") ? "RANK:SECONDS:silent|gone" : "--by or --lost");
            return usage(why);
        }
    }
    return *nlost ? 0 : usage("no --lost RANK:SECONDS:silent|gone");
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

/* Which ranks are lost, the text naming them, and the hosts lost whole. */
static void describe(const Lost *lost, int nlost, int nranks, const char (*host)[HOST_LEN], int by,
                     char *is_lost, char *detail, size_t dlen, char *nodes, size_t nlen) {
    size_t n = strlen(detail), before = n;
    for (int k = 0; k < nlost; k++) {
        int r = lost[k].rank;
        if (r >= nranks || is_lost[r]) continue;
        is_lost[r] = 1;
        n += (size_t)snprintf(
            detail + n, n < dlen ? dlen - n : 0, "%srank %d on %.64s %s for %.1f s", n ? "; " : "",
            r, host[r], lost[k].gone ? "ended (process gone), silent" : "silent", lost[k].silent);
        /* a rank silent on this very host: the host lives (the finalizer runs on it) */
        if (lost[k].gone || !strncmp(host[r], dt_hostname(), HOST_LEN - 1)) continue;
        if (!strstr(nodes, host[r]))
            snprintf(nodes + strlen(nodes), nlen - strlen(nodes), "%s%.64s", nodes[0] ? "," : "",
                     host[r]);
        for (int q = 0; q < nranks; q++) /* the node is lost: its other ranks too */
            if (!strncmp(host[q], host[r], HOST_LEN)) is_lost[q] = 1;
    }
    if (by >= 0 && by < nranks && n < dlen && n > before) /* it named a rank */
        snprintf(detail + n, dlen - n, " (seen by the watchdog of rank %d, %.64s)", by, host[by]);
}

static int mark(hid_t file, const Lost *lost, int nlost, int by, const char *path) {
    char *reason = attr_string(file, "stop_reason");
    int finished = H5Aexists(file, "finished") > 0;
    if (finished && strcmp(reason, "peer_lost") != 0) {
        fprintf(stderr,
                "dtbench: --finalize: %s was closed by the run itself (stop_reason=%s); "
                "left as it is\n",
                path, reason);
        free(reason);
        return FINALIZE_ALREADY_CLOSED;
    }
    char detail[4096] = "", nodes[1024] = "", ranks[1024] = "";
    if (!strcmp(reason, "peer_lost")) { /* another survivor's finalizer came first */
        char *d = attr_string(file, "stop_detail"), *nd = attr_string(file, "failed_nodes");
        snprintf(detail, sizeof detail, "%s", d), snprintf(nodes, sizeof nodes, "%s", nd);
        free(d), free(nd);
    }
    free(reason);
    hid_t d = FZ(H5Dopen2(file, "ranks/status", H5P_DEFAULT)),
          space = d < 0 ? -1 : FZ(H5Dget_space(d));
    hssize_t nr = space < 0 ? -1 : FZ(H5Sget_simple_extent_npoints(space));
    if (space >= 0) H5Sclose(space);
    if (d >= 0) H5Dclose(d);
    if (nr <= 0) return 1;
    int nranks = (int)nr;
    int *status = xcalloc((size_t)nranks, sizeof *status);
    char(*host)[HOST_LEN] = xcalloc((size_t)nranks, HOST_LEN);
    char *is_lost = xcalloc((size_t)nranks, 1);
    hid_t htype = H5Tcopy(H5T_C_S1);
    H5Tset_size(htype, HOST_LEN);
    int rc = rw_set(file, "ranks/status", H5T_NATIVE_INT, status, 0) ||
             rw_set(file, "ranks/host", htype, host, 0);
    for (int r = 0; r < nranks; r++)
        host[r][HOST_LEN - 1] = '\0';
    if (!rc) {
        /* ranks already named by an earlier finalizer stay lost */
        for (int r = 0; r < nranks; r++) {
            char needle[96];
            snprintf(needle, sizeof needle, "rank %d on ", r);
            if (strstr(detail, needle)) is_lost[r] = 1;
        }
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

int finalize_main(int argc, char **argv) {
    /* A job being torn down signals whatever it can reach: finish the file first. */
    signal(SIGPIPE, SIG_IGN), signal(SIGTERM, SIG_IGN), signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN), signal(SIGUSR1, SIG_IGN), signal(SIGUSR2, SIG_IGN);
    if (argc < 3) return usage("no FILE");
    const char *path = argv[2];
    int by, nlost;
    Lost lost[MAX_LOST];
    if (parse(argc, argv, &by, lost, &nlost)) return 2;
    int lock = take_turn(path);
    if (lock < 0) {
        fprintf(stderr, "dtbench: --finalize: %s: %s\n", path, strerror(errno ? errno : EAGAIN));
        return 1;
    }
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
        rc = mark(file, lost, nlost, by, path);
        if (FZ(H5Fclose(file)) < 0) rc = 1;
    }
    if (rc == 1)
        fprintf(stderr,
                "dtbench: --finalize on %s: %s: cannot mark it: %s; every written block "
                "stays readable\n",
                dt_hostname(), path, failure[0] ? failure : "no /ranks/status");
    if (rc == 0) fdatasync(lock);
    close(lock);
    return rc;
}
