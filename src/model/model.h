/* model.h - networks defined as data, and the runtime that trains them on a backend.
 *
 * A ModelDesc is a list of LayerDesc rows (src/model/models.c) in an order where every layer comes
 * after the layers it reads. A row names its inputs (default: the previous row), so branching
 * networks (GoogLeNet's inception modules, ResNet's residual blocks) are data too. model_plan()
 * infers every layer's shape from the data set's input and lays all parameters out in ONE
 * contiguous buffer (and the gradients and momentum in two more of the same layout), so that an
 * exchange is one buffer; non-trained state (batch-norm running statistics) lives in one more,
 * `buffers`.
 *
 * A Model may hold only a consecutive range of layers [first, last): one stage of a pipeline
 * (src/run/pipeline.c). Its parameters are then the matching contiguous slice of the whole layout.
 * Activations are kept for `batch` samples; forward and backward run on any slice of at most
 * `chunk` samples (a micro-batch), so a pipeline keeps every micro-batch's activations until its
 * backward. Output gradients live only during one micro-batch's backward pass: except for the
 * part's last layer (whose gradients of every micro-batch arrive before the backward starts),
 * they share a few chunk-sized buffers, assigned at build time by liveness. */
#ifndef DTBENCH_MODEL_H
#define DTBENCH_MODEL_H

#include "backend.h"
#include "optimizer.h" /* defines: DecayRange */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
    LAYER_CONV,
    LAYER_MAXPOOL,
    LAYER_FC,
    LAYER_RELU,
    LAYER_LRN,
    LAYER_BATCHNORM,
    LAYER_AVGPOOL,
    LAYER_GLOBAL_AVGPOOL,
    LAYER_CONCAT,
    LAYER_ADD,
    LAYER_DROPOUT,
    LAYER_EMBEDDING,
    LAYER_LSTM,
    LAYER_TOKPOS,
    LAYER_LAYERNORM,
    LAYER_GELU,
    LAYER_ATTENTION,
    LAYER_LM_HEAD,
    LAYER_KINDS /* the number of kinds: each has a row in src/model/layer_kinds.c */
} LayerKind;

#define LAYER_MAX_INPUTS 4

/* One row of a model. The first six fields are positional (LeNet, FCN); the rest are named. */
typedef struct {
    LayerKind kind;
    const char *name;
    int out;            /* conv: channels; fc: features (0 on the last fc = the number of
                           classes); lstm: hidden size; embedding: vector size */
    int k, stride, pad; /* conv and pooling windows; lrn: k = window in channels */
    /* comma-separated names of earlier rows read by this one (concat: in order; add: two);
     * NULL = the previous row (the model input for row 0) */
    const char *inputs;
    int no_bias;             /* conv, fc: no bias (a batch norm follows) */
    float rate;              /* dropout: probability of dropping an element */
    float alpha, beta, bias; /* lrn: y = x / (bias + alpha/k * sum of x^2 over k channels)^beta */
    int vocab;               /* embedding, tokpos: vocabulary size */
    /* transformers (src/model/layer_transformer.c) */
    int positions;    /* tokpos: the context (rows of the position table) */
    int heads;        /* attention: heads (out / heads = head size) */
    const char *tied; /* lm_head: the tokpos row whose token table it multiplies by */
    float init_std;   /* fc, tokpos: weights from normal(0, init_std), zero bias (0: the
                         kind's default) */
} LayerDesc;

typedef struct ModelDesc {
    const char *name;
    const char *about;
    int in_c, in_h, in_w; /* native input (used with --dataset synthetic) */
    int classes;          /* native number of classes */
    int nlayers;
    const LayerDesc *layers;
    int vocab; /* > 0: a language model: the input is in_w token ids in [0, vocab), with one label
                  (the next token) per position, and the loss is the mean over positions */
    const struct ModelDesc *small; /* variant used instead for images of at most 32x32 pixels
                                      (CIFAR-10, MNIST), NULL if none */
    int adamw_default; /* the optimizer of --optimizer auto: 1 AdamW (the transformers), 0 SGD */
} ModelDesc;

