/* test_act_observe.c - what the model tells an observer (src/model/model_observe.c) and the profile
 * (src/results/profile.c) when rows are fused and activations are stored in another format, and how
 * --act-layout is resolved (src/model/model_format.c), on the CPU through the fake backend of
 * tests/act_fake.c:
 *   - events: a fused group reports once, under the row that ran it, with `last` its last row
 *     (BN->ReLU, BN->add->ReLU, a convolution's forward with its ReLU), the fused rows report
 *     nothing in that direction (the convolution's ReLU still reports its backward), a batch norm
 *     fused with an add reports the add's other input's gradient (dz);
 *   - every tensor an event points at, read with model_act_download from a fused NHWC model (fp32
 *     and bf16), equals the unfused CPU backend's tensor of the same rows (outputs of `last`,
 *     output gradients, parameter and input gradients, dz as the add's input gradient) within
 *     1e-5 (fp32) or, storing bf16, layer_compare's chained bf16 tolerance (0.3 normwise);
 *     model_act_upload then model_act_download gives the values rounded to bf16;
 *   - the per-layer profile on a fused model: a finite time >= 0 for every row that ran in a
 *     direction, exactly 0 for the rows fused into another (no read of a mark never made);
 *   - model_choose_layout: auto takes the backend's NHWC format where the model runs it and NCHW
 *     fp32 for a model with LSTM layers or on a backend with NCHW only; nhwc is refused there
 *     with the reason; nchw always gives NCHW fp32. */
#include "act_fake.h"
#include "half_bits.h" /* defines: gc_bf16_* */
#include "harness.h"
#include "layers.h"
#include "profile.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_resnet8, model_lstm32, model_lenet;

enum { BATCH = 4 };

/* ---- a model on a backend, one training step ----------------------------------------------- */

typedef struct {
    const BackendOps *be;
    BackendCtx *ctx;
    Model m;
} Run;

static void build(Run *r, const ModelDesc *d, const BackendOps *be) {
    BackendConfig cfg = {.threads = 1};
    r->be = be;
    be->init(&cfg, &r->ctx);
    model_build(&r->m, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH, be, r->ctx, 5);
    act_fake_grads = r->m.grads, act_fake_ngrads = r->m.nparams;
    const size_t nx = (size_t)BATCH * r->m.x_size;
    float *x = xmalloc(nx * sizeof *x);
    int32_t labels[BATCH];
    for (size_t i = 0; i < nx; i++)
        x[i] = sinf(0.41f * (float)i) + 0.3f * cosf(0.013f * (float)(i * i % 911));
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 2 + 1) % r->m.classes;
    be->upload(r->ctx, r->m.x, x, nx * sizeof *x);
    be->upload(r->ctx, r->m.labels, labels, sizeof labels);
    free(x);
}

static void step(Run *r, LayerObserver *o) {
    model_set_observer(&r->m, o);
    model_forward(&r->m, BATCH, 1, NULL);
    model_backward(&r->m, BATCH);
    model_set_observer(&r->m, NULL);
}

static void finish(Run *r) {
    model_free(&r->m);
    r->be->finalize(r->ctx);
}

/* ---- the reference's tensors, per row ---------------------------------------------------------
 */

typedef struct {
    float *out, *dy, *dw, *dx[LAYER_MAX_INPUTS];
    int fwd_events, bwd_events, last;
} Rec;
static Rec *ref, *got; /* [nlayers] */

static float *act(const Model *m, int producer, const float *dev) {
    const size_t n = (size_t)BATCH * (producer < 0 ? m->x_size : m->layers[producer].out_size);
    float *h = xmalloc((n + 1) * sizeof *h);
    model_act_download(m, producer, dev, BATCH, h);
    return h;
}
static float *params(const Model *m, const float *dev, size_t n) {
    float *h = xmalloc((n + 1) * sizeof *h);
    m->be->download(m->ctx, h, dev, n * sizeof *h);
    return h;
}

