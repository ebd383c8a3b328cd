/* model_format.c - which activation format a model runs in (backend.h's ActFormat): what a model
 * cannot store in a format other than fp32 NCHW, the choice --act-layout makes between the
 * backend's NHWC format and NCHW fp32, and what the model tells a backend when it is built (the
 * format checked, where the convolutions' parameters lie). */
#include "layers.h"
#include "alloc.h" /* defines: xcalloc */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *model_format_problem(const Model *m, ActFormat f) {
    if (f.layout == ACT_NCHW && f.type == ACT_FP32) return NULL;
    if (m->first > 0 || m->last < m->nlayers)
        return "pipeline stages exchange fp32 NCHW activations";
    for (int i = 0; i < m->nlayers; i++) {
        const Layer *L = &m->layers[i];
        if (L->d.kind == LAYER_EMBEDDING || L->d.kind == LAYER_TOKPOS || L->seq)
            return "its layers over token sequences (embeddings, LSTM, transformer) run on fp32 "
                   "NCHW sequences";
    }
    if (m->layers[m->nlayers - 1].d.kind != LAYER_FC)
        return "its last layer (the logits) is not fully connected";
    return NULL;
}

int model_choose_layout(const Model *m, const BackendOps *be, Precision precision,
                        ActLayoutChoice choice, ActLayout *layout, ActFormat *f, char *why,
                        size_t len) {
    const ActFormat nchw = {ACT_NCHW, ACT_FP32};
    *layout = ACT_NCHW, *f = nchw;
    if (choice == ACT_LAYOUT_NCHW) return 0;
    char bwhy[256] = "";
    ActFormat g = nchw;
    const int ok =
        be->act_format_for && be->act_format_for(precision, ACT_NHWC, &g, bwhy, sizeof bwhy);
    const char *mwhy = ok ? model_format_problem(m, g) : NULL;
    if (ok && !mwhy) {
        *layout = ACT_NHWC, *f = g;
        return 0;
    }
    if (choice != ACT_LAYOUT_NHWC) return 0; /* auto: NCHW fp32 */
    if (ok)
        snprintf(why, len, "%s cannot store %s %s activations: %s", m->desc->name,
                 ACT_LAYOUT_NAME(g.layout), ACT_TYPE_NAME(g.type), mwhy);
    else
        snprintf(why, len, "%s", bwhy[0] ? bwhy : "the backend stores NCHW fp32 only");
    return -1;
}

/* A model in an activation format other than NCHW fp32 (the backend's, backend.h) that it cannot
 * run: the resolver chose the layout (model_choose_layout), so this is a mistake of a caller or
 * of the backend's table, reported before anything runs. */
void model_check_format(const Model *m) {
    if (m->act.layout == ACT_NCHW && m->act.type == ACT_FP32) return;
    const char *why = !m->be->input_to_act || !m->be->act_add
                          ? "the backend lacks input_to_act or act_add"
                          : model_format_problem(m, m->act);
    if (!why) return;
    fprintf(stderr, "dtbench: %s: the %s backend's activation format (%s, %s) cannot run it: %s\n",
            m->desc->name, m->be->name, ACT_LAYOUT_NAME(m->act.layout), ACT_TYPE_NAME(m->act.type),
            why);
    abort();
}

/* The backend's weights_layout: every convolution of this part, where its parameters lie. */
void model_declare_weights(const Model *m) {
    if (!m->be->weights_layout) return;
    ConvWeights *cw = xcalloc((size_t)(m->last - m->first) + 1, sizeof *cw);
    int n = 0;
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        if (L->d.kind != LAYER_CONV) continue;
        cw[n++] =
            (ConvWeights){L->w_off - m->param_base, L->nb ? L->b_off - m->param_base : SIZE_MAX,
                          L->out_c, L->in_c, L->d.k * L->d.k};
    }
    m->be->weights_layout(m->ctx, cw, n);
    free(cw);
}
