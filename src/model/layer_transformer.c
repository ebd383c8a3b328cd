/* layer_transformer.c - the layer kinds of a GPT-2 transformer (rows of the table in layers.h):
 * the token and position embedding (tokpos), layer normalisation, GELU, causal self-attention
 * between the QKV projection and the output projection (fc rows on the sequence), and the language
 * model head, whose weights are the token embedding's (tied). The projections, the residual adds
 * and the loss are the zoo's fc, add and softmax cross-entropy. A sequence is [seq, 1, width]. */
#include "layers.h"
#include "rng.h" /* defines: rng_mix */

#include <math.h>
#include <string.h>

/* ---- token and position embedding ------------------------------------------------------------ */

static TokPosShape tokpos_shape(const Layer *L, int n) {
    return (TokPosShape){n, L->seq, L->d.vocab, L->d.out};
}

static void tokpos_plan(Model *m, Layer *L, const Layer *P) {
    const LayerDesc *d = &L->d;
    const int seq = (int)L->in_size;
    if (P || m->desc->vocab <= 0) layer_problem(m, L, "reads token ids: it must read the input");
    if (seq > d->positions)
        layer_problem(m, L, "a sequence of %d tokens is longer than its context of %d", seq,
                      d->positions);
    L->seq = seq, L->out_c = seq, L->out_h = 1, L->out_w = d->out;
    L->nw = (size_t)d->vocab * d->out;     /* wte [vocab, width] */
    L->nb = (size_t)d->positions * d->out; /* wpe [context, width] */
    L->flops = (double)seq * d->out;       /* the position added */
    L->flops_dw = 2.0 * seq * d->out;      /* each dy row added into its token's and position's */
}

/* nanoGPT's: normal(0, 0.02) for both tables */
static void tokpos_init(const Layer *L, uint64_t key, float *w, float *b) {
    const float std = L->d.init_std > 0.0f ? L->d.init_std : 0.02f;
    layer_fill_normal(w, L->nw, key, std);
    layer_fill_normal(b, L->nb, rng_mix(key ^ 0x77706eULL), std);
}

static void tokpos_forward(const LayerStep *t) {
    TokPosShape s = tokpos_shape(t->L, t->n);
    t->m->be->tokpos_forward(t->m->ctx, &s, t->x, t->w, t->b, t->y);
}

/* The head tied to this row wrote its part of the token table's gradient first (it runs earlier
 * in the backward order, into its own buffer): added here, where the table's gradient is made.
 * A head on a later pipeline stage sent its part summed over the iteration (model.h, tied_*):
 * added once, by the call the driver marked. */
static void tokpos_backward(const LayerStep *t) {
    const Layer *L = t->L;
    Model *m = t->m;
    TokPosShape s = tokpos_shape(L, t->n);
    m->be->tokpos_backward(m->ctx, &s, t->x, t->dy, t->dw, t->db);
    if (s.seq < L->d.positions) /* positions beyond the sequence: no gradient (the kernel leaves
                                   them, and db may be scratch that another row wrote) */
        m->be->zero(m->ctx, t->db + (size_t)s.seq * s.dim,
                    (size_t)(L->d.positions - s.seq) * s.dim * sizeof(float));
    if (L->tied_by >= 0 && L->tied_by < m->last)
        m->be->axpy(m->ctx, L->nw, 1.0f, m->layers[L->tied_by].aux, t->dw);
    else if (L->tied_by >= 0 && m->tied_pending) {
        m->be->axpy(m->ctx, L->nw, 1.0f, m->tied_grad, t->dw);
        m->tied_pending = 0;
    }
}

static const LayerOp tokpos_ops[] = {
    LAYER_OP(tokpos_forward), LAYER_OP(tokpos_backward), {0, NULL}};

const LayerKindOps layer_tokpos = {
    .name = "tokpos",
    .flags = LK_READS_TOKENS | LK_BWD_READS_INPUT | LK_GATHERS_WEIGHTS | LK_OUTPUT_REUSABLE |
             LK_DECAY_WEIGHTS | LK_DECAY_BIAS,
    .plan = tokpos_plan,
    .init = tokpos_init,
    .forward = tokpos_forward,
    .backward = tokpos_backward,
    .needs = tokpos_ops,
};

/* ---- layer normalisation --------------------------------------------------------------------- */

static LayerNormShape layernorm_shape(const Layer *L, int n) {
    return (LayerNormShape){n * (L->seq ? L->seq : 1), L->seq ? L->in_w : (int)L->in_size, 1e-5f};
}

static void layernorm_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    const int width = L->seq ? L->in_w : (int)L->in_size;
    L->nw = L->nb = (size_t)width; /* gain, bias */
    L->flops = 8.0 * (double)L->in_size;
    L->flops_dw = 4.0 * (double)L->in_size, L->flops_dx = 10.0 * (double)L->in_size;
}

