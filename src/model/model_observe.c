/* model_observe.c - the model's per-layer observer (model.h's LayerObserver): the events of each
 * layer's forward and backward, fused groups reported under the row that ran them, and the
 * conversion of what an event points at (activations and their gradients in the backend's
 * activation format) to fp32 NCHW on the host and back, so that an observer compares models of
 * any format with one another. */
#include "half_bits.h" /* defines: gc_bf16_*, gc_fp16_* */
#include "layers.h"
#include "layout.h" /* defines: layout_to_nchw, layout_to_nhwc */
#include "alloc.h"  /* defines: xmalloc */

#include <stdlib.h>
#include <string.h>

void model_set_observer(Model *m, LayerObserver *o) {
    m->observer = o && o->fn ? o : NULL;
}

void model_observe(const LayerStep *s, LayerEventKind kind) {
    const Model *m = s->m;
    const Layer *L = s->L;
    const int i = s->i;
    /* the last row of the group, in the direction it is fused (a convolution's ReLU: forward) */
    const int fwd = kind == LAYER_FORWARD_BEGIN || kind == LAYER_FORWARD_END;
    const int r = L->fuse_relu;
    LayerEvent e = {.kind = kind,
                    .layer = i,
                    .last = r >= 0 && (fwd || m->layers[r].exec_as < 0) ? r : i,
                    .s0 = s->s0,
                    .n = s->n,
                    .dz_layer = -1,
                    .dz_input = -1};
    if (kind == LAYER_FORWARD_END) e.y = layer_y_at(m, &m->layers[e.last], s->s0);
    if (kind == LAYER_BACKWARD_END) {
        e.dw = L->nparams ? m->grads + (L->w_off - m->param_base) : NULL;
        for (int k = 0; k < L->ninputs; k++)
            if ((e.dx[k] = s->target[k])) e.dx_count[k] = (size_t)s->n * layer_input_size(m, L, k);
        if (L->fuse_add >= 0) { /* the add's other input's gradient, written by this row */
            const Layer *A = &m->layers[L->fuse_add];
            const int k = A->inputs[0] == i ? 1 : 0;
            e.dz_layer = L->fuse_add, e.dz_input = k;
            if ((e.dz = layer_input_grad(m, A, k, s->s0)))
                e.dz_count = (size_t)s->n * layer_input_size(m, A, k);
        }
    }
    m->observer->fn(m->observer->user, m, &e);
}

/* ---- activations as fp32 NCHW --------------------------------------------------------------- */

typedef struct {
    size_t count, bytes; /* values, bytes per value */
    int nhwc;            /* stored NHWC: [n, hw, c] */
    size_t c, hw;
    ActType type;
} ActView;

static ActView view(const Model *m, int producer, int n) {
    ActView v = {.bytes = sizeof(float), .type = ACT_FP32};
    if (producer < m->first) { /* the part's input: fp32 NCHW */
        v.count = (size_t)n * m->x_size;
        return v;
    }
    const Layer *L = &m->layers[producer];
    v.count = (size_t)n * L->out_size;
    v.bytes = layer_out_bytes(m, L);
    v.type = v.bytes == sizeof(float) ? ACT_FP32 : m->act.type;
    v.c = (size_t)L->out_c, v.hw = (size_t)L->out_h * L->out_w;
    v.nhwc = m->act.layout == ACT_NHWC && !layer_is_logits(m, L) && v.hw > 1 && !L->seq;
    return v;
}

void model_act_download(const Model *m, int producer, const float *dev, int n, float *host) {
    const ActView v = view(m, producer, n);
    void *raw = xmalloc(v.count * v.bytes + 1);
    m->be->download(m->ctx, raw, dev, v.count * v.bytes);
    float *t = v.nhwc ? xmalloc(v.count * sizeof(float) + 1) : host;
    for (size_t i = 0; i < v.count; i++) {
        const uint16_t h = v.bytes == 2 ? ((const uint16_t *)raw)[i] : 0;
        t[i] = v.type == ACT_BF16   ? gc_bf16_to_float(h)
               : v.type == ACT_FP16 ? gc_fp16_to_float(h)
                                    : ((const float *)raw)[i];
    }
    if (v.nhwc) layout_to_nchw((size_t)n, v.c, v.hw, t, host), free(t);
    free(raw);
}

void model_act_upload(const Model *m, int producer, float *dev, const float *host, int n) {
    const ActView v = view(m, producer, n);
    float *t = NULL;
    if (v.nhwc) {
        t = xmalloc(v.count * sizeof(float) + 1);
        layout_to_nhwc((size_t)n, v.c, v.hw, host, t);
        host = t;
    }
    void *raw = xmalloc(v.count * v.bytes + 1);
    for (size_t i = 0; i < v.count; i++)
        if (v.bytes == 2)
            ((uint16_t *)raw)[i] =
                v.type == ACT_FP16 ? gc_fp16_from_float(host[i]) : gc_bf16_from_float(host[i]);
        else
            ((float *)raw)[i] = host[i];
    m->be->upload(m->ctx, dev, raw, v.count * v.bytes);
    free(raw), free(t);
}
