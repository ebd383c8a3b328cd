/* model_optim.c - the optimizer's update of a Model's parameters (see model.h): SGD over the one
 * parameter buffer, and AdamW with its decoupled weight decay only where the rows' kinds say the
 * parameters decay (layers.h's LK_DECAY_WEIGHTS, LK_DECAY_BIAS: nanoGPT's rule, tensors of 2 or
 * more dimensions decay, biases and normalisation gains do not). Rows lie in forward order in the
 * buffer, each its w then its b, so a model's parameters are a few long runs of the same decay
 * (LeNet: 8 runs, one per tensor; merged where neighbours agree), one adamw_update call each. */
#include "layers.h"

void model_sgd(Model *m, float lr, float momentum, float weight_decay) {
    m->be->sgd_update(m->ctx, m->nparams, m->params, m->grads, m->momentum, lr, momentum,
                      weight_decay);
}

void model_use_optimizer(Model *m, int adamw) {
    if (!m->momentum) m->momentum = layer_alloc(m, m->nparams * sizeof(float));
    if (adamw && !m->variance) m->variance = layer_alloc(m, m->nparams * sizeof(float));
}

void model_use_adamw(Model *m) {
    model_use_optimizer(m, 1);
}

/* Calls fn(user, off, count, decay) for each maximal run of this Model's parameters with the same
 * decay, in order (offsets into its buffers); returns the number of runs. */
typedef void (*RunFn)(void *user, size_t off, size_t count, int decay);
static int each_run(const Model *m, RunFn fn, void *user) {
    size_t start = 0, end = 0;
    int decay = -1, runs = 0;
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        const unsigned flags = layer_kind(L->d.kind)->flags;
        const struct {
            size_t off, n;
            int decay;
        } part[2] = {{L->w_off - m->param_base, L->nw, (flags & LK_DECAY_WEIGHTS) != 0},
                     {L->b_off - m->param_base, L->nb, (flags & LK_DECAY_BIAS) != 0}};
        for (int k = 0; k < 2; k++) {
            if (!part[k].n) continue;
            if (part[k].decay == decay && part[k].off == end) {
                end += part[k].n;
                continue;
            }
            if (end > start) fn(user, start, end - start, decay), runs++;
            start = part[k].off, end = start + part[k].n, decay = part[k].decay;
        }
    }
    if (end > start) fn(user, start, end - start, decay), runs++;
    return runs;
}

typedef struct {
    DecayRange *out;
    int n, max;
} RangeList;

static void add_range(void *user, size_t off, size_t count, int decay) {
    RangeList *l = user;
    if (l->n < l->max) l->out[l->n] = (DecayRange){off, count, decay};
    l->n++;
}

int model_decay_ranges(const Model *m, DecayRange *out, int max) {
    RangeList l = {out, 0, out ? max : 0};
    return each_run(m, add_range, &l);
}

typedef struct {
    Model *m;
    const AdamWStep *decay, *none;
} AdamWRuns;

static void adamw_run(void *user, size_t off, size_t count, int decay) {
    AdamWRuns *r = user;
    Model *m = r->m;
    m->be->adamw_update(m->ctx, count, m->params + off, m->grads + off, m->momentum + off,
                        m->variance + off, decay ? r->decay : r->none);
}

void model_adamw(Model *m, const AdamWStep *a) {
    AdamWStep none = *a;
    none.weight_decay = 0.0f;
    AdamWRuns r = {m, a, &none};
    (void)each_run(m, adamw_run, &r);
}
