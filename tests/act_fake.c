/* act_fake.c - the fake activation-format backend of act_fake.h: a configuration of the fake
 * device (kernels/fake/fake_device.h) whose hook runs the CPU backend's layer kernels on fp32 NCHW
 * copies of their activations, converted from the declared format and back. */
#include "act_fake.h"
#include "fake_device.h" /* defines: FakeDevice, FAKE_ARGS, fake_device_run */
#include "fused_rows.h"  /* defines: fused_rows_install */
#include "half_bits.h"   /* defines: gc_bf16_*, gc_fp16_* */
#include "layout.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ActFormat act_fake_format;
int act_fake_round;
const float *act_fake_grads;
size_t act_fake_ngrads;
int act_fake_weights_calls, act_fake_bad_filters;
const float *act_fake_weights_seen;

#define FMT      act_fake_format
#define ACTS_MAX 12 /* tensors of one call: more than a concatenation of the model has */

/* ---- conversions --------------------------------------------------------------------------- */

static float widen(uint16_t h) {
    return FMT.type == ACT_FP16 ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
}
static uint16_t narrow(float v, ActType t) {
    return t == ACT_FP16 ? gc_fp16_from_float(v) : gc_bf16_from_float(v);
}

static float *fbuf(size_t n) {
    return xmalloc((n ? n : 1) * sizeof(float));
}

/* n values of x (fmt) as fp32 and back; flat: no permutation */
static float *flat_in(const float *x, size_t n) {
    float *t = fbuf(n);
    if (FMT.type == ACT_FP32)
        memcpy(t, x, n * sizeof *t);
    else
        for (size_t i = 0; i < n; i++)
            t[i] = widen(((const uint16_t *)x)[i]);
    return t;
}
static void flat_out(const float *t, size_t n, float *x) {
    if (FMT.type != ACT_FP32) {
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)x)[i] = narrow(t[i], FMT.type);
        return;
    }
    if (act_fake_round) {
        for (size_t i = 0; i < n; i++) {
            const uint16_t h = narrow(t[i], (ActType)act_fake_round);
            x[i] = act_fake_round == ACT_FP16 ? gc_fp16_to_float(h) : gc_bf16_to_float(h);
        }
    } else if (x != t) {
        memcpy(x, t, n * sizeof *t);
    }
}
/* an image tensor [n, c, hw] in fmt as fp32 NCHW, and back */
static float *img_in(const float *x, size_t n, size_t c, size_t hw) {
    float *t = flat_in(x, n * c * hw);
    if (FMT.layout == ACT_NCHW) return t;
    float *u = fbuf(n * c * hw);
    layout_to_nchw(n, c, hw, t, u);
    free(t);
    return u;
}
static void img_out(const float *t, size_t n, size_t c, size_t hw, float *x) {
    if (FMT.layout == ACT_NCHW) {
        flat_out(t, n * c * hw, x);
        return;
    }
    float *u = fbuf(n * c * hw);
    layout_to_nhwc(n, c, hw, t, u);
    flat_out(u, n * c * hw, x);
    free(u);
}

/* One call's activations as fp32 NCHW: inputs converted (in_act), outputs computed into buffers
 * (out_act; NULL for a NULL tensor) that done() converts back into the format, and every buffer
 * freed. A tensor is an image [n, c, hw], or n flat values (hw 0). */
