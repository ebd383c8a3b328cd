/* model.c - builds a Model from its description and runs forward, backward and the optimizer
 * through the backend's function table. Knows shapes and buffers, no arithmetic of its own. */
#include "model.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void model_plan(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                int batch) {
    memset(m, 0, sizeof *m);
    m->desc = d;
    m->nlayers = d->nlayers;
    m->layers = xcalloc((size_t)d->nlayers, sizeof(Layer));
    m->batch = batch;
    m->in_c = in_c, m->in_h = in_h, m->in_w = in_w, m->classes = classes;

    int c = in_c, h = in_h, w = in_w;
    size_t off = 0;
    for (int i = 0; i < d->nlayers; i++) {
        Layer *L = &m->layers[i];
        L->d = d->layers[i];
        L->in_c = c, L->in_h = h, L->in_w = w;
        L->in_size = (size_t)c * h * w;
        switch (L->d.kind) {
        case LAYER_CONV:
            L->out_c = L->d.out;
            L->out_h = (h + 2 * L->d.pad - L->d.k) / L->d.stride + 1;
            L->out_w = (w + 2 * L->d.pad - L->d.k) / L->d.stride + 1;
            L->nparams = (size_t)L->out_c * c * L->d.k * L->d.k + (size_t)L->out_c;
            L->flops = 2.0 * L->out_c * L->out_h * L->out_w * c * L->d.k * L->d.k;
            break;
        case LAYER_MAXPOOL:
            L->out_c = c;
            L->out_h = (h - L->d.k) / L->d.stride + 1;
            L->out_w = (w - L->d.k) / L->d.stride + 1;
            L->flops = (double)c * L->out_h * L->out_w * L->d.k * L->d.k;
            break;
        case LAYER_FC:
            L->out_c = L->d.out ? L->d.out : classes, L->out_h = 1, L->out_w = 1;
            L->nparams = (size_t)L->out_c * L->in_size + (size_t)L->out_c;
            L->flops = 2.0 * (double)L->out_c * (double)L->in_size;
            break;
        case LAYER_RELU:
            L->out_c = c, L->out_h = h, L->out_w = w;
            L->flops = (double)L->in_size;
            break;
        }
        L->out_size = (size_t)L->out_c * L->out_h * L->out_w;
        L->w_off = off;
        L->b_off = off + L->nparams - (L->nparams ? (size_t)L->out_c : 0);
        off += L->nparams;
        c = L->out_c, h = L->out_h, w = L->out_w;
    }
    m->nparams = off;
}

static ConvShape conv_shape(const Layer *L, int n) {
    return (ConvShape){n,      L->in_c,     L->in_h,  L->in_w,  L->out_c,
                       L->d.k, L->d.stride, L->d.pad, L->out_h, L->out_w};
}
static PoolShape pool_shape(const Layer *L, int n) {
    return (PoolShape){n, L->in_c, L->in_h, L->in_w, L->d.k, L->d.stride, L->out_h, L->out_w};
}
static FcShape fc_shape(const Layer *L, int n) {
    return (FcShape){n, (int)L->in_size, L->out_c};
}

/* Xavier-uniform weights, zero biases, from a counter-based RNG: identical on every rank. */
static void init_params(Model *m, uint64_t seed) {
    float *host = xmalloc(m->nparams * sizeof(float));
    for (int i = 0; i < m->nlayers; i++) {
        const Layer *L = &m->layers[i];
        if (!L->nparams) continue;
        size_t nw = L->nparams - (size_t)L->out_c;
        double fan_in = (double)nw / L->out_c, fan_out = (double)nw / L->in_c;
        if (L->d.kind == LAYER_FC) fan_out = L->out_c;
        float bound = (float)sqrt(6.0 / (fan_in + fan_out));
        uint64_t key = rng_mix(seed ^ (0x5eedULL + (uint64_t)i * 0x100000001b3ULL));
        for (size_t j = 0; j < nw; j++)
            host[L->w_off + j] = (2.0f * rng_uniform(key + j) - 1.0f) * bound;
        memset(host + L->b_off, 0, (size_t)L->out_c * sizeof(float));
    }
    m->be->upload(m->ctx, m->params, host, m->nparams * sizeof(float));
    free(host);
}

void model_build(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch,
                 const BackendOps *be, BackendCtx *ctx, uint64_t seed) {
    model_plan(m, d, in_c, in_h, in_w, classes, batch);
    m->be = be, m->ctx = ctx;
    size_t pbytes = m->nparams * sizeof(float);
    m->params = be->alloc(ctx, pbytes);
    m->grads = be->alloc(ctx, pbytes);
    m->momentum = be->alloc(ctx, pbytes);
    m->x = be->alloc(ctx, (size_t)batch * in_c * in_h * in_w * sizeof(float));
    m->labels = be->alloc(ctx, (size_t)batch * sizeof(int32_t));
    m->stats = be->alloc(ctx, 2 * sizeof(float));
    for (int i = 0; i < m->nlayers; i++) {
        Layer *L = &m->layers[i];
        size_t bytes = (size_t)batch * L->out_size * sizeof(float);
        L->y = be->alloc(ctx, bytes);
        L->dy = be->alloc(ctx, bytes);
        if (L->d.kind == LAYER_MAXPOOL)
            L->argmax = be->alloc(ctx, (size_t)batch * L->out_size * sizeof(int32_t));
        if (L->d.kind == LAYER_CONV) {
            ConvShape s = conv_shape(L, batch);
            size_t wb = be->conv_workspace_bytes(ctx, &s);
            if (wb > m->work_bytes) m->work_bytes = wb;
        }
    }
    if (m->work_bytes) m->work = be->alloc(ctx, m->work_bytes);
    init_params(m, seed);
}

