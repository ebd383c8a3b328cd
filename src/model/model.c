/* model.c - the interpreter of the table of layer kinds (layers.h): builds a Model from its
 * description and runs forward, backward and the optimizer through the backend's function table.
 * Knows shapes, buffers and the graph of layers (which row reads which, where gradients of an
 * output read by several rows are summed, which ReLU runs in place); what a layer of a kind does
 * is its row's, in src/model/layer_*.c, and the services rows share (where activations and
 * gradients lie, memory, problems) are layer_services.c's. No arithmetic of its own. */
#include "layers.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */
#include "rng.h"   /* defines: rng_mix */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- planning: inputs, shapes, parameter layout ------------------------------------------- */

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
        if (found == -2) layer_bad_table(d, L->d.name, "an input names no earlier row");
        if (L->ninputs == LAYER_MAX_INPUTS) layer_bad_table(d, L->d.name, "too many inputs");
        L->inputs[L->ninputs++] = found;
        p = end ? end + 1 : p + len;
    }
}

/* Shape, parameters and FLOPs of row i, from its inputs: what every kind shares, then its row. */
static void plan_layer(Model *m, int i) {
    Layer *L = &m->layers[i];
    const LayerKindOps *K = layer_kind(L->d.kind);
    const Layer *P = L->inputs[0] >= 0 ? &m->layers[L->inputs[0]] : NULL;
    int c = P ? P->out_c : m->in_c, h = P ? P->out_h : m->in_h, w = P ? P->out_w : m->in_w;
    int seq = P ? P->seq : 0;
    L->in_c = c, L->in_h = h, L->in_w = w;
    L->in_size = (size_t)c * h * w;
    L->out_c = c, L->out_h = h, L->out_w = w, L->seq = seq; /* shape-preserving by default */
    if (seq && !(K->flags & LK_TAKES_SEQUENCE)) layer_problem(m, L, "cannot take a sequence");
    if (!(K->flags & LK_READS_TOKENS) && m->desc->vocab > 0 && !P)
        layer_problem(m, L, "cannot read token ids");
    K->plan(m, L, P);
    if (L->out_c <= 0 || L->out_h <= 0 || L->out_w <= 0) {
        layer_problem(m, L, "would have an empty output");
        L->out_c = L->out_h = L->out_w = 1; /* keep planning, so the whole table can print */
    }
    L->out_size = (size_t)L->out_c * L->out_h * L->out_w;
    L->nparams = L->nw + L->nb;
}

void model_plan(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                int batch) {
    model_plan_tensor(m, d, in_c, in_h, in_w, classes, batch, NULL);
}