typedef struct {
    float *t, *x;
    size_t n, c, hw;
    const FcShape *fc; /* a fully connected layer's weight gradient, mapped back */
} ActOut;
typedef struct {
    float *tmp[ACTS_MAX];
    ActOut out[ACTS_MAX];
    int ntmp, nout;
    const float *xs[ACTS_MAX]; /* a concatenation's inputs, and its gradients */
    float *dxs[ACTS_MAX];
    DropoutShape nchw; /* a dropout's shape over the converted tensor */
} Acts;
static float *keep(Acts *a, float *t) {
    a->tmp[a->ntmp++] = t;
    return t;
}
static const float *in_act(Acts *a, const float *x, size_t n, size_t c, size_t hw) {
    return keep(a, hw ? img_in(x, n, c, hw) : flat_in(x, n));
}
static float *out_act(Acts *a, float *x, size_t n, size_t c, size_t hw) {
    if (!x) return NULL;
    float *t = keep(a, fbuf(hw ? n * c * hw : n));
    a->out[a->nout++] = (ActOut){t, x, n, c, hw, NULL};
    return t;
}
static void done(Acts *a) {
    for (int i = 0; i < a->nout; i++) {
        const ActOut *o = &a->out[i];
        if (o->fc)
            fc_weights_from_nhwc(o->fc->out, o->fc->flat_c, o->fc->flat_hw, o->t, o->x);
        else if (o->hw)
            img_out(o->t, o->n, o->c, o->hw, o->x);
        else
            flat_out(o->t, o->n, o->x);
    }
    for (int i = 0; i < a->ntmp; i++)
        free(a->tmp[i]);
}

/* ---- format, input, gradient sums ------------------------------------------------------------ */

static int f_format_for(Precision p, ActLayout layout, ActFormat *f, char *why, size_t len) {
    (void)p, (void)why, (void)len;
    *f = layout == ACT_NHWC ? FMT : (ActFormat){ACT_NCHW, ACT_FP32};
    return 1;
}
static void f_format(BackendCtx *c, ActFormat *f) {
    (void)c, *f = FMT;
}
static void f_input(BackendCtx *c, int n, int ch, int h, int w, const float *x, float *xa) {
    (void)c, img_out(x, n, ch, (size_t)h * w, xa);
}
static void f_act_add(BackendCtx *c, size_t n, const float *x, float *y) {
    float *a = flat_in(x, n), *b = flat_in(y, n);
    cpu_backend.axpy(c, n, 1.0f, a, b);
    flat_out(b, n, y);
    free(a), free(b);
}
/* The reference of 16-bit storage (act_fake_round): its axpy also rounds, as act_add does, except
 * on the parameters' gradients (micro-batches summed, fp32 in every format). */
static void f_axpy(BackendCtx *c, size_t n, float alpha, const float *x, float *y) {
    cpu_backend.axpy(c, n, alpha, x, y);
    if (act_fake_round && !(y >= act_fake_grads && y < act_fake_grads + act_fake_ngrads))
        flat_out(y, n, y);
}

/* ---- parameters: counted, and the convolutions' declared places checked ---------------------- */

static ConvWeights *declared;
static int ndeclared;
static void f_weights_layout(BackendCtx *c, const ConvWeights *cw, int n) {
    (void)c;
    free(declared);
    declared = xcalloc((size_t)n + 1, sizeof *cw);
    memcpy(declared, cw, (size_t)n * sizeof *cw);
    ndeclared = n;
}
static void f_weights_ready(BackendCtx *c, const float *params, size_t n) {
    (void)c, (void)n;
    act_fake_weights_calls++, act_fake_weights_seen = params;
}
/* w (and b) are where weights_layout put a filter of shape s */
static void check_filter(const ConvShape *s, const float *w, const float *b) {
    const float *p = act_fake_weights_seen;
    for (int i = 0; p && i < ndeclared; i++) {
        const ConvWeights *d = &declared[i];
        if (w != p + d->w_off) continue;
        const int bias_ok = d->b_off == SIZE_MAX ? b == NULL : b == p + d->b_off;
        if (d->k == s->c_out && d->c == s->c_in && d->khw == s->k * s->k && bias_ok) return;
    }
    act_fake_bad_filters++;
}

/* ---- the layer kernels: which arguments are activations, of which shape -----------------------
 */

