/* layer_compare.c - one training step of a model on two backend configurations, compared layer by
 * layer: from the same initial weights (the model's seeded initialisation) and the same batch,
 * every layer's forward output in forward order, the loss, then in backward order every layer's
 * parameter gradient and the gradient of each of its inputs (as summed so far over that input's
 * readers), and the parameters after one SGD step. For each it prints the largest absolute
 * difference and that difference relative to the largest |value| of configuration A, against the
 * tolerance of configuration B's precision, and names the first layer beyond it (index, name,
 * kind, output shape). Observation goes through the model's per-layer observer (src/model/model.h):
 * tensors are read as fp32 NCHW whatever a configuration's activation format (NHWC, 16-bit:
 * model_act_download); a fused group of B (a batch norm with its ReLU and residual add, a
 * convolution with its ReLU) is compared as a unit, its output with A's output of the group's
 * last row ("output (fused up to N)"), the add's other input's gradient with A's gradient of that
 * input ("input K (fused)"). A should be the unfused reference (the CPU backend): a tensor A
 * did not produce because it fused rows B ran separately is a failure. Max pooling's input
 * gradient is compared per tie group of B's input (tests/pool_ties.h): where 16-bit storage
 * rounds a window's two largest inputs to one value, B routes the gradient to the first of them
 * and A to the larger, both right; so B's outputs must be its windows' maxima bit for bit, its
 * gradient must sum, per group, to the group's incoming gradients within its own rounding, and
 * the per-group sums are what is compared with A's.
 *
 *   layer_compare --model NAME --a CONFIG --b CONFIG [--batch N] [--input C,H,W] [--classes K]
 *                 [--seed S] [--threads T] [--chained] [--tol-forward X] [--tol-grad X]
 *                 [--inject-grad LAYER] [--pool-positions] [--quiet]
 *   CONFIG: cpu | cpu64 | cuda[:fp32|tf32|bf16|fp16[:auto|nchw|nhwc]] | cpu:bf16 | fake:bf16|fp16
 *     the last part: --act-layout (auto, the default, as dtbench resolves it; nhwc where it
 *     cannot run: exit 77)
 *     cpu64: the CPU backend with float64 convolutions and fully connected layers (tests/cpu64.c)
 *     fake: B only: activations stored NHWC in bf16 or fp16 around the CPU's fp32 kernels, with
 *       fused rows (tests/act_fake.c): a GPU's NHWC 16-bit storage, pooling's choice of maximum
 *       among rounded values included, on any CPU; the precision's tolerances
 *   --pool-positions: max pooling's input gradient compared position by position like any other
 *     tensor (what fails where rounding makes ties: tests/test_layer_compare.sh shows it)
 *   --inject-grad LAYER: configuration B's convolution / fully connected backward adds an error
 *     as large as the whole gradient (its 2-norm) to element 0 of LAYER's weight gradient and
 *     input gradient (a test that the comparison names the layer that went wrong)
 * Default tolerances (relative to the largest |value| of the tensor, per precision of B):
 *   fp32 1e-3 forward, 1e-2 gradients; tf32 2e-2 / 1e-1; bf16, fp16 5e-2 / 2.5e-1.
 * Exit status: 0 all within, 1 a difference beyond its tolerance, 2 usage, 77 a configuration
 * this machine cannot run (no GPU, no bf16 on this CPU). */
#include "act_fake.h"    /* defines: act_fake_backend, act_fake_format */
#include "cpu64.h"       /* defines: cpu64_backend */
#include "inject_grad.h" /* defines: inject_grad_wrap, inject_grad_at */
#include "layers.h"
#include "parts.h"     /* defines: registry_backend */
#include "pool_ties.h" /* defines: pool_tie_groups, pool_group_sums, pool_check_routing */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_fcn5, model_fcn8, model_alexnet, model_vgg16,
    model_googlenet, model_resnet50, model_lstm32, model_lstm64, model_resnet8, model_gpt2,
    model_nanogpt_char;
