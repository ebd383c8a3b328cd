/* util.c - the driver's small helpers: memory available, output paths, the exit status (see
 * util.h); the clock, allocation and RNG live in base/, the rank, job abort and collective usage
 * errors in comm/mpi_check.c. */
#define _GNU_SOURCE
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int dt_exit_status = 0;

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