void model_plan_tensor(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                       int batch, const ModelTensor *tp) {
    memset(m, 0, sizeof *m);
    m->desc = d;
    m->nlayers = d->nlayers;
    m->layers = xcalloc((size_t)d->nlayers, sizeof(Layer));
    m->batch = m->chunk = batch;
    m->slots = 1;
    m->act = (ActFormat){ACT_NCHW, ACT_FP32}, m->act_bytes = sizeof(float);
    m->in_c = in_c, m->in_h = in_h, m->in_w = in_w, m->classes = classes;
    if (tp && tp->size > 1) m->tp = *tp;

    for (int i = 0; i < d->nlayers; i++) {
        Layer *L = &m->layers[i];
        L->d = d->layers[i];
        L->last_consumer = -1;
        L->fuse_relu = L->fuse_add = -1, L->exec_as = i; /* unfused (model_fuse.c) */
        L->fwd_fused = 0;
        L->tied = L->tied_by = -1;
        resolve_inputs(d, i, L);
        for (int k = 0; k < L->ninputs; k++)
            if (L->inputs[k] >= 0) {
                m->layers[L->inputs[k]].last_consumer = i;
                m->layers[L->inputs[k]].consumers++;
            }
    }
    if (m->tp.size > 1) model_tensor_roles(m); /* the split rows' widths, before planning */
    size_t off = 0, boff = 0, whole = 0;
    for (int i = 0; i < d->nlayers; i++) {
        Layer *L = &m->layers[i];
        plan_layer(m, i);
        L->w_off = off, L->b_off = off + L->nw;
        off += L->nparams;
        whole += m->tp.size > 1 ? model_tensor_whole(m, L).nparams : L->nparams;
        L->buf_off = boff;
        boff += L->nbuf;
    }
    m->tp.whole_params = whole;
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

/* ---- allocation and initialisation --------------------------------------------------------- */

/* Parameters of row i, as the whole model would have them: counter-based, so any stage of a
 * pipeline initialises its rows exactly as one process would (the row's init picks the values). */
static void init_layer(const Layer *L, int i, uint64_t seed, float *w, float *b) {
    uint64_t key = rng_mix(seed ^ (0x5eedULL + (uint64_t)i * 0x100000001b3ULL));
    const LayerKindOps *K = layer_kind(L->d.kind);
    if (K->init) K->init(L, key, w, b);
}

int (*model_interrupted)(void) = NULL;

/* The run was asked to stop while the model is built: the rest is left undone (model.h). */
static int interrupted(void) {
    return model_interrupted && model_interrupted();
}

/* Row i's part of the parameters: a row split over a tensor group initialises the whole row's
 * (the same values one process draws), then keeps this rank's slice. */
static void init_slice(const Model *m, const Layer *L, int i, float *w) {
    if (L->tp_role != TP_COLUMN && L->tp_role != TP_ROW) {
        init_layer(L, i, m->seed, w, w + L->nw);
        return;
    }
    const Layer F = model_tensor_whole(m, L);
    float *full = xmalloc((F.nparams + 1) * sizeof(float));
    init_layer(&F, i, m->seed, full, full + F.nw);
    model_tensor_copy(m, L, m->tp.rank, full, w, 1);
    free(full);
}

static void init_part(Model *m) {
    float *host = xmalloc((m->nparams + m->nbuffers + 1) * sizeof(float));
    float *hbuf = host + m->nparams;
    for (int i = m->first; i < m->last; i++) {
        if (interrupted()) {
            free(host);
            return;
        }
        const Layer *L = &m->layers[i];
        float *w = host + (L->w_off - m->param_base);
        init_slice(m, L, i, w);
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

/* A layer that may run in place (a ReLU) whose input is read by nothing else, produced in this
 * part by a layer whose backward does not read its own output, runs in that layer's y and dy:
 * half the activation memory and traffic of conv-ReLU chains. */
static int runs_in_place(const Model *m, const Layer *L) {
    const int p = L->inputs[0];
    if (!(layer_kind(L->d.kind)->flags & LK_IN_PLACE) || p < m->first) return 0;
    const Layer *P = &m->layers[p];
    return (layer_kind(P->d.kind)->flags & LK_OUTPUT_REUSABLE) && P->consumers == 1;
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
    const size_t pool_bytes = (size_t)m->chunk * largest * m->act_bytes;
    int *slot_of = xcalloc((size_t)m->nlayers + 1, sizeof(int)); /* pool index + 1, per owner */
    int *in_use = xcalloc((size_t)m->nlayers + 1, sizeof(int));
    m->dy_pool = xcalloc((size_t)m->nlayers + 1, sizeof(float *));

    const int top = dy_owner(m, m->last - 1);
    if (layer_kind(m->layers[top].d.kind)->flags & LK_DY_IN_Y)
        m->layers[top].dy = m->layers[top].y; /* the loss writes its gradient over the logits */
    else
        m->layers[top].dy = layer_alloc(m, (size_t)m->batch * m->layers[top].out_size *
                                               layer_out_bytes(m, &m->layers[top]));
    m->layers[top].dy_full = 1;
    /* the backward order: at each place, the row run there (exec_as, model_fuse.c) */
    for (int at = m->last - 1; at >= m->first; at--) {
        const int j = m->layers[at].exec_as;
        const Layer *L = j >= 0 ? &m->layers[j] : NULL;
        for (int k = 0; L && k < L->ninputs + (L->fuse_add >= 0); k++) {
            /* its backward writes its inputs' gradients (a fused add's other input's too) */
            const Layer *W = k < L->ninputs ? L : &m->layers[L->fuse_add];
            const int kk = k < L->ninputs ? k : (W->inputs[0] == j ? 1 : 0);
            if (W->inputs[kk] < m->first) continue;
            const int o = dy_owner(m, W->inputs[kk]);
            if (m->layers[o].dy) continue;
            int b = 0;
            while (b < m->ndy_pool && in_use[b])
                b++;
            if (b == m->ndy_pool) m->dy_pool[m->ndy_pool++] = layer_alloc(m, pool_bytes);
            in_use[b] = 1, slot_of[o] = b + 1;
            m->layers[o].dy = m->dy_pool[b];
        }
        /* the gradient read at this place is done */
        if (!m->layers[at].in_place && slot_of[at]) in_use[slot_of[at] - 1] = 0;
    }
    for (int i = m->first; i < m->last; i++) { /* a batch norm fused with an add: never read */
        Layer *B = &m->layers[i];
        if (B->fuse_add >= 0 && !B->dy) B->dy = m->layers[B->fuse_add].dy;
    }
    for (int i = m->first; i < m->last; i++) { /* in-place ReLUs share their owner's */
        Layer *L = &m->layers[i];
        Layer *O = &m->layers[dy_owner(m, i)];
        if (!O->dy) O->dy = layer_alloc(m, pool_bytes); /* read by no layer: not in the zoo */
        L->dy = O->dy, L->dy_full = O->dy_full;
    }
    free(slot_of), free(in_use);
}

/* A row computing with a table another stage holds (a tied head on the last stage): its copy of
 * the table, initialised as the table's row initialises it, and the gradient it sends; the
 * table's stage: the gradient it receives (model.h, tied_*). */
static void tie_stages(Model *m) {
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        if (L->tied_by >= m->last) { /* the table, read by a later stage */
            m->tied_count = L->nw;
            m->tied_grad = layer_alloc(m, L->nw * sizeof(float));
        }
        if (L->tied < 0 || L->tied >= m->first) continue;
        const Layer *T = &m->layers[L->tied]; /* the table, in an earlier stage */
        float *host = xmalloc((T->nparams + 1) * sizeof(float));
        init_layer(T, L->tied, m->seed, host, host + T->nw);
        m->tied_count = T->nw;
        m->tied_w = layer_alloc(m, T->nw * sizeof(float));
        m->tied_grad = layer_alloc(m, T->nw * sizeof(float));
        m->be->upload(m->ctx, m->tied_w, host, T->nw * sizeof(float));
        free(host);
    }
}

void model_build_part(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                      int batch, int microbatches, int first, int last, const BackendOps *be,
                      BackendCtx *ctx, uint64_t seed) {
    model_build_tensor(m, d, in_c, in_h, in_w, classes, batch, microbatches, first, last, be, ctx,
                       seed, NULL);
}

void model_build_tensor(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes,
                        int batch, int microbatches, int first, int last, const BackendOps *be,
                        BackendCtx *ctx, uint64_t seed, const ModelTensor *tp) {
    model_plan_tensor(m, d, in_c, in_h, in_w, classes, batch, tp);
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
    m->act = (ActFormat){ACT_NCHW, ACT_FP32};
    if (be->activation_format) be->activation_format(ctx, &m->act);
    m->act_bytes = ACT_TYPE_BYTES(m->act.type);
    model_check_format(m);

    size_t pbytes = m->nparams * sizeof(float);
    m->params = layer_alloc(m, pbytes); /* each zeroed: FCN-5's take 0.5 GB */
    if (interrupted()) return;
    m->grads = layer_alloc(m, pbytes);
    if (interrupted()) return;
    if (m->nbuffers) m->buffers = layer_alloc(m, m->nbuffers * sizeof(float));
    m->x = layer_alloc(m, (size_t)batch * m->x_size * sizeof(float));
    if (first > 0) m->dx = layer_alloc(m, (size_t)batch * m->x_size * sizeof(float));
    if (m->act.layout != ACT_NCHW || m->act.type != ACT_FP32)
        m->x_act = layer_alloc(m, (size_t)batch * m->x_size * m->act_bytes);
    if (last == m->nlayers)
        m->labels = layer_alloc(m, (size_t)batch * m->label_size * sizeof(int32_t));
    m->stats = layer_alloc(m, 2 * sizeof(float));

    size_t max_layer_params = 0, max_shared_out = 0;
    for (int i = first; i < last; i++) {
        if (interrupted()) return;
        Layer *L = &m->layers[i];
        size_t bytes = (size_t)batch * L->out_size * layer_out_bytes(m, L);
        if ((L->in_place = runs_in_place(m, L)))
            L->y = m->layers[L->inputs[0]].y;
        else
            L->y = layer_alloc(m, bytes);
        const LayerKindOps *K = layer_kind(L->d.kind);
        if (K->alloc) K->alloc(m, L);
        if (L->nparams > max_layer_params) max_layer_params = L->nparams;
        for (int k = 0; k < L->ninputs; k++)
            if (!layer_last_reader(m, i, k) && layer_input_size(m, L, k) > max_shared_out)
                max_shared_out = layer_input_size(m, L, k);
    }
    model_choose_fusions(m); /* the in-place rows are known */
    assign_gradient_buffers(m);
    if (microbatches > 1 && max_layer_params)
        m->grad_scratch = layer_alloc(m, max_layer_params * sizeof(float));
    if (max_shared_out)
        m->dy_scratch = layer_alloc(m, (size_t)m->chunk * max_shared_out * m->act_bytes);
    for (int i = first; i < last; i++) { /* the shared scratch last (LayerKindOps.plan_work) */
        const LayerKindOps *K = layer_kind(m->layers[i].d.kind);
        if (K->plan_work) K->plan_work(m, &m->layers[i]);
    }
    if (m->work_bytes) m->work = layer_alloc(m, m->work_bytes);
    init_part(m);
    tie_stages(m);
    model_declare_weights(m);
    if (be->weights_ready) be->weights_ready(ctx, m->params, m->nparams); /* may allocate */
}

void model_build(Model *m, const ModelDesc *d, int in_c, int in_h, int in_w, int classes, int batch,
                 const BackendOps *be, BackendCtx *ctx, uint64_t seed) {
    model_build_part(m, d, in_c, in_h, in_w, classes, batch, 1, 0, d->nlayers, be, ctx, seed);
    model_use_optimizer(m, 0); /* SGD's momentum: what the tests' steps need */
}

void model_free(Model *m) {
    if (m->be) {
        BackendCtx *c = m->ctx;
        for (int i = m->first; i < m->last; i++) {
            Layer *L = &m->layers[i];
            void *bufs[] = {L->in_place ? NULL : L->y,
                            L->dy_full && !L->in_place && L->dy != L->y ? L->dy : NULL, L->argmax,
                            L->mask, L->aux};
            for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++)
                if (bufs[j]) m->be->free(c, bufs[j]);
        }
        void *bufs[] = {m->params,       m->grads,      m->momentum, m->buffers,
                        m->x,            m->dx,         m->labels,   m->work,
                        m->grad_scratch, m->dy_scratch, m->stats,    m->x_act,
                        m->origin,       m->variance,   m->tied_w,   m->tied_grad,
                        m->loss_scale_dev};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) m->be->free(c, bufs[i]);
        for (int i = 0; i < m->ndy_pool; i++)
            m->be->free(c, m->dy_pool[i]);
    }
    free(m->dy_pool);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

/* The optional backend functions L calls. */
static const LayerOp *layer_needs(const Layer *L) {
    return layer_kind(L->d.kind)->needs;
}

static int backend_has(const BackendOps *be, size_t offset) {
    void (*fn)(void);
    memcpy(&fn, (const char *)be + offset, sizeof fn);
    return fn != NULL;
}

const char *model_missing_op(const Model *m, const BackendOps *be, int microbatches,
                             const char **layer) {
    static const LayerOp axpy = LAYER_OP(axpy), scale = LAYER_OP(scale);
    for (int i = m->first; i < m->last; i++) {
        const Layer *L = &m->layers[i];
        *layer = L->d.name;
        if ((L->consumers > 1 || microbatches > 1) && !backend_has(be, axpy.offset))
            return axpy.name; /* gradients added up */
        if (microbatches > 1 && !backend_has(be, scale.offset))
            return scale.name; /* the loss gradient / M */
        for (const LayerOp *op = layer_needs(L); op->offset; op++)
            if (!backend_has(be, op->offset)) return op->name;
    }
    *layer = NULL;
    return NULL;
}

void model_set_sample_origin(Model *m, uint64_t origin) {
    m->sample_origin = origin;
    if (m->origin) m->be->upload(m->ctx, m->origin, &m->sample_origin, sizeof m->sample_origin);
}

void model_set_loss_scale(Model *m, float scale) {
    const int changed = scale != m->loss_scale;
    m->loss_scale = scale;
    if (!m->be->device_memory || !m->be->scale_by) return;
    if (!m->loss_scale_dev) {
        m->loss_scale_dev = m->be->alloc(m->ctx, sizeof *m->loss_scale_dev);
        m->be->upload(m->ctx, m->loss_scale_dev, &m->loss_scale, sizeof m->loss_scale);
    } else if (changed) {
        m->be->upload(m->ctx, m->loss_scale_dev, &m->loss_scale, sizeof m->loss_scale);
    }
}

/* ---- forward, loss, backward -------------------------------------------------------------- */

/* A row-parallel row on a rank other than the group's first: its output is a partial sum, to
 * which rank 0 alone adds the bias. */
static int tensor_partial(const Model *m, const Layer *L) {
    return L->tp_role == TP_ROW && m->tp.rank != 0;
}

static float *param(const Model *m, size_t off) {
    return m->params + (off - m->param_base);
}

void model_forward_part(Model *m, int s0, int n, int slot, int train) {
    if (slot == 0 && m->be->weights_ready) /* a step's first micro-batch: its weights are final */
        m->be->weights_ready(m->ctx, m->params, m->nparams);
    if (m->x_act)
        m->be->input_to_act(m->ctx, n, m->in_c, m->in_h, m->in_w, m->x + (size_t)s0 * m->x_size,
                            layer_act_offset(m->x_act, (size_t)s0 * m->x_size, m->act_bytes));
    for (int at = m->first; at < m->last; at++) {
        const int i = m->layers[at].exec_as; /* the row run here (model_fuse.c) */
        if (i < 0 || m->layers[i].fwd_fused) continue;
        Layer *L = &m->layers[i];
        const LayerStep s = {
            .m = m,
            .L = L,
            .i = i,
            .s0 = s0,
            .n = n,
            .slot = slot,
            .train = train,
            .x = layer_input_y(m, L, 0, s0),
            .w = param(m, L->w_off),
            .b = L->nb && !tensor_partial(m, L) ? param(m, L->b_off) : NULL, /* NULL: none */
            .y = layer_y_at(m, L, s0),
        };
        if (m->observer) model_observe(&s, LAYER_FORWARD_BEGIN);
        layer_kind(L->d.kind)->forward(&s);
        if (L->tp_role == TP_ROW) /* the partial sums of the group: Megatron's g */
            m->tp.allreduce(m->tp.user, s.y, (size_t)n * L->out_size);
        if (m->observer) model_observe(&s, LAYER_FORWARD_END);
    }
}

void model_loss_queue(Model *m, int s0, int n, int train, float grad_scale) {
    Layer *L = &m->layers[m->nlayers - 1];
    const int rows = n * m->label_size;
    float *logits = layer_y_at(m, L, s0);
    float *dlogits = train ? layer_dy_at(m, L, s0) : NULL;
    m->be->softmax_xent(m->ctx, rows, m->classes, logits, m->labels + (size_t)s0 * m->label_size,
                        dlogits, m->stats);
    if (dlogits && m->loss_scale_dev) { /* fp16: the scale read when the kernel runs */
        m->be->scale_by(m->ctx, (size_t)rows * m->classes, grad_scale, m->loss_scale_dev, dlogits);
        return;
    }
    if (m->loss_scale > 0.0f) grad_scale *= m->loss_scale; /* fp16: the scaled loss's gradient */
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

void model_backward_part(Model *m, int s0, int n, int slot, int accumulate) {
    model_backward_part_hook(m, s0, n, slot, accumulate, NULL, NULL);
}

void model_backward_part_hook(Model *m, int s0, int n, int slot, int accumulate, GradsReadyFn ready,
                              void *user) {
    const BackendOps *be = m->be;
    BackendCtx *ctx = m->ctx;
    for (int at = m->last - 1; at >= m->first; at--) {
        const int i = m->layers[at].exec_as; /* the row run here (model_fuse.c) */
        /* grads from the layer at `at` on are final: layers run last to first, the parameter
         * buffer holds them in forward order, and a row run later in the backward order than
         * its place (a batch norm run at its residual add's place) ran before it */
        const Layer *A = &m->layers[at];
        if (i < 0) {
            if (ready && A->nparams) ready(user, A->w_off - m->param_base);
            continue;
        }
        Layer *L = &m->layers[i];
        const LayerKindOps *K = layer_kind(L->d.kind);
        float *g = L->nparams
                       ? (accumulate ? m->grad_scratch : m->grads + (L->w_off - m->param_base))
                       : NULL;
        float *target[LAYER_MAX_INPUTS], *dest[LAYER_MAX_INPUTS];
        for (int k = 0; k < L->ninputs; k++) {
            target[k] = layer_input_grad(m, L, k, s0);
            dest[k] = target[k] && !layer_last_reader(m, i, k) ? m->dy_scratch : target[k];
        }
        const LayerStep s = {
            .m = m,
            .L = L,
            .i = i,
            .s0 = s0,
            .n = n,
            .slot = slot,
            .train = 1,
            .x = layer_input_y(m, L, 0, s0),
            .w = param(m, L->w_off),
            .accumulate = accumulate,
            .dy = layer_dy_at(m, L, s0),
            .dw = g,
            .db = g && L->nb ? g + L->nw : NULL,
            .dx = dest[0],
            .dest = dest,
            .target = target,
        };
        if (m->observer) model_observe(&s, LAYER_BACKWARD_BEGIN);
        K->backward(&s);
        if (L->tp_role == TP_COLUMN && s.dx) /* the input's gradient, summed: Megatron's f */
            m->tp.allreduce(m->tp.user, s.dx, (size_t)n * layer_input_size(m, L, 0));
        if (!(K->flags & LK_OWN_INPUT_GRADS))
            layer_finish_input_grad(&s, 0, (size_t)n * layer_input_size(m, L, 0));
        if (accumulate && L->nparams)
            be->axpy(ctx, L->nparams, 1.0f, m->grad_scratch, m->grads + (L->w_off - m->param_base));
        if (m->observer) model_observe(&s, LAYER_BACKWARD_END);
        if (ready && A->nparams) ready(user, A->w_off - m->param_base);
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

int model_unscale_grads(Model *m) {
    if (!m->be->all_finite(m->ctx, m->nparams, m->grads)) return 0;
    if (m->loss_scale > 0.0f && m->loss_scale != 1.0f)
        m->be->scale(m->ctx, m->nparams, 1.0f / m->loss_scale, m->grads);
    return 1;
}