static const ModelDesc *const MODELS[] = {
    &model_lenet,     &model_fcn5,     &model_fcn8,   &model_alexnet, &model_vgg16,
    &model_googlenet, &model_resnet50, &model_lstm32, &model_lstm64,  &model_resnet8,
    &model_gpt2,      &model_nanogpt_char};

typedef struct {
    const char *text;
    const BackendOps *be;
    Precision precision;    /* B's: the tolerances */
    Precision run;          /* the backend's arithmetic: the precision, but fp32 for the fake */
    ActLayoutChoice layout; /* --act-layout's choice: auto (the default), nchw, nhwc */
    ActLayout act_layout; /* what it resolves to for the model (model_choose_layout) */
    BackendCtx *ctx;
    Model m;
} Config;

/* ---- the tensors of configuration A, per layer --------------------------------------------- */
typedef struct {
    float *out, *dy, *params; /* forward output; output gradient at backward start; dW, db */
    float *dx[LAYER_MAX_INPUTS];
} Recorded;

static Recorded *rec;             /* [nlayers] */
static float **pool_x, **pool_dy; /* [nlayers]: B's input and output gradient of a max pooling */
/* [nlayers]: the tie groups of B's values of a row's output, from the max pooling rows reading it
 * whose backward ran: the row's gradient holds their routing and is compared per group */
static long **ties;
static float *rec_loss;
static int local = 1, quiet, beyond, named, compared, pool_positions;
static double tol_fwd, tol_grad, worst_norm;

/* n fp32 values (parameters, their gradients, the loss) */
static float *fetch(const Model *m, const float *dev, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof(float));
    m->be->download(m->ctx, h, dev, n * sizeof(float));
    return h;
}

/* an activation (or its gradient) of row `producer`, n samples, as fp32 NCHW whatever the
 * model's format (model_act_download) */
static size_t act_count(const Model *m, int producer, int n) {
    return (size_t)n * (producer < m->first ? m->x_size : m->layers[producer].out_size);
}
static float *fetch_act(const Model *m, int producer, const float *dev, int n) {
    float *h = malloc((act_count(m, producer, n) + 1) * sizeof(float));
    model_act_download(m, producer, dev, n, h);
    return h;
}

/* Prints one comparison line; counts and names the first beyond its tolerance. The tolerance
 * holds the normwise relative difference ||a - b|| / ||a|| (2-norms): a few elements that move
 * legitimately (a max-pooling window whose two largest inputs swap order under rounding sends
 * its gradient to the other one) do not fail a tensor of thousands, a systematic error does. */
static void report(const Model *m, int layer, const char *what, const float *a, const float *b,
                   size_t n, double tol) {
    double max_abs = 0, scale = 0, dd = 0, aa = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            nonfinite++;
            continue;
        }
        const double d = (double)a[i] - b[i];
        max_abs = fmax(max_abs, fabs(d));
        scale = fmax(scale, fabs((double)a[i]));
        dd += d * d, aa += (double)a[i] * a[i];
    }
    const double rel = scale > 0 ? max_abs / scale : max_abs > 0 ? INFINITY : 0;
    const double norm = aa > 0 ? sqrt(dd / aa) : dd > 0 ? INFINITY : 0;
    const int bad = nonfinite > 0 || !(norm <= tol);
    char name[96] = "loss", shape[48] = "";
    if (layer >= 0) {
        const Layer *L = &m->layers[layer];
        snprintf(name, sizeof name, "%d %s (%s)", layer, L->d.name, layer_kind(L->d.kind)->name);
        snprintf(shape, sizeof shape, "[%d,%d,%d]", L->out_c, L->out_h, L->out_w);
    }
    if (!quiet || bad)
        printf("%-40s %-16s %-8s max abs %-9.3g max/max|a| %-9.3g norm rel %-9.3g (tolerance "
               "%g)%s%s\n",
               name, shape, what, max_abs, rel, norm, tol, nonfinite ? " NON-FINITE" : "",
               bad ? " BEYOND" : "");
    if (bad && !named++)
        printf("first difference beyond tolerance: %s%s%s%s, %s\n", layer >= 0 ? "layer " : "",
               name, layer >= 0 ? ", output " : "", layer >= 0 ? shape : "", what);
    beyond += bad;
    worst_norm = fmax(worst_norm, norm);
}

