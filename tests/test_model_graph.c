/* test_model_graph.c - the model runtime's graph (src/model/model.c, src/model/layer_*.c) on the
 * CPU backend:
 *   1. the graph runtime on three small models built from the zoo's kinds of rows (a residual
 *      block with batch norm; an inception-like module with LRN, padded pools, concatenation,
 *      dropout; embedding + two LSTMs): whole-model gradients against finite differences, the
 *      same gradients from two micro-batches accumulated (with batch norm: those of two separate
 *      half batches, each micro-batch normalised with its own statistics), and from two stages
 *      glued by hand (what the pipeline does over MPI);
 *   2. every zoo model: one forward and backward pass on a tiny batch (finite loss near ln C,
 *      finite gradients). */
#include "harness.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_alexnet, model_vgg16, model_googlenet, model_resnet50, model_lstm32;

/* ---- the graph runtime on small models ---------------------------------------------------- */

#define ROW(kind_, name_, out_, k_, s_, p_)                                                        \
    .kind = kind_, .name = name_, .out = out_, .k = k_, .stride = s_, .pad = p_

/* A residual block with batch norm (ResNet's kinds of rows), on [3,8,8], 5 classes. */
static const LayerDesc TINY_RES[] = {
    {ROW(LAYER_CONV, "conv0", 6, 3, 1, 1), .no_bias = 1},
    {ROW(LAYER_BATCHNORM, "bn0", 0, 0, 0, 0)},
    {ROW(LAYER_RELU, "relu0", 0, 0, 0, 0)},
    {ROW(LAYER_CONV, "b.conv1", 6, 3, 1, 1), .no_bias = 1},
    {ROW(LAYER_BATCHNORM, "b.bn1", 0, 0, 0, 0)},
    {ROW(LAYER_RELU, "b.relu1", 0, 0, 0, 0)},
    {ROW(LAYER_CONV, "b.conv2", 6, 3, 1, 1), .no_bias = 1},
    {ROW(LAYER_BATCHNORM, "b.bn2", 0, 0, 0, 0)},
    {ROW(LAYER_ADD, "b.add", 0, 0, 0, 0), .inputs = "b.bn2,relu0"},
    {ROW(LAYER_RELU, "b.relu", 0, 0, 0, 0)},
    {ROW(LAYER_MAXPOOL, "pool", 0, 3, 2, 1)},
    {ROW(LAYER_GLOBAL_AVGPOOL, "gap", 0, 0, 0, 0)},
    {ROW(LAYER_FC, "fc", 0, 0, 0, 0)},
};
static const ModelDesc tiny_res = {.name = "tiny_res",
                                   .about = "residual block",
                                   .in_c = 3,
                                   .in_h = 8,
                                   .in_w = 8,
                                   .classes = 5,
                                   .nlayers = 13,
                                   .layers = TINY_RES};

/* An inception-like module (GoogLeNet's kinds of rows) on [3,8,8], 5 classes. */
static const LayerDesc TINY_INCEPTION[] = {
    {ROW(LAYER_CONV, "conv0", 8, 3, 1, 1)},
    {ROW(LAYER_RELU, "relu0", 0, 0, 0, 0)},
    {ROW(LAYER_LRN, "lrn0", 0, 3, 0, 0), .alpha = 0.05f, .beta = 0.75f, .bias = 1.0f},
    {ROW(LAYER_CONV, "br1", 4, 1, 1, 0), .inputs = "lrn0"},
    {ROW(LAYER_CONV, "br2", 4, 3, 1, 1), .inputs = "lrn0"},
    {ROW(LAYER_MAXPOOL, "br3pool", 0, 3, 1, 1), .inputs = "lrn0"},
    {ROW(LAYER_CONV, "br3", 4, 1, 1, 0)},
    {ROW(LAYER_CONCAT, "cat", 0, 0, 0, 0), .inputs = "br1,br2,br3"},
    {ROW(LAYER_RELU, "relu1", 0, 0, 0, 0)},
    {ROW(LAYER_AVGPOOL, "avg", 0, 3, 2, 1)},
    {ROW(LAYER_DROPOUT, "drop", 0, 0, 0, 0), .rate = 0.3f},
    {ROW(LAYER_FC, "fc", 0, 0, 0, 0)},
};
static const ModelDesc tiny_inception = {.name = "tiny_inception",
                                         .about = "inception module",
                                         .in_c = 3,
                                         .in_h = 8,
                                         .in_w = 8,
                                         .classes = 5,
                                         .nlayers = 12,
                                         .layers = TINY_INCEPTION};

