/* test_act_format.c - the model's side of the activation-format seam (backend.h's ActFormat), on
 * the CPU, through the fake backend of tests/act_fake.c (the CPU backend behind conversions to
 * and from the declared format; optionally with fused operations made of the unfused calls).
 * The same models, seeds, inputs and steps on it and on the CPU backend give:
 *   - NHWC fp32: the CPU's losses and parameters within 1e-5 (only the flattened fc sums in
 *     another order), for LeNet (conv, max pooling, flatten, fc), a model with every join (batch
 *     norm, residual add, ReLU, padded max pooling, LRN, channel concatenation, dropout on an
 *     image, an output read by two layers: act_fake_joins), ResNet-8 (global average pooling
 *     with its channel count) and AlexNet's CIFAR variant (average pooling, LRN), whole batch and
 *     in two micro-batches (offsets of later samples), unfused and with the fused rows the GPU
 *     runs (BN->ReLU, BN->add->ReLU, conv->ReLU forward);
 *   - 16-bit storage (bf16, fp16; NCHW and NHWC): bit for bit what the fake gives storing the
 *     same rounded values in fp32 in the same layout (so every size and offset of 2-byte
 *     activations is right), and within 5e-2 of the CPU backend for bf16 (the rounding of
 *     activations through two steps on batches of 4).
 * And the model hands the backend its parameters (weights_ready, where 16-bit copies are made)
 * once when built and once per step, before the first micro-batch, never per layer or call, and
 * declares where every convolution's filter and bias lie (weights_layout), which every
 * convolution call is checked against.
 * A model that sized or offset an activation in fp32 bytes, passed a concatenation's rows in the
 * wrong layout, forgot the input conversion, dropped an NHWC image's elements by their storage
 * order or summed gradients with the fp32 axpy would read other samples' values or outside its
 * buffers (the sanitizer build catches the latter). */
#include "act_fake.h"
#include "half_bits.h" /* defines: gc_bf16_*, gc_fp16_* */
#include "harness.h"
#include "layers.h"
#include "alloc.h" /* defines: xmalloc */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_resnet8, model_alexnet;

/* one counted check (tests/harness.h), its message already formatted */
static void check(int ok, const char *what) {
    EXPECT(ok, "%s", what);
}

/* ---- training on a backend
 * ----------------------------------------------------------------------- */

enum { BATCH = 4, STEPS = 2 };

/* Two steps of SGD (micro-batches of BATCH/mb samples, gradients accumulated); the losses and the
 * final parameters come back in loss[STEPS] and a malloc'd array. */
static float *train(const ModelDesc *d, const BackendOps *be, int mb, float *loss) {
    const int fake = be != &cpu_backend;
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx = NULL;
    be->init(&cfg, &ctx);
    Model m;
    model_build_part(&m, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH, mb, 0, d->nlayers, be,
                     ctx, 11);
    model_use_optimizer(&m, 0);
    act_fake_grads = m.grads, act_fake_ngrads = m.nparams;
    const int calls_built = act_fake_weights_calls;
    const size_t nx = (size_t)BATCH * m.x_size;
    float *x = xmalloc(nx * sizeof *x);
    int32_t labels[BATCH];
    for (size_t i = 0; i < nx; i++)
        x[i] = sinf(0.37f * (float)i) + 0.25f * cosf(0.011f * (float)(i * i % 977));
    if (act_fake_round) /* as input_to_act rounds it */
        for (size_t i = 0; i < nx; i++)
            x[i] = act_fake_round == ACT_FP16 ? gc_fp16_to_float(gc_fp16_from_float(x[i]))
                                              : gc_bf16_to_float(gc_bf16_from_float(x[i]));
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 3 + 1) % m.classes;
    be->upload(ctx, m.x, x, nx * sizeof *x);
    be->upload(ctx, m.labels, labels, sizeof labels);
    const int chunk = BATCH / mb;
    for (int step = 0; step < STEPS; step++) {
        loss[step] = 0;
        for (int k = 0; k < mb; k++) {
            model_forward_part(&m, k * chunk, chunk, k, 1);
            loss[step] += model_loss_part(&m, k * chunk, chunk, 1, 1.0f / mb, NULL) / mb;
            model_backward_part(&m, k * chunk, chunk, k, k > 0);
        }
        model_sgd(&m, 0.05f, 0.9f, 1e-4f);
    }
    if (fake) { /* once when built, then once per step whatever the micro-batches */
        char what[160];
        snprintf(what, sizeof what,
                 "%s on %s, %d micro-batch(es): weights_ready once at build and once per step, on "
                 "the parameters; every convolution's filter where weights_layout put it (%d not)",
                 d->name, be->name, mb, act_fake_bad_filters);
        check(calls_built == 1 && act_fake_weights_calls == 1 + STEPS &&
                  act_fake_weights_seen == m.params && act_fake_bad_filters == 0,
              what);
        act_fake_weights_calls = act_fake_bad_filters = 0;
    }
    float *p = xmalloc(m.nparams * sizeof *p);
    be->download(ctx, p, m.params, m.nparams * sizeof *p);
    model_free(&m);
    be->finalize(ctx);
    free(x);
    return p;
}