/* Records every event's tensors under the rows they belong to, as layer_compare does. */
static void record(void *user, const Model *m, const LayerEvent *e) {
    Rec *r = user;
    const Layer *L = &m->layers[e->layer];
    switch (e->kind) {
    case LAYER_FORWARD_END:
        r[e->layer].fwd_events++, r[e->layer].last = e->last;
        r[e->last].out = act(m, e->last, e->y);
        break;
    case LAYER_BACKWARD_BEGIN:
        r[e->last].dy = act(m, e->last, m->layers[e->last].dy);
        break;
    case LAYER_BACKWARD_END:
        r[e->layer].bwd_events++;
        if (e->dw) r[e->layer].dw = params(m, e->dw, L->nparams);
        for (int k = 0; k < L->ninputs; k++)
            if (e->dx[k]) r[e->layer].dx[k] = act(m, L->inputs[k], e->dx[k]);
        if (e->dz)
            r[e->dz_layer].dx[e->dz_input] =
                act(m, m->layers[e->dz_layer].inputs[e->dz_input], e->dz);
        break;
    default:
        break;
    }
}

static void free_recs(Rec *r, int n) {
    for (int i = 0; i < n; i++) {
        free(r[i].out), free(r[i].dy), free(r[i].dw);
        for (int k = 0; k < LAYER_MAX_INPUTS; k++)
            free(r[i].dx[k]);
    }
    free(r);
}

/* ||a - b|| / ||a|| within tol (both present) */
static double worst; /* the largest seen */
static int close_norm(const float *a, const float *b, size_t n, double tol) {
    if (!a || !b) return 0;
    double dd = 0, aa = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i])) return 0;
        dd += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), aa += (double)a[i] * a[i];
    }
    const double rel = aa > 0 ? sqrt(dd / aa) : dd > 0 ? INFINITY : 0;
    worst = fmax(worst, rel);
    return rel <= tol;
}

/* The fused fake's tensors against the CPU's, row by row. */
static void test_events(const ModelDesc *d, ActFormat f, double tol) {
    Run c, g;
    act_fake_format = f;
    build(&c, d, &cpu_backend);
    build(&g, d, act_fake_backend(1));
    const int n = c.m.nlayers;
    ref = xcalloc((size_t)n, sizeof *ref), got = xcalloc((size_t)n, sizeof *got);
    LayerObserver oc = {record, ref}, og = {record, got};
    step(&c, &oc), step(&g, &og);
    int bad = 0, groups = 0, dz = 0, tensors = 0;
    worst = 0;
    for (int i = 0; i < n; i++) {
        const Layer *L = &g.m.layers[i];
        const size_t out = (size_t)BATCH * L->out_size;
        /* events: where each row ran (model_fuse.c's choice; a batch norm fused with an add runs
         * at the add's place) */
        int place_run = 0;
        for (int at = 0; at < n; at++)
            place_run |= g.m.layers[at].exec_as == i;
        if (got[i].fwd_events != (place_run && !L->fwd_fused) || got[i].bwd_events != place_run)
            bad++, printf("  row %d %s: %d forward, %d backward events\n", i, L->d.name,
                          got[i].fwd_events, got[i].bwd_events);
        if (got[i].fwd_events && got[i].last != (L->fuse_relu >= 0 ? L->fuse_relu : i)) bad++;
        groups += got[i].fwd_events && got[i].last != i;
        /* tensors: every one the fused run produced, against the CPU's */
        const float *pairs[][2] = {{ref[i].out, got[i].out}, {ref[i].dy, got[i].dy}};
        for (int k = 0; k < 2; k++)
            if (pairs[k][1] && ++tensors && !close_norm(pairs[k][0], pairs[k][1], out, tol))
                bad++, printf("  row %d %s: %s differs\n", i, L->d.name, k ? "dy" : "output");
        if (got[i].dw && ++tensors && !close_norm(ref[i].dw, got[i].dw, L->nparams, tol))
            bad++, printf("  row %d %s: parameter gradient differs\n", i, L->d.name);
        for (int k = 0; k < L->ninputs; k++) {
            const int p = L->inputs[k];
            if (!got[i].dx[k]) continue;
            tensors++;
            dz += L->d.kind == LAYER_ADD; /* only a fused batch norm's dz reaches an add's row */
            const size_t cnt = (size_t)BATCH * (p < 0 ? g.m.x_size : g.m.layers[p].out_size);
            if (!close_norm(ref[i].dx[k], got[i].dx[k], cnt, tol))
                bad++, printf("  row %d %s: input %d gradient differs\n", i, L->d.name, k);
        }
    }
    EXPECT(bad == 0 && groups > 0 && tensors > 0 && dz > 0,
           "%s, %s %s fused: events where the rows ran, %d fused groups under their first row, "
           "%d tensors (%d add gradients through dz) equal to the unfused CPU's within %g (%d "
           "not; largest ||a-b||/||a|| %.2g)",
           d->name, ACT_LAYOUT_NAME(f.layout), ACT_TYPE_NAME(f.type), groups, tensors, dz, tol, bad,
           worst);
    free_recs(ref, n), free_recs(got, n);
    finish(&c), finish(&g);
}