/* Configuration A: records every tensor, and each layer's output gradient for the forcing. A fused
 * group (model.h's events) is recorded under the rows whose tensors it produced: its output under
 * its last row, its output gradient likewise, its input gradients under its rows. */
static void observe_a(void *user, const Model *m, const LayerEvent *e) {
    (void)user;
    const Layer *L = &m->layers[e->layer];
    if (e->kind == LAYER_FORWARD_END) rec[e->last].out = fetch_act(m, e->last, e->y, e->n);
    if (e->kind == LAYER_BACKWARD_BEGIN) {
        if (e->last == m->last - 1) rec_loss = fetch(m, m->stats, 1);
        rec[e->last].dy = fetch_act(m, e->last, m->layers[e->last].dy, e->n);
    }
    if (e->kind != LAYER_BACKWARD_END) return;
    Recorded *r = &rec[e->layer];
    if (e->dw) r->params = fetch(m, e->dw, L->nparams);
    for (int k = 0; k < L->ninputs; k++)
        if (e->dx[k]) r->dx[k] = fetch_act(m, L->inputs[k], e->dx[k], e->n);
    if (e->dz) {
        const int q = m->layers[e->dz_layer].inputs[e->dz_input];
        rec[e->dz_layer].dx[e->dz_input] = fetch_act(m, q, e->dz, e->n);
    }
}

/* B's tensor at dev (fp32 when producer < -1: parameters, loss; else an activation of that row)
 * against A's */
static void compare(const Model *m, int layer, const char *what, const float *a, const float *dev,
                    int producer, size_t n, int samples, int grad) {
    if (!a) {
        printf("configuration A has no %s of layer %d: the two ran different layers FAIL\n", what,
               layer);
        exit(1);
    }
    if (producer >= -1) n = act_count(m, producer, samples);
    float *b = producer < -1 ? fetch(m, dev, n) : fetch_act(m, producer, dev, samples);
    for (size_t i = 0; grad && m->loss_scale > 0 && i < n; i++) /* fp16: B's scaled gradients */
        b[i] /= m->loss_scale;
    float *ga = NULL;
    char label[64];
    if (grad && producer >= 0 && ties[producer]) { /* a max pooling's routing is in it */
        ga = malloc(n * sizeof *ga);
        pool_group_sums(n, ties[producer], a, ga), pool_group_sums(n, ties[producer], b, b);
        snprintf(label, sizeof label, "%s per tie group", what);
        a = ga, what = label;
    }
    report(m, layer, what, a, b, n, grad ? tol_grad : tol_fwd);
    compared++;
    free(b), free(ga);
}

/* Upload A's values of row `producer`'s output (or its gradient) into B's buffer (--local), in
 * B's format; an output gradient times B's loss scale (fp16: B's backward runs on scaled
 * gradients, and compare() divides them back). */
static void force(const Model *m, int producer, float *dev, const float *a, int samples, int grad) {
    if (!a) return;
    const size_t n = act_count(m, producer, samples);
    float *v = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = grad && m->loss_scale > 0 ? a[i] * m->loss_scale : a[i];
    model_act_upload(m, producer, dev, v, samples);
    free(v);
}