typedef struct {
    LayerDesc d;
    int ninputs;
    int inputs[LAYER_MAX_INPUTS]; /* producing rows; -1 = the model's input */
    int last_consumer;            /* highest row reading this output, -1 if none (the logits) */
    int consumers;                /* rows reading this output */
    int in_place;                 /* a ReLU working in its producer's y and dy (model_build_part) */
    /* Fusion (src/model/model_fuse.c): a batch norm that also runs the ReLU after it (fuse_relu),
     * or the residual add and the ReLU after it (fuse_add, fuse_relu), through the backend's fused
     * operations; a convolution whose forward also runs the ReLU after it (fuse_relu; that
     * ReLU's backward runs unfused); -1: none. exec_as: the row run at this layer's place in the
     * forward and backward order: itself, another (the add's place runs its batch norm, whose
     * other input is ready only then) or -1 (a row fused into another). fwd_fused: a ReLU whose
     * forward its convolution runs (skipped forward, run backward). */
    int fuse_relu, fuse_add, exec_as, fwd_fused;
    int dy_full; /* dy holds the whole batch (the part's last layer); else one chunk, shared */
    /* Tied weights (a language model's head and its token embedding): the row whose weights this
     * one computes with (tied), the row that computes with this one's (tied_by); -1: none. Both
     * sit in the same part (partition.c never cuts between them). */
    int tied, tied_by;
    /* Tensor parallelism (ModelTensor): TP_COLUMN, TP_LOCAL or TP_ROW when this row is split
     * across the tensor group, with tp_groups the blocks its columns form (3 for a QKV
     * projection: q, k, v); TP_NONE: replicated (and every row without a group). */
    int tp_role, tp_groups;
    int in_c, in_h, in_w;     /* per-sample input [c,h,w] (the first input) */
    int out_c, out_h, out_w;  /* per-sample output [c,h,w]; a sequence is [seq, 1, features] */
    int seq;                  /* > 0: the output is a sequence of seq positions */
    size_t in_size, out_size; /* elements per sample */
    size_t w_off, nw, b_off, nb, nparams; /* weights then bias, into the parameter buffer */
    size_t buf_off, nbuf; /* batch norm: running mean and variance, into `buffers` */
    double flops;         /* forward FLOPs per sample */
    /* backward FLOPs per sample (--profile-layers' roofline, model_layer_cost): those of the
     * parameter gradients, and those only the input gradients need (none when the layer writes
     * no input gradient: it reads the data) */
    double flops_dw, flops_dx;
    /* on the backend, for the layers this Model holds */
    float *y;              /* [batch, out_size] */
    float *dy;             /* [batch, out_size] if dy_full, else [chunk, out_size] */
    int32_t *argmax;       /* max pooling: [batch, out_size] */
    uint8_t *mask;         /* dropout: [batch, out_size] */
    float *aux;            /* lrn: s [batch, out_size]; batch norm: [slots][2, c] batch mean
                              and 1/std; lstm: [slots] reserve of aux_slot_bytes */
    size_t aux_slot_bytes; /* batch norm, lstm */
} Layer;

/* Tensor parallelism (Megatron-LM, Shoeybi et al. 2019; src/model/model_tensor.c): a group of
 * `size` ranks splits each transformer block's matrices. The QKV projection and the MLP's first
 * fc are column-parallel (rank r holds the output columns of its heads H/size, resp. 4C/size),
 * attention and GELU run on the local columns, the output projections are row-parallel (input
 * C/size, resp. 4C/size; the bias is added by rank 0 only). `allreduce` sums a buffer over the
 * group: called by the model after a row-parallel forward (its output, Megatron's g) and after a
 * column-parallel backward (its input gradient, f). Embeddings, layer norms, residual adds and
 * the tied head are replicated: their gradients are the same on every rank of the group. */
typedef enum { TP_NONE, TP_COLUMN, TP_LOCAL, TP_ROW } TensorRole;
typedef void (*TensorAllreduceFn)(void *user, float *buf, size_t count);
typedef struct {
    int size, rank; /* size 0 or 1: no tensor parallelism */
    TensorAllreduceFn allreduce;
    void *user;
    size_t whole_params; /* the unsplit model's parameters (model_plan_tensor sets it) */
} ModelTensor;