/* A language model (the LSTM models' kinds of rows): 5 tokens of a vocabulary of 7. */
static const LayerDesc TINY_LSTM[] = {
    {ROW(LAYER_EMBEDDING, "emb", 6, 0, 0, 0), .vocab = 7},
    {ROW(LAYER_LSTM, "lstm1", 5, 0, 0, 0)},
    {ROW(LAYER_DROPOUT, "drop", 0, 0, 0, 0), .rate = 0.2f},
    {ROW(LAYER_LSTM, "lstm2", 4, 0, 0, 0)},
    {ROW(LAYER_FC, "fc", 0, 0, 0, 0)},
};
static const ModelDesc tiny_lstm = {.name = "tiny_lstm",
                                    .about = "language model",
                                    .in_c = 1,
                                    .in_h = 1,
                                    .in_w = 5,
                                    .classes = 7,
                                    .nlayers = 5,
                                    .layers = TINY_LSTM,
                                    .vocab = 7};

/* Fills the input and labels of samples [0, n) with seeded values (token ids for a language
 * model), the same for every model built from the same description. */
static void fill_batch(Model *m, int n) {
    uint64_t s = 0x1234567ULL;
    for (size_t i = 0; i < (size_t)n * m->x_size; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(s >> 11) / 9007199254740992.0;
        m->x[i] = m->desc->vocab ? (float)(int)(u * m->desc->vocab) : (float)u;
    }
    for (int i = 0; m->labels && i < n * m->label_size; i++)
        m->labels[i] = (i * 3 + 1) % m->classes;
    model_set_sample_origin(m, 100);
}

static Model build_small(const ModelDesc *d, int batch, int microbatches, int first, int last,
                         BackendCtx *ctx) {
    Model m;
    model_build_part(&m, d, d->in_c, d->in_h, d->in_w, d->classes, batch, microbatches, first, last,
                     &cpu_backend, ctx, 21);
    if (first == 0) fill_batch(&m, batch);
    if (last == d->nlayers && first > 0) { /* labels only */
        for (int i = 0; i < batch * m.label_size; i++)
            m.labels[i] = (i * 3 + 1) % m.classes;
    }
    model_set_sample_origin(&m, 100);
    return m;
}

/* Central difference of the (float) training loss in parameter idx. */
static double fd_loss(Model *m, int n, size_t idx, float eps) {
    float keep = m->params[idx];
    m->params[idx] = keep + eps;
    double up = model_forward(m, n, 1, NULL);
    m->params[idx] = keep - eps;
    double down = model_forward(m, n, 1, NULL);
    m->params[idx] = keep;
    return (up - down) / (2.0 * eps);
}

/* Whole-model gradients against central differences of the training loss, for entries of every
 * layer with parameters. Biases start from small random values rather than 0, so that no ReLU
 * input sits exactly on its kink (a zero bias on a pixel where every input channel is 0). An
 * entry whose difference quotient changes with the step (eps against eps/2) straddles a kink of
 * ReLU or max pooling and is skipped; at most a quarter may be. */