/* --local: the outputs a row (and what is fused into it) reads, A's values */
static void force_inputs(const Model *m, const Layer *L, int n) {
    for (int k = 0; k < L->ninputs; k++) {
        const int p = L->inputs[k];
        if (p >= m->first) force(m, p, m->layers[p].y, rec[p].out, n, 0);
    }
    if (L->fuse_add >= 0) { /* the residual add's other input */
        const Layer *A = &m->layers[L->fuse_add];
        const int q = A->inputs[A->inputs[0] == (int)(L - m->layers) ? 1 : 0];
        if (q >= m->first) force(m, q, m->layers[q].y, rec[q].out, n, 0);
    }
}

/* A max pooling row of its own (not fused) reading a layer's output: compared by tie groups */
static int tie_pool(const Model *m, const LayerEvent *e) {
    const Layer *L = &m->layers[e->layer];
    return !pool_positions && L->d.kind == LAYER_MAXPOOL && e->last == e->layer &&
           L->inputs[0] >= m->first;
}

/* B's unit roundoff of its stored activations and their gradients */
static double act_u(const Model *m) {
    return m->act.type == ACT_BF16 ? 0x1p-8 : m->act.type == ACT_FP16 ? 0x1p-11 : 0x1p-24;
}
static PoolShape pool_of(const Layer *L, int n) {
    return (PoolShape){n,           L->in_c,  L->in_h,  L->in_w, L->d.k,
                       L->d.stride, L->d.pad, L->out_h, L->out_w};
}

/* After B's max pooling forward: its outputs must be its windows' maxima (its own input kept for
 * the backward, which reads none) */
static void pool_forward_b(const Model *m, const LayerEvent *e) {
    const Layer *L = &m->layers[e->layer];
    const PoolShape s = pool_of(L, e->n);
    free(pool_x[e->layer]);
    float *x = pool_x[e->layer] = fetch_act(m, L->inputs[0], layer_input_y(m, L, 0, 0), e->n);
    float *y = fetch_act(m, e->layer, e->y, e->n);
    const size_t bad = pool_not_window_max(&s, x, y);
    if (!quiet || bad)
        printf("%-40s every output its window's maximum: %zu not%s\n", L->d.name, bad,
               bad ? " BEYOND" : "");
    beyond += bad > 0;
    free(y);
}

/* After B's max pooling backward: the tie groups of its input, kept for the comparisons of that
 * input's gradient; where it wrote that gradient first (the last reader in forward order), its
 * own routing of dy */
static void pool_backward_b(const Model *m, const LayerEvent *e) {
    const Layer *L = &m->layers[e->layer];
    const int p = L->inputs[0];
    const PoolShape s = pool_of(L, e->n);
    const float *x = pool_x[e->layer], *dy = pool_dy[e->layer], *xa = rec[p].out;
    if (!x || !dy || !e->dx[0]) return;
    long *group = pool_tie_groups(&s, x);
    size_t tied = 0, bad = 0;
    const size_t moved = xa ? pool_moved_maxima(&s, xa, x, &tied) : 0;
    double worst = 0;
    if (layer_last_reader(m, e->layer, 0)) {
        float *dx = fetch_act(m, p, e->dx[0], e->n);
        bad = pool_check_routing(&s, x, group, dy, dx, act_u(m), &worst);
        free(dx);
    }
    if (!quiet || bad || moved)
        printf("%-40s windows whose first maximum moved: %zu, %zu of them ties in B's values; B's "
               "gradient per tie group = its windows' (%.3g of the rounding bound): %zu not%s\n",
               L->d.name, moved, tied, worst, bad, bad ? " BEYOND" : "");
    beyond += bad > 0;
    if (ties[p]) {
        pool_merge_groups(act_count(m, p, e->n), ties[p], group);
        free(group);
    } else {
        ties[p] = group;
    }
}

/* Configuration B: compares with A's tensor of the same event; with --local, first gives the
 * layer A's inputs (forward) and A's output gradient (backward), so that each line measures the
 * layer's own arithmetic, not what it inherited. */