/* upload then download: the values rounded to the format */
static void test_round_trip(void) {
    Run g;
    act_fake_format = (ActFormat){ACT_NHWC, ACT_BF16};
    build(&g, &act_fake_joins, act_fake_backend(0));
    const Layer *L = &g.m.layers[0];
    const size_t n = (size_t)BATCH * L->out_size;
    float *v = xmalloc(n * sizeof *v), *back = xmalloc(n * sizeof *back);
    for (size_t i = 0; i < n; i++)
        v[i] = 1.0f + (float)i / 3.0f;
    model_act_upload(&g.m, 0, L->y, v, BATCH);
    model_act_download(&g.m, 0, L->y, BATCH, back);
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += back[i] != gc_bf16_to_float(gc_bf16_from_float(v[i]));
    /* stored NHWC: the value of (n 0, c 1, pixel 0) is the second one stored */
    uint16_t raw[2];
    g.be->download(g.ctx, raw, L->y, sizeof raw);
    bad += gc_bf16_to_float(raw[1]) != back[(size_t)L->out_h * L->out_w];
    EXPECT(bad == 0,
           "model_act_upload then model_act_download on NHWC bf16: the values rounded "
           "to bf16, stored channels innermost (%d wrong)",
           bad);
    free(v), free(back);
    finish(&g);
}

/* ---- the profile of a fused model -------------------------------------------------------------
 */

static void test_profile(void) {
    Run g;
    act_fake_format = (ActFormat){ACT_NHWC, ACT_FP32};
    build(&g, &model_resnet8, act_fake_backend(1));
    const int n = g.m.nlayers;
    LayerProfile *p = profile_create(&g.m, 0, 1);
    double *fw = xcalloc((size_t)n, sizeof *fw), *bw = xcalloc((size_t)n, sizeof *bw), cost;
    profile_begin(p, 0);
    model_forward(&g.m, BATCH, 1, NULL);
    model_backward(&g.m, BATCH);
    const int idx = profile_end(p, 0, fw, bw, &cost);
    int bad = idx != 0, zero_fwd = 0, zero_bwd = 0;
    for (int i = 0; i < n; i++) {
        const Layer *L = &g.m.layers[i];
        int place_run = 0;
        for (int at = 0; at < n; at++)
            place_run |= g.m.layers[at].exec_as == i;
        const int ran_fwd = place_run && !L->fwd_fused, ran_bwd = place_run;
        bad += !(isfinite(fw[i]) && fw[i] >= 0 && isfinite(bw[i]) && bw[i] >= 0);
        bad += (!ran_fwd && fw[i] != 0.0) + (!ran_bwd && bw[i] != 0.0);
        zero_fwd += !ran_fwd, zero_bwd += !ran_bwd;
    }
    EXPECT(bad == 0 && zero_fwd > 0 && zero_bwd > 0,
           "profile of fused ResNet-8: every row that ran has a finite time >= 0, the %d rows "
           "fused forward and %d fused backward read 0 (%d wrong)",
           zero_fwd, zero_bwd, bad);
    profile_free(p);
    free(fw), free(bw);
    finish(&g);
}

