/* layer_sequence.c - the layer kinds of language models (rows of the table in layers.h): the
 * embedding that turns token ids into a sequence [seq, 1, dim], and the LSTM that runs over it
 * (its per-micro-batch reserve and scratch sized by the backend). */
#include "layers.h"

#include <math.h>

/* ---- embedding ------------------------------------------------------------------------------- */

static void embedding_plan(Model *m, Layer *L, const Layer *P) {
    const LayerDesc *d = &L->d;
    const size_t in = L->in_size;
    if (P || m->desc->vocab <= 0) layer_problem(m, L, "reads token ids: it must read the input");
    L->seq = (int)in, L->out_c = (int)in, L->out_h = 1, L->out_w = d->out;
    L->nw = (size_t)d->vocab * d->out;
    L->flops_dw = (double)in * d->out; /* each dy row added into its token's row */
}

static void embedding_init(const Layer *L, uint64_t key, float *w, float *b) {
    layer_init_uniform(L, key, 0.1f, w, b);
}

static void embedding_forward(const LayerStep *t) {
    const Layer *L = t->L;
    EmbeddingShape s = {t->n * L->seq, L->d.vocab, L->d.out};
    t->m->be->embedding_forward(t->m->ctx, &s, t->x, t->w, t->y);
}

static void embedding_backward(const LayerStep *t) {
    const Layer *L = t->L;
    EmbeddingShape s = {t->n * L->seq, L->d.vocab, L->d.out};
    t->m->be->embedding_backward(t->m->ctx, &s, t->x, t->dy, t->dw);
}

static const LayerOp embedding_ops[] = {
    LAYER_OP(embedding_forward), LAYER_OP(embedding_backward), {0, NULL}};

const LayerKindOps layer_embedding = {
    .name = "embedding",
    .flags = LK_READS_TOKENS | LK_BWD_READS_INPUT | LK_GATHERS_WEIGHTS | LK_DECAY_WEIGHTS,
    .plan = embedding_plan,
    .init = embedding_init,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .needs = embedding_ops,
};

/* ---- LSTM ------------------------------------------------------------------------------------ */

static LstmShape lstm_shape(const Layer *L, int n) {
    return (LstmShape){n, L->seq, L->in_w, L->d.out};
}

static void lstm_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    const int seq = L->seq, w = L->in_w, hidden = L->d.out;
    if (!seq) layer_problem(m, L, "needs a sequence");
    L->out_c = seq, L->out_h = 1, L->out_w = hidden;
    L->nw = (size_t)4 * hidden * (w + hidden);
    L->nb = (size_t)4 * hidden;
    L->flops = (double)seq * (2.0 * 4 * hidden * (w + hidden) + 10.0 * hidden);
    /* the weight gradients' products and the gates' gradients; the input and recurrent
     * gradients' products */
    L->flops_dw = L->flops, L->flops_dx = (double)seq * 2.0 * 4 * hidden * (w + hidden);
}

/* uniform(-1/sqrt hidden, 1/sqrt hidden) weights, zero bias */
static void lstm_init(const Layer *L, uint64_t key, float *w, float *b) {
    layer_init_uniform(L, key, 1.0f / sqrtf((float)L->d.out), w, b);
}

/* per micro-batch: the reserve the backward reads (64-byte aligned slots); shared scratch */
static void lstm_alloc(Model *m, Layer *L) {
    LstmShape s = lstm_shape(L, m->chunk);
    L->aux_slot_bytes = (m->be->lstm_reserve_bytes(m->ctx, &s) + 63) & ~(size_t)63;
    layer_need_work(m, m->be->lstm_workspace_bytes(m->ctx, &s));
    L->aux = layer_alloc(m, L->aux_slot_bytes * (size_t)m->slots);
}

static void lstm_forward(const LayerStep *t) {
    const Layer *L = t->L;
    LstmShape s = lstm_shape(L, t->n);
    t->m->be->lstm_forward(t->m->ctx, &s, t->x, t->w, t->b, t->y,
                           (char *)L->aux + t->slot * L->aux_slot_bytes, t->m->work);
}

static void lstm_backward(const LayerStep *t) {
    const Layer *L = t->L;
    LstmShape s = lstm_shape(L, t->n);
    const float *y = layer_y_at(t->m, L, t->s0);
    t->m->be->lstm_backward(t->m->ctx, &s, t->x, t->w, y,
                            (char *)L->aux + t->slot * L->aux_slot_bytes, t->dy, t->dx, t->dw,
                            t->db, t->m->work);
}

static const LayerOp lstm_ops[] = {LAYER_OP(lstm_reserve_bytes),
                                   LAYER_OP(lstm_workspace_bytes),
                                   LAYER_OP(lstm_forward),
                                   LAYER_OP(lstm_backward),
                                   {0, NULL}};

const LayerKindOps layer_lstm = {
    .name = "lstm",
    .flags = LK_TAKES_SEQUENCE | LK_BWD_READS_INPUT | LK_BWD_READS_OUTPUT | LK_DECAY_WEIGHTS,
    .plan = lstm_plan,
    .init = lstm_init,
    .alloc = lstm_alloc,
    .forward = lstm_forward,
    .backward = lstm_backward,
    .needs = lstm_ops,
};