static void observe_b(void *user, const Model *m, const LayerEvent *e) {
    (void)user;
    const Layer *L = &m->layers[e->layer];
    const Recorded *r = &rec[e->layer];
    char what[48];
    switch (e->kind) {
    case LAYER_FORWARD_BEGIN:
        if (local) force_inputs(m, L, e->n);
        break;
    case LAYER_FORWARD_END: /* a fused group's output is its last row's */
        if (e->last != e->layer)
            snprintf(what, sizeof what, "output (fused up to %d)", e->last);
        else
            snprintf(what, sizeof what, "output");
        compare(m, e->last, what, rec[e->last].out, e->y, e->last, 0, e->n, 0);
        if (tie_pool(m, e)) pool_forward_b(m, e);
        break;
    case LAYER_BACKWARD_BEGIN:
        if (e->last == m->last - 1) compare(m, -1, "value", rec_loss, m->stats, -2, 1, 0, 0);
        if (local) force(m, e->last, m->layers[e->last].dy, rec[e->last].dy, e->n, 1);
        if (tie_pool(m, e)) {
            free(pool_dy[e->layer]);
            pool_dy[e->layer] = fetch_act(m, e->layer, m->layers[e->layer].dy, e->n);
        }
        break;
    case LAYER_BACKWARD_END:
        if (e->dw) compare(m, e->layer, "params", r->params, e->dw, -2, L->nparams, 0, 1);
        if (tie_pool(m, e)) pool_backward_b(m, e);
        for (int k = 0; k < L->ninputs; k++)
            if (e->dx[k]) {
                snprintf(what, sizeof what, "input %d", k);
                compare(m, e->layer, what, r->dx[k], e->dx[k], L->inputs[k], 0, e->n, 1);
            }
        if (e->dz) { /* the fused residual add's other input */
            const int q = m->layers[e->dz_layer].inputs[e->dz_input];
            snprintf(what, sizeof what, "input %d (fused)", e->dz_input);
            compare(m, e->dz_layer, what, rec[e->dz_layer].dx[e->dz_input], e->dz, q, 0, e->n, 1);
        }
        break;
    }
}

/* ---- set-up -------------------------------------------------------------------------------- */

static _Noreturn void usage(const char *why) {
    fprintf(stderr, "layer_compare: %s\n(see the comment at the top of tests/layer_compare.c)\n",
            why);
    exit(2);
}

static void parse_config(Config *c, const char *text) {
    char base[32], prec[16] = "";
    const char *colon = strchr(text, ':');
    snprintf(base, sizeof base, "%.*s", colon ? (int)(colon - text) : (int)strlen(text), text);
    c->text = text;
    c->precision = PRECISION_FP32;
    c->layout = ACT_LAYOUT_AUTO;
    if (colon) {
        const char *colon2 = strchr(colon + 1, ':');
        snprintf(prec, sizeof prec, "%.*s",
                 colon2 ? (int)(colon2 - colon - 1) : (int)strlen(colon + 1), colon + 1);
        if (colon2) {
            const int layout = names_find(ACT_LAYOUT_NAMES, colon2 + 1);
            if (layout < 0) usage("layout: expected auto, nchw or nhwc");
            c->layout = (ActLayoutChoice)layout;
        }
        const int p = names_find(PRECISION_NAMES, prec);
        if (p < 0) usage("precision: expected fp32, tf32, bf16 or fp16");
        c->precision = (Precision)p;
    }
    c->run = c->precision;
    if (!strcmp(base, "fake")) {
        if (c->precision != PRECISION_BF16 && c->precision != PRECISION_FP16)
            usage("fake: expected fake:bf16 or fake:fp16");
        act_fake_format =
            (ActFormat){ACT_NHWC, c->precision == PRECISION_FP16 ? ACT_FP16 : ACT_BF16};
        c->be = act_fake_backend(1), c->run = PRECISION_FP32;
        return;
    }
    /* cpu and cuda from the registry (comm/parts.c: cuda where it was built) */
    c->be = !strcmp(base, "cpu64")                          ? cpu64_backend()
            : !strcmp(base, "cpu") || !strcmp(base, "cuda") ? registry_backend(base)
                                                            : NULL;
    if (!c->be && !strcmp(base, "cuda")) {
        printf("SKIP: %s: no CUDA backend here %s\n", text, registry_load_error());
        exit(77);
    }
    if (!c->be)
        usage("configuration: expected cpu, cpu64, cuda[:precision[:layout]] or fake:bf16|fp16");
}