static void layernorm_init(const Layer *L, uint64_t key, float *w, float *b) {
    (void)key;
    for (size_t j = 0; j < L->nw; j++)
        w[j] = 1.0f;
    memset(b, 0, L->nb * sizeof(float));
}

/* per micro-batch: the rows' mean and 1/std, [slots][2][rows of a chunk] */
static void layernorm_alloc(Model *m, Layer *L) {
    const size_t rows = (size_t)m->chunk * (L->seq ? L->seq : 1);
    L->aux_slot_bytes = (2 * rows * sizeof(float) + 63) & ~(size_t)63;
    L->aux = layer_alloc(m, L->aux_slot_bytes * (size_t)m->slots);
}

static float *layernorm_saved(const LayerStep *t) {
    return (float *)((char *)t->L->aux + (size_t)t->slot * t->L->aux_slot_bytes);
}

static void layernorm_forward(const LayerStep *t) {
    LayerNormShape s = layernorm_shape(t->L, t->n);
    float *mean = layernorm_saved(t);
    t->m->be->layernorm_forward(t->m->ctx, &s, t->x, t->w, t->b, t->y, mean, mean + s.rows);
}

static void layernorm_backward(const LayerStep *t) {
    LayerNormShape s = layernorm_shape(t->L, t->n);
    const float *mean = layernorm_saved(t);
    t->m->be->layernorm_backward(t->m->ctx, &s, t->x, t->w, mean, mean + s.rows, t->dy, t->dx,
                                 t->dw, t->db);
}

static const LayerOp layernorm_ops[] = {
    LAYER_OP(layernorm_forward), LAYER_OP(layernorm_backward), {0, NULL}};

const LayerKindOps layer_layernorm = {
    .name = "layernorm",
    .flags = LK_TAKES_SEQUENCE | LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT,
    .plan = layernorm_plan,
    .init = layernorm_init,
    .alloc = layernorm_alloc,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .needs = layernorm_ops,
};

/* ---- GELU ------------------------------------------------------------------------------------ */

static void gelu_plan(Model *m, Layer *L, const Layer *P) {
    (void)m, (void)P;
    L->flops = 10.0 * (double)L->in_size, L->flops_dx = 14.0 * (double)L->in_size;
}

static void gelu_forward(const LayerStep *t) {
    t->m->be->gelu_forward(t->m->ctx, (size_t)t->n * t->L->out_size, t->x, t->y);
}

static void gelu_backward(const LayerStep *t) {
    if (t->dx)
        t->m->be->gelu_backward(t->m->ctx, (size_t)t->n * t->L->out_size, t->x, t->dy, t->dx);
}

static const LayerOp gelu_ops[] = {LAYER_OP(gelu_forward), LAYER_OP(gelu_backward), {0, NULL}};

const LayerKindOps layer_gelu = {
    .name = "gelu",
    .flags = LK_TAKES_SEQUENCE | LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT,
    .plan = gelu_plan,
    .forward = gelu_forward,
    .backward = gelu_backward,
    .needs = gelu_ops,
};

/* ---- causal self-attention ------------------------------------------------------------------- */

static AttentionShape attention_shape(const Layer *L, int n) {
    return (AttentionShape){n, L->seq, L->d.heads, L->out_w / L->d.heads};
}

/* reads the QKV projection [seq, 1, 3 x width], writes [seq, 1, width] */
static void attention_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    const int heads = L->d.heads, seq = L->seq, width = L->in_w / 3;
    if (!seq) layer_problem(m, L, "needs a sequence");
    if (heads <= 0 || L->in_w % 3 || width % heads)
        layer_bad_table(m->desc, L->d.name, "attention reads 3 x heads x head size values");
    L->out_c = seq, L->out_h = 1, L->out_w = width;
    /* q k^T and the weighted sum of v over every (query, key) pair, as PyTorch's FLOP counter
     * counts scaled_dot_product_attention (the mask's half included); the softmax */
    L->flops = 4.0 * seq * (double)seq * width + 5.0 * heads * (double)seq * seq;
    L->flops_dx = 2.0 * L->flops;
}

static void attention_alloc(Model *m, Layer *L) {
    AttentionShape s = attention_shape(L, m->chunk);
    L->aux_slot_bytes = (m->be->attention_reserve_bytes(m->ctx, &s) + 63) & ~(size_t)63;
    layer_need_work(m, m->be->attention_workspace_bytes(m->ctx, &s));
    L->aux = layer_alloc(m, L->aux_slot_bytes * (size_t)m->slots);
}

static void *attention_reserve(const LayerStep *t) {
    return (char *)t->L->aux + (size_t)t->slot * t->L->aux_slot_bytes;
}

