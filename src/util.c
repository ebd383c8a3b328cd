/* util.c - clock, host name, allocation, RNG and collective usage errors (see util.h). */
#define _GNU_SOURCE
#include "util.h"
#include "check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double dt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void dt_iso_time(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *dt_hostname(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) != 0) strcpy(host, "unknown");
    return host;
}

int dt_rank(void) {
    int initialized = 0, finalized = 0, rank = -1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

void (*dt_fatal_hook)(void) = NULL;
int dt_exit_status = 0;

static void run_fatal_hook(void) {
    void (*hook)(void) = dt_fatal_hook;
    dt_fatal_hook = NULL; /* once, even if the hook itself fails */
    if (hook) hook();
}

_Noreturn void check_fail(const char *file, int line, const char *what, const char *msg) {
    fprintf(stderr, "dtbench: rank %d on %s: %s:%d: %s: %s\n", dt_rank(), dt_hostname(), file, line,
            what, msg);
    fflush(stderr);
    run_fatal_hook();
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    ALLOC_CHECK(p);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    ALLOC_CHECK(p);
    return p;
}

void *xrealloc(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    ALLOC_CHECK(q);
    return q;
}

double dt_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb >= 0) return kb * 1024.0;
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : -1.0;
}

uint64_t rng_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

const char *output_path_problem(const char *option, const char *path, int overwrite, char *err,
                                size_t len) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            snprintf(err, len, "%s: %s is a directory; expected a file name", option, path);
        else if (!overwrite)
            snprintf(err, len,
                     "%s: %s exists; results are never overwritten silently (pass --overwrite to "
                     "replace it, or choose another file)",
                     option, path);
        else
            return NULL;
        return err;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        strcpy(dir, ".");
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, len, "%s: cannot create %s: folder %s: %s", option, path, dir,
                 strerror(errno));
        return err;
    }
    return NULL;
}

void usage_check_all(int ok, const char *fmt, ...) {
    int rank = 0, nranks = 1;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    int mine = ok ? nranks : rank, first_bad = nranks;
    MPI_CHECK(MPI_Allreduce(&mine, &first_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (first_bad == nranks) return;
    if (rank == first_bad) {
        va_list ap;
        va_start(ap, fmt);
        fputs("dtbench: error: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        fflush(stderr);
    }
    run_fatal_hook();
    MPI_Finalize();
    exit(2);
}