void model_free(Model *m) {
    if (m->be) {
        BackendCtx *c = m->ctx;
        for (int i = 0; i < m->nlayers; i++) {
            m->be->free(c, m->layers[i].y);
            m->be->free(c, m->layers[i].dy);
            if (m->layers[i].argmax) m->be->free(c, m->layers[i].argmax);
        }
        void *bufs[] = {m->params, m->grads, m->momentum, m->x, m->labels, m->stats, m->work};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) m->be->free(c, bufs[i]);
    }
    free(m->layers);
    memset(m, 0, sizeof *m);
}

void model_forward_queue(Model *m, int n, int train) {
    const BackendOps *be = m->be;
    const float *x = m->x;
    for (int i = 0; i < m->nlayers; i++) {
        Layer *L = &m->layers[i];
        const float *w = m->params + L->w_off, *b = m->params + L->b_off;
        switch (L->d.kind) {
        case LAYER_CONV: {
            ConvShape s = conv_shape(L, n);
            be->conv_forward(m->ctx, &s, x, w, b, L->y, m->work);
            break;
        }
        case LAYER_MAXPOOL: {
            PoolShape s = pool_shape(L, n);
            be->maxpool_forward(m->ctx, &s, x, L->y, L->argmax);
            break;
        }
        case LAYER_FC: {
            FcShape s = fc_shape(L, n);
            be->fc_forward(m->ctx, &s, x, w, b, L->y);
            break;
        }
        case LAYER_RELU:
            be->relu_forward(m->ctx, (size_t)n * L->in_size, x, L->y);
            break;
        }
        x = L->y;
    }
    Layer *last = &m->layers[m->nlayers - 1];
    be->softmax_xent(m->ctx, n, m->classes, last->y, m->labels, train ? last->dy : NULL, m->stats);
}

float model_read_loss(Model *m, int *correct) {
    float stats[2];
    m->be->download(m->ctx, stats, m->stats, sizeof stats);
    if (correct) *correct = (int)stats[1];
    return stats[0];
}

float model_forward(Model *m, int n, int train, int *correct) {
    model_forward_queue(m, n, train);
    return model_read_loss(m, correct);
}

void model_backward(Model *m, int n) {
    model_backward_hook(m, n, NULL, NULL);
}

void model_backward_hook(Model *m, int n, GradsReadyFn ready, void *user) {
    const BackendOps *be = m->be;
    for (int i = m->nlayers - 1; i >= 0; i--) {
        Layer *L = &m->layers[i];
        const float *x = i ? m->layers[i - 1].y : m->x;
        float *dx = i ? m->layers[i - 1].dy : NULL; /* no gradient for the input batch */
        const float *w = m->params + L->w_off;
        float *dw = m->grads + L->w_off, *db = m->grads + L->b_off;
        switch (L->d.kind) {
        case LAYER_CONV: {
            ConvShape s = conv_shape(L, n);
            be->conv_backward(m->ctx, &s, x, w, L->dy, dx, dw, db, m->work);
            break;
        }
        case LAYER_MAXPOOL: {
            PoolShape s = pool_shape(L, n);
            if (dx) be->maxpool_backward(m->ctx, &s, x, L->y, L->argmax, L->dy, dx);
            break;
        }
        case LAYER_FC: {
            FcShape s = fc_shape(L, n);
            be->fc_backward(m->ctx, &s, x, w, L->dy, dx, dw, db);
            break;
        }
        case LAYER_RELU:
            if (dx) be->relu_backward(m->ctx, (size_t)n * L->in_size, L->y, L->dy, dx);
            break;
        }
        if (ready && L->nparams) ready(user, L->w_off);
    }
}

void model_sgd(Model *m, float lr, float momentum, float weight_decay) {
    m->be->sgd_update(m->ctx, m->nparams, m->params, m->grads, m->momentum, lr, momentum,
                      weight_decay);
}

double model_flops_per_sample(const Model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += m->layers[i].flops;
    return f;
}

static const char *kind_name(LayerKind k) {
    static const char *names[] = {"conv", "maxpool", "fc", "relu"};
    return names[k];
}

void model_print(const Model *m, FILE *out) {
    fprintf(out, "model %s: %s, input [%d,%d,%d], %d classes\n", m->desc->name, m->desc->about,
            m->in_c, m->in_h, m->in_w, m->classes);
    fprintf(out, "  %-8s %-8s %-16s %14s %16s\n", "layer", "type", "output [c,h,w]", "parameters",
            "FLOPs/sample");
    for (int i = 0; i < m->nlayers; i++) {
        const Layer *L = &m->layers[i];
        char shape[48];
        snprintf(shape, sizeof shape, "[%d,%d,%d]", L->out_c, L->out_h, L->out_w);
        fprintf(out, "  %-8s %-8s %-16s %14zu %16.0f\n", L->d.name, kind_name(L->d.kind), shape,
                L->nparams, L->flops);
    }
    double f = model_flops_per_sample(m);
    fprintf(out, "  total parameters: %zu (%.2f MiB of float32)\n", m->nparams,
            m->nparams * 4.0 / 1048576.0);
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

int model_save(const Model *m, const char *path) {
    unsigned char header[64] = "DTBMODEL";
    uint64_t version = 1, n = m->nparams;
    memcpy(header + 8, &version, 8);
    memcpy(header + 16, &n, 8);
    snprintf((char *)header + 24, 40, "%s", m->desc->name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    float *host = params_on_host(m);
    int ok = fwrite(header, 1, sizeof header, f) == sizeof header &&
             fwrite(host, sizeof(float), n, f) == n;
    free(host);
    if (fclose(f) != 0 || !ok) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}
