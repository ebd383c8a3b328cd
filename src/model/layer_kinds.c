/* layer_kinds.c - the table of layer kinds: one row per LayerKind (model.h), in enum order, and
 * what a model asks of its rows' flags. The rows themselves live in src/model/layer_*.c by concern
 * (see layers.h). */
#include "layers.h"

static const LayerKindOps *const KINDS[] = {
    [LAYER_CONV] = &layer_conv,       [LAYER_MAXPOOL] = &layer_maxpool,
    [LAYER_FC] = &layer_fc,           [LAYER_RELU] = &layer_relu,
    [LAYER_LRN] = &layer_lrn,         [LAYER_BATCHNORM] = &layer_batchnorm,
    [LAYER_AVGPOOL] = &layer_avgpool, [LAYER_GLOBAL_AVGPOOL] = &layer_gavgpool,
    [LAYER_CONCAT] = &layer_concat,   [LAYER_ADD] = &layer_add,
    [LAYER_DROPOUT] = &layer_dropout, [LAYER_EMBEDDING] = &layer_embedding,
    [LAYER_LSTM] = &layer_lstm,       [LAYER_TOKPOS] = &layer_tokpos,
    [LAYER_LAYERNORM] = &layer_layernorm, [LAYER_GELU] = &layer_gelu,
    [LAYER_ATTENTION] = &layer_attention, [LAYER_LM_HEAD] = &layer_lm_head,
};
_Static_assert(sizeof KINDS / sizeof KINDS[0] == LAYER_KINDS, "a LayerKind without a row");

const LayerKindOps *layer_kind(LayerKind kind) {
    return KINDS[kind];
}

const char *model_step_argument_layer(const Model *m) {
    for (int i = m->first; i < m->last; i++)
        if (layer_kind(m->layers[i].d.kind)->flags & LK_STEP_ARGUMENTS) return m->layers[i].d.name;
    return NULL;
}