typedef struct {
    const ModelDesc *desc;
    int nlayers;
    Layer *layers;
    int batch; /* samples the activation buffers hold (per rank, per replica) */
    int chunk; /* most samples in one forward/backward call (batch / micro-batches) */
    int slots; /* batch / chunk: micro-batches whose activations are kept at once */
    int in_c, in_h, in_w, classes;
    int label_size;      /* labels per sample: 1, or the sequence length of a language model */
    size_t total_params; /* the whole model's parameters */
    size_t total_buffers;
    char problem[200]; /* model_plan: why the input does not fit the model ("" when it does) */

    /* The part this Model holds: layers [first, last) (all of them outside model parallelism).
     * Its parameters are [param_base, param_base + nparams) of the whole layout; the layers'
     * w_off / b_off / buf_off are relative to this part's buffers. */
    int first, last;
    size_t nparams, param_base;
    size_t nbuffers, buf_base;
    size_t x_size; /* per-sample size of this part's input (the data, or layer first-1's output) */

    const BackendOps *be;
    BackendCtx *ctx;
    float *params, *grads; /* [nparams] each, same layout */
    /* [nparams] each: the optimizer's state (model_use_optimizer), NULL until then, and for good
     * in a run whose exchange keeps the state of its shard itself (ExchangeOps.shards_optimizer):
     * SGD's momentum (AdamW's first moment) and AdamW's second moment */
    float *momentum, *variance;
    /* A table two pipeline stages share (a language model's token table, which its head on the
     * last stage multiplies by; src/run/pipeline_tied.c keeps them equal). On the stage of the
     * head: tied_w, its copy of the table, and tied_grad, the head's gradient of it summed over
     * the iteration's micro-batches, for the table's stage. On the table's stage: tied_grad, that
     * gradient as received, which the table's backward adds once when tied_pending is set. NULL,
     * 0: none (one stage holds both, or the model has no tied rows). */
    float *tied_w, *tied_grad;
    size_t tied_count; /* floats of the table */
    int tied_pending;
    float *buffers;                   /* [nbuffers] */
    float *x;                         /* [batch, x_size] the part's input (fp32 NCHW) */
    /* The backend's activation format (backend.h's ActFormat; NCHW fp32 unless it declares
     * another) and its bytes per value; with another format the input converted into it: */
    ActFormat act;
    size_t act_bytes;
    float *x_act;    /* [batch, x_size] in the activation format, or NULL (x is read) */
    float *dx;       /* [batch, x_size] gradient of the input (not for data) */
    int32_t *labels; /* [batch * label_size] (the part holding the last layer) */
    float *stats;    /* [2] mean loss, correct predictions (softmax_xent) */
    void *work;      /* conv / lstm scratch */
    size_t work_bytes;
    float *grad_scratch; /* one layer's gradients, when micro-batches accumulate */
    float *dy_scratch;   /* [chunk * out_size] of an output read by several layers */
    float **dy_pool;     /* the shared output-gradient buffers, [chunk * largest out_size] */
    int ndy_pool;
    uint64_t seed;          /* initialisation and dropout masks */
    uint64_t sample_origin; /* global index of sample 0 of the current batch (dropout masks) */
    uint64_t *origin;       /* [1] sample_origin in device memory, which dropout kernels read
                             * when they run (a replayed step reads its own); NULL: no dropout,
                             * or a host backend (the kernels get the value) */
    float loss_scale; /* --precision fp16: the loss gradient is multiplied by it (0 or 1: none) */
    float *loss_scale_dev; /* [1] loss_scale in device memory, which the loss gradient's kernel
                            * reads when it runs (one step graph for every scale); NULL: none
                            * set yet, or a backend without scale_by (the value is passed) */
    struct LayerObserver *observer; /* model_set_observer; NULL: none */
    ModelTensor tp; /* tensor parallelism (size <= 1: none); total_params then counts the
                       rank's slices */
} Model;

/* Per-layer observation, for the layer-by-layer comparison (tests/layer_compare.c) and the
 * per-layer profile (--profile-layers): when set, `fn` is called just before and just after each
 * layer's forward and backward is queued on the backend (nothing is synchronised: an observer
 * that reads a buffer downloads it, which waits for it). Unset, it costs one pointer test per
 * layer. The buffers of an *_END event are the backend's, valid until the next call, in the
 * model's activation format (m->act): read them with model_act_download.
 * Fused rows (src/model/model_fuse.c): a row that runs others fused into it reports once per call,
 * under its own index, with `last` the last row it ran in that direction (its output is that
 * row's: y, and the gradient its backward reads is that row's dy); the rows fused into it report
 * nothing in that direction (a ReLU fused into its convolution's forward still reports its
 * backward, and the convolution's backward events are its own: last = layer). A batch
 * norm fused with a residual add also reports, at BACKWARD_END, the gradient of the add's other
 * input (dz). So an observer compares a fused group's output with the unfused model's output of
 * row `last`, and its input gradients with those of the rows that read the group's inputs. */
