/* model.c - builds a Model from its description and runs forward, backward and the optimizer
 * through the backend's function table. Knows shapes, buffers and the graph of layers (which row
 * reads which, and where gradients of an output read by several rows are summed), no arithmetic
 * of its own. */
#include "model.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *const KIND_NAMES[] = {"conv",      "maxpool",   "fc",       "relu",   "lrn",
                                         "batchnorm", "avgpool",   "gavgpool", "concat", "add",
                                         "dropout",   "embedding", "lstm"};

/* ---- planning: inputs, shapes, parameter layout ------------------------------------------- */

/* A mistake in a model table: the zoo is tested, so this only fires while writing a new model. */
static _Noreturn void bad_table(const ModelDesc *d, const char *row, const char *what) {
    fprintf(stderr, "dtbench: model table %s, row %s: %s\n", d->name, row, what);
    abort();
}

/* Resolves row i's comma-separated input names to earlier rows ("input": the model input). */
static void resolve_inputs(const ModelDesc *d, int i, Layer *L) {
    if (!L->d.inputs) {
        L->ninputs = 1, L->inputs[0] = i - 1;
        return;
    }
    for (const char *p = L->d.inputs; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        int found = -2;
        if (len == 5 && !strncmp(p, "input", 5)) found = -1;
        for (int j = i - 1; j >= 0 && found == -2; j--)
            if (strlen(d->layers[j].name) == len && !strncmp(d->layers[j].name, p, len)) found = j;
        if (found == -2) bad_table(d, L->d.name, "an input names no earlier row");
        if (L->ninputs == LAYER_MAX_INPUTS) bad_table(d, L->d.name, "too many inputs");
        L->inputs[L->ninputs++] = found;
        p = end ? end + 1 : p + len;
    }
}

