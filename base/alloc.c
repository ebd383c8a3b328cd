/* alloc.c - xmalloc, xcalloc, xrealloc and the memory available (see alloc.h). */
#include "alloc.h"
#include "fail.h" /* defines: ALLOC_CHECK */

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
