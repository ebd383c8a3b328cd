/* optimizer.c - the optimizer's update of a range of a parameter layout (see optimizer.h). */
#include "optimizer.h"

#include <math.h>

AdamWStep optimizer_adamw_step(const Optimizer *o, int64_t t) {
    return (AdamWStep){.lr = o->lr,
                       .beta1 = o->beta1,
                       .beta2 = o->beta2,
                       .eps = o->eps,
                       .weight_decay = o->weight_decay,
                       .bias1 = (float)(1.0 - pow((double)o->beta1, (double)t)),
                       .bias2 = (float)(1.0 - pow((double)o->beta2, (double)t))};
}

/* The decay of element i of the layout and where the stretch of that decay containing it ends
 * (at most `end`), from the first run r[*k] that does not end at or before i (advanced). */
static int decay_at(const DecayRange *r, int nr, int *k, size_t i, size_t end, size_t *stop) {
    while (*k < nr && r[*k].off + r[*k].count <= i)
        (*k)++;
    if (*k == nr || r[*k].off > i) { /* in a gap: no decay up to the next run */
        *stop = *k < nr && r[*k].off < end ? r[*k].off : end;
        return 0;
    }
    size_t e = r[*k].off + r[*k].count;
    *stop = e < end ? e : end;
    return r[*k].decay != 0;
}

void optimizer_adamw_ranges(const BackendOps *be, BackendCtx *ctx, const AdamWStep *a,
                            const DecayRange *r, int nr, size_t lo, size_t n, float *p,
                            const float *g, float *m, float *v) {
    AdamWStep none = *a;
    none.weight_decay = 0.0f;
    const size_t end = lo + n;
    size_t i = lo;
    int k = 0;
    while (i < end) { /* [i, j): one stretch of the same decay, runs merged */
        size_t j;
        const int decay = decay_at(r, nr, &k, i, end, &j);
        size_t next;
        while (j < end && decay_at(r, nr, &k, j, end, &next) == decay)
            j = next;
        const size_t o = i - lo;
        be->adamw_update(ctx, j - i, p + o, g + o, m + o, v + o, decay ? a : &none);
        i = j;
    }
}

void optimizer_update(const BackendOps *be, BackendCtx *ctx, const Optimizer *o, int64_t t,
                      size_t lo, size_t n, float *p, const float *g, float *m, float *v) {
    if (o->kind == OPTIMIZER_ADAMW) {
        const AdamWStep a = optimizer_adamw_step(o, t);
        optimizer_adamw_ranges(be, ctx, &a, o->ranges, o->nranges, lo, n, p, g, m, v);
    } else {
        be->sgd_update(ctx, n, p, g, m, o->lr, o->momentum, o->weight_decay);
    }
}
