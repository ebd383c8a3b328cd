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

void dt_abort_job(void) {
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
    MPI_Finalize();
    exit(2);
}
