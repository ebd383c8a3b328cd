/* layer_services.c - what the interpreter (model.c) offers the rows of the table of layer kinds
 * (layers.h), the fusion (model_fuse.c) and the observer (model_observe.c): a model's problems
 * and table mistakes, window sizes, uniform initialisation, backend memory, and where each
 * layer's activations and gradients lie for a range of samples. Below model.c, which builds and
 * runs a model through them and calls the fusion and the observer. */
#include "layers.h"
#include "rng.h" /* defines: rng_uniform */

#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A mistake in a model table: the zoo is tested, so this only fires while writing a new model. */
_Noreturn void layer_bad_table(const ModelDesc *d, const char *row, const char *what) {
    fprintf(stderr, "dtbench: model table %s, row %s: %s\n", d->name, row, what);
    abort();
}

void layer_problem(Model *m, const Layer *L, const char *fmt, ...) {
    if (m->problem[0]) return; /* the first one explains the rest */
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(m->problem, sizeof m->problem, "%s does not fit the input [%d,%d,%d]: %s %s %s",
             m->desc->name, m->in_c, m->in_h, m->in_w, layer_kind(L->d.kind)->name, L->d.name,
             what);
}

int layer_window_out(int in, int k, int stride, int pad) {
    return in + 2 * pad < k || stride <= 0 ? 0 : (in + 2 * pad - k) / stride + 1;
}

void layer_init_uniform(const Layer *L, uint64_t key, float bound, float *w, float *b) {
    for (size_t j = 0; j < L->nw; j++)
        w[j] = (2.0f * rng_uniform(key + j) - 1.0f) * bound;
    memset(b, 0, L->nb * sizeof(float));
}

void layer_fill_normal(float *w, size_t n, uint64_t key, float std) {
    for (size_t j = 0; j < n; j += 2) { /* Box-Muller: two values from two counter-based uniforms */
        const float u1 = rng_uniform(key + j) + 0.5f / 16777216.0f;
        const float u2 = rng_uniform(key + j + 1) * 6.2831853f;
        const float r = std * sqrtf(-2.0f * logf(u1));
        w[j] = r * cosf(u2);
        if (j + 1 < n) w[j + 1] = r * sinf(u2);
    }
}

void layer_init_normal(const Layer *L, uint64_t key, float std, float *w, float *b) {
    layer_fill_normal(w, L->nw, key, std);
    memset(b, 0, L->nb * sizeof(float));
}

void *layer_alloc(Model *m, size_t bytes) {
    void *p = m->be->alloc(m->ctx, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "dtbench: %s: cannot allocate %zu bytes on the %s backend\n", m->desc->name,
                bytes, m->be->name);
        abort();
    }
    return p;
}

void layer_need_work(Model *m, size_t bytes) {
    if (bytes > m->work_bytes) m->work_bytes = bytes;
}

size_t layer_input_size(const Model *m, const Layer *L, int k) {
    return L->inputs[k] < m->first ? m->x_size : m->layers[L->inputs[k]].out_size;
}

int layer_is_logits(const Model *m, const Layer *L) {
    return L == &m->layers[m->nlayers - 1];
}

size_t layer_out_bytes(const Model *m, const Layer *L) {
    return layer_is_logits(m, L) ? sizeof(float) : m->act_bytes;
}

float *layer_y_at(const Model *m, const Layer *L, int s0) {
    return layer_act_offset(L->y, (size_t)s0 * L->out_size, layer_out_bytes(m, L));
}

const float *layer_input_y(const Model *m, const Layer *L, int k, int s0) {
    int p = L->inputs[k];
    if (p < m->first)
        return m->x_act ? layer_act_offset(m->x_act, (size_t)s0 * m->x_size, m->act_bytes)
                        : m->x + (size_t)s0 * m->x_size;
    return layer_y_at(m, &m->layers[p], s0);
}

/* `dest` received the gradient; when it was dy_scratch, it is added to the producer's. */
void layer_finish_input_grad(const LayerStep *s, int k, size_t count) {
    float *dest = s->dest[k], *target = s->target[k];
    if (!dest || dest == target) return;
    if (s->m->be->act_add)
        s->m->be->act_add(s->m->ctx, count, dest, target);
    else
        s->m->be->axpy(s->m->ctx, count, 1.0f, dest, target);
}

/* Row i is the last to read input k: its gradient goes straight to the producer's dy (backward
 * meets it first); every other reader's gradient is added to it through dy_scratch. */
int layer_last_reader(const Model *m, int i, int k) {
    int p = m->layers[i].inputs[k];
    if (p < 0) return 1; /* the data: no gradient */
    return m->layers[p].last_consumer == i;
}

/* L's output gradient of samples from s0: a whole-batch buffer, or the chunk buffer itself. */
float *layer_dy_at(const Model *m, const Layer *L, int s0) {
    return layer_act_offset(L->dy, L->dy_full ? (size_t)s0 * L->out_size : 0,
                            layer_out_bytes(m, L));
}

/* Where the gradient of input k of L goes (NULL: the data, no gradient). */
float *layer_input_grad(const Model *m, const Layer *L, int k, int s0) {
    int p = L->inputs[k];
    if (p < 0) return NULL;
    if (p < m->first) return m->dx ? m->dx + (size_t)s0 * m->x_size : NULL;
    return layer_dy_at(m, &m->layers[p], s0);
}