static void problem(Model *m, const Layer *L, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void problem(Model *m, const Layer *L, const char *fmt, ...) {
    if (m->problem[0]) return; /* the first one explains the rest */
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(m->problem, sizeof m->problem, "%s does not fit the input [%d,%d,%d]: %s %s %s",
             m->desc->name, m->in_c, m->in_h, m->in_w, KIND_NAMES[L->d.kind], L->d.name, what);
}

/* Output size of a window of k with padding: 0 when the window does not fit. */
static int window_out(int in, int k, int stride, int pad) {
    return in + 2 * pad < k || stride <= 0 ? 0 : (in + 2 * pad - k) / stride + 1;
}

/* Shape, parameters and FLOPs of row i, from its inputs. */
static void plan_layer(Model *m, int i) {
    Layer *L = &m->layers[i];
    const LayerDesc *d = &L->d;
    const Layer *P = L->inputs[0] >= 0 ? &m->layers[L->inputs[0]] : NULL;
    int c = P ? P->out_c : m->in_c, h = P ? P->out_h : m->in_h, w = P ? P->out_w : m->in_w;
    int seq = P ? P->seq : 0;
    L->in_c = c, L->in_h = h, L->in_w = w;
    L->in_size = (size_t)c * h * w;
    L->out_c = c, L->out_h = h, L->out_w = w, L->seq = seq; /* shape-preserving by default */
    size_t in = L->in_size;
    if (seq && d->kind != LAYER_FC && d->kind != LAYER_LSTM && d->kind != LAYER_RELU &&
        d->kind != LAYER_DROPOUT)
        problem(m, L, "cannot take a sequence");
    if (d->kind != LAYER_EMBEDDING && m->desc->vocab > 0 && !P)
        problem(m, L, "cannot read token ids");

    switch (d->kind) {
    case LAYER_CONV:
        L->out_c = d->out;
        L->out_h = window_out(h, d->k, d->stride, d->pad);
        L->out_w = window_out(w, d->k, d->stride, d->pad);
        L->nw = (size_t)d->out * c * d->k * d->k;
        L->nb = d->no_bias ? 0 : (size_t)d->out;
        L->flops = 2.0 * d->out * L->out_h * L->out_w * c * d->k * d->k;
        break;
    case LAYER_MAXPOOL:
    case LAYER_AVGPOOL:
        if (d->pad >= d->k) problem(m, L, "has padding as wide as its window");
        L->out_h = window_out(h, d->k, d->stride, d->pad);
        L->out_w = window_out(w, d->k, d->stride, d->pad);
        L->flops = (double)c * L->out_h * L->out_w * d->k * d->k;
        break;
    case LAYER_FC: {
        int out = d->out ? d->out : m->classes;
        size_t features = seq ? (size_t)w : in; /* a sequence: the same fc at every position */
        if (seq)
            L->out_c = seq, L->out_h = 1, L->out_w = out;
        else
            L->out_c = out, L->out_h = 1, L->out_w = 1;
        L->nw = (size_t)out * features;
        L->nb = d->no_bias ? 0 : (size_t)out;
        L->flops = 2.0 * out * (double)features * (seq ? seq : 1);
        break;
    }
    case LAYER_RELU:
    case LAYER_DROPOUT:
        L->flops = (double)in;
        break;
    case LAYER_LRN:
        L->flops = (double)in * (2.0 * d->k + 3.0);
        break;
    case LAYER_BATCHNORM:
        if (!P) problem(m, L, "cannot normalise the model input");
        L->nw = L->nb = (size_t)c;
        L->nbuf = 2 * (size_t)c;
        L->flops = 5.0 * (double)in;
        break;
    case LAYER_GLOBAL_AVGPOOL:
        L->out_h = L->out_w = 1;
        L->flops = (double)in;
        break;
    case LAYER_CONCAT:
        L->out_c = 0;
        for (int k = 0; k < L->ninputs; k++) {
            const Layer *Q = L->inputs[k] >= 0 ? &m->layers[L->inputs[k]] : NULL;
            int qh = Q ? Q->out_h : m->in_h, qw = Q ? Q->out_w : m->in_w;
            if (qh != h || qw != w || (Q && Q->seq)) problem(m, L, "joins inputs of other sizes");
            L->out_c += Q ? Q->out_c : m->in_c;
        }
        break;
    case LAYER_ADD: {
        if (L->ninputs != 2) bad_table(m->desc, d->name, "add needs two inputs");
        const Layer *Q = L->inputs[1] >= 0 ? &m->layers[L->inputs[1]] : NULL;
        if (!P || !Q || Q->out_c != c || Q->out_h != h || Q->out_w != w)
            problem(m, L, "adds inputs of other shapes");
        L->flops = (double)in;
        break;
    }
    case LAYER_EMBEDDING:
        if (P || m->desc->vocab <= 0) problem(m, L, "reads token ids: it must read the input");
        L->seq = (int)in, L->out_c = (int)in, L->out_h = 1, L->out_w = d->out;
        L->nw = (size_t)d->vocab * d->out;
        break;
    case LAYER_LSTM: {
        if (!seq) problem(m, L, "needs a sequence");
        const int hidden = d->out;
        L->out_c = seq, L->out_h = 1, L->out_w = hidden;
        L->nw = (size_t)4 * hidden * (w + hidden);
        L->nb = (size_t)4 * hidden;
        L->flops = (double)seq * (2.0 * 4 * hidden * (w + hidden) + 10.0 * hidden);
        break;
    }
    }
    if (L->out_c <= 0 || L->out_h <= 0 || L->out_w <= 0) {
        problem(m, L, "would have an empty output");
        L->out_c = L->out_h = L->out_w = 1; /* keep planning, so the whole table can print */
    }
    L->out_size = (size_t)L->out_c * L->out_h * L->out_w;
    L->nparams = L->nw + L->nb;
}

void model_plan(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                int batch) {
    memset(m, 0, sizeof *m);
    m->desc = d;
    m->nlayers = d->nlayers;
    m->layers = xcalloc((size_t)d->nlayers, sizeof(Layer));
    m->batch = m->chunk = batch;
    m->slots = 1;
    m->in_c = in_c, m->in_h = in_h, m->in_w = in_w, m->classes = classes;

    size_t off = 0, boff = 0;
    for (int i = 0; i < d->nlayers; i++) {
        Layer *L = &m->layers[i];
        L->d = d->layers[i];
        L->last_consumer = -1;
        resolve_inputs(d, i, L);
        for (int k = 0; k < L->ninputs; k++)
            if (L->inputs[k] >= 0) {
                m->layers[L->inputs[k]].last_consumer = i;
                m->layers[L->inputs[k]].consumers++;
            }
        plan_layer(m, i);
        L->w_off = off, L->b_off = off + L->nw;
        off += L->nparams;
        L->buf_off = boff;
        boff += L->nbuf;
    }
    const Layer *last = &m->layers[d->nlayers - 1];
    m->label_size = last->seq > 0 ? last->seq : 1;
    m->classes = (int)(last->out_size / (size_t)m->label_size);
    m->total_params = m->nparams = off;
    m->total_buffers = m->nbuffers = boff;
    m->first = 0, m->last = d->nlayers;
    m->x_size = (size_t)in_c * in_h * in_w;
}

const ModelDesc *model_for_input(const ModelDesc *d, int c, int h, int w) {
    (void)c;
    return d->small && h <= 32 && w <= 32 ? d->small : d;
}

/* ---- backend shapes of a layer on n samples ---------------------------------------------- */

static ConvShape conv_shape(const Layer *L, int n) {
    return (ConvShape){n,      L->in_c,     L->in_h,  L->in_w,  L->out_c,
                       L->d.k, L->d.stride, L->d.pad, L->out_h, L->out_w};
}
static PoolShape pool_shape(const Layer *L, int n) {
    return (PoolShape){n, L->in_c, L->in_h, L->in_w, L->d.k, L->d.stride, L->out_h, L->out_w};
}
static PadPoolShape pad_pool_shape(const Layer *L, int n) {
    return (PadPoolShape){n,           L->in_c,  L->in_h,  L->in_w, L->d.k,
                          L->d.stride, L->d.pad, L->out_h, L->out_w};
}
static FcShape fc_shape(const Layer *L, int n) {
    if (L->seq) return (FcShape){n * L->seq, L->in_w, L->out_w};
    return (FcShape){n, (int)L->in_size, L->out_c};
}
static LrnShape lrn_shape(const Layer *L, int n) {
    return (LrnShape){n, L->in_c, L->in_h, L->in_w, L->d.k, L->d.alpha, L->d.beta, L->d.bias};
}
static BnShape bn_shape(const Layer *L, int n) {
    return (BnShape){n, L->in_c, L->in_h * L->in_w, 1e-5f, 0.1f};
}
static LstmShape lstm_shape(const Layer *L, int n) {
    return (LstmShape){n, L->seq, L->in_w, L->d.out};
}
static int maxpool_padded(const Layer *L) {
    return L->d.kind == LAYER_MAXPOOL && L->d.pad > 0;
}

/* ---- allocation and initialisation --------------------------------------------------------- */

/* Parameters of row i, as the whole model would have them: counter-based, so any stage of a
 * pipeline initialises its rows exactly as one process would. Conv/fc: Xavier-uniform weights,
 * zero biases; batch norm: gamma 1, beta 0; embedding: uniform(-0.1, 0.1); LSTM: uniform(-1/sqrt
 * hidden, 1/sqrt hidden) weights, zero bias. */
static void init_layer(const Layer *L, int i, uint64_t seed, float *w, float *b) {
    uint64_t key = rng_mix(seed ^ (0x5eedULL + (uint64_t)i * 0x100000001b3ULL));
    float bound = 0.0f;
    switch (L->d.kind) {
    case LAYER_CONV:
    case LAYER_FC: {
        size_t out = L->d.kind == LAYER_FC && L->seq ? (size_t)L->out_w : (size_t)L->out_c;
        double fan_in = (double)L->nw / out, fan_out = (double)L->nw / L->in_c;
        if (L->d.kind == LAYER_FC) fan_out = (double)out;
        bound = (float)sqrt(6.0 / (fan_in + fan_out));
        break;
    }
    case LAYER_EMBEDDING:
        bound = 0.1f;
        break;
    case LAYER_LSTM:
        bound = 1.0f / sqrtf((float)L->d.out);
        break;
    case LAYER_BATCHNORM:
        for (size_t j = 0; j < L->nw; j++)
            w[j] = 1.0f;
        memset(b, 0, L->nb * sizeof(float));
        return;
    default:
        return;
    }
    for (size_t j = 0; j < L->nw; j++)
        w[j] = (2.0f * rng_uniform(key + j) - 1.0f) * bound;
    memset(b, 0, L->nb * sizeof(float));
}

static void init_part(Model *m) {
    float *host = xmalloc((m->nparams + m->nbuffers + 1) * sizeof(float));
    float *hbuf = host + m->nparams;
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        float *w = host + (L->w_off - m->param_base);
        init_layer(L, i, m->seed, w, w + L->nw);
        if (L->nbuf) { /* running mean 0, running variance 1 */
            float *r = hbuf + (L->buf_off - m->buf_base);
            for (size_t j = 0; j < L->nbuf; j++)
                r[j] = j < L->nbuf / 2 ? 0.0f : 1.0f;
        }
    }
    m->be->upload(m->ctx, m->params, host, m->nparams * sizeof(float));
    if (m->nbuffers) m->be->upload(m->ctx, m->buffers, hbuf, m->nbuffers * sizeof(float));
    free(host);
}