/* fc: features as stored (pixel-major after an NHWC flatten: the weights mapped) */
static int fc_mapped(const FcShape *s) {
    return FMT.layout == ACT_NHWC && s->flat_c;
}
static const float *fc_weights(Acts *a, const FcShape *s, const float *w) {
    if (!fc_mapped(s)) return w;
    float *t = keep(a, fbuf((size_t)s->out * s->in));
    fc_weights_to_nhwc(s->out, s->flat_c, s->flat_hw, w, t);
    return t;
}
static float *fc_weights_out(Acts *a, const FcShape *s, float *dw) {
    if (!fc_mapped(s)) return dw;
    float *t = keep(a, fbuf((size_t)s->out * s->in));
    a->out[a->nout++] = (ActOut){.t = t, .x = dw, .fc = s};
    return t;
}
/* a concatenation's rows as the model passes them (samples, or pixels in NHWC) */
static size_t row_size(const size_t *sizes, int k) {
    size_t total = 0;
    for (int i = 0; i < k; i++)
        total += sizes[i];
    return total;
}
static const float *const *in_rows(Acts *a, const float *const *xs, int rows, int k,
                                   const size_t *sizes) {
    for (int i = 0; i < k; i++)
        a->xs[i] = in_act(a, xs[i], (size_t)rows * sizes[i], 1, 0);
    return a->xs;
}
static float *const *out_rows(Acts *a, float *const *dxs, int rows, int k, const size_t *sizes) {
    for (int i = 0; i < k; i++)
        a->dxs[i] = out_act(a, dxs[i], (size_t)rows * sizes[i], 1, 0);
    return a->dxs;
}
/* dropout: an NHWC image (s->hw > 0) converted to NCHW, where the CPU's mask applies; the mask is
 * the fake's own record, in NCHW order */
static const DropoutShape *drop_nchw(Acts *a, const DropoutShape *s) {
    a->nchw = *s;
    a->nchw.c = a->nchw.hw = 0;
    return &a->nchw;
}

/* A tensor's dimensions: an image [n, c, hw], or n flat values (s: a simple expression) */
#define IMG(n, c, hw) (size_t)(n), (size_t)(c), (size_t)(hw)
#define FLAT(n)       (size_t)(n), (size_t)1, (size_t)0
#define POOL_IN(s)    IMG(s->batch, s->c, (size_t)s->h_in * s->w_in)
#define POOL_OUT(s)   IMG(s->batch, s->c, (size_t)s->h_out * s->w_out)
#define CONV_IN(s)    IMG(s->batch, s->c_in, (size_t)s->h_in * s->w_in)
#define CONV_OUT(s)   IMG(s->batch, s->c_out, (size_t)s->h_out * s->w_out)
#define LRN(s)        IMG(s->batch, s->c, (size_t)s->h * s->w)
#define BN(s)         IMG(s->batch, s->c, s->spatial)
#define DROP(s)       s->hw ? (size_t)s->batch : s->batch * s->size, s->hw ? (size_t)s->c : 1, s->hw
#define FC_X(s)       FLAT((size_t)s->batch * s->in)
#define FC_Y(s)       FLAT((size_t)s->batch * s->out)
/* IN(arg, dims): read by the kernel; OUT(arg, dims): written by it */
#define IN(f, dims)  p->f = in_act(a, p->f, dims)
#define OUT(f, dims) p->f = out_act(a, p->f, dims)
#define CONVERT(m, ...)                                                                            \
    case BM_##m: {                                                                                 \
        FakeArgs_##m *p = FAKE_ARGS(k, m);                                                         \
        __VA_ARGS__;                                                                               \
        return 1;                                                                                  \
    }

