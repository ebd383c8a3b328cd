/* model_roofline.c - what each layer computes and the least it must move (model.h's
 * model_layer_cost), for the roofline of --profile-layers: a layer's bytes over its time against
 * the device's memory bandwidth, its FLOPs over its time against its compute, and which of the
 * two bounds it (src/results/roofline.h).
 *
 * The least traffic of one call on n samples, whatever the kernels do: a forward reads every
 * input and its parameters once and writes its output once (a batch norm reads its input twice:
 * its statistics over the whole batch come before the normalisation, and a batch does not stay
 * in cache); a backward reads dy, the inputs or
 * the output where its kind needs them (layers.h's LK_BWD_READS_*), writes each input gradient
 * that exists (none for the data) and its parameter gradients, and reads the weights when it
 * writes an input gradient. Values are counted in the format the tensor is stored in: the
 * activation format's bytes (2 for bf16/fp16, 4 for fp32; the logits fp32), parameters and their
 * gradients fp32. The backend's own state (argmax, dropout masks, LRN's scale, saved statistics,
 * the LSTM's reserve, workspaces) and the gradient sums of outputs read twice are not counted: a
 * kernel may do without them. */
#include "layers.h"

#include <string.h>

/* Bytes per value of input k of L: its producer's output, or the part's input (the data in the
 * activation format, or fp32 when it is read as uploaded). */
static double input_bytes(const Model *m, const Layer *L, int k) {
    const int p = L->inputs[k];
    if (p < m->first) return m->x_act ? (double)m->act_bytes : (double)sizeof(float);
    return (double)layer_out_bytes(m, &m->layers[p]);
}

/* One row alone, unfused. */
static void row_cost(const Model *m, int i, int n, LayerCost *c) {
    const Layer *L = &m->layers[i];
    const unsigned flags = layer_kind(L->d.kind)->flags;
    const double out = (double)L->out_size * (double)layer_out_bytes(m, L), f32 = sizeof(float);
    const double params = (double)(L->nw + L->nb) * f32;
    double in = 0.0, dx = 0.0; /* per sample: every input, and the gradients written */
    for (int k = 0; k < L->ninputs; k++) {
        const double bytes = (double)layer_input_size(m, L, k) * input_bytes(m, L, k);
        in += bytes;
        if (layer_input_grad(m, L, k, 0)) dx += bytes;
    }
    const double weights_read = flags & LK_GATHERS_WEIGHTS ? n * (double)L->out_size * f32 : params;
    const double reads = L->d.kind == LAYER_BATCHNORM ? 2.0 : 1.0; /* statistics, normalisation */
    c->forward_flop = n * L->flops;
    c->forward_bytes = n * (reads * in + out) + weights_read;
    c->backward_flop = c->backward_bytes = 0.0;
    if (dx == 0.0 && L->nw + L->nb == 0) return; /* nothing to compute backward */
    c->backward_flop = n * (L->flops_dw + (dx > 0.0 ? L->flops_dx : 0.0));
    c->backward_bytes = n * (out + dx + (flags & LK_BWD_READS_INPUT ? in : 0.0) +
                             (flags & LK_BWD_READS_OUTPUT ? out : 0.0)) +
                        params + (dx > 0.0 ? (double)L->nw * f32 : 0.0);
}

/* Adds row j's amounts to a group's, less the tensor it hands to the next row of the group (an
 * output never written to memory nor read back, and its gradient likewise). */
static void add_row(const Model *m, int j, int n, int inner, int forward, int backward,
                    LayerCost *c) {
    LayerCost r;
    row_cost(m, j, n, &r);
    const Layer *L = &m->layers[j];
    const double handed = inner ? 2.0 * n * (double)L->out_size * layer_out_bytes(m, L) : 0.0;
    if (forward) c->forward_flop += r.forward_flop, c->forward_bytes += r.forward_bytes - handed;
    if (backward)
        c->backward_flop += r.backward_flop, c->backward_bytes += r.backward_bytes - handed;
}

void model_layer_cost(const Model *m, int i, int n, LayerCost *c) {
    memset(c, 0, sizeof *c);
    int runs = 0; /* the row runs at some place (model_fuse.c's exec_as), as profile_end reads */
    for (int at = m->first; at < m->last; at++)
        runs |= m->layers[at].exec_as == i;
    if (!runs) return;
    const Layer *L = &m->layers[i];
    const int fwd = !L->fwd_fused;
    if (L->fuse_relu < 0) {
        add_row(m, i, n, 0, fwd, 1, c);
        return;
    }
    /* a batch norm with its ReLU (and the add between), both ways; a convolution with its ReLU,
     * forward only: the ReLU's backward is its own row's, the convolution's its own */
    const int bn = L->d.kind == LAYER_BATCHNORM;
    add_row(m, i, n, 1, fwd, bn, c);
    if (L->fuse_add >= 0) add_row(m, L->fuse_add, n, 1, 1, 1, c);
    add_row(m, L->fuse_relu, n, 0, 1, bn, c);
    if (!bn) add_row(m, i, n, 0, 0, 1, c);
}