static void *alloc_or_die(Model *m, size_t bytes) {
    void *p = m->be->alloc(m->ctx, bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "dtbench: %s: cannot allocate %zu bytes on the %s backend\n", m->desc->name,
                bytes, m->be->name);
        abort();
    }
    return p;
}

/* Size per sample of the output read by input k of L, as seen from this part. */
static size_t input_size(const Model *m, const Layer *L, int k) {
    return L->inputs[k] < m->first ? m->x_size : m->layers[L->inputs[k]].out_size;
}

/* Row i is the last to read input k: its gradient goes straight to the producer's dy (backward
 * meets it first); every other reader's gradient is added to it through dy_scratch. */
static int last_reader(const Model *m, int i, int k) {
    int p = m->layers[i].inputs[k];
    if (p < 0) return 1; /* the data: no gradient */
    return m->layers[p].last_consumer == i;
}

/* A ReLU whose input is read by nothing else, produced in this part by a layer whose backward
 * does not read its own output, runs in place in that layer's y and dy: half the activation
 * memory and traffic of conv-ReLU chains. */
static int relu_in_place(const Model *m, const Layer *L) {
    const int p = L->inputs[0];
    if (L->d.kind != LAYER_RELU || p < m->first) return 0;
    const Layer *P = &m->layers[p];
    switch (P->d.kind) {
    case LAYER_CONV:
    case LAYER_FC:
    case LAYER_BATCHNORM:
    case LAYER_ADD:
    case LAYER_CONCAT:
    case LAYER_MAXPOOL:
    case LAYER_AVGPOOL:
    case LAYER_GLOBAL_AVGPOOL:
        return P->consumers == 1;
    default:
        return 0; /* LRN's and LSTM's backward read their output; ReLU's, dropout's too */
    }
}

