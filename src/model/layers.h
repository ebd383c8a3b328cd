/* layers.h - the table of layer kinds: one row (LayerKindOps) per LayerKind, which
 * src/model/model.c interprets. A row says how a layer of that kind is planned (shape, parameters,
 * FLOPs), what it allocates, how its parameters start, how it runs forward and backward on the
 * backend, which in-place rules apply to it, and which optional BackendOps functions it needs (by
 * offset, so model_missing_op is generic). Rows live in src/model/layer_*.c by concern;
 * src/model/layer_kinds.c lists them. Adding a layer kind: a LayerKind value (model.h), a row in a
 * layer_*.c file, its entry in layer_kinds.c, and its kernels behind BackendOps
 * (kernels/common/backend.h). Internal to src/model/: the rest of the program uses model.h. */
#ifndef DTBENCH_LAYERS_H
#define DTBENCH_LAYERS_H

#include "model.h"

#include <stddef.h>

/* One optional backend function a layer kind calls: its offset in BackendOps and its name. */
typedef struct {
    size_t offset; /* 0 ends a list (no function pointer sits at offset 0: `name` does) */
    const char *name;
} LayerOp;
#define LAYER_OP(fn)                                                                               \
    { offsetof(BackendOps, fn), #fn }

/* One forward or backward call of layer i on samples [s0, s0 + n), micro-batch `slot`. */
typedef struct {
    Model *m;
    Layer *L;
    int i, s0, n, slot, train;
    int accumulate;       /* backward: this micro-batch's parameter gradients add to the others' */
    const float *x;       /* input 0 */
    const float *w, *b;   /* parameters (b NULL: no bias) */
    float *y;             /* output */
    const float *dy;      /* backward: the output gradient */
    float *dw, *db;       /* backward: where the parameter gradients go (NULL: none) */
    float *dx;            /* backward: where input 0's gradient goes (NULL: none wanted) */
    float *const *dest;   /* backward: per input, where its gradient is written ... */
    float *const *target; /* ... and the producer's dy it belongs to (layer_finish_input_grad) */
} LayerStep;

/* Row flags. */
enum {
    LK_TAKES_SEQUENCE = 1 << 0,  /* may read a sequence [seq, 1, features] */
    LK_READS_TOKENS = 1 << 1,    /* may (must) read a language model's token ids */
    LK_OUTPUT_REUSABLE = 1 << 2, /* its backward never reads its own output, so an in-place
                                    consumer may overwrite it (and its dy) */
    LK_IN_PLACE = 1 << 3,        /* runs in its producer's y and dy when that one is
                                    LK_OUTPUT_REUSABLE and read by nothing else */
    LK_OWN_INPUT_GRADS = 1 << 4, /* backward finishes every input's gradient itself (several
                                    inputs); otherwise model.c finishes input 0's */
    LK_STEP_ARGUMENTS = 1 << 5,  /* passes values that change every step to its kernels as
                                    arguments: a graph captured once would replay stale ones
                                    (src/run/step_graph.c). None in the zoo: dropout reads the
                                    batch's first sample from memory (model_set_sample_origin) */
    /* What its backward reads besides dy, and how its forward reads its parameters, for the least
     * traffic of --profile-layers' roofline (src/model/model_roofline.c); the backend's own state
     * (argmax, masks, LRN's scale, saved statistics, the LSTM's reserve) is not counted. */
    LK_BWD_READS_INPUT = 1 << 6,  /* its inputs' values (a weight gradient, a normalisation) */
    LK_BWD_READS_OUTPUT = 1 << 7, /* its own output (ReLU's mask, LRN, LSTM) */
    LK_GATHERS_WEIGHTS = 1 << 8,  /* forward reads only the parameter rows its input selects
                                     (an embedding: one row per token), not all of them */
    /* AdamW's decoupled weight decay (nanoGPT's rule: tensors of 2 or more dimensions decay,
     * biases and normalisation gains do not; model_decay_ranges): */
    LK_DECAY_WEIGHTS = 1 << 9, /* its weights w decay (a matrix or filter bank) */
    LK_DECAY_BIAS = 1 << 10,   /* its b decays too (a second matrix: wpe beside wte) */
    LK_DY_IN_Y = 1 << 11, /* the logits' gradient overwrites them (softmax_xent in place): a
                             language model over a large vocabulary holds one copy */
};

typedef struct LayerKindOps {
    const char *name; /* in model_print and messages */
    unsigned flags;
    /* Output shape (out_c/h/w, seq: preset to the input's, shape-preserving), nw, nb, nbuf,
     * flops, flops_dw and flops_dx of L, whose first input is P (NULL: the model input, of
     * m->in_c/h/w). Reports a model that does not fit with layer_problem. */
    void (*plan)(Model *m, Layer *L, const Layer *P);
    /* Initial weights w[nw] and bias b[nb] from the counter-based key (NULL: no parameters). */
    void (*init)(const Layer *L, uint64_t key, float *w, float *b);
    /* Backend memory beyond y and dy (argmax, masks, saved statistics, workspace); NULL: none. */
    void (*alloc)(Model *m, Layer *L);
    /* Scratch in the shared m->work (layer_need_work) that depends on the backend's choice of
     * algorithm, asked once every other buffer of the model exists, so that a backend choosing
     * within the free device memory (CUDA's convolutions) sees what is left; NULL: none. */
    void (*plan_work)(Model *m, Layer *L);
    void (*forward)(const LayerStep *s);
    void (*backward)(const LayerStep *s);
    const LayerOp *needs; /* optional backend functions it calls, {0} ended */
} LayerKindOps;

/* The row of a kind (src/model/layer_kinds.c). */
const LayerKindOps *layer_kind(LayerKind kind);

/* Tensor parallelism (src/model/model_tensor.c; ModelTensor in model.h). */
/* Marks the split rows (tp_role, tp_groups) of m, whose inputs are resolved, and narrows their
 * descriptions (a column-parallel fc's outputs, an attention's heads) to one rank's share. */
void model_tensor_roles(Model *m);
/* Split row L as the whole model plans it (its parameter counts and widths unsplit). */
Layer model_tensor_whole(const Model *m, const Layer *L);
/* Between the whole row's parameters (whole: weights then bias, as model_tensor_whole counts
 * them) and rank r's slice (part: L's): to_part 1 copies the slice out of whole, 0 into it. */
void model_tensor_copy(const Model *m, const Layer *L, int r, float *whole, float *part,
                       int to_part);

/* ---- for the rows: services of the interpreter (src/model/layer_services.c)
 * --------------------------
 */

/* Records why the input does not fit the model (the first problem only). */
void layer_problem(Model *m, const Layer *L, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A mistake in a model table (not in the input): reports and aborts. */
_Noreturn void layer_bad_table(const ModelDesc *d, const char *row, const char *what);
/* Backend memory of `bytes` (zeroed), or a report and abort. */
void *layer_alloc(Model *m, size_t bytes);
/* Makes the shared scratch m->work at least `bytes`. */
void layer_need_work(Model *m, size_t bytes);
/* Input k of L: per-sample size, and its values on samples from s0. */
size_t layer_input_size(const Model *m, const Layer *L, int k);
const float *layer_input_y(const Model *m, const Layer *L, int k, int s0);
/* L's output (and output gradient) values: bytes per value (the activation format's, fp32 for
 * the logits), and the output of samples from s0. Activations are `float *` whatever they hold:
 * offsets go through these. */
size_t layer_out_bytes(const Model *m, const Layer *L);
float *layer_y_at(const Model *m, const Layer *L, int s0);
/* base + `values` activation values of `bytes` each. */
static inline float *layer_act_offset(float *base, size_t values, size_t bytes) {
    return (float *)((char *)base + values * bytes);
}
/* 1 when L is the model's last layer, whose output is the logits (fp32 in every format). */
int layer_is_logits(const Model *m, const Layer *L);
/* Output gradient of L on samples from s0, and where the gradient of input k of L goes (NULL:
 * the data). */
float *layer_dy_at(const Model *m, const Layer *L, int s0);
float *layer_input_grad(const Model *m, const Layer *L, int k, int s0);
/* For a row that runs others fused into it (Layer.fuse_relu, src/model/model_fuse.c): the output
 * the fused rows end in (the ReLU's) and its gradient; the residual add's other input (NULL: no
 * add) and where its gradient goes (the fusion is chosen only where the add is the last reader of
 * that input, so the gradient goes there directly; NULL: the data). */
float *layer_fused_y(const LayerStep *t);
float *layer_fused_dy(const LayerStep *t);
const float *layer_fused_z(const LayerStep *t);
float *layer_fused_dz(const LayerStep *t);
/* Chooses the fusions of this Model's rows (model_build_part, once in-place rows are known). */
void model_choose_fusions(Model *m);
/* The observer's event `kind` of the call s (src/model/model_observe.c; m->observer is set). */
void model_observe(const LayerStep *s, LayerEventKind kind);
/* When the model is built (src/model/model_format.c): a format the backend declared that the model
 * cannot run is reported (abort: the resolver chose it); the backend's weights_layout told where
 * every convolution's filter and bias lie. */
void model_check_format(const Model *m);
void model_declare_weights(const Model *m);
/* 1 when row k of this Model is last read by row i through its input k (its gradient then goes
 * straight to the producer). */
int layer_last_reader(const Model *m, int i, int k);
/* After a backward wrote input k's gradient to s->dest[k] over `count` values: adds it to the
 * producer's gradient when it went to shared scratch. */
void layer_finish_input_grad(const LayerStep *s, int k, size_t count);
/* Output size of a window of k with padding: 0 when the window does not fit. */
int layer_window_out(int in, int k, int stride, int pad);
/* Uniform(-bound, bound) weights from the key, zero bias (conv, fc, embedding, lstm). */
void layer_init_uniform(const Layer *L, uint64_t key, float bound, float *w, float *b);
/* normal(0, std) values w[n] from the key; and weights from it, zero bias (GPT-2's rows) */
void layer_fill_normal(float *w, size_t n, uint64_t key, float std);
void layer_init_normal(const Layer *L, uint64_t key, float std, float *w, float *b);

/* ---- the rows, by concern ------------------------------------------------------------------- */
extern const LayerKindOps layer_conv, layer_fc;                         /* layer_gemm.c */
extern const LayerKindOps layer_maxpool, layer_avgpool, layer_gavgpool; /* layer_pool.c */
extern const LayerKindOps layer_lrn, layer_batchnorm;                   /* layer_norm.c */
extern const LayerKindOps layer_embedding, layer_lstm;                  /* layer_sequence.c */
extern const LayerKindOps layer_relu, layer_dropout;                    /* layer_elementwise.c */
extern const LayerKindOps layer_concat, layer_add;                      /* layer_join.c */
extern const LayerKindOps layer_tokpos, layer_layernorm, layer_gelu, layer_attention,
    layer_lm_head; /* layer_transformer.c */

#endif