static void test_small_finite_differences(const ModelDesc *d, BackendCtx *ctx) {
    const int n = 4;
    Model m = build_small(d, n, 1, 0, d->nlayers, ctx);
    for (int l = 0; l < m.nlayers; l++)
        if (m.layers[l].d.kind != LAYER_BATCHNORM)
            for (size_t j = 0; j < m.layers[l].nb; j++)
                m.params[m.layers[l].b_off + j] = 0.1f * (float)sin(1.0 + 7.0 * (double)j + l);
    model_forward(&m, n, 1, NULL);
    model_backward(&m, n);
    float *g = malloc(m.nparams * sizeof(float));
    memcpy(g, m.grads, m.nparams * sizeof(float));
    int checked = 0, bad = 0, skipped = 0;
    double worst = 0;
    for (int l = 0; l < m.nlayers; l++) {
        const Layer *L = &m.layers[l];
        for (int j = 0; j < 8 && L->nparams; j++) {
            size_t idx = L->w_off + (size_t)((j * 2654435761u + 17u) % (unsigned)L->nparams);
            const float eps = 1e-3f;
            double fd = fd_loss(&m, n, idx, eps), fd_half = fd_loss(&m, n, idx, eps / 2);
            if (fabs(fd - fd_half) > 0.05 * fmax(fabs(fd), fabs(fd_half)) + 1e-4) {
                skipped++;
                continue;
            }
            double an = g[idx];
            double err = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
            if (err > worst) worst = err;
            if (err > 2e-2 && fabs(fd - an) > 3e-4) {
                printf("  %s %s param %zu: analytic %.6g, finite difference %.6g\n", d->name,
                       L->d.name, idx, an, fd);
                bad++;
            }
            checked++;
        }
    }
    printf("%s whole-model finite differences: %d parameters (%d skipped: the quotient moves with "
           "the step, a kink or noise), max relative "
           "error %.3g (tolerance 2e-2, or 3e-4 absolute), %d off\n",
           d->name, checked, skipped, worst, bad);
    EXPECT(bad == 0 && skipped * 3 <= checked, "%s model gradient against finite differences",
           d->name);
    free(g);
    model_free(&m);
}

static double max_abs_diff(const float *a, const float *b, size_t n, double *scale) {
    double worst = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)b[i]));
    }
    return worst;
}

/* Two micro-batches (loss gradient scaled by 1/2, parameter gradients accumulated, backward in
 * reverse order as in the pipeline) give the whole batch's gradients. */
static void test_small_microbatches(const ModelDesc *d, BackendCtx *ctx) {
    const int n = 4, mb = 2;
    Model whole = build_small(d, n, 1, 0, d->nlayers, ctx);
    Model part = build_small(d, n, 2, 0, d->nlayers, ctx);
    float lw = model_forward(&whole, n, 1, NULL);
    model_backward(&whole, n);
    float l0, l1;
    model_forward_part(&part, 0, mb, 0, 1);
    l0 = model_loss_part(&part, 0, mb, 1, 0.5f, NULL);
    model_forward_part(&part, mb, mb, 1, 1);
    l1 = model_loss_part(&part, mb, mb, 1, 0.5f, NULL);
    model_backward_part(&part, mb, mb, 1, 0);
    model_backward_part(&part, 0, mb, 0, 1);
    double scale, diff = max_abs_diff(part.grads, whole.grads, whole.nparams, &scale);
    printf("%s: 2 micro-batches vs the whole batch: loss %.6f vs %.6f, gradients max abs diff "
           "%.3g (largest %.3g, tolerance 1e-5 x largest)\n",
           d->name, 0.5 * (l0 + l1), lw, diff, scale);
    EXPECT(fabs(0.5 * (l0 + l1) - lw) < 1e-5 && diff <= 1e-5 * scale && scale > 0,
           "%s micro-batch gradients", d->name);
    model_free(&whole), model_free(&part);
}

/* Batch norm with two micro-batches: each micro-batch is normalised with its own statistics (as in
 * GPipe), so the gradients are not the whole batch's but the mean of those of two separate batches
 * of 2 samples, and the running statistics have been updated once per micro-batch, in order. The
 * reference is a one-micro-batch Model run on each half in turn. Backward runs micro-batch 1
 * before 0 (as the pipeline does): a backward pass reading the other micro-batch's saved
 * statistics fails this. */