/* The layer whose dy a layer uses: itself, or for an in-place ReLU its producer's owner. */
static int dy_owner(const Model *m, int i) {
    while (m->layers[i].in_place)
        i = m->layers[i].inputs[0];
    return i;
}

/* Output gradients: the part's last layer gets a whole-batch buffer; every other owner gets one
 * of a pool of chunk-sized buffers, from the first write of its gradient (backward of its last
 * reader) to the end of its own backward, found by walking the backward order once. */
static void assign_gradient_buffers(Model *m) {
    size_t largest = 0;
    for (int i = m->first; i < m->last; i++)
        if (m->layers[i].out_size > largest) largest = m->layers[i].out_size;
    const size_t pool_bytes = (size_t)m->chunk * largest * sizeof(float);
    int *slot_of = xcalloc((size_t)m->nlayers + 1, sizeof(int)); /* pool index + 1, per owner */
    int *in_use = xcalloc((size_t)m->nlayers + 1, sizeof(int));
    m->dy_pool = xcalloc((size_t)m->nlayers + 1, sizeof(float *));

    const int top = dy_owner(m, m->last - 1);
    m->layers[top].dy = alloc_or_die(m, (size_t)m->batch * m->layers[top].out_size * sizeof(float));
    m->layers[top].dy_full = 1;
    for (int i = m->last - 1; i >= m->first; i--) {
        const Layer *L = &m->layers[i];
        for (int k = 0; k < L->ninputs; k++) { /* its backward writes its inputs' gradients */
            if (L->inputs[k] < m->first) continue;
            const int o = dy_owner(m, L->inputs[k]);
            if (m->layers[o].dy) continue;
            int b = 0;
            while (b < m->ndy_pool && in_use[b])
                b++;
            if (b == m->ndy_pool) m->dy_pool[m->ndy_pool++] = alloc_or_die(m, pool_bytes);
            in_use[b] = 1, slot_of[o] = b + 1;
            m->layers[o].dy = m->dy_pool[b];
        }
        if (!L->in_place && slot_of[i]) in_use[slot_of[i] - 1] = 0; /* its backward is done */
    }
    for (int i = m->first; i < m->last; i++) { /* in-place ReLUs share their owner's */
        Layer *L = &m->layers[i];
        Layer *O = &m->layers[dy_owner(m, i)];
        if (!O->dy) O->dy = alloc_or_die(m, pool_bytes); /* read by no layer: not in the zoo */
        L->dy = O->dy, L->dy_full = O->dy_full;
    }
    free(slot_of), free(in_use);
}