typedef enum {
    LAYER_FORWARD_BEGIN,
    LAYER_FORWARD_END,
    LAYER_BACKWARD_BEGIN,
    LAYER_BACKWARD_END
} LayerEventKind;
typedef struct {
    LayerEventKind kind;
    int layer;       /* index into m->layers: the row that ran */
    int last;        /* the last row it ran: `layer`, or the end of its fused group */
    int s0, n;       /* the call's samples */
    const float *y;  /* FORWARD_END: the output [n, out_size] */
    const float *dw; /* BACKWARD_END: the parameter gradients [nparams] (NULL: none) */
    /* BACKWARD_END: the gradient of each input as summed so far over its readers (the producer's
     * dy, [n, its out_size] = dx_count floats; NULL: the data, no gradient) */
    const float *dx[LAYER_MAX_INPUTS];
    size_t dx_count[LAYER_MAX_INPUTS];
    /* BACKWARD_END of a batch norm fused with a residual add: the gradient of the add's other
     * input, input dz_input of row dz_layer (NULL: none, or the data) */
    const float *dz;
    size_t dz_count;
    int dz_layer, dz_input;
} LayerEvent;
typedef void (*LayerObserverFn)(void *user, const Model *m, const LayerEvent *e);
typedef struct LayerObserver {
    LayerObserverFn fn;
    void *user;
} LayerObserver;
/* Sets (fn non-NULL) or clears the observer; `o` must outlive its use. */
void model_set_observer(Model *m, LayerObserver *o);
/* n samples of the output of row `producer` (-1: the model input, fp32 NCHW) held at dev on the
 * backend in the model's activation format (its output, or its gradient), as fp32 NCHW values in
 * host[n * out_size]; and back (what an observer writes into the model). The logits are fp32 in
 * every format. src/model/model_format.c. */
void model_act_download(const Model *m, int producer, const float *dev, int n, float *host);
void model_act_upload(const Model *m, int producer, float *dev, const float *host, int n);

/* Why model part m (planned) cannot store its activations in format f, with its parts [first,
 * last) (NULL: it can): a pipeline stage, a last layer that is not fully connected, embedding
 * and LSTM layers (fp32 NCHW sequences only). */
const char *model_format_problem(const Model *m, ActFormat f);
/* The activation layout to ask backend `be` for (BackendConfig.act_layout) to run model part m
 * (planned) under `precision`, as --act-layout `choice` says (auto: NHWC where the backend
 * stores it, act_format_for, and the model can run it, else NCHW; nchw; nhwc): 0 and
 * *layout, *f (the format the backend will declare), or -1 with the reason in why (an explicit
 * choice the backend or the model cannot run). */
int model_choose_layout(const Model *m, const BackendOps *be, Precision precision,
                        ActLayoutChoice choice, ActLayout *layout, ActFormat *f, char *why,
                        size_t len);

/* Infers shapes and sizes only (no allocation): for --dry-run, splitting and tests. When the input
 * does not fit the model (a layer's output would be empty), m->problem says where. */
void model_plan(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch);
/* model_plan + allocation of the whole model on the backend + seeded parameter initialisation,
 * with SGD's momentum (model_use_optimizer(m, 0)). */
void model_build(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch,
                 const BackendOps *be, BackendCtx *ctx, uint64_t seed);
/* The same for layers [first, last) only, with activations for `batch` samples run in
 * micro-batches of batch / microbatches (which must divide it). Parameters are initialised to the
 * values the whole model would give them. No optimizer state: model_use_optimizer. */
/* Set by the program (or NULL: never): a non-zero return between two allocations or two layers'
 * initialisation leaves the rest of model_build_part undone (the model is then only fit for
 * model_free), for a run that was asked to stop while it sets up: FCN-5's build zeroes and fills
 * 1.4 GB, seconds, where one step is a fraction of a second. */
extern int (*model_interrupted)(void);
void model_build_part(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                      int batch, int microbatches, int first, int last, const BackendOps *be,
                      BackendCtx *ctx, uint64_t seed);
void model_free(Model *m);

