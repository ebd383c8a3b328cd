/* alloc.h - host allocation that never returns NULL: out of memory is reported by check_fail. */
#ifndef DTBENCH_ALLOC_H
#define DTBENCH_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t bytes);           /* bytes 0: still a valid pointer */
void *xcalloc(size_t n, size_t size);  /* zeroed */
void *xrealloc(void *p, size_t bytes); /* bytes 0: still a valid pointer */

#endif
