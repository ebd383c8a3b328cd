/* model_io.c - a Model's reports: the layer table of --dry-run, FLOPs and the FNV hash of its
 * parameters (ranks compare them). The parameter file of --save-model: model_save.c. */
#include "layers.h"
#include "alloc.h" /* defines: xmalloc */

#include <stdlib.h>
#include <string.h>

double model_flops_per_sample(const Model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += m->layers[i].flops;
    return f;
}

/* Backward FLOPs per sample of row L as a step runs it (model_roofline.c's rule, unfused): its
 * parameter gradients, and its input gradients where it writes any (an input that is not the
 * data); none for a row with neither. */
static double backward_flops(const Layer *L) {
    int dx = 0;
    for (int k = 0; k < L->ninputs; k++)
        dx |= L->inputs[k] >= 0;
    if (!dx && L->nparams == 0) return 0.0;
    return L->flops_dw + (dx ? L->flops_dx : 0.0);
}

double model_train_flops_per_sample(const Model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += m->layers[i].flops + backward_flops(&m->layers[i]);
    return f;
}

const char *model_layer_kind_name(const Model *m, int i) {
    return layer_kind(m->layers[i].d.kind)->name;
}

void model_print(const Model *m, FILE *out) {
    fprintf(out, "model %s: %s, input [%d,%d,%d], %d classes%s\n", m->desc->name, m->desc->about,
            m->in_c, m->in_h, m->in_w, m->classes, m->label_size > 1 ? " at every position" : "");
    fprintf(out, "  %-4s %-30s %-9s %-16s %12s %14s  %s\n", "#", "layer", "type", "output [c,h,w]",
            "parameters", "FLOPs/sample", "(inputs, when not the row above)");
    for (int i = 0; i < m->nlayers; i++) {
        const Layer *L = &m->layers[i];
        char shape[48];
        snprintf(shape, sizeof shape, "[%d,%d,%d]", L->out_c, L->out_h, L->out_w);
        fprintf(out, "  %-4d %-30s %-9s %-16s %12zu %14.0f", i, L->d.name,
                layer_kind(L->d.kind)->name, shape, L->nparams, L->flops);
        if (L->d.inputs) fprintf(out, "  <- %s", L->d.inputs);
        fputc('\n', out);
    }
    double f = model_flops_per_sample(m), t = model_train_flops_per_sample(m);
    fprintf(out, "  total parameters: %zu (%.2f MiB of float32)\n", m->total_params,
            m->total_params * 4.0 / 1048576.0);
    if (m->total_buffers)
        fprintf(out, "  non-trained state: %zu floats (batch-norm running mean and variance)\n",
                m->total_buffers);
    fprintf(out, "  forward FLOPs per sample: %.0f (%.3f GFLOP)\n", f, f / 1e9);
    fprintf(out,
            "  training FLOPs per sample: %.0f (%.3f GFLOP, %.2fx the forward: forward, parameter "
            "and input gradients)\n",
            t, t / 1e9, f > 0 ? t / f : 0.0);
}

static float *params_on_host(const Model *m) {
    float *host = xmalloc(m->nparams * sizeof(float));
    m->be->download(m->ctx, host, m->params, m->nparams * sizeof(float));
    return host;
}

uint64_t model_param_hash(const Model *m) {
    float *host = params_on_host(m);
    const unsigned char *p = (const unsigned char *)host;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < m->nparams * sizeof(float); i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    free(host);
    return h;
}
