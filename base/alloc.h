/* alloc.h - host allocation that never returns NULL: out of memory is reported by check_fail; and
 * how much memory the node has left for it. */
#ifndef DTBENCH_ALLOC_H
#define DTBENCH_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t bytes);           /* bytes 0: still a valid pointer */
void *xcalloc(size_t n, size_t size);  /* zeroed */
void *xrealloc(void *p, size_t bytes); /* bytes 0: still a valid pointer */

/* Bytes of memory available for new allocations on this node (MemAvailable), -1 if unknown. */
double dt_mem_available(void);

#endif