/* The call's activations converted (1), or 0: the member runs as it is. */
static int convert(FakeCall *k, Acts *a) {
    switch (k->member) {
        CONVERT(fc_forward, IN(x, FC_X(p->s)), p->w = fc_weights(a, p->s, p->w),
                p->y = p->s->logits ? p->y : out_act(a, p->y, FC_Y(p->s)))
        CONVERT(fc_backward, IN(x, FC_X(p->s)), p->w = fc_weights(a, p->s, p->w),
                p->dy = p->s->logits ? p->dy : in_act(a, p->dy, FC_Y(p->s)), OUT(dx, FC_X(p->s)),
                p->dw = fc_weights_out(a, p->s, p->dw))
        CONVERT(conv_forward, check_filter(p->s, p->w, p->b), IN(x, CONV_IN(p->s)),
                OUT(y, CONV_OUT(p->s)))
        CONVERT(conv_backward,
                check_filter(p->s, p->w,
                             p->db ? p->w + (size_t)p->s->c_out * p->s->c_in * p->s->k * p->s->k
                                   : NULL),
                IN(x, CONV_IN(p->s)), IN(dy, CONV_OUT(p->s)), OUT(dx, CONV_IN(p->s)))
        /* the CPU's max pooling records argmax in NCHW planes, which its backward reads back */
        CONVERT(maxpool_forward, IN(x, POOL_IN(p->s)), OUT(y, POOL_OUT(p->s)))
        CONVERT(maxpool_backward, IN(dy, POOL_OUT(p->s)), OUT(dx, POOL_IN(p->s)))
        CONVERT(avgpool_forward, IN(x, POOL_IN(p->s)), OUT(y, POOL_OUT(p->s)))
        CONVERT(avgpool_backward, IN(dy, POOL_OUT(p->s)), OUT(dx, POOL_IN(p->s)))
        /* global average pooling: x [n, c, plane] (NHWC: [n, plane, c]) -> y [n, c] */
        CONVERT(global_avgpool_forward, IN(x, IMG(p->n, p->c, p->plane)), OUT(y, FLAT(p->n * p->c)))
        CONVERT(global_avgpool_backward, IN(dy, FLAT(p->n * p->c)),
                OUT(dx, IMG(p->n, p->c, p->plane)))
        /* LRN: scale is the fake's own record (NCHW, fp32) */
        CONVERT(lrn_forward, IN(x, LRN(p->s)), OUT(y, LRN(p->s)))
        CONVERT(lrn_backward, IN(x, LRN(p->s)), IN(y, LRN(p->s)), IN(dy, LRN(p->s)),
                OUT(dx, LRN(p->s)))
        CONVERT(batchnorm_forward_train, IN(x, BN(p->s)), OUT(y, BN(p->s)))
        CONVERT(batchnorm_forward_infer, IN(x, BN(p->s)), OUT(y, BN(p->s)))
        CONVERT(batchnorm_backward, IN(x, BN(p->s)), IN(dy, BN(p->s)), OUT(dx, BN(p->s)))
        /* element-wise rows: the layout does not matter, only the type */
        CONVERT(relu_forward, IN(x, FLAT(p->n)), OUT(y, FLAT(p->n)))
        CONVERT(relu_backward, IN(y, FLAT(p->n)), IN(dy, FLAT(p->n)), OUT(dx, FLAT(p->n)))
        CONVERT(add_forward, IN(a, FLAT(p->n)), IN(b, FLAT(p->n)), OUT(y, FLAT(p->n)))
        CONVERT(concat_forward, p->xs = in_rows(a, p->xs, p->batch, p->ninputs, p->sizes),
                OUT(y, FLAT(p->batch * row_size(p->sizes, p->ninputs))))
        CONVERT(concat_backward, IN(dy, FLAT(p->batch * row_size(p->sizes, p->ninputs))),
                p->dxs = out_rows(a, p->dxs, p->batch, p->ninputs, p->sizes))
        CONVERT(dropout_forward, IN(x, DROP(p->s)), OUT(y, DROP(p->s)), p->s = drop_nchw(a, p->s))
        CONVERT(dropout_backward, IN(dy, DROP(p->s)), OUT(dx, DROP(p->s)),
                p->s = drop_nchw(a, p->s))
    default:
        return 0;
    }
}

/* The fake device's hook: a layer kernel runs on converted copies, its outputs converted back. */
static int act_call(FakeCall *k) {
    Acts a = {0};
    if (!convert(k, &a)) return 1;
    fake_device_run(k);
    done(&a);
    return 0;
}