void model_build_part(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                      int batch, int microbatches, int first, int last, const BackendOps *be,
                      BackendCtx *ctx, uint64_t seed) {
    model_plan(m, d, in_c, in_h, in_w, classes, batch);
    if (m->problem[0]) {
        fprintf(stderr, "dtbench: %s\n", m->problem);
        abort(); /* the driver checks m->problem before building */
    }
    m->be = be, m->ctx = ctx, m->seed = seed;
    m->slots = microbatches;
    m->chunk = batch / microbatches;
    m->first = first, m->last = last;
    m->param_base = m->layers[first].w_off;
    m->nparams = (last < m->nlayers ? m->layers[last].w_off : m->total_params) - m->param_base;
    m->buf_base = m->layers[first].buf_off;
    m->nbuffers = (last < m->nlayers ? m->layers[last].buf_off : m->total_buffers) - m->buf_base;
    m->x_size = first > 0 ? m->layers[first - 1].out_size : (size_t)in_c * in_h * in_w;

    size_t pbytes = m->nparams * sizeof(float);
    m->params = alloc_or_die(m, pbytes);
    m->grads = alloc_or_die(m, pbytes);
    m->momentum = alloc_or_die(m, pbytes);
    if (m->nbuffers) m->buffers = alloc_or_die(m, m->nbuffers * sizeof(float));
    m->x = alloc_or_die(m, (size_t)batch * m->x_size * sizeof(float));
    if (first > 0) m->dx = alloc_or_die(m, (size_t)batch * m->x_size * sizeof(float));
    if (last == m->nlayers)
        m->labels = alloc_or_die(m, (size_t)batch * m->label_size * sizeof(int32_t));
    m->stats = alloc_or_die(m, 2 * sizeof(float));

    size_t max_layer_params = 0, max_shared_out = 0;
    for (int i = first; i < last; i++) {
        Layer *L = &m->layers[i];
        size_t bytes = (size_t)batch * L->out_size * sizeof(float);
        if ((L->in_place = relu_in_place(m, L)))
            L->y = m->layers[L->inputs[0]].y;
        else
            L->y = alloc_or_die(m, bytes);
        if (L->d.kind == LAYER_MAXPOOL)
            L->argmax = alloc_or_die(m, (size_t)batch * L->out_size * sizeof(int32_t));
        if (L->d.kind == LAYER_DROPOUT) L->mask = alloc_or_die(m, (size_t)batch * L->out_size);
        if (L->d.kind == LAYER_LRN) L->aux = alloc_or_die(m, bytes);
        if (L->d.kind == LAYER_BATCHNORM) L->aux_slot_bytes = 2 * (size_t)L->in_c * sizeof(float);
        if (L->d.kind == LAYER_LSTM) {
            LstmShape s = lstm_shape(L, m->chunk);
            L->aux_slot_bytes = (be->lstm_reserve_bytes(ctx, &s) + 63) & ~(size_t)63;
            size_t wb = be->lstm_workspace_bytes(ctx, &s);
            if (wb > m->work_bytes) m->work_bytes = wb;
        }
        if (L->aux_slot_bytes) L->aux = alloc_or_die(m, L->aux_slot_bytes * (size_t)m->slots);
        if (L->d.kind == LAYER_CONV) {
            ConvShape s = conv_shape(L, m->chunk);
            size_t wb = be->conv_workspace_bytes(ctx, &s);
            if (wb > m->work_bytes) m->work_bytes = wb;
        }
        if (L->nparams > max_layer_params) max_layer_params = L->nparams;
        for (int k = 0; k < L->ninputs; k++)
            if (!last_reader(m, i, k) && input_size(m, L, k) > max_shared_out)
                max_shared_out = input_size(m, L, k);
    }
    assign_gradient_buffers(m);
    if (m->work_bytes) m->work = alloc_or_die(m, m->work_bytes);
    if (microbatches > 1 && max_layer_params)
        m->grad_scratch = alloc_or_die(m, max_layer_params * sizeof(float));
    if (max_shared_out)
        m->dy_scratch = alloc_or_die(m, (size_t)m->chunk * max_shared_out * sizeof(float));
    init_part(m);
}

void model_build(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch,
                 const BackendOps *be, BackendCtx *ctx, uint64_t seed) {
    model_build_part(m, d, in_c, in_h, in_w, classes, batch, 1, 0, d->nlayers, be, ctx, seed);
}

void model_free(Model *m) {
    if (m->be) {
        BackendCtx *c = m->ctx;
        for (int i = m->first; i < m->last; i++) {
            Layer *L = &m->layers[i];
            void *bufs[] = {L->in_place ? NULL : L->y, L->dy_full && !L->in_place ? L->dy : NULL,
                            L->argmax, L->mask, L->aux};
            for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++)
                if (bufs[j]) m->be->free(c, bufs[j]);
        }
        void *bufs[] = {m->params, m->grads, m->momentum,     m->buffers,    m->x,    m->dx,
                        m->labels, m->work,  m->grad_scratch, m->dy_scratch, m->stats};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) m->be->free(c, bufs[i]);
        for (int i = 0; i < m->ndy_pool; i++)
            m->be->free(c, m->dy_pool[i]);
    }
    free(m->dy_pool);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

const char *model_missing_op(const Model *m, const BackendOps *be, int microbatches,
                             const char **layer) {
#define NEED(op)                                                                                   \
    if (!be->op) return #op
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        *layer = L->d.name;
        if (L->consumers > 1 || microbatches > 1) NEED(axpy); /* gradients added up */
        if (microbatches > 1) NEED(scale);                    /* the loss gradient / M */
        switch (L->d.kind) {
        case LAYER_MAXPOOL:
            if (maxpool_padded(L)) {
                NEED(maxpool_pad_forward);
                NEED(maxpool_pad_backward);
            }
            break;
        case LAYER_LRN:
            NEED(lrn_forward);
            NEED(lrn_backward);
            break;
        case LAYER_BATCHNORM:
            NEED(batchnorm_forward_train);
            NEED(batchnorm_forward_infer);
            NEED(batchnorm_backward);
            break;
        case LAYER_AVGPOOL:
            NEED(avgpool_forward);
            NEED(avgpool_backward);
            break;
        case LAYER_GLOBAL_AVGPOOL:
            NEED(global_avgpool_forward);
            NEED(global_avgpool_backward);
            break;
        case LAYER_CONCAT:
            NEED(concat_forward);
            NEED(concat_backward);
            break;
        case LAYER_ADD:
            NEED(add_forward);
            NEED(add_backward);
            break;
        case LAYER_DROPOUT:
            NEED(dropout_forward);
            NEED(dropout_backward);
            NEED(copy);
            break;
        case LAYER_EMBEDDING:
            NEED(embedding_forward);
            NEED(embedding_backward);
            break;
        case LAYER_LSTM:
            NEED(lstm_reserve_bytes);
            NEED(lstm_workspace_bytes);
            NEED(lstm_forward);
            NEED(lstm_backward);
            break;
        default:
            break;
        }
    }
