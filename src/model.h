/* model.h - networks defined as data, and the runtime that trains them on a backend.
 *
 * A ModelDesc is a list of LayerDesc rows (src/models.c). model_build() infers every layer's
 * shape from the data set's input, lays all parameters out in ONE contiguous buffer (and the
 * gradients and momentum in two more of the same layout), so that an exchange is one buffer. */
#ifndef DTBENCH_MODEL_H
#define DTBENCH_MODEL_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { LAYER_CONV, LAYER_MAXPOOL, LAYER_FC, LAYER_RELU } LayerKind;

/* out: channels (conv) or features (fc); 0 on the last fc = the number of classes. */
typedef struct {
    LayerKind kind;
    const char *name;
    int out;
    int k, stride, pad;
} LayerDesc;

typedef struct ModelDesc {
    const char *name;
    const char *about;
    int in_c, in_h, in_w; /* native input (used with --dataset synthetic) */
    int classes;          /* native number of classes */
    int nlayers;
    const LayerDesc *layers;
} ModelDesc;

typedef struct {
    LayerDesc d;
    int in_c, in_h, in_w;         /* per-sample input  [c,h,w] */
    int out_c, out_h, out_w;      /* per-sample output [c,h,w] */
    size_t in_size, out_size;     /* elements per sample */
    size_t w_off, b_off, nparams; /* into the parameter buffer */
    double flops;                 /* forward FLOPs per sample */
    float *y, *dy;                /* [batch, out_size] on the device */
    int32_t *argmax;              /* maxpool: [batch, out_size] */
} Layer;

typedef struct {
    const ModelDesc *desc;
    int nlayers;
    Layer *layers;
    int batch; /* per-rank batch the buffers are sized for */
    int in_c, in_h, in_w, classes;
    size_t nparams;
    const BackendOps *be;
    BackendCtx *ctx;
    float *params, *grads, *momentum; /* [nparams] each, same layout */
    float *x;                         /* [batch, in_c*in_h*in_w] input batch */
    int32_t *labels;                  /* [batch] */
    float *stats;                     /* [2] mean loss, correct predictions (softmax_xent) */
    void *work;                       /* conv scratch */
    size_t work_bytes;
} Model;

/* Infers shapes and sizes only (no allocation; be may be NULL): for --dry-run and tests. */
void model_plan(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch);
/* model_plan + allocation on the backend + seeded parameter initialisation. */
void model_build(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch,
                 const BackendOps *be, BackendCtx *ctx, uint64_t seed);
void model_free(Model *m);

/* Forward pass on the first n <= batch samples of m->x / m->labels, then the loss.
 * Returns the mean loss; *correct gets the number of right predictions. When train is set,
 * the loss gradient is kept for model_backward. Waits for the result: model_forward_queue
 * followed by model_read_loss. */
float model_forward(Model *m, int n, int train, int *correct);
/* The same forward pass without waiting for it: on a device the kernels are only queued. */
void model_forward_queue(Model *m, int n, int train);
/* The loss (returned) and correct predictions of the last forward pass; waits for it. */
float model_read_loss(Model *m, int *correct);
/* Backward pass of the last training forward: fills m->grads (overwritten, not accumulated). */
void model_backward(Model *m, int n);
/* The same, calling ready(user, first) after each layer's parameter gradients were queued:
 * grads[first .. nparams) are then final (layers run last to first, and the parameter buffer
 * holds them in forward order). For exchanges that overlap with the backward pass. */
typedef void (*GradsReadyFn)(void *user, size_t first);
void model_backward_hook(Model *m, int n, GradsReadyFn ready, void *user);
/* SGD with momentum on all parameters. */
void model_sgd(Model *m, float lr, float momentum, float weight_decay);

/* FNV-1a hash of the parameters' bytes: equal on two ranks iff their parameters are identical. */
uint64_t model_param_hash(const Model *m);
/* Writes the parameters: a 64-byte header ("DTBMODEL", u64 version 1, u64 nparams, model name)
 * then nparams little-endian float32. Returns 0, or -1 with errno set. */
int model_save(const Model *m, const char *path);

/* Layer table for --dry-run: name, output shape, parameters, forward FLOPs per sample. */
void model_print(const Model *m, FILE *out);
double model_flops_per_sample(const Model *m); /* forward */

#endif
