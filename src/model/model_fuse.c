/* model_fuse.c - which rows of a model run fused, chosen when it is built: a batch norm followed
 * by a ReLU that runs in its output (BN -> ReLU), or by a residual add whose output a ReLU runs in
 * (BN -> add -> ReLU, the end of every ResNet block; of an add of two batch norms, the first),
 * run as one backend operation when the
 * backend has one (BackendOps.bn_act_*: y = relu(BN(x) + z), its backward through the ReLU's
 * mask writing the add's other gradient in the same pass); a convolution followed by a ReLU that
 * runs in its output, forward only (BackendOps.conv_relu_forward: conv + bias -> ReLU in one
 * pass; the ReLU's backward stays a row of its own). The CPU backend has the batch-norm ones
 * (bit for bit its unfused rows) and not the convolution's. The fused rows are skipped (Layer.exec_as -1); a batch norm fused with an add
 * runs at the add's place, where the add's other input has been computed (a ResNet block's
 * shortcut comes after its last batch norm in the table), forward and backward. What the fused
 * row reads and writes instead of its own buffers: the services at the end. */
#include "layers.h"

/* The add i whose input `k_bn` is row b fuses with b and the ReLU after it when the ReLU runs in
 * the add's output, nothing else reads that output, and the add is the last reader of its other
 * input (whose gradient then goes straight to its producer). */
static int add_fuses(const Model *m, int a, int b, int *relu) {
    const Layer *A = &m->layers[a];
    if (A->d.kind != LAYER_ADD || A->ninputs != 2 || A->consumers != 1) return 0;
    if (A->exec_as != a) return 0; /* fused already with its other input (two batch norms) */
    const int k_other = A->inputs[0] == b ? 1 : 0;
    if (A->inputs[1 - k_other] != b || A->inputs[k_other] == b) return 0;
    const int r = A->last_consumer;
    if (r < 0 || r >= m->last) return 0;
    const Layer *R = &m->layers[r];
    if (R->d.kind != LAYER_RELU || !R->in_place || R->inputs[0] != a) return 0;
    if (A->inputs[k_other] >= 0 && !layer_last_reader(m, a, k_other)) return 0;
    *relu = r;
    return 1;
}

/* A convolution whose only reader is a ReLU run in place in its output: its forward also runs
 * that ReLU (BackendOps.conv_relu_forward); the ReLU's backward runs unfused, from the same y. */
static void fuse_conv_relu(Model *m) {
    if (!m->be->conv_relu_forward) return;
    for (int c = m->first; c < m->last; c++) {
        Layer *C = &m->layers[c];
        const int r = C->last_consumer;
        if (C->d.kind != LAYER_CONV || C->consumers != 1 || r < 0 || r >= m->last) continue;
        Layer *R = &m->layers[r];
        if (R->d.kind != LAYER_RELU || !R->in_place || R->inputs[0] != c) continue;
        C->fuse_relu = r, R->fwd_fused = 1;
    }
}

void model_choose_fusions(Model *m) {
    for (int i = m->first; i < m->last; i++) {
        Layer *L = &m->layers[i];
        L->fuse_relu = L->fuse_add = -1, L->exec_as = i, L->fwd_fused = 0;
    }
    fuse_conv_relu(m);
    const BackendOps *be = m->be;
    if (!be->bn_act_forward_train || !be->bn_act_forward_infer || !be->bn_act_backward) return;
    for (int b = m->first; b < m->last; b++) {
        Layer *B = &m->layers[b];
        const int c = B->last_consumer;
        if (B->d.kind != LAYER_BATCHNORM || B->consumers != 1 || c >= m->last) continue;
        Layer *C = &m->layers[c];
        int r;
        if (C->d.kind == LAYER_RELU && C->in_place && C->inputs[0] == b) {
            B->fuse_relu = c, C->exec_as = -1; /* runs at the batch norm's place */
        } else if (add_fuses(m, c, b, &r)) {
            B->fuse_add = c, B->fuse_relu = r;
            B->exec_as = -1, C->exec_as = b, m->layers[r].exec_as = -1;
        }
    }
}

/* ---- what a fused row reads and writes --------------------------------------------------------
 */

float *layer_fused_y(const LayerStep *t) {
    return layer_y_at(t->m, &t->m->layers[t->L->fuse_relu], t->s0);
}

float *layer_fused_dy(const LayerStep *t) {
    return layer_dy_at(t->m, &t->m->layers[t->L->fuse_relu], t->s0);
}

/* input k of the fused add other than this row */
static int other_input(const LayerStep *t) {
    const Layer *A = &t->m->layers[t->L->fuse_add];
    return A->inputs[0] == t->i ? 1 : 0;
}

const float *layer_fused_z(const LayerStep *t) {
    if (t->L->fuse_add < 0) return NULL;
    return layer_input_y(t->m, &t->m->layers[t->L->fuse_add], other_input(t), t->s0);
}

float *layer_fused_dz(const LayerStep *t) {
    if (t->L->fuse_add < 0) return NULL;
    return layer_input_grad(t->m, &t->m->layers[t->L->fuse_add], other_input(t), t->s0);
}