#undef NEED
    *layer = NULL;
    return NULL;
}

void model_set_sample_origin(Model *m, uint64_t origin) {
    m->sample_origin = origin;
}

/* ---- forward, loss, backward -------------------------------------------------------------- */

static float *param(const Model *m, size_t off) {
    return m->params + (off - m->param_base);
}

/* L's output gradient of samples from s0: a whole-batch buffer, or the chunk buffer itself. */
static float *dy_slice(const Layer *L, int s0) {
    return L->dy + (L->dy_full ? (size_t)s0 * L->out_size : 0);
}

/* Input k of L on samples from s0. */
static const float *input_y(const Model *m, const Layer *L, int k, int s0) {
    int p = L->inputs[k];
    if (p < m->first) return m->x + (size_t)s0 * m->x_size;
    return m->layers[p].y + (size_t)s0 * m->layers[p].out_size;
}

/* Where the gradient of input k of L goes (NULL: the data, no gradient). */
static float *input_grad(const Model *m, const Layer *L, int k, int s0) {
    int p = L->inputs[k];
    if (p < 0) return NULL;
    if (p < m->first) return m->dx ? m->dx + (size_t)s0 * m->x_size : NULL;
    return dy_slice(&m->layers[p], s0);
}

void model_forward_part(Model *m, int s0, int n, int slot, int train) {
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    for (int i = m->first; i < m->last; i++) {
        Layer *L = &m->layers[i];
        const float *x = input_y(m, L, 0, s0);
        float *y = L->y + (size_t)s0 * L->out_size;
        const float *w = param(m, L->w_off);
        const float *b = L->nb ? param(m, L->b_off) : NULL; /* NULL: no bias */
        const size_t count = (size_t)n * L->out_size;
        switch (L->d.kind) {
        case LAYER_CONV: {
            ConvShape s = conv_shape(L, n);
            be->conv_forward(ctx, &s, x, w, b, y, m->work);
            break;
        }
        case LAYER_MAXPOOL:
            if (maxpool_padded(L)) {
                PadPoolShape s = pad_pool_shape(L, n);
                be->maxpool_pad_forward(ctx, &s, x, y, L->argmax + (size_t)s0 * L->out_size);
            } else {
                PoolShape s = pool_shape(L, n);
                be->maxpool_forward(ctx, &s, x, y, L->argmax + (size_t)s0 * L->out_size);
            }
            break;
        case LAYER_FC: {
            FcShape s = fc_shape(L, n);
            be->fc_forward(ctx, &s, x, w, b, y);
            break;
        }
        case LAYER_RELU:
            be->relu_forward(ctx, count, x, y);
            break;
        case LAYER_LRN: {
            LrnShape s = lrn_shape(L, n);
            be->lrn_forward(ctx, &s, x, y, L->aux + (size_t)s0 * L->out_size);
            break;
        }
        case LAYER_BATCHNORM: {
            BnShape s = bn_shape(L, n);
            float *run = m->buffers + (L->buf_off - m->buf_base),
                  *saved = L->aux + slot * 2 * L->in_c;
            if (train)
                be->batchnorm_forward_train(ctx, &s, x, w, b, y, saved, saved + L->in_c, run,
                                            run + L->in_c);
            else
                be->batchnorm_forward_infer(ctx, &s, x, w, b, run, run + L->in_c, y);
            break;
        }
        case LAYER_AVGPOOL: {
            PadPoolShape s = pad_pool_shape(L, n);
            be->avgpool_forward(ctx, &s, x, y);
            break;
        }
        case LAYER_GLOBAL_AVGPOOL:
            be->global_avgpool_forward(ctx, (size_t)n * L->in_c, (size_t)L->in_h * L->in_w, x, y);
            break;
        case LAYER_CONCAT: {
            const float *xs[LAYER_MAX_INPUTS];
            size_t sizes[LAYER_MAX_INPUTS];
            for (int k = 0; k < L->ninputs; k++)
                xs[k] = input_y(m, L, k, s0), sizes[k] = input_size(m, L, k);
            be->concat_forward(ctx, n, L->ninputs, xs, sizes, y);
            break;
        }
        case LAYER_ADD:
            be->add_forward(ctx, count, x, input_y(m, L, 1, s0), y);
            break;
        case LAYER_DROPOUT:
            if (train) {
                DropoutShape s = {n, L->out_size, L->d.rate,
                                  rng_mix(m->seed ^ (0xd20b0000ULL + (uint64_t)i)),
                                  m->sample_origin + (uint64_t)s0};
                be->dropout_forward(ctx, &s, x, y, L->mask + (size_t)s0 * L->out_size);
            } else {
                be->copy(ctx, y, x, count * sizeof(float));
            }
            break;
        case LAYER_EMBEDDING: {
            EmbeddingShape s = {n * L->seq, L->d.vocab, L->d.out};
            be->embedding_forward(ctx, &s, x, w, y);
            break;
        }
        case LAYER_LSTM: {
            LstmShape s = lstm_shape(L, n);
            be->lstm_forward(ctx, &s, x, w, b, y, (char *)L->aux + slot * L->aux_slot_bytes,
                             m->work);
            break;
        }
        }
    }
}

