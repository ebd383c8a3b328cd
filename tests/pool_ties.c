/* pool_ties.c - max pooling compared by its windows' maxima and tie groups (see pool_ties.h). */
#include "pool_ties.h"

#include <math.h>
#include <stdlib.h>

static size_t in_plane(const PoolShape *s) {
    return (size_t)s->h_in * s->w_in;
}
static size_t out_plane(const PoolShape *s) {
    return (size_t)s->h_out * s->w_out;
}
static size_t inputs(const PoolShape *s) {
    return (size_t)s->batch * s->c * in_plane(s);
}

long pool_first_max(const PoolShape *s, const float *x, size_t o) {
    const size_t plane = o / out_plane(s), r = o % out_plane(s);
    const int oh = (int)(r / (size_t)s->w_out), ow = (int)(r % (size_t)s->w_out);
    const float *p = x + plane * in_plane(s);
    long best = -1;
    for (int ki = 0; ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
            const int ih = oh * s->stride - s->pad + ki, iw = ow * s->stride - s->pad + kj;
            if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
            const long i = (long)ih * s->w_in + iw;
            if (best < 0 || p[i] > p[best]) best = i;
        }
    return best < 0 ? -1 : (long)(plane * in_plane(s)) + best;
}

/* calls f(i, o, user) for every input i of output o's window holding the window's maximum */
static void each_max(const PoolShape *s, const float *x, size_t o,
                     void (*f)(long i, size_t o, void *user), void *user) {
    const long a = pool_first_max(s, x, o);
    if (a < 0) return;
    const size_t plane = o / out_plane(s), r = o % out_plane(s);
    const int oh = (int)(r / (size_t)s->w_out), ow = (int)(r % (size_t)s->w_out);
    for (int ki = 0; ki < s->k; ki++)
        for (int kj = 0; kj < s->k; kj++) {
            const int ih = oh * s->stride - s->pad + ki, iw = ow * s->stride - s->pad + kj;
            if (ih < 0 || ih >= s->h_in || iw < 0 || iw >= s->w_in) continue;
            const long i = (long)(plane * in_plane(s)) + (long)ih * s->w_in + iw;
            if (x[i] == x[a]) f(i, o, user);
        }
}

size_t pool_not_window_max(const PoolShape *s, const float *x, const float *y) {
    const size_t n = (size_t)s->batch * s->c * out_plane(s);
    size_t bad = 0;
    for (size_t o = 0; o < n; o++) {
        const long a = pool_first_max(s, x, o);
        const float want = a < 0 ? 0.0f : x[a];
        bad += !(y[o] == want); /* not bitwise: -0 and 0 are one maximum */
    }
    return bad;
}

/* union-find on input positions, the root being a group's smallest index */
static long root(long *g, long i) {
    while (g[i] != i)
        i = g[i] = g[g[i]];
    return i;
}
typedef struct {
    long *g;
    long first; /* the window's first position seen, -1 before */
} Join;
static void unite(long *g, long i, long j) {
    const long a = root(g, i), b = root(g, j);
    if (a < b) g[b] = a;
    if (b < a) g[a] = b;
}
static void join(long i, size_t o, void *user) {
    (void)o;
    Join *j = user;
    if (j->g[i] < 0) j->g[i] = i;
    if (j->first >= 0) unite(j->g, j->first, i);
    j->first = i;
}

long *pool_tie_groups(const PoolShape *s, const float *x) {
    const size_t n = inputs(s), no = (size_t)s->batch * s->c * out_plane(s);
    long *g = malloc((n ? n : 1) * sizeof *g);
    if (!g) abort();
    for (size_t i = 0; i < n; i++)
        g[i] = -1;
    for (size_t o = 0; o < no; o++) {
        Join j = {g, -1};
        each_max(s, x, o, join, &j);
    }
    for (size_t i = 0; i < n; i++)
        if (g[i] >= 0) g[i] = root(g, (long)i);
    return g;
}

void pool_merge_groups(size_t n, long *into, const long *more) {
    long *g = malloc((n ? n : 1) * sizeof *g);
    if (!g) abort();
    for (size_t i = 0; i < n; i++)
        g[i] = into[i] >= 0 || more[i] >= 0 ? (long)i : -1;
    for (size_t i = 0; i < n; i++) {
        if (into[i] >= 0) unite(g, (long)i, into[i]);
        if (more[i] >= 0) unite(g, (long)i, more[i]);
    }
    for (size_t i = 0; i < n; i++)
        into[i] = g[i] < 0 ? -1 : root(g, (long)i);
    free(g);
}

void pool_group_sums(size_t n, const long *group, const float *dx, float *out) {
    double *sum = calloc(n ? n : 1, sizeof *sum);
    if (!sum) abort();
    for (size_t i = 0; i < n; i++)
        if (group[i] >= 0) sum[group[i]] += dx[i];
    for (size_t i = 0; i < n; i++)
        out[i] = group[i] < 0 ? dx[i] : group[i] == (long)i ? (float)sum[i] : 0.0f;
    free(sum);
}

size_t pool_check_routing(const PoolShape *s, const float *x, const long *group, const float *dy,
                          const float *dx, double u, double *worst) {
    const size_t n = inputs(s), no = (size_t)s->batch * s->c * out_plane(s);
    double *got = calloc(n ? n : 1, sizeof *got), *want = calloc(n ? n : 1, sizeof *want),
           *mag = calloc(n ? n : 1, sizeof *mag);
    if (!got || !want || !mag) abort();
    size_t bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (group[i] >= 0)
            got[group[i]] += dx[i];
        else
            bad += dx[i] != 0.0f; /* a gradient on no window's maximum */
    }
    for (size_t o = 0; o < no; o++) { /* a window's maxima all lie in one group */
        const long a = pool_first_max(s, x, o);
        if (a < 0) continue;
        want[group[a]] += dy[o], mag[group[a]] += fabs((double)dy[o]);
    }
    const int m = s->k * s->k;
    const double gamma = m * 0x1p-24 / (1.0 - m * 0x1p-24);
    for (size_t i = 0; i < n; i++) {
        if (group[i] != (long)i) continue;
        const double bound = (u + (1.0 + u) * gamma) * mag[i], d = fabs(got[i] - want[i]);
        if (!(d <= bound)) bad++;
        if (bound > 0 && d / bound > *worst) *worst = d / bound;
        if (bound == 0 && d > 0) *worst = INFINITY;
    }
    free(got), free(want), free(mag);
    return bad;
}

size_t pool_moved_maxima(const PoolShape *s, const float *x, const float *xr, size_t *tied) {
    const size_t no = (size_t)s->batch * s->c * out_plane(s);
    size_t moved = 0;
    *tied = 0;
    for (size_t o = 0; o < no; o++) {
        const long a = pool_first_max(s, x, o), b = pool_first_max(s, xr, o);
        if (a == b) continue;
        moved++;
        *tied += a >= 0 && b >= 0 && xr[a] == xr[b];
    }
    return moved;
}
