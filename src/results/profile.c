/* profile.c - the per-layer profile (see profile.h). */
#include "profile.h"
#include "alloc.h" /* defines: xcalloc */
#include "clock.h" /* defines: dt_now */
#include "fail.h"  /* defines: check_fail */

#include <math.h>
#include <stdlib.h>

enum { FWD_BEGIN, FWD_END, BWD_BEGIN, BWD_END };

struct LayerProfile {
    Model *m;
    int64_t first;
    int iters;
    int active;
    double cost; /* host time in the observer this iteration, s */
    LayerObserver obs;
};

static int slot(const LayerProfile *p, int layer, int which) {
    return BACKEND_PHASE_SLOTS + 4 * (layer - p->m->first) + which;
}

static void mark(void *user, const Model *m, const LayerEvent *e) {
    LayerProfile *p = user;
    const double t = dt_now();
    const int which = e->kind == LAYER_FORWARD_BEGIN    ? FWD_BEGIN
                      : e->kind == LAYER_FORWARD_END    ? FWD_END
                      : e->kind == LAYER_BACKWARD_BEGIN ? BWD_BEGIN
                                                        : BWD_END;
    m->be->timer_record(m->ctx, slot(p, e->layer, which));
    p->cost += dt_now() - t;
}

LayerProfile *profile_create(Model *m, int64_t first, int iters) {
    if (iters <= 0) return NULL;
    if (m->last - m->first > PROFILE_MAX_LAYERS)
        check_fail(__FILE__, __LINE__, "profile_create", "more layers than PROFILE_MAX_LAYERS");
    LayerProfile *p = xcalloc(1, sizeof *p);
    p->m = m, p->first = first, p->iters = iters;
    p->obs = (LayerObserver){mark, p};
    return p;
}

void profile_free(LayerProfile *p) {
    if (p && p->active) model_set_observer(p->m, NULL);
    free(p);
}

static int profiled(const LayerProfile *p, int64_t it) {
    return p && it >= p->first && it < p->first + p->iters;
}

void profile_begin(LayerProfile *p, int64_t it) {
    if (!profiled(p, it)) return;
    p->cost = 0.0, p->active = 1;
    model_set_observer(p->m, &p->obs);
}

int profile_end(LayerProfile *p, int64_t it, double *forward, double *backward, double *cost) {
    *cost = 0.0;
    if (!profiled(p, it) || !p->active) return -1;
    const Model *m = p->m;
    model_set_observer(p->m, NULL);
    p->active = 0;
    for (int i = 0; i < m->nlayers; i++) /* not held: NaN; held but fused into another row: 0 */
        forward[i] = backward[i] = i >= m->first && i < m->last ? 0.0 : NAN;
    for (int at = m->first; at < m->last; at++) { /* the rows that ran (model_fuse.c) */
        const int i = m->layers[at].exec_as;
        if (i < 0) continue;
        if (!m->layers[i].fwd_fused)
            forward[i] = m->be->timer_elapsed(m->ctx, slot(p, i, FWD_BEGIN), slot(p, i, FWD_END));
        backward[i] = m->be->timer_elapsed(m->ctx, slot(p, i, BWD_BEGIN), slot(p, i, BWD_END));
    }
    *cost = p->cost;
    return (int)(it - p->first);
}

void profile_amounts(const Model *m, double *amounts) {
    const size_t n = (size_t)m->nlayers;
    for (int i = 0; i < m->nlayers; i++) {
        LayerCost c = {NAN, NAN, NAN, NAN};
        if (i >= m->first && i < m->last) model_layer_cost(m, i, m->chunk, &c);
        const double row[PROFILE_AMOUNTS] = {c.forward_flop, c.backward_flop, c.forward_bytes,
                                             c.backward_bytes};
        for (int a = 0; a < PROFILE_AMOUNTS; a++)
            amounts[a * n + (size_t)i] = row[a];
    }
}
