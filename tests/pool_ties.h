/* pool_ties.h - max pooling compared where its maximum is not unique (tests/layer_compare.c,
 * tests/test_pool_ties.c). Two configurations that store activations in different types (fp32
 * against bf16 or fp16) see different ties: two inputs of a window that differ in fp32 may round
 * to the same 16-bit value, and then the first maximum in window order, which every backend
 * routes the window's gradient to (backend.h), is another position than in fp32. Both routings
 * are right; comparing gradients position by position calls it a difference as large as the
 * gradient itself. What is the same for every right routing is compared instead:
 *   - forward: every output is, bit for bit, the maximum of its window of the configuration's own
 *     input (pool_not_window_max);
 *   - backward: the positions holding a window's maximum (in the configuration's own input) form
 *     a tie group with that window, groups sharing a position merge; every right routing puts
 *     the same total on each group, and nothing on a position that is no window's maximum. So
 *     the gradient summed per group is compared (pool_group_sums), and the configuration's own
 *     routing is checked: each group's total = its windows' incoming gradients, within the
 *     rounding of the stored gradient alone (pool_check_routing).
 * Shapes: PoolShape (backend.h), NCHW fp32 host arrays over all batch * c planes. */
#ifndef DTBENCH_POOL_TIES_H
#define DTBENCH_POOL_TIES_H

#include "backend.h"

#include <stddef.h>

/* The first maximum in row-major window order of output o (a flat NCHW output index) of x: its
 * flat NCHW input index, or -1 for a window wholly in the padding. */
long pool_first_max(const PoolShape *s, const float *x, size_t o);

/* Outputs of y that are not the maximum of their window of x (0 for a window in the padding). */
size_t pool_not_window_max(const PoolShape *s, const float *x, const float *y);

/* For every input position of x: the smallest flat index of its tie group, or -1 for a position
 * that is no window's maximum. Freed by the caller. */
long *pool_tie_groups(const PoolShape *s, const float *x);

/* into = the groups of into and of more together (two max pooling rows reading one tensor):
 * groups sharing a position merge. Both over the same n positions. */
void pool_merge_groups(size_t n, long *into, const long *more);

/* out[n] = dx with each tie group's total moved onto its smallest position (the others 0); a
 * position outside every group keeps its value. out may be dx. */
void pool_group_sums(size_t n, const long *group, const float *dx, float *out);

/* The configuration's own routing of dy into dx (x, dy, dx as it stored them, unit roundoff u of
 * its storage; group from x): the tie groups whose total differs from their windows' dy by more
 * than the stored gradient's rounding, (u + (1 + u) gamma_m) * sum |dy| of the group's windows with
 * gamma_m the fp32 sum of the m = k*k gradients a position can receive; plus every position outside
 * all groups that is not 0. *worst: the largest difference in units of its bound. */
size_t pool_check_routing(const PoolShape *s, const float *x, const long *group, const float *dy,
                          const float *dx, double u, double *worst);

/* Windows whose first maximum lies at another position in x than in xr, and how many of those
 * are ties in xr (xr equal at both positions): the ties rounding made. */
size_t pool_moved_maxima(const PoolShape *s, const float *x, const float *xr, size_t *tied);

#endif
