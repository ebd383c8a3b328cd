/* util.c - the MPI rank and job abort (check_fail's hooks), output paths and collective usage
 * errors (see util.h); the clock, allocation and RNG live in base/. */
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

void dt_abort_job(void) {
    run_fatal_hook(); /* check_fail (base/fail.c) calls this before it exits */
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
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