static void f_add_backward(BackendCtx *c, size_t n, const float *dy, float *da, float *db) {
    (void)c;
    const size_t bytes = n * ACT_TYPE_BYTES(FMT.type);
    if (da && da != dy) memcpy(da, dy, bytes);
    if (db && db != dy) memcpy(db, dy, bytes);
}

/* clang-format off */
static const FakeDevice ACT_FAKE = {
    .inner = &cpu_backend, .before = act_call,
    .over = {.name = "fake-format", .act_format_for = f_format_for, .activation_format = f_format,
             .input_to_act = f_input, .act_add = f_act_add, .axpy = f_axpy,
             .weights_ready = f_weights_ready, .weights_layout = f_weights_layout,
             .add_backward = f_add_backward},
};
/* clang-format on */

const BackendOps *act_fake_backend(int with_fused) {
    static BackendOps unfused, fused;
    if (!fused.name) {
        fake_device_table(&ACT_FAKE, &unfused);
        unfused.embedding_forward = NULL, unfused.embedding_backward = NULL; /* not converted */
        unfused.lstm_forward = NULL, unfused.lstm_backward = NULL;
        unfused.bn_act_forward_train = NULL, unfused.bn_act_forward_infer = NULL; /* NCHW only */
        unfused.bn_act_backward = NULL;
        fused = unfused;
        fused.name = "fake-format-fused";
        fused_rows_install(&fused, &fused, 1);
    }
    return with_fused ? &fused : &unfused;
}

/* ---- a model with every join ------------------------------------------------------------------
 */

#define ROW(kind_, name_, out_, k_, s_, p_, in_)                                                   \
    { .kind = kind_, .name = name_, .out = out_, .k = k_, .stride = s_, .pad = p_, .inputs = in_ }
static const LayerDesc JOINS[] = {
    ROW(LAYER_CONV, "conv1", 8, 3, 1, 1, NULL),
    ROW(LAYER_BATCHNORM, "bn1", 0, 0, 0, 0, NULL),
    ROW(LAYER_RELU, "relu1", 0, 0, 0, 0, NULL),
    {.kind = LAYER_CONV, .name = "conv2", .out = 8, .k = 3, .stride = 1, .pad = 1, .no_bias = 1},
    ROW(LAYER_BATCHNORM, "bn2", 0, 0, 0, 0, NULL),
    ROW(LAYER_ADD, "add", 0, 0, 0, 0, "bn2,relu1"), /* relu1 read twice: gradients summed */
    ROW(LAYER_RELU, "relu2", 0, 0, 0, 0, NULL),
    ROW(LAYER_MAXPOOL, "pool", 0, 3, 2, 1, NULL), /* [8,4,4], padded */
    {.kind = LAYER_LRN, .name = "norm", .k = 3, .alpha = 1e-3f, .beta = 0.75f, .bias = 1.0f},
    ROW(LAYER_CONV, "convA", 4, 1, 1, 0, "norm"),        /* [4,4,4] */
    ROW(LAYER_CONV, "convB", 6, 3, 1, 1, "norm"),        /* [6,4,4] */
    ROW(LAYER_RELU, "reluB", 0, 0, 0, 0, NULL),          /* fuses with convB's forward */
    ROW(LAYER_CONCAT, "cat", 0, 0, 0, 0, "convA,reluB"), /* [10,4,4] */
    {.kind = LAYER_DROPOUT, .name = "drop", .rate = 0.3f},
    ROW(LAYER_FC, "fc1", 16, 0, 0, 0, NULL), /* flattened from [10, 16 pixels] */
    ROW(LAYER_RELU, "relu3", 0, 0, 0, 0, NULL),
    ROW(LAYER_FC, "fc2", 0, 0, 0, 0, NULL),
};
const ModelDesc act_fake_joins = {.name = "joins",
                                  .about = "every join",
                                  .in_c = 3,
                                  .in_h = 8,
                                  .in_w = 8,
                                  .classes = 5,
                                  .nlayers = (int)(sizeof JOINS / sizeof JOINS[0]),
                                  .layers = JOINS};