void model_loss_queue(Model *m, int s0, int n, int train, float grad_scale) {
    Layer *L = &m->layers[m->nlayers - 1];
    const int rows = n * m->label_size;
    float *logits = L->y + (size_t)s0 * L->out_size;
    float *dlogits = train ? dy_slice(L, s0) : NULL;
    m->be->softmax_xent(m->ctx, rows, m->classes, logits, m->labels + (size_t)s0 * m->label_size,
                        dlogits, m->stats);
    if (dlogits && grad_scale != 1.0f)
        m->be->scale(m->ctx, (size_t)rows * m->classes, grad_scale, dlogits);
}

float model_read_loss(Model *m, int *correct) {
    float stats[2];
    m->be->download(m->ctx, stats, m->stats, sizeof stats);
    if (correct) *correct = (int)stats[1];
    return stats[0];
}

float model_loss_part(Model *m, int s0, int n, int train, float grad_scale, int *correct) {
    model_loss_queue(m, s0, n, train, grad_scale);
    return model_read_loss(m, correct);
}

/* Backward of one layer-input pair: `dest` receives the gradient; when it was dy_scratch, it is
 * added to the producer's gradient afterwards. */
static void finish_input_grad(Model *m, float *dest, float *target, size_t count) {
    if (dest && dest != target) m->be->axpy(m->ctx, count, 1.0f, dest, target);
}

void model_backward_part(Model *m, int s0, int n, int slot, int accumulate) {
    model_backward_part_hook(m, s0, n, slot, accumulate, NULL, NULL);
}