static void attention_forward(const LayerStep *t) {
    AttentionShape s = attention_shape(t->L, t->n);
    t->m->be->attention_forward(t->m->ctx, &s, t->x, t->y, attention_reserve(t), t->m->work);
}

static void attention_backward(const LayerStep *t) {
    AttentionShape s = attention_shape(t->L, t->n);
    const float *y = layer_y_at(t->m, t->L, t->s0);
    t->m->be->attention_backward(t->m->ctx, &s, t->x, y, attention_reserve(t), t->dy, t->dx,
                                 t->m->work);
}

static const LayerOp attention_ops[] = {LAYER_OP(attention_reserve_bytes),
                                        LAYER_OP(attention_workspace_bytes),
                                        LAYER_OP(attention_forward),
                                        LAYER_OP(attention_backward),
                                        {0, NULL}};

const LayerKindOps layer_attention = {
    .name = "attention",
    .flags = LK_TAKES_SEQUENCE | LK_BWD_READS_INPUT | LK_BWD_READS_OUTPUT,
    .plan = attention_plan,
    .alloc = attention_alloc,
    .forward = attention_forward,
    .backward = attention_backward,
    .needs = attention_ops,
};

/* ---- the language model head, tied to the token embedding ------------------------------------ */

static const Layer *tied_row(const Model *m, const Layer *L) {
    return &m->layers[L->tied];
}

/* 1: the table is in this part; 0: in an earlier pipeline stage (this part holds its copy) */
static int tied_here(const Model *m, const Layer *L) {
    return L->tied >= m->first;
}

/* logits [seq, 1, vocab] = x [seq, 1, width] wte^T, wte the tied row's token table */
static void lm_head_plan(Model *m, Layer *L, const Layer *P) {
    (void)P;
    const int i = (int)(L - m->layers);
    L->tied = -1;
    for (int j = i - 1; j >= 0 && L->d.tied; j--)
        if (!strcmp(m->layers[j].d.name, L->d.tied)) L->tied = j;
    if (L->tied < 0 || m->layers[L->tied].d.kind != LAYER_TOKPOS)
        layer_bad_table(m->desc, L->d.name, "lm_head names no earlier tokpos row as .tied");
    Layer *T = &m->layers[L->tied];
    T->tied_by = i;
    if (!L->seq) layer_problem(m, L, "needs a sequence");
    if (L->in_w != T->d.out) layer_bad_table(m->desc, L->d.name, "width is not its tied row's");
    L->out_c = L->seq, L->out_h = 1, L->out_w = T->d.vocab;
    L->flops = 2.0 * L->seq * (double)T->d.vocab * L->in_w;
    L->flops_dw = L->flops_dx = L->flops;
}

/* the token table's gradient from one micro-batch, which the tied row adds to its own
 * (tokpos_backward), or which adds to the sum sent to the table's stage (micro-batches after the
 * first; the first writes the sum) */
static void lm_head_alloc(Model *m, Layer *L) {
    if (tied_here(m, L) || m->slots > 1)
        L->aux = layer_alloc(m, tied_row(m, L)->nw * sizeof(float));
}

static FcShape lm_head_shape(const LayerStep *t) {
    const Layer *L = t->L;
    return (FcShape){t->n * L->seq, L->in_w, L->out_w, 0, 0, layer_is_logits(t->m, L)};
}

static const float *lm_head_weights(const LayerStep *t) {
    if (!tied_here(t->m, t->L)) return t->m->tied_w;
    return t->m->params + (tied_row(t->m, t->L)->w_off - t->m->param_base);
}

static void lm_head_forward(const LayerStep *t) {
    FcShape s = lm_head_shape(t);
    t->m->be->fc_forward(t->m->ctx, &s, t->x, lm_head_weights(t), NULL, t->y);
}

static void lm_head_backward(const LayerStep *t) {
    Model *m = t->m;
    FcShape s = lm_head_shape(t);
    const int sum_here = !tied_here(m, t->L) && !t->accumulate; /* the first micro-batch's */
    float *dw = sum_here ? m->tied_grad : t->L->aux;
    m->be->fc_backward(m->ctx, &s, t->x, lm_head_weights(t), t->dy, t->dx, dw, NULL);
    if (!tied_here(m, t->L) && t->accumulate)
        m->be->axpy(m->ctx, m->tied_count, 1.0f, t->L->aux, m->tied_grad);
}

static const LayerOp lm_head_ops[] = {LAYER_OP(axpy), {0, NULL}};

const LayerKindOps layer_lm_head = {
    .name = "lm_head",
    .flags = LK_TAKES_SEQUENCE | LK_OUTPUT_REUSABLE | LK_BWD_READS_INPUT | LK_DY_IN_Y,
    .plan = lm_head_plan,
    .alloc = lm_head_alloc,
    .forward = lm_head_forward,
    .backward = lm_head_backward,
    .needs = lm_head_ops,
};
