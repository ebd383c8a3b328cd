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
    double f = model_flops_per_sample(m);
    fprintf(out, "  total parameters: %zu (%.2f MiB of float32)\n", m->total_params,
            m->total_params * 4.0 / 1048576.0);
    if (m->total_buffers)
        fprintf(out, "  non-trained state: %zu floats (batch-norm running mean and variance)\n",
                m->total_buffers);
    fprintf(out, "  forward FLOPs per sample: %.0f (%.3f GFLOP); training step ~3x: %.3f GFLOP\n",
            f, f / 1e9, 3 * f / 1e9);
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