/* ---- --act-layout ------------------------------------------------------------------------------
 */

static void test_choose(void) {
    static const struct {
        const ModelDesc *d;
        int fake; /* the fake (NHWC bf16) or the CPU backend (NCHW only) */
        ActLayoutChoice choice;
        int ok;
        ActLayout layout;
        const char *why; /* a word the refusal names */
    } cases[] = {
        {&model_lenet, 1, ACT_LAYOUT_AUTO, 1, ACT_NHWC, NULL},
        {&model_resnet8, 1, ACT_LAYOUT_NHWC, 1, ACT_NHWC, NULL},
        {&model_lenet, 1, ACT_LAYOUT_NCHW, 1, ACT_NCHW, NULL},
        {&model_lstm32, 1, ACT_LAYOUT_AUTO, 1, ACT_NCHW, NULL},
        {&model_lstm32, 1, ACT_LAYOUT_NHWC, 0, ACT_NCHW, "LSTM"},
        {&model_lenet, 0, ACT_LAYOUT_AUTO, 1, ACT_NCHW, NULL},
        {&model_lenet, 0, ACT_LAYOUT_NHWC, 0, ACT_NCHW, "NCHW"},
    };
    act_fake_format = (ActFormat){ACT_NHWC, ACT_BF16};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ModelDesc *d = cases[i].d;
        Model plan;
        model_plan(&plan, d, d->in_c, d->in_h, d->in_w, d->classes, 2);
        ActLayout layout = (ActLayout)-1;
        ActFormat f = {(ActLayout)-1, (ActType)-1};
        char why[320] = "";
        const int ok =
            model_choose_layout(&plan, cases[i].fake ? act_fake_backend(0) : &cpu_backend,
                                PRECISION_BF16, cases[i].choice, &layout, &f, why, sizeof why) == 0;
        const int want_bf16 = cases[i].ok && cases[i].layout == ACT_NHWC;
        EXPECT(ok == cases[i].ok &&
                   (!ok ||
                    (layout == cases[i].layout && f.type == (want_bf16 ? ACT_BF16 : ACT_FP32))) &&
                   (ok || strstr(why, cases[i].why)),
               "--act-layout %s, %s on the %s backend: %s %s %s",
               NAME_OF(ACT_LAYOUT_NAMES, cases[i].choice), d->name,
               cases[i].fake ? "fake NHWC bf16" : "CPU",
               ok ? "runs" : "refused:", ok ? ACT_LAYOUT_NAME(layout) : why,
               ok ? ACT_TYPE_NAME(f.type) : "");
        model_free(&plan);
    }
    Model plan; /* a pipeline stage: NCHW fp32 only */
    model_plan(&plan, &model_lenet, 1, 28, 28, 10, 2);
    plan.first = 2;
    const char *why = model_format_problem(&plan, (ActFormat){ACT_NHWC, ACT_BF16});
    EXPECT(why && strstr(why, "pipeline"), "a pipeline stage cannot store NHWC bf16: %s",
           why ? why : "(accepted)");
    plan.first = 0;
    model_free(&plan);
}

int main(void) {
    test_events(&act_fake_joins, (ActFormat){ACT_NHWC, ACT_FP32}, 1e-5);
    test_events(&model_resnet8, (ActFormat){ACT_NHWC, ACT_FP32}, 1e-5);
    /* bf16 storage, chained through the step: layer_compare's chained bf16 tolerance (measured:
     * 0.23 at worst on ResNet-8, whose batch norms over 4 samples amplify the rounding) */
    test_events(&act_fake_joins, (ActFormat){ACT_NHWC, ACT_BF16}, 0.3);
    test_events(&model_resnet8, (ActFormat){ACT_NHWC, ACT_BF16}, 0.3);
    test_round_trip();
    test_profile();
    test_choose();
    return check_summary();
}
