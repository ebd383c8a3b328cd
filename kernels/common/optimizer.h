/* optimizer.h - the run's optimizer as data, and one update of a range of a parameter layout on
 * any backend: SGD (BackendOps.sgd_update) or AdamW (BackendOps.adamw_update, with its decoupled
 * weight decay only on the parameters that decay). One definition for the model's update
 * (src/model/model_optim.c, through the driver) and for the strategies that update parameters
 * themselves (comm/ssp.c's last steps, comm/async_ps.c's servers on their shard), which get the
 * optimizer and the layout's decaying runs as plain data in their configuration
 * (ExchangeConfig.optim), since comm/ knows no model. */
#ifndef DTBENCH_OPTIMIZER_H
#define DTBENCH_OPTIMIZER_H

#include "backend.h"

#include <stddef.h>
#include <stdint.h>

/* --optimizer, named in the enum's order (base/names.h): auto is the model's own choice
 * (ModelDesc.adamw_default), resolved once by src/run/resolve.c; nothing after it sees auto. */
typedef enum { OPTIMIZER_SGD = 0, OPTIMIZER_ADAMW, OPTIMIZER_AUTO } OptimizerKind;
#define OPTIMIZER_NAMES "sgd,adamw,auto"

/* Parameters [off, off + count) of a layout, and whether AdamW's weight decay applies to them
 * (nanoGPT's rule: the tensors of 2 or more dimensions decay, biases and normalisation gains do
 * not; the model says which are which, model_decay_ranges). */
typedef struct {
    size_t off, count;
    int decay;
} DecayRange;

typedef struct {
    OptimizerKind kind; /* SGD or ADAMW */
    float lr;
    /* SGD: L2 regularisation added to the gradient (PyTorch's SGD); AdamW: the decoupled decay
     * p *= 1 - lr * weight_decay, on the decaying ranges only */
    float weight_decay;
    float momentum;          /* SGD */
    float beta1, beta2, eps; /* AdamW */
    /* AdamW: the layout's runs, in order and disjoint; parameters in none of them do not decay.
     * NULL (nranges 0): none decays. */
    const DecayRange *ranges;
    int nranges;
} Optimizer;

/* backend.h's AdamWStep of update t >= 1 (bias1 = 1 - beta1^t, bias2 = 1 - beta2^t, in double
 * then rounded), with o's lr, betas, eps and weight decay. */
AdamWStep optimizer_adamw_step(const Optimizer *o, int64_t t);

/* AdamW step `a` on parameters [lo, lo + n) of a layout whose decaying runs are r[nr]: p, g, m and
 * v point at element lo. Weight decay a->weight_decay inside a decaying run, 0 elsewhere; one
 * adamw_update per maximal stretch of the same decay (adjacent runs of the same decay merge). */
void optimizer_adamw_ranges(const BackendOps *be, BackendCtx *ctx, const AdamWStep *a,
                            const DecayRange *r, int nr, size_t lo, size_t n, float *p,
                            const float *g, float *m, float *v);

/* Update number t (>= 1; AdamW's bias correction) of parameters [lo, lo + n) of the layout with
 * optimizer o: p, g, m (SGD's momentum buffer, AdamW's first moment) and v (AdamW's second moment;
 * unused by SGD) point at element lo. */
void optimizer_update(const BackendOps *be, BackendCtx *ctx, const Optimizer *o, int64_t t,
                      size_t lo, size_t n, float *p, const float *g, float *m, float *v);

#endif