/* Tensor parallelism (ModelTensor, src/model/model_tensor.c). model_build_tensor: as
 * model_build_part, as rank tp->rank of a tensor group of tp->size: the split rows hold their
 * slices (initialised as the whole model's, then sliced), and tp->allreduce is called between
 * layers. model_plan_tensor: the same planning only. */
void model_plan_tensor(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                       int batch, const ModelTensor *tp);
void model_build_tensor(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                        int batch, int microbatches, int first, int last, const BackendOps *be,
                        BackendCtx *ctx, uint64_t seed, const ModelTensor *tp);
/* Why the planned whole model `plan` cannot split over a tensor group of n (NULL: it can): no
 * transformer block, or heads / widths n does not divide. */
const char *model_tensor_problem(const Model *plan, int n, char *why, size_t len);
/* The group sizes from 2 to max that plan splits over, comma-separated into list. */
void model_tensor_sizes(const Model *plan, int max, char *list, size_t len);
/* The unsplit parameters of this part's layers (model_save's layout, from layer `first` on) from
 * every group rank's: ranks[r] holds rank r's nparams (m is any rank's part). Returns -1, or the
 * first replicated row whose parameters differ between ranks (they must not). */
int model_tensor_gather(const Model *m, const float *const *ranks, float *whole);
/* The unsplit parameter count of layers [first, last) of m (planned, split or not). */
size_t model_tensor_whole_count(const Model *m, int first, int last);

/* The first backend function this model's layers need that `be` lacks (NULL: none), with the
 * layer in *layer; with micro-batches (> 1), also what accumulating their gradients needs. */
const char *model_missing_op(const Model *m, const BackendOps *be, int microbatches,
                             const char **layer);

/* The first of this Model's layers whose kernels take values that change every step as arguments
 * (layers.h's LK_STEP_ARGUMENTS), NULL if none: a step with one cannot be replayed from a captured
 * graph (src/run/step_graph.c). */
const char *model_step_argument_layer(const Model *m);

/* The model to train on images of [c,h,w]: d, or its small-image variant for inputs of at most
 * 32x32 pixels. */
const ModelDesc *model_for_input(const ModelDesc *d, int c, int h, int w);

/* Dropout masks: sample i of the batch is global sample origin + i (see DropoutShape). On a
 * device, with dropout layers, the value is also queued into device memory (m->origin, ordered
 * before the step's kernels), where their kernels read it: call it outside a captured step. */
void model_set_sample_origin(Model *m, uint64_t origin);

/* fp16's loss scale (m->loss_scale). On a device with scale_by, the value is also queued into
 * device memory (m->loss_scale_dev, ordered before the step's kernels; allocated by the first
 * call: make it before the timed loop), where the loss gradient's kernel reads it, so that a
 * replayed step scales by that step's scale; queued only when it changes. Call it outside a
 * captured step. */
void model_set_loss_scale(Model *m, float scale);

/* Forward pass on the first n <= chunk samples of m->x / m->labels, then the loss.
 * Returns the mean loss; *correct gets the number of right predictions (per position for a
 * language model). When train is set, the loss gradient is kept for model_backward. */
float model_forward(Model *m, int n, int train, int *correct);
/* The same without waiting: the forward pass and loss are queued on the backend, and the loss is
 * read later with model_read_loss (after the update: a GPU step never waits for its loss). */
void model_forward_queue(Model *m, int n, int train);
float model_read_loss(Model *m, int *correct);
/* Backward pass of the last training forward: fills m->grads (overwritten, not accumulated). */
void model_backward(Model *m, int n);
/* The same, calling ready(user, first) after each layer's parameter gradients were queued:
 * grads[first .. nparams) are then final (layers run last to first, and the parameter buffer
 * holds them in forward order). For exchanges that overlap with the backward pass. */
typedef void (*GradsReadyFn)(void *user, size_t first);
void model_backward_hook(Model *m, int n, GradsReadyFn ready, void *user);

/* The same in parts, on samples [s0, s0 + n) of the buffers (n <= chunk), micro-batch `slot`
 * (0 <= slot < slots: batch-norm statistics and LSTM state of that micro-batch):
 *   model_forward_part: this Model's layers (m->x holds the input);
 *   model_loss_part:    the loss of the last layer (only for the part that holds it); with train
 *                       the gradient of the logits, times grad_scale, goes to the last layer's dy;
 *   model_backward_part: from the dy of layer last-1 down to m->dx; accumulate = 0 overwrites
 *                       m->grads, 1 adds to them (the later micro-batches of an iteration). */