static void test_small_microbatches_bn(const ModelDesc *d, BackendCtx *ctx) {
    const int n = 4, mb = 2;
    Model part = build_small(d, n, 2, 0, d->nlayers, ctx);
    Model ref = build_small(d, n, 1, 0, d->nlayers, ctx);
    float l0 = model_forward(&ref, mb, 1, NULL); /* samples 0, 1 */
    model_backward(&ref, mb);
    float *g0 = malloc(ref.nparams * sizeof(float));
    memcpy(g0, ref.grads, ref.nparams * sizeof(float));
    memmove(ref.x, ref.x + (size_t)mb * ref.x_size, (size_t)mb * ref.x_size * sizeof(float));
    memmove(ref.labels, ref.labels + mb * ref.label_size,
            (size_t)mb * ref.label_size * sizeof(int32_t));
    float l1 = model_forward(&ref, mb, 1, NULL); /* samples 2, 3 */
    model_backward(&ref, mb);
    for (size_t i = 0; i < ref.nparams; i++)
        ref.grads[i] = 0.5f * (g0[i] + ref.grads[i]);
    model_forward_part(&part, 0, mb, 0, 1);
    float p0 = model_loss_part(&part, 0, mb, 1, 0.5f, NULL);
    model_forward_part(&part, mb, mb, 1, 1);
    float p1 = model_loss_part(&part, mb, mb, 1, 0.5f, NULL);
    model_backward_part(&part, mb, mb, 1, 0);
    model_backward_part(&part, 0, mb, 0, 1);
    double scale, diff = max_abs_diff(part.grads, ref.grads, ref.nparams, &scale);
    double bscale, bdiff = max_abs_diff(part.buffers, ref.buffers, ref.nbuffers, &bscale);
    /* the whole batch's gradients (one set of statistics) must differ: else nothing is tested */
    Model whole = build_small(d, n, 1, 0, d->nlayers, ctx);
    model_forward(&whole, n, 1, NULL);
    model_backward(&whole, n);
    double wscale, wdiff = max_abs_diff(part.grads, whole.grads, whole.nparams, &wscale);
    printf("%s: batch norm, 2 micro-batches vs 2 separate batches: loss %.6f, %.6f vs %.6f, %.6f, "
           "gradients max abs diff %.3g (largest %.3g, tolerance 1e-5 x largest), running "
           "statistics %.3g over %zu (tolerance 1e-6 x largest %.3g); vs the whole batch's "
           "gradients %.3g (must be > 1e-3 x largest)\n",
           d->name, p0, p1, l0, l1, diff, scale, bdiff, ref.nbuffers, bscale, wdiff);
    EXPECT(fabs(p0 - l0) < 1e-5 && fabs(p1 - l1) < 1e-5 && diff <= 1e-5 * scale && scale > 0,
           "%s batch-norm micro-batch gradients", d->name);
    EXPECT(ref.nbuffers > 0 && bdiff <= 1e-6 * bscale, "%s batch-norm running statistics", d->name);
    EXPECT(wdiff > 1e-3 * wscale,
           "%s: micro-batches' batch-norm gradients differ from the whole batch's", d->name);
    free(g0);
    model_free(&part), model_free(&ref), model_free(&whole);
}

/* Two stages glued by hand at row s: stage A's output is stage B's input, B's input gradient is
 * A's output gradient. The parameters' gradients are those of the whole model. */
