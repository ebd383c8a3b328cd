/* alloc.c - xmalloc, xcalloc, xrealloc (see alloc.h). */
#include "alloc.h"
#include "fail.h" /* defines: ALLOC_CHECK */

#include <stdlib.h>

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
