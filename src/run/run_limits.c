/* run_limits.c - the memory a run needs, estimated before anything is allocated (see run_limits.h).
 * Deliberately rough (within a factor of ~2 of what the backends allocate): it exists to refuse
 * runs that are impossible by orders of magnitude with a line naming the option, instead of an
 * abort in an allocation later ("alloc.c: p: out of memory") or a machine swapping to death. */
#include "run_limits.h"
#include "alloc.h" /* defines: dt_mem_available */

#include <stdio.h>

int limits_check(const Options *o, const ExchangeOps *x, const Model *plan, int first, int last,
                 int batch, int replicas, int ranks_on_node, char *err, size_t errlen) {
    double per_sample = 0, params = 0;
    for (int l = first; l < last && l < plan->nlayers; l++) {
        const Layer *L = &plan->layers[l];
        /* output, its gradient, and a mask/argmax/aux of the same size at most */
        per_sample += 3.0 * (double)L->out_size * sizeof(float);
        params += (double)L->nparams;
    }
    per_sample += 2.0 * (double)plan->in_c * plan->in_h * plan->in_w * sizeof(float);
    double activations = per_sample * batch;
    /* parameters, gradients, exchange; momentum (AdamW's first moment) and AdamW's second
     * moment, 1/replicas of them where the exchange shards them (ZeRO: comm/zero.c, which needs
     * no exchange copy either: it works in place; zero3, comm/zero3.c, shards the parameters and
     * gradients too, and holds one bucket of each gathered, and a second of parameters with
     * --param-prefetch on) */
    double state = o->optimizer == OPTIMIZER_ADAMW ? 2.0 : 1.0;
    double copies = 3.0 + state;
    const double R = replicas > 0 ? replicas : 1;
    if (x->shards_optimizer) copies = 2.0 + state / R;
    if (x->shards_params) copies = (2.0 + state) / R; /* zero3: and a bucket of each, below */
    double weights = copies * params * sizeof(float);
    if (x->shards_params) { /* --param-prefetch on: a second group of parameters, gathered ahead */
        const double bucket = o->bucket_mb * 1048576.0,
                     held = o->param_prefetch == PARAM_PREFETCH_ON ? 3.0 : 2.0;
        weights += held * (bucket < params * sizeof(float) ? bucket : params * sizeof(float));
    }
    double delayed = x->delays_grads ? ((double)o->staleness + 1) * params * sizeof(float) : 0;
    double timings = 2.0 * ((double)o->iters + o->warmup) * sizeof(double);
    double need = activations + weights + delayed + timings;
    double avail = dt_mem_available();
    if (avail <= 0) return 0; /* unknown: nothing to compare with */
    double share = avail / (ranks_on_node > 0 ? ranks_on_node : 1);
    if (need <= share) return 0;
    const char *option = "--model";
    char what[200];
    snprintf(what, sizeof what, "the model's parameters");
    if (activations >= delayed && activations >= timings && activations >= weights) {
        option = "--batch";
        snprintf(what, sizeof what, "activations of %d samples per rank", batch);
    } else if (delayed >= timings && delayed >= weights) {
        option = "--staleness";
        snprintf(what, sizeof what, "%d delayed gradients of --exchange %s", o->staleness + 1,
                 x->name);
    } else if (timings >= weights) {
        option = "--iters";
        snprintf(what, sizeof what, "timings of %d iterations", o->iters + o->warmup);
    }
    snprintf(err, errlen,
             "%s: this run needs about %.1f GB of memory per rank (%s), and this node has %.1f GB "
             "available, %.1f GB for each of its %d ranks",
             option, need / 1e9, what, avail / 1e9, share / 1e9, ranks_on_node);
    return -1;
}