void model_backward_part_hook(Model *m, int s0, int n, int slot, int accumulate, GradsReadyFn ready,
                              void *user) {
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    for (int i = m->last - 1; i >= m->first; i--) {
        Layer *L = &m->layers[i];
        const float *x = input_y(m, L, 0, s0), *w = param(m, L->w_off);
        const float *y = L->y + (size_t)s0 * L->out_size;
        const float *dy = dy_slice(L, s0);
        float *g = L->nparams
                       ? (accumulate ? m->grad_scratch : m->grads + (L->w_off - m->param_base))
                       : NULL;
        float *dw = g, *db = g && L->nb ? g + L->nw : NULL;
        float *target[LAYER_MAX_INPUTS], *dest[LAYER_MAX_INPUTS];
        for (int k = 0; k < L->ninputs; k++) {
            target[k] = input_grad(m, L, k, s0);
            dest[k] = target[k] && !last_reader(m, i, k) ? m->dy_scratch : target[k];
        }
        const size_t count = (size_t)n * L->out_size, in_count = (size_t)n * input_size(m, L, 0);
        float *dx = dest[0];
        switch (L->d.kind) {
        case LAYER_CONV: {
            ConvShape s = conv_shape(L, n);
            be->conv_backward(ctx, &s, x, w, dy, dx, dw, db, m->work);
            break;
        }
        case LAYER_MAXPOOL:
            if (!dx) break;
            if (maxpool_padded(L)) {
                PadPoolShape s = pad_pool_shape(L, n);
                be->maxpool_pad_backward(ctx, &s, L->argmax + (size_t)s0 * L->out_size, dy, dx);
            } else {
                PoolShape s = pool_shape(L, n);
                be->maxpool_backward(ctx, &s, x, y, L->argmax + (size_t)s0 * L->out_size, dy, dx);
            }
            break;
        case LAYER_FC: {
            FcShape s = fc_shape(L, n);
            be->fc_backward(ctx, &s, x, w, dy, dx, dw, db);
            break;
        }
        case LAYER_RELU:
            if (dx) be->relu_backward(ctx, count, y, dy, dx);
            break;
        case LAYER_LRN: {
            LrnShape s = lrn_shape(L, n);
            if (dx) be->lrn_backward(ctx, &s, x, y, L->aux + (size_t)s0 * L->out_size, dy, dx);
            break;
        }
        case LAYER_BATCHNORM: {
            BnShape s = bn_shape(L, n);
            const float *saved = L->aux + slot * 2 * L->in_c;
            /* dx is always written: a batch norm never reads the data (model_plan) */
            be->batchnorm_backward(ctx, &s, x, w, saved, saved + L->in_c, dy, dx, dw, db);
            break;
        }
        case LAYER_AVGPOOL: {
            PadPoolShape s = pad_pool_shape(L, n);
            if (dx) be->avgpool_backward(ctx, &s, dy, dx);
            break;
        }
        case LAYER_GLOBAL_AVGPOOL:
            if (dx)
                be->global_avgpool_backward(ctx, (size_t)n * L->in_c, (size_t)L->in_h * L->in_w, dy,
                                            dx);
            break;
        case LAYER_CONCAT: { /* one input at a time: they may share dy_scratch */
            size_t sizes[LAYER_MAX_INPUTS];
            for (int k = 0; k < L->ninputs; k++)
                sizes[k] = input_size(m, L, k);
            for (int k = 0; k < L->ninputs; k++) {
                if (!dest[k]) continue;
                float *dxs[LAYER_MAX_INPUTS] = {NULL};
                dxs[k] = dest[k];
                be->concat_backward(ctx, n, L->ninputs, sizes, dy, dxs);
                finish_input_grad(m, dest[k], target[k], (size_t)n * sizes[k]);
            }
            continue; /* inputs done */
        }
        case LAYER_ADD:
            for (int k = 0; k < L->ninputs; k++) {
                if (!dest[k]) continue;
                be->add_backward(ctx, count, dy, dest[k], NULL);
                finish_input_grad(m, dest[k], target[k], count);
            }
            continue;
        case LAYER_DROPOUT:
            if (dx) {
                DropoutShape s = {n, L->out_size, L->d.rate, 0, 0};
                be->dropout_backward(ctx, &s, L->mask + (size_t)s0 * L->out_size, dy, dx);
            }
            break;
        case LAYER_EMBEDDING: {
            EmbeddingShape s = {n * L->seq, L->d.vocab, L->d.out};
            be->embedding_backward(ctx, &s, x, dy, dw);
            break;
        }
        case LAYER_LSTM: {
            LstmShape s = lstm_shape(L, n);
            be->lstm_backward(ctx, &s, x, w, y, (char *)L->aux + slot * L->aux_slot_bytes, dy, dx,
                              dw, db, m->work);
            break;
        }
        }
        finish_input_grad(m, dx, target[0], in_count);
        if (accumulate && L->nparams)
            be->axpy(ctx, L->nparams, 1.0f, m->grad_scratch, m->grads + (L->w_off - m->param_base));
        /* layers run last to first and hold increasing offsets: grads from here on are final */
        if (ready && L->nparams) ready(user, L->w_off - m->param_base);
    }
}

void model_forward_queue(Model *m, int n, int train) {
    model_forward_part(m, 0, n, 0, train);
    model_loss_queue(m, 0, n, train, 1.0f);
}

float model_forward(Model *m, int n, int train, int *correct) {
    model_forward_queue(m, n, train);
    return model_read_loss(m, correct);
}

void model_backward(Model *m, int n) {
    model_backward_part(m, 0, n, 0, 0);
}

void model_backward_hook(Model *m, int n, GradsReadyFn ready, void *user) {
    model_backward_part_hook(m, 0, n, 0, 0, ready, user);
}

void model_sgd(Model *m, float lr, float momentum, float weight_decay) {
    m->be->sgd_update(m->ctx, m->nparams, m->params, m->grads, m->momentum, lr, momentum,
                      weight_decay);
}

/* ---- reporting, hashing, saving -------------------------------------------------------------- */

double model_flops_per_sample(const Model *m) {
    double f = 0;
    for (int i = 0; i < m->nlayers; i++)
        f += m->layers[i].flops;
    return f;
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
        fprintf(out, "  %-4d %-30s %-9s %-16s %12zu %14.0f", i, L->d.name, KIND_NAMES[L->d.kind],
                shape, L->nparams, L->flops);
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

static int save_floats(const Model *m, const float *host, size_t n, const char *path) {
    unsigned char header[64] = "DTBMODEL";
    uint64_t version = 1, count = n;
    memcpy(header + 8, &version, 8);
    memcpy(header + 16, &count, 8);
    snprintf((char *)header + 24, 40, "%s", m->desc->name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(header, 1, sizeof header, f) == sizeof header &&
             fwrite(host, sizeof(float), n, f) == n;
    if (fclose(f) != 0 || !ok) {
        if (!errno) errno = EIO;
        return -1;
    }
    return 0;
}

int model_save(const Model *m, const char *path) {
    float *host = params_on_host(m);
    int rc = save_floats(m, host, m->nparams, path);
    free(host);
    return rc;
}

int model_save_params(const Model *m, const float *host_params, const char *path) {
    return save_floats(m, host_params, m->total_params, path);
}