/* The configuration's activation layout for the planned model, as dtbench resolves it. */
static void choose_layout(Config *c, const Model *plan) {
    char why[320] = "";
    ActFormat f;
    if (model_choose_layout(plan, c->be, c->run, c->layout, &c->act_layout, &f, why, sizeof why) !=
        0) {
        printf("SKIP: %s: %s\n", c->text, why);
        exit(77);
    }
}

static void start(Config *c, int threads) {
    char why[256] = "";
    if (c->run != PRECISION_FP32 &&
        (!c->be->precision_ok || !c->be->precision_ok(c->run, threads, why, sizeof why))) {
        printf("SKIP: %s: %s\n", c->text, why[0] ? why : "precision not supported");
        exit(77);
    }
    BackendConfig cfg = {.threads = threads, .precision = c->run, .act_layout = c->act_layout};
    if (c->be->init(&cfg, &c->ctx) != 0) {
        printf("SKIP: %s: the backend cannot start here (no GPU?)\n", c->text);
        exit(77);
    }
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The batch: inputs uniform in [-1, 1) (token ids for a language model), labels uniform. */
static void upload_batch(Config *c, uint64_t seed) {
    Model *m = &c->m;
    const size_t nx = (size_t)m->batch * m->x_size, nl = (size_t)m->batch * m->label_size;
    float *x = malloc(nx * sizeof(float));
    int32_t *lab = malloc(nl * sizeof(int32_t));
    uint64_t st = seed;
    for (size_t i = 0; i < nx; i++)
        x[i] = m->desc->vocab > 0 ? (float)(splitmix(&st) % (uint64_t)m->desc->vocab)
                                  : (float)((splitmix(&st) >> 40) * (2.0 / 16777216.0) - 1.0);
    for (size_t i = 0; i < nl; i++)
        lab[i] = (int32_t)(splitmix(&st) % (uint64_t)m->classes);
    m->be->upload(m->ctx, m->x, x, nx * sizeof(float));
    m->be->upload(m->ctx, m->labels, lab, nl * sizeof(int32_t));
    free(x), free(lab);
}

static void step(Config *c, LayerObserver *o, float lr) {
    Model *m = &c->m;
    model_set_observer(m, o);
    model_forward(m, m->batch, 1, NULL);
    model_backward(m, m->batch);
    model_set_observer(m, NULL);
    if (m->loss_scale > 0) model_unscale_grads(m);
    model_sgd(m, lr, 0.9f, 0.0f);
}

/* Tolerances on ||a - b|| / ||a|| by B's precision: --local measures one layer's own rounding
 * (fp32: about 1e-7 to 1e-6 per tensor between cpu and cpu64; 16-bit: a few units of 2^-8 or
 * 2^-11), --chained what a whole step accumulates (ResNet-50 amplifies it by orders of
 * magnitude: see docs/gpu.md). */
static void default_tolerances(Precision p) {
    static const double tab[2][4][2] = {
        /* chained */ {{1e-3, 1e-2}, {2e-2, 1e-1}, {5e-2, 2.5e-1}, {5e-2, 2.5e-1}},
        /* local */ {{1e-5, 1e-4}, {5e-3, 1e-2}, {3e-2, 5e-2}, {1e-2, 2e-2}}};
    if (tol_fwd <= 0) tol_fwd = tab[local][p][0];
    if (tol_grad <= 0) tol_grad = tab[local][p][1];
}

/* The command line, less what sets the globals (--quiet, --chained, the tolerances). */
typedef struct {
    const char *model, *a_text, *b_text, *inject;
    int batch, threads, c, h, w, classes;
    uint64_t seed;
} Args;

static void parse_args(int argc, char **argv, Args *args) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "--pool-positions")) {
            pool_positions = 1;
            continue;
        }
        if (!strcmp(o, "--quiet") || !strcmp(o, "--chained")) {
            *(!strcmp(o, "--quiet") ? &quiet : &local) = !strcmp(o, "--quiet");
            continue;
        }
        if (!v) usage("an option lacks its value");
        i++;
        if (!strcmp(o, "--model"))
            args->model = v;
        else if (!strcmp(o, "--a"))
            args->a_text = v;
        else if (!strcmp(o, "--b"))
            args->b_text = v;
        else if (!strcmp(o, "--batch"))
            args->batch = atoi(v);
        else if (!strcmp(o, "--threads"))
            args->threads = atoi(v);
        else if (!strcmp(o, "--classes"))
            args->classes = atoi(v);
        else if (!strcmp(o, "--seed"))
            args->seed = strtoull(v, NULL, 10);
        else if (!strcmp(o, "--tol-forward"))
            tol_fwd = atof(v);
        else if (!strcmp(o, "--tol-grad"))
            tol_grad = atof(v);
        else if (!strcmp(o, "--inject-grad"))
            args->inject = v;
        else if (!strcmp(o, "--input")) {
            if (sscanf(v, "%d,%d,%d", &args->c, &args->h, &args->w) != 3 || args->c < 1 ||
                args->h < 1 || args->w < 1)
                usage("--input: expected C,H,W");
        } else
            usage("unknown option");
    }
}