static void test_small_stages(const ModelDesc *d, int s, BackendCtx *ctx) {
    const int n = 4;
    Model whole = build_small(d, n, 1, 0, d->nlayers, ctx);
    Model a = build_small(d, n, 1, 0, s, ctx), b = build_small(d, n, 1, s, d->nlayers, ctx);
    float lw = model_forward(&whole, n, 1, NULL);
    model_backward(&whole, n);
    model_forward_part(&a, 0, n, 0, 1);
    const Layer *out = &a.layers[s - 1];
    memcpy(b.x, out->y, (size_t)n * out->out_size * sizeof(float));
    model_forward_part(&b, 0, n, 0, 1);
    float lb = model_loss_part(&b, 0, n, 1, 1.0f, NULL);
    model_backward_part(&b, 0, n, 0, 0);
    memcpy(out->dy, b.dx, (size_t)n * out->out_size * sizeof(float));
    model_backward_part(&a, 0, n, 0, 0);
    double sa, sb;
    double da = max_abs_diff(a.grads, whole.grads, a.nparams, &sa);
    double db = max_abs_diff(b.grads, whole.grads + a.nparams, b.nparams, &sb);
    printf("%s: stages [0,%d) + [%d,%d) vs the whole model: loss %.6f vs %.6f, gradients max abs "
           "diff %.3g / %.3g (tolerance 1e-6 x largest)\n",
           d->name, s, s, d->nlayers, lb, lw, da, db);
    EXPECT(a.nparams + b.nparams == whole.nparams && lb == lw && da <= 1e-6 * sa && db <= 1e-6 * sb,
           "%s split at %d", d->name, s);
    model_free(&whole), model_free(&a), model_free(&b);
}

/* Every zoo model: one training step's forward and backward on 2 samples (1 for AlexNet at
 * 224x224), on the smallest input it takes. The loss starts near ln(classes). */
static void test_zoo_smoke(BackendCtx *ctx) {
    struct {
        const ModelDesc *d;
        int c, h, w, classes, n;
    } cases[] = {
        {&model_alexnet, 3, 224, 224, 1000, 1}, {&model_alexnet, 3, 32, 32, 10, 2},
        {&model_vgg16, 3, 32, 32, 10, 2},       {&model_googlenet, 3, 32, 32, 10, 2},
        {&model_resnet50, 3, 32, 32, 10, 2},    {&model_lstm32, 1, 1, 32, 10000, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const ModelDesc *d = model_for_input(cases[i].d, cases[i].c, cases[i].h, cases[i].w);
        Model m;
        model_build(&m, d, cases[i].c, cases[i].h, cases[i].w, cases[i].classes, cases[i].n,
                    &cpu_backend, ctx, 5);
        fill_batch(&m, cases[i].n);
        double loss = model_forward(&m, cases[i].n, 1, NULL);
        model_backward(&m, cases[i].n);
        size_t nonzero = 0, finite = 1;
        for (size_t j = 0; j < m.nparams; j++) {
            nonzero += m.grads[j] != 0.0f;
            finite &= isfinite(m.grads[j]) != 0;
        }
        double expect = log((double)m.classes);
        printf("%s on [%d,%d,%d], batch %d: loss %.3f (ln %d = %.3f), %zu of %zu gradients "
               "non-zero\n",
               d->name, cases[i].c, cases[i].h, cases[i].w, cases[i].n, loss, m.classes, expect,
               nonzero, m.nparams);
        EXPECT(isfinite(loss) && loss > 0.5 * expect && loss < 3 * expect && finite &&
                   nonzero > m.nparams / 10,
               "%s forward/backward", d->name);
        model_free(&m);
    }
}

int main(void) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx;
    cpu_backend.init(&cfg, &ctx);
    const ModelDesc *small[] = {&tiny_res, &tiny_inception, &tiny_lstm};
    for (int i = 0; i < 3; i++)
        test_small_finite_differences(small[i], ctx);
    test_small_microbatches(&tiny_inception, ctx);
    test_small_microbatches(&tiny_lstm, ctx);
    test_small_microbatches_bn(&tiny_res, ctx); /* batch norm: statistics per micro-batch */
    test_small_stages(&tiny_inception, 3, ctx); /* B's input feeds three branches */
    test_small_stages(&tiny_res, 3, ctx);       /* B's input feeds the block and the add */
    test_small_stages(&tiny_lstm, 2, ctx);
    test_zoo_smoke(ctx);
    cpu_backend.finalize(ctx);
    return check_summary();
}