static const char *fmt_text(ActFormat f) {
    static char t[32];
    snprintf(t, sizeof t, "%s %s", ACT_LAYOUT_NAME(f.layout), ACT_TYPE_NAME(f.type));
    return t;
}

/* d trained in format f on the fake (fused: with its fused operations), against the CPU backend
 * (ref_round 0) or against the fake storing the same values rounded to f's type in fp32 in the
 * same layout, fused the same way (ref_round 1: bit for bit, tolerances 0). */
static void compare(const ModelDesc *d, ActFormat f, int fused, int mb, int ref_round,
                    double loss_tol, double param_tol) {
    Model plan;
    model_plan(&plan, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH);
    const size_t n = plan.nparams;
    model_free(&plan);
    float lc[STEPS], lf[STEPS];
    float *pc;
    if (ref_round) {
        act_fake_format = (ActFormat){f.layout, ACT_FP32}, act_fake_round = (int)f.type;
        pc = train(d, act_fake_backend(fused), mb, lc);
        act_fake_round = 0;
    } else {
        pc = train(d, &cpu_backend, mb, lc);
    }
    act_fake_format = f, fused_rows_calls = 0;
    float *pf = train(d, act_fake_backend(fused), mb, lf);
    double worst = 0, lworst = 0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, isnan(pf[i]) ? INFINITY : fabs((double)pf[i] - pc[i]));
    for (int s = 0; s < STEPS; s++)
        lworst = fmax(lworst, fabs((double)lf[s] - lc[s]) / fmax(1e-6, fabs((double)lc[s])));
    char what[240];
    snprintf(what, sizeof what,
             "%s, %s%s, %d micro-batch(es) vs %s: losses within %.0e (%.2g), parameters within "
             "%.0e (%.2g)",
             d->name, fmt_text(f), fused ? " fused" : "", mb,
             ref_round ? "fp32 holding the same rounded values" : "the CPU backend", loss_tol,
             lworst, param_tol, worst);
    check(lworst <= loss_tol && worst <= param_tol && isfinite(lf[STEPS - 1]) &&
              (!fused || fused_rows_calls > 0),
          what);
    free(pc), free(pf);
}

int main(void) {
    const ActFormat nhwc = {ACT_NHWC, ACT_FP32}, bf16 = {ACT_NCHW, ACT_BF16};
    const ActFormat nhwc16 = {ACT_NHWC, ACT_BF16}, nhwc_fp16 = {ACT_NHWC, ACT_FP16};
    const ModelDesc *joins = &act_fake_joins, *alex = model_for_input(&model_alexnet, 3, 32, 32);
    for (int mb = 1; mb <= 2; mb++) {
        compare(&model_lenet, nhwc, 0, mb, 0, 1e-5, 1e-5);
        compare(joins, nhwc, 0, mb, 0, 1e-5, 1e-5);
        compare(joins, nhwc, 1, mb, 0, 1e-5, 1e-5);
        compare(&model_lenet, bf16, 0, mb, 1, 0, 0);
        compare(joins, bf16, 0, mb, 1, 0, 0);
        compare(joins, bf16, 0, mb, 0, 5e-2, 5e-2);
        compare(joins, nhwc16, 1, mb, 1, 0, 0);
        compare(joins, nhwc16, 1, mb, 0, 5e-2, 5e-2);
    }
    compare(joins, nhwc_fp16, 1, 1, 1, 0, 0);
    compare(&model_resnet8, bf16, 0, 1, 1, 0, 0);
    compare(&model_resnet8, bf16, 0, 1, 0, 5e-2, 5e-2);
    compare(&model_resnet8, nhwc, 1, 1, 0, 1e-5, 1e-5);
    compare(&model_resnet8, nhwc16, 1, 1, 1, 0, 0);
    compare(&model_resnet8, nhwc16, 1, 1, 0, 5e-2, 5e-2);
    compare(alex, nhwc, 1, 1, 0, 1e-5, 1e-5);
    compare(alex, nhwc16, 1, 1, 1, 0, 0);
    return check_summary();
}