/* --model's description for the input (the model's own unless --input), with the classes. */
static const ModelDesc *model_of(Args *args) {
    const ModelDesc *d = NULL;
    for (size_t i = 0; args->model && i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (!strcmp(MODELS[i]->name, args->model)) d = MODELS[i];
    if (!d || !args->a_text || !args->b_text || args->batch < 1 || args->threads < 1)
        usage("--model (a model of the zoo), --a, --b and a positive --batch are needed");
    if (!args->c) args->c = d->in_c, args->h = d->in_h, args->w = d->in_w;
    if (args->classes <= 0) args->classes = d->classes;
    return model_for_input(d, args->c, args->h, args->w);
}

/* The two configurations from their text, the tolerances, and the activation layouts for the
 * planned model (which also judges --inject-grad's layer). */
static void plan_configs(Config cf[2], const ModelDesc *d, const Args *args) {
    memset(cf, 0, 2 * sizeof *cf);
    parse_config(&cf[0], args->a_text), parse_config(&cf[1], args->b_text);
    if (cf[0].run != cf[0].precision) usage("fake: configuration B only"); /* A, the reference */
    default_tolerances(cf[1].precision);
    Model probe;
    model_plan(&probe, d, args->c, args->h, args->w, args->classes, args->batch);
    if (probe.problem[0]) usage(probe.problem);
    int inject_ok = 0;
    for (int i = 0; args->inject && i < probe.nlayers; i++)
        if (!strcmp(probe.layers[i].d.name, args->inject))
            inject_ok = probe.layers[i].d.kind == LAYER_CONV || probe.layers[i].d.kind == LAYER_FC;
    choose_layout(&cf[0], &probe), choose_layout(&cf[1], &probe);
    model_free(&probe);
    if (args->inject && !inject_ok)
        usage("--inject-grad: name a convolution or fully connected layer of the model");
}

/* The backends started, the models built on the same weights and batch; --inject-grad wraps B's
 * table and picks the weight gradient it perturbs. */
static void build_configs(Config cf[2], const ModelDesc *d, const Args *args) {
    for (int k = 0; k < 2; k++)
        start(&cf[k], args->threads);
    if (args->inject) cf[1].be = inject_grad_wrap(cf[1].be); /* model_build keeps the pointer */
    for (int k = 0; k < 2; k++) {
        model_build(&cf[k].m, d, args->c, args->h, args->w, args->classes, args->batch, cf[k].be,
                    cf[k].ctx, args->seed);
        if (cf[k].precision == PRECISION_FP16) cf[k].m.loss_scale = 1024.0f; /* unscaled above */
        upload_batch(&cf[k], args->seed + 1);
    }
    if (args->inject)
        for (int i = 0; i < cf[1].m.nlayers; i++)
            if (!strcmp(cf[1].m.layers[i].d.name, args->inject))
                inject_grad_at(cf[1].m.grads + (cf[1].m.layers[i].w_off - cf[1].m.param_base),
                               cf[1].m.act.type);
}

/* One step of A (recording), then of B (comparing); the parameters after it, and the verdict. */
static void run_steps(Config cf[2], const ModelDesc *d) {
    rec = calloc((size_t)d->nlayers, sizeof *rec);
    pool_x = calloc((size_t)d->nlayers, sizeof *pool_x);
    pool_dy = calloc((size_t)d->nlayers, sizeof *pool_dy);
    ties = calloc((size_t)d->nlayers, sizeof *ties);
    LayerObserver oa = {observe_a, NULL}, ob = {observe_b, NULL};
    const float lr = 0.01f;
    step(&cf[0], &oa, lr);
    step(&cf[1], &ob, lr);
    float *pa = fetch(&cf[0].m, cf[0].m.params, cf[0].m.nparams);
    float *pb = fetch(&cf[1].m, cf[1].m.params, cf[1].m.nparams);
    double pmax = 0;
    for (size_t i = 0; i < cf[0].m.nparams; i++)
        pmax = fmax(pmax, fabs((double)pa[i] - pb[i]));
    printf("parameters after one SGD step (lr %g, momentum 0.9): max abs difference %.3g\n", lr,
           pmax);
    printf("%s: %d tensor(s) beyond tolerance of %d compared (%s); largest norm rel %.3g\n",
           beyond ? "FAIL" : "PASS", beyond, compared,
           local ? "each layer on A's inputs" : "chained", worst_norm);
    free(pa), free(pb);
}

int main(int argc, char **argv) {
    Args args = {.batch = 4, .threads = 1, .seed = 3};
    parse_args(argc, argv, &args);
    const ModelDesc *d = model_of(&args);
    Config cf[2];
    plan_configs(cf, d, &args);
    build_configs(cf, d, &args);

    printf("%s: batch %d, input [%d,%d,%d], seed %llu; A = %s (%s %s), B = %s (%s %s), %s; "
           "tolerances (||a-b|| / ||a||): forward %g, gradients %g\n",
           d->name, args.batch, args.c, args.h, args.w, (unsigned long long)args.seed, args.a_text,
           ACT_LAYOUT_NAME(cf[0].m.act.layout), ACT_TYPE_NAME(cf[0].m.act.type), args.b_text,
           ACT_LAYOUT_NAME(cf[1].m.act.layout), ACT_TYPE_NAME(cf[1].m.act.type),
           local ? "each layer of B on A's inputs (--local)" : "B chained (--chained)", tol_fwd,
           tol_grad);
    run_steps(cf, d);
    for (int i = 0; i < d->nlayers; i++) {
        free(rec[i].out), free(rec[i].dy), free(rec[i].params), free(pool_x[i]), free(pool_dy[i]);
        free(ties[i]);
        for (int k = 0; k < LAYER_MAX_INPUTS; k++)
            free(rec[i].dx[k]);
    }
    free(rec), free(rec_loss), free(pool_x), free(pool_dy), free(ties);
    for (int k = 0; k < 2; k++) {
        model_free(&cf[k].m);
        cf[k].be->finalize(cf[k].ctx);
    }
    return beyond ? 1 : 0;
}