void model_forward_part(Model *m, int s0, int n, int slot, int train);
float model_loss_part(Model *m, int s0, int n, int train, float grad_scale, int *correct);
void model_loss_queue(Model *m, int s0, int n, int train, float grad_scale); /* no wait */
void model_backward_part(Model *m, int s0, int n, int slot, int accumulate);
void model_backward_part_hook(Model *m, int s0, int n, int slot, int accumulate, GradsReadyFn ready,
                              void *user);

/* The optimizer (src/model/model_optim.c). SGD with momentum on all parameters this Model holds. */
void model_sgd(Model *m, float lr, float momentum, float weight_decay);
/* Allocates the optimizer's state where not yet allocated, zeroed: m->momentum (SGD's momentum,
 * AdamW's first moment) and, with adamw, m->variance (AdamW's second moment); after
 * model_build_part, for a run whose driver applies the update (model_sgd, model_adamw). */
void model_use_optimizer(Model *m, int adamw);
/* model_use_optimizer(m, 1). */
void model_use_adamw(Model *m);
/* AdamW step a on all parameters this Model holds (needs model_use_adamw): a->weight_decay on the
 * parameters model_decay_ranges says decay, none on the others; one adamw_update per stretch. */
void model_adamw(Model *m, const AdamWStep *a);
/* The parameters of this Model (offsets into its buffers, [0, nparams) covered in order) in
 * maximal runs of the same weight decay: the rows' kinds say which decay (layers.h's
 * LK_DECAY_WEIGHTS and LK_DECAY_BIAS: the weights of convolutions, fully connected, embedding and
 * LSTM layers; no bias, no normalisation's gain or shift). Writes the first `max` to out (NULL
 * when max is 0) and returns how many there are. */
int model_decay_ranges(const Model *m, DecayRange *out, int max);
/* fp16's loss scaling, after the exchange: 1 if every gradient is finite, and then the gradients
 * are divided by m->loss_scale (unscaled for the optimizer); 0 (overflow) leaves them. */
int model_unscale_grads(Model *m);

/* FNV-1a hash of the parameters' bytes: equal on two ranks iff their parameters are identical. */
uint64_t model_param_hash(const Model *m);
/* Rank 0: writes the parameters to the file --save-model claimed (path: its name), through the
 * one write path of the results (src/results/model_save.c, outputs.h; the program's, not the
 * model's test programs'): a 64-byte header ("DTBMODEL", u64 version 1, u64 nparams, model
 * name) then nparams little-endian float32. Returns 0; a failure is reported there (one line,
 * exit status 1, no file left). */
int model_save(const Model *m, const char *path);
/* The same from a host array holding all total_params parameters (a pipeline gathers them). */
int model_save_params(const Model *m, const float *host_params, const char *path);

/* The name of layer i's kind ("conv", "batchnorm", ...), as the layer table prints it. */
const char *model_layer_kind_name(const Model *m, int i);
/* Layer table for --dry-run: name, output shape, parameters, forward FLOPs per sample. */
void model_print(const Model *m, FILE *out);
double model_flops_per_sample(const Model *m); /* forward, whole model */
/* Training FLOPs per sample of the whole model, as a step computes them: each row's forward, its
 * parameter gradients (flops_dw) and its input gradients (flops_dx) where it writes any (not for
 * a row reading the data). The root attribute train_flops_per_sample (MFU), --dry-run's line. */
double model_train_flops_per_sample(const Model *m);

/* What row i of built part m (first <= i < last) computes and moves in one call on n samples, as
 * it runs (src/model/model_roofline.c): FLOPs, and the least bytes a forward and a backward must
 * move (inputs read, outputs and input gradients written, parameters read and their gradients
 * written, in m's activation format; parameters and gradients fp32). As the profile places its
 * times (src/results/profile.h): a row that runs others fused into it holds the group's
 * amounts, less the tensors that stay inside the group; a row fused into another holds 0 in that
 * direction. */
typedef struct {
    double forward_flop, backward_flop, forward_bytes, backward_bytes;
} LayerCost;
void model_layer_cost(const Model *m, int i, int n, LayerCost *c);

#endif
