/* models_gpt.c - the transformers of the zoo, as data: GPT-2 (Radford et al. 2019) as OpenAI
 * released it and as nanoGPT and llm.c train it: pre-layer-norm blocks (layer norm, causal
 * self-attention, residual add; layer norm, 4x MLP with GELU (tanh), residual add), a learned
 * position embedding, a final layer norm, and the language-model head tied to the token embedding.
 *   gpt2:          12 blocks, 12 heads, width 768, context 1024, vocabulary 50257: 124,439,808
 *   gpt2-medium:   24 blocks, 16 heads, width 1024, context 1024, vocabulary 50257: 354,823,168
 *   nanogpt-char:  nanoGPT's Shakespeare character model (config/train_shakespeare_char.py: 6
 *                  blocks, 6 heads, width 384, context 256) over bytes (vocabulary 256): the size
 *                  people train on one machine, 10,844,160 parameters.
 * Initial weights as nanoGPT's: normal(0, 0.02), the residual projections (attn.c_proj,
 * mlp.c_proj) normal(0, 0.02 / sqrt(2 x blocks)), zero biases, layer norms gain 1 and bias 0. */
#include "model.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

#define TOKPOS(name_, voc, width, ctx)                                                             \
    { .kind = LAYER_TOKPOS, .name = name_, .out = width, .vocab = voc, .positions = ctx }
#define LN(name_, in)                                                                              \
    { .kind = LAYER_LAYERNORM, .name = name_, .inputs = in }
#define PROJ(name_, width, std)                                                                    \
    { .kind = LAYER_FC, .name = name_, .out = width, .init_std = std }
#define ATTN(name_, h)                                                                             \
    { .kind = LAYER_ATTENTION, .name = name_, .heads = h }
#define GELU(name_)                                                                                \
    { .kind = LAYER_GELU, .name = name_ }
#define ADD(name_, in)                                                                             \
    { .kind = LAYER_ADD, .name = name_, .inputs = in }
#define LM_HEAD(name_, table)                                                                      \
    { .kind = LAYER_LM_HEAD, .name = name_, .tied = table }

/* Block P of a model of width C, H heads and NL blocks, reading the residual stream `in`; its
 * output is P ".add2". */
#define BLOCK(P, in, C, H, NL)                                                                     \
    LN(P ".ln_1", in), PROJ(P ".attn.c_attn", 3 * (C), 0.02f), ATTN(P ".attn", H),                 \
        PROJ(P ".attn.c_proj", C, RESID_STD(NL)), ADD(P ".add1", P ".attn.c_proj," in),            \
        LN(P ".ln_2", P ".add1"), PROJ(P ".mlp.c_fc", 4 * (C), 0.02f), GELU(P ".mlp.gelu"),        \
        PROJ(P ".mlp.c_proj", C, RESID_STD(NL)), ADD(P ".add2", P ".mlp.c_proj," P ".add1")
#define RESID_STD(NL) (0.02f / SQRT2N(NL))
#define SQRT2N(NL)    ((NL) == 6 ? 3.4641016f : (NL) == 12 ? 4.8989795f : 6.9282032f) /* 2 x NL */

#define MODEL_LM(name_, about_, ctx, voc, rows_)                                                   \
    .name = name_, .about = about_, .in_c = 1, .in_h = 1, .in_w = ctx, .classes = voc,             \
    .nlayers = COUNT(rows_), .layers = rows_, .vocab = voc, .adamw_default = 1

/* ---- GPT-2 small ----------------------------------------------------------------------------- */

#define G2(P, in) BLOCK(P, in, 768, 12, 12)
static const LayerDesc GPT2[] = {
    TOKPOS("wte", 50257, 768, 1024), /* [seq,1,768] */
    G2("h.0", "wte"),
    G2("h.1", "h.0.add2"),
    G2("h.2", "h.1.add2"),
    G2("h.3", "h.2.add2"),
    G2("h.4", "h.3.add2"),
    G2("h.5", "h.4.add2"),
    G2("h.6", "h.5.add2"),
    G2("h.7", "h.6.add2"),
    G2("h.8", "h.7.add2"),
    G2("h.9", "h.8.add2"),
    G2("h.10", "h.9.add2"),
    G2("h.11", "h.10.add2"),
    LN("ln_f", "h.11.add2"),   /* */
    LM_HEAD("lm_head", "wte"), /* [seq,1,50257]: logits of the next token */
};
const ModelDesc model_gpt2 = {
    MODEL_LM("gpt2", "GPT-2 small (12 x 768, 12 heads, context 1024)", 1024, 50257, GPT2)};

/* ---- GPT-2 medium ---------------------------------------------------------------------------- */

#define G2M(P, in) BLOCK(P, in, 1024, 16, 24)
static const LayerDesc GPT2_MEDIUM[] = {
    TOKPOS("wte", 50257, 1024, 1024), G2M("h.0", "wte"),        G2M("h.1", "h.0.add2"),
    G2M("h.2", "h.1.add2"),           G2M("h.3", "h.2.add2"),   G2M("h.4", "h.3.add2"),
    G2M("h.5", "h.4.add2"),           G2M("h.6", "h.5.add2"),   G2M("h.7", "h.6.add2"),
    G2M("h.8", "h.7.add2"),           G2M("h.9", "h.8.add2"),   G2M("h.10", "h.9.add2"),
    G2M("h.11", "h.10.add2"),         G2M("h.12", "h.11.add2"), G2M("h.13", "h.12.add2"),
    G2M("h.14", "h.13.add2"),         G2M("h.15", "h.14.add2"), G2M("h.16", "h.15.add2"),
    G2M("h.17", "h.16.add2"),         G2M("h.18", "h.17.add2"), G2M("h.19", "h.18.add2"),
    G2M("h.20", "h.19.add2"),         G2M("h.21", "h.20.add2"), G2M("h.22", "h.21.add2"),
    G2M("h.23", "h.22.add2"),         LN("ln_f", "h.23.add2"),  LM_HEAD("lm_head", "wte"),
};
const ModelDesc model_gpt2_medium = {MODEL_LM(
    "gpt2-medium", "GPT-2 medium (24 x 1024, 16 heads, context 1024)", 1024, 50257, GPT2_MEDIUM)};

/* ---- nanoGPT's character model, over bytes --------------------------------------------------- */

#define NG(P, in) BLOCK(P, in, 384, 6, 6)
static const LayerDesc NANOGPT_CHAR[] = {
    TOKPOS("wte", 256, 384, 256), NG("h.0", "wte"),       NG("h.1", "h.0.add2"),
    NG("h.2", "h.1.add2"),        NG("h.3", "h.2.add2"),  NG("h.4", "h.3.add2"),
    NG("h.5", "h.4.add2"),        LN("ln_f", "h.5.add2"), LM_HEAD("lm_head", "wte"),
};
const ModelDesc model_nanogpt_char = {
    MODEL_LM("nanogpt-char", "nanoGPT's character model (6 x 384, 6 heads, context 256, bytes)",
             256, 256, NANOGPT_CHAR)};
