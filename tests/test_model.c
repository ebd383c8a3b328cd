/* test_model.c - the model zoo and the model runtime on the CPU backend:
 *   1. parameter counts match the published ones (LeNet 431,080; FCN-5 117,997,696; FCN-8
 *      130,586,752; AlexNet 61,100,840 and its CIFAR-10 variant 89,578; VGG16 138,357,544;
 *      GoogLeNet 6,998,552; ResNet-50 25,557,032; LSTM-32/64 6,180,624) and some layer shapes
 *      are the published ones;
 *   2. LeNet's model_backward against a chain of the naive reference kernels (every parameter),
 *      and FCN-5's against central finite differences of the loss (max-pool ties make finite
 *      differences unreliable for LeNet at float precision);
 *   3. the graph runtime on three small models built from the zoo's kinds of rows (a residual
 *      block with batch norm; an inception-like module with LRN, padded pools, concatenation,
 *      dropout; embedding + two LSTMs): whole-model gradients against finite differences, the
 *      same gradients from two micro-batches accumulated (with batch norm: those of two separate
 *      half batches, each micro-batch normalised with its own statistics), and from two stages
 *      glued by hand (what the pipeline does over MPI);
 *   4. every zoo model: one forward and backward pass on a tiny batch (finite loss near ln C,
 *      finite gradients);
 *   5. pipeline cuts: where each model can be cut, the FLOPs-balanced split against brute force,
 *      and --split's errors;
 *   6. data sharding: the slices of P ranks put together are the batch of one process; the
 *      CIFAR-10 reader on small files written here in the binary format (two training batches and
 *      a test batch read back record by record; a truncated file and a bad label refused);
 *      synthetic token sequences whose labels are the next tokens. */
#include "data.h"
#include "model.h"
#include "partition.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const ModelDesc model_lenet, model_fcn5, model_fcn8, model_alexnet, model_vgg16,
    model_googlenet, model_resnet50, model_lstm32, model_lstm64;

static int failures = 0;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL: " __VA_ARGS__);                                                          \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static void test_counts(void) {
    struct {
        const ModelDesc *d;
        int c, h, w, k;
        size_t params;
    } cases[] = {
        {&model_lenet, 1, 28, 28, 10, 431080},
        {&model_fcn5, 26752, 1, 1, 26752, 117997696},
        {&model_fcn8, 26752, 1, 1, 26752, 130586752},
        {&model_fcn5, 1, 28, 28, 10, 784 * 2048 + 2048 + 2 * (2048 * 2048 + 2048) + 2048 * 10 + 10},
        {&model_alexnet, 3, 224, 224, 1000, 61100840},  /* torchvision alexnet */
        {&model_vgg16, 3, 224, 224, 1000, 138357544},   /* torchvision vgg16 */
        {&model_googlenet, 3, 224, 224, 1000, 6998552}, /* Caffe bvlc_googlenet without aux */
        {&model_resnet50, 3, 224, 224, 1000, 25557032}, /* torchvision resnet50 */
        /* embedding 10000x256 + 2 x (4*256*(256+256) + 4*256) + 256*10000 + 10000 */
        {&model_lstm32, 1, 1, 32, 10000, 6180624},
        {&model_lstm64, 1, 1, 64, 10000, 6180624},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Model m;
        model_plan(&m, cases[i].d, cases[i].c, cases[i].h, cases[i].w, cases[i].k, 8);
        printf("%s on [%d,%d,%d]: %zu parameters (expected %zu)\n", cases[i].d->name, cases[i].c,
               cases[i].h, cases[i].w, m.nparams, cases[i].params);
        EXPECT(m.nparams == cases[i].params, "%s parameter count", cases[i].d->name);
        model_free(&m);
    }
    Model m;
    model_plan(&m, &model_lenet, 1, 28, 28, 10, 8);
    int shapes[][3] = {{20, 24, 24}, {20, 12, 12}, {50, 8, 8}, {50, 4, 4},
                       {500, 1, 1},  {500, 1, 1},  {10, 1, 1}};
    for (int i = 0; i < m.nlayers; i++)
        EXPECT(m.layers[i].out_c == shapes[i][0] && m.layers[i].out_h == shapes[i][1] &&
                   m.layers[i].out_w == shapes[i][2],
               "lenet layer %s shape [%d,%d,%d]", m.layers[i].d.name, m.layers[i].out_c,
               m.layers[i].out_h, m.layers[i].out_w);
    /* conv1: 2*20*24*24*25 FLOPs per sample */
    EXPECT(fabs(m.layers[0].flops - 2.0 * 20 * 24 * 24 * 25) < 1, "conv1 FLOPs");
    model_free(&m);

    /* The CIFAR-10 variant of AlexNet is chosen for 32x32 images: DLBench's cuda-convnet net. */
    const ModelDesc *small = model_for_input(&model_alexnet, 3, 32, 32);
    model_plan(&m, small, 3, 32, 32, 10, 8);
    printf("alexnet on [3,32,32] (%s): %zu parameters (expected 89578)\n", small->about, m.nparams);
    EXPECT(small != &model_alexnet && m.nparams == 89578, "alexnet CIFAR-10 variant");
    model_free(&m);

    /* Published shapes at 224x224. */
    struct {
        const ModelDesc *d;
        const char *layer;
        int c, h, w;
    } shapes_224[] = {
        {&model_alexnet, "pool5", 256, 6, 6},
        {&model_vgg16, "pool5", 512, 7, 7},
        {&model_googlenet, "inception_3a/output", 256, 28, 28},
        {&model_googlenet, "inception_4e/output", 832, 14, 14},
        {&model_googlenet, "inception_5b/output", 1024, 7, 7},
        {&model_resnet50, "layer1.2.relu", 256, 56, 56},
        {&model_resnet50, "layer4.2.relu", 2048, 7, 7},
    };
    for (size_t i = 0; i < sizeof shapes_224 / sizeof shapes_224[0]; i++) {
        model_plan(&m, shapes_224[i].d, 3, 224, 224, 1000, 1);
        int found = 0;
        for (int l = 0; l < m.nlayers; l++) {
            const Layer *L = &m.layers[l];
            if (strcmp(L->d.name, shapes_224[i].layer)) continue;
            found = 1;
            EXPECT(L->out_c == shapes_224[i].c && L->out_h == shapes_224[i].h &&
                       L->out_w == shapes_224[i].w,
                   "%s %s shape [%d,%d,%d]", shapes_224[i].d->name, L->d.name, L->out_c, L->out_h,
                   L->out_w);
        }
        EXPECT(found, "%s has no layer %s", shapes_224[i].d->name, shapes_224[i].layer);
        model_free(&m);
    }
    /* An input too small for the model is reported, not planned into nonsense. */
    model_plan(&m, &model_vgg16, 1, 28, 28, 10, 1);
    printf("vgg16 on [1,28,28]: %s\n", m.problem);
    EXPECT(strstr(m.problem, "pool5") != NULL, "vgg16 on 28x28 input is not reported");
    model_free(&m);
    printf("published parameter counts and shapes checked\n");
}

/* The whole network's gradient computed by chaining the naive reference kernels of
 * tests/ref_kernels.c over the model's layer table: independent of model.c's forward/backward. */
static void reference_gradients(const Model *m, int n, float *grads) {
    int L = m->nlayers;
    float **act = calloc((size_t)L + 1, sizeof(float *)),
          **dact = calloc((size_t)L + 1, sizeof(float *));
    act[0] = m->x;
    for (int i = 0; i < L; i++) {
        const Layer *l = &m->layers[i];
        act[i + 1] = calloc((size_t)n * l->out_size, sizeof(float));
        dact[i + 1] = calloc((size_t)n * l->out_size, sizeof(float));
        const float *w = m->params + l->w_off, *b = m->params + l->b_off;
        if (l->d.kind == LAYER_CONV) {
            ConvShape s = {n,      l->in_c,     l->in_h,  l->in_w,  l->out_c,
                           l->d.k, l->d.stride, l->d.pad, l->out_h, l->out_w};
            ref_conv_forward(&s, act[i], w, b, act[i + 1]);
        } else if (l->d.kind == LAYER_MAXPOOL) {
            PoolShape s = {n,           l->in_c,  l->in_h,  l->in_w, l->d.k,
                           l->d.stride, l->d.pad, l->out_h, l->out_w};
            int32_t *am = calloc((size_t)n * l->out_size, sizeof(int32_t));
            ref_maxpool_forward(&s, act[i], act[i + 1], am);
            free(am);
        } else if (l->d.kind == LAYER_FC) {
            FcShape s = {n, (int)l->in_size, l->out_c};
            ref_fc_forward(&s, act[i], w, b, act[i + 1]);
        } else {
            ref_relu_forward((size_t)n * l->in_size, act[i], act[i + 1]);
        }
    }
    ref_softmax_xent(n, m->classes, act[L], m->labels, dact[L], NULL);
    for (int i = L - 1; i >= 0; i--) {
        const Layer *l = &m->layers[i];
        const float *w = m->params + l->w_off;
        float *dx = i ? dact[i] : NULL, *dw = grads + l->w_off, *db = grads + l->b_off;
        if (l->d.kind == LAYER_CONV) {
            ConvShape s = {n,      l->in_c,     l->in_h,  l->in_w,  l->out_c,
                           l->d.k, l->d.stride, l->d.pad, l->out_h, l->out_w};
            ref_conv_backward(&s, act[i], w, dact[i + 1], dx, dw, db);
        } else if (l->d.kind == LAYER_MAXPOOL) {
            PoolShape s = {n,           l->in_c,  l->in_h,  l->in_w, l->d.k,
                           l->d.stride, l->d.pad, l->out_h, l->out_w};
            if (dx) ref_maxpool_backward(&s, act[i], dact[i + 1], dx);
        } else if (l->d.kind == LAYER_FC) {
            FcShape s = {n, (int)l->in_size, l->out_c};
            ref_fc_backward(&s, act[i], w, dact[i + 1], dx, dw, db);
        } else if (dx) {
            ref_relu_backward((size_t)n * l->in_size, act[i], dact[i + 1], dx);
        }
    }
    for (int i = 1; i <= L; i++)
        free(act[i]), free(dact[i]);
    free(act), free(dact);
}

static Model make_model(const ModelDesc *d, int n, BackendCtx *ctx) {
    Model m;
    model_build(&m, d, 1, 28, 28, 10, n, &cpu_backend, ctx, 7);
    for (int i = 0; i < n * 784; i++)
        m.x[i] = (float)((i * 7919) % 1000) / 1000.0f;
    for (int i = 0; i < n; i++)
        m.labels[i] = (i * 3) % 10;
    return m;
}

/* LeNet: model_forward + model_backward against the reference chain, every parameter. */
static void test_model_vs_reference(BackendCtx *ctx) {
    const int n = 3;
    Model m = make_model(&model_lenet, n, ctx);
    model_forward(&m, n, 1, NULL);
    model_backward(&m, n);
    float *ref = calloc(m.nparams, sizeof(float));
    reference_gradients(&m, n, ref);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < m.nparams; i++) {
        double d = fabs((double)m.grads[i] - ref[i]);
        if (d > worst) worst = d;
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    printf("lenet gradients vs reference chain: %zu parameters, max abs diff %.3g "
           "(largest gradient %.3g, tolerance 1e-5 x largest)\n",
           m.nparams, worst, scale);
    EXPECT(worst <= 1e-5 * scale && scale > 0, "lenet gradients differ from the reference chain");
    free(ref);
    model_free(&m);
}

/* FCN-5 on MNIST-shaped input: analytic gradients against central finite differences of the
 * loss (no pooling ties; ReLU kinks are rare at these magnitudes). */
static void test_model_finite_differences(BackendCtx *ctx) {
    const int n = 3;
    Model m = make_model(&model_fcn5, n, ctx);
    model_forward(&m, n, 1, NULL);
    model_backward(&m, n);
    int checked = 0, bad = 0;
    double worst = 0;
    for (int l = 0; l < m.nlayers; l++) {
        const Layer *L = &m.layers[l];
        if (!L->nparams) continue;
        for (int j = 0; j < 12; j++) {
            /* the gradient is 0 for weights of always-zero inputs: pick entries that matter */
            size_t idx =
                j < 6 ? L->b_off + (size_t)((j * 2654435761u) % (unsigned)L->out_c)
                      : L->w_off + (size_t)((j * 2654435761u) % (L->nparams - (size_t)L->out_c));
            float keep = m.params[idx], an = m.grads[idx];
            const float eps = 1e-3f; /* 1e-2 steps cross ReLU kinks */
            m.params[idx] = keep + eps;
            double up = model_forward(&m, n, 0, NULL);
            m.params[idx] = keep - eps;
            double down = model_forward(&m, n, 0, NULL);
            m.params[idx] = keep;
            double fd = (up - down) / (2.0 * eps);
            double err = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
            if (err > worst) worst = err;
            if (err > 2e-2 && fabs(fd - an) > 3e-4) {
                printf("  %s param %zu: analytic %.6g, finite difference %.6g\n", L->d.name, idx,
                       an, fd);
                bad++;
            }
            checked++;
        }
    }
    printf("fcn5 whole-model finite differences: %d parameters, max relative error %.3g "
           "(tolerance 2e-2, or 3e-4 absolute: float loss / 2e-3), %d off\n",
           checked, worst, bad);
    EXPECT(bad == 0, "fcn5 model gradient against finite differences");
    model_free(&m);
}

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
    EXPECT(wdiff > 1e-3 * wscale, "%s: micro-batches gave the whole batch's batch-norm gradients",
           d->name);
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

/* ---- pipeline cuts ------------------------------------------------------------------------ */

static void test_partition(void) {
    Model m;
    char text[400];
    int cut_ok[400];
    model_plan(&m, &model_lenet, 1, 28, 28, 10, 1);
    EXPECT(partition_cuts(&m, cut_ok) == 6, "lenet: every cut possible");
    model_free(&m);

    model_plan(&m, &model_googlenet, 3, 224, 224, 1000, 1);
    partition_cuts(&m, cut_ok);
    partition_cuts_text(&m, text, sizeof text);
    printf("googlenet cuts: %s\n", text);
    /* row 10 is inception_3a's first branch: a cut before it leaves only pool2's output crossing;
     * a cut inside the module would leave that output crossing beside a branch's */
    EXPECT(cut_ok[10] && !cut_ok[11] && !cut_ok[23] && cut_ok[24], "googlenet cuts around 3a");
    for (int s = 1; s < m.nlayers; s++)
        if (cut_ok[s]) {
            const Layer *L = &m.layers[s];
            EXPECT(strstr(L->d.name, "inception") == NULL || strstr(L->d.name, "/1x1"),
                   "googlenet cut inside a module before %s", L->d.name);
        }
    /* balanced splits against brute force over the possible cuts */
    for (int K = 2; K <= 3; K++) {
        int first[4];
        EXPECT(partition_balance(&m, K, first) == 0, "googlenet balance K=%d", K);
        double got = 0;
        for (int k = 0; k < K; k++) {
            EXPECT(first[k] < first[k + 1] && (k == 0 || cut_ok[first[k]]), "stage %d", k);
            got = fmax(got, partition_flops(&m, first[k], first[k + 1]));
        }
        double best = 1e300;
        for (int a = 1; a < m.nlayers; a++) {
            if (!cut_ok[a]) continue;
            if (K == 2) {
                best =
                    fmin(best, fmax(partition_flops(&m, 0, a), partition_flops(&m, a, m.nlayers)));
                continue;
            }
            for (int b = a + 1; b < m.nlayers; b++)
                if (cut_ok[b])
                    best = fmin(best, fmax(partition_flops(&m, 0, a),
                                           fmax(partition_flops(&m, a, b),
                                                partition_flops(&m, b, m.nlayers))));
        }
        printf("googlenet, %d stages: largest stage %.4g FLOPs (brute force %.4g)\n", K, got, best);
        EXPECT(fabs(got - best) <= 1e-9 * best, "googlenet K=%d not optimal", K);
    }
    char err[1024];
    int first[4];
    EXPECT(partition_parse(&m, "24", 2, first, err, sizeof err) == 0 && first[1] == 24,
           "--split 24");
    EXPECT(partition_parse(&m, "12", 2, first, err, sizeof err) != 0 &&
               strstr(err, "--split: 12 is not accepted") && strstr(err, "cannot be cut"),
           "--split 12: %s", err);
    printf("--split 12 on googlenet: %s\n", err);
    EXPECT(partition_parse(&m, "38,24", 3, first, err, sizeof err) != 0 && strstr(err, "increase"),
           "--split 38,24: %s", err);
    EXPECT(partition_parse(&m, "24", 3, first, err, sizeof err) != 0 &&
               strstr(err, "3 stages take 2"),
           "--split 24 with 3 stages: %s", err);
    EXPECT(partition_parse(&m, "x", 2, first, err, sizeof err) != 0, "--split x");
    model_free(&m);

    model_plan(&m, &model_resnet50, 3, 224, 224, 1000, 1);
    partition_cuts(&m, cut_ok);
    for (int s = 1; s < m.nlayers; s++) {
        const char *name = m.layers[s].d.name;
        int inside = strstr(name, ".conv2") || strstr(name, ".bn3") || strstr(name, ".downsample");
        EXPECT(!(cut_ok[s] && inside), "resnet50 cut inside a block before %s", name);
    }
    model_free(&m);
    printf("pipeline cuts checked\n");
}

static void test_sharding(void) {
    Dataset ds;
    char err[256];
    if (dataset_open(&ds, "synthetic", "", 1, 28, 28, 10, 5, err, sizeof err) != 0) {
        EXPECT(0, "synthetic data set: %s", err);
        return;
    }
    const int B = 16;
    float whole[16 * 784], part[16 * 784];
    int32_t wl[16], pl[16];
    for (int64_t it = 0; it < 40; it += 13) {
        dataset_train_batch(&ds, it, B, 0, 1, whole, wl);
        for (int P = 2; P <= 4; P *= 2)
            for (int r = 0; r < P; r++) {
                dataset_train_batch(&ds, it, B, r, P, part, pl);
                size_t off = (size_t)r * (B / P);
                EXPECT(!memcmp(part, whole + off * 784, (size_t)(B / P) * 784 * sizeof(float)) &&
                           !memcmp(pl, wl + off, (size_t)(B / P) * sizeof(int32_t)),
                       "iteration %lld rank %d of %d: slice differs from the single-process batch",
                       (long long)it, r, P);
            }
    }
    printf("data sharding: 1, 2 and 4 ranks see the same global batches\n");
    dataset_close(&ds);
}

/* Pixel j of record r of a generated CIFAR-10 file, and its label. */
static uint8_t cifar_pixel(int r, int j) {
    return (uint8_t)((r * 37 + j * 11) % 251);
}

static void write_cifar(const char *path, int first, int n, int bad_label, int truncate) {
    FILE *f = fopen(path, "wb");
    for (int r = first; r < first + n; r++) {
        fputc(bad_label && r == first + 1 ? 10 : r % 10, f);
        for (int j = 0; j < 3072; j++)
            fputc(cifar_pixel(r, j), f);
    }
    if (truncate) fputc(7, f);
    fclose(f);
}

static void test_cifar10_reader(void) {
    char dir[] = "/tmp/dtbench-cifar.XXXXXX", path[256], err[512];
    if (!mkdtemp(dir)) {
        EXPECT(0, "mkdtemp");
        return;
    }
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    write_cifar(path, 0, 5, 0, 0);
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    write_cifar(path, 5, 3, 0, 0);
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    write_cifar(path, 100, 4, 0, 0);
    Dataset ds;
    int rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc == 0, "cifar10 reader: %s", err);
    if (rc == 0) {
        EXPECT(ds.ntrain == 8 && ds.ntest == 4 && ds.c == 3 && ds.h == 32 && ds.w == 32 &&
                   ds.classes == 10,
               "cifar10: %zu/%zu records [%d,%d,%d]", ds.ntrain, ds.ntest, ds.c, ds.h, ds.w);
        float x[4 * 3072];
        int32_t labels[4];
        dataset_test_batch(&ds, 0, 4, x, labels);
        int wrong = 0;
        for (int r = 0; r < 4; r++) {
            wrong += labels[r] != (100 + r) % 10;
            for (int j = 0; j < 3072; j++)
                wrong += fabsf(x[r * 3072 + j] - cifar_pixel(100 + r, j) / 255.0f) > 1e-7f;
        }
        /* training samples come shuffled: each must be one of the 8 records, label included */
        dataset_train_batch(&ds, 0, 4, 0, 1, x, labels);
        for (int i = 0; i < 4; i++) {
            int match = 0;
            for (int r = 0; r < 8 && !match; r++)
                match = labels[i] == r % 10 &&
                        fabsf(x[i * 3072 + 5] - cifar_pixel(r, 5) / 255.0f) < 1e-7f &&
                        fabsf(x[i * 3072 + 3071] - cifar_pixel(r, 3071) / 255.0f) < 1e-7f;
            wrong += !match;
        }
        printf("cifar10 reader: 2 training batches (8 records) and a test batch (4) read back, %d "
               "mismatches\n",
               wrong);
        EXPECT(wrong == 0, "cifar10 records differ");
        dataset_close(&ds);
    }
    snprintf(path, sizeof path, "%s/data_batch_2.bin", dir);
    write_cifar(path, 5, 3, 0, 1);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    printf("truncated batch: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "--data-dir") && strstr(err, "not a CIFAR-10 binary batch"),
           "truncated cifar file accepted");
    write_cifar(path, 5, 3, 1, 0);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    printf("bad label: %s\n", err);
    EXPECT(rc != 0 && strstr(err, "label 10 of record 1"), "label 10 accepted");
    unlink(path);
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    unlink(path);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "no test_batch.bin"), "missing test_batch.bin: %s", err);
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    unlink(path);
    rc = dataset_open(&ds, "cifar10", dir, 0, 0, 0, 0, 1, err, sizeof err);
    EXPECT(rc != 0 && strstr(err, "no data_batch_1.bin"), "missing data_batch_1.bin: %s", err);
    rmdir(dir);

    /* token sequences: the labels are the inputs shifted by one position */
    dataset_open_tokens(&ds, 6, 50, 3);
    float t[2 * 6];
    int32_t next[2 * 6];
    dataset_train_batch(&ds, 3, 2, 0, 1, t, next);
    int shifted = ds.label_size == 6;
    for (int i = 0; i < 2; i++)
        for (int p = 0; p + 1 < 6; p++)
            shifted &= (int)t[i * 6 + p + 1] == next[i * 6 + p];
    for (int i = 0; i < 12; i++)
        shifted &= t[i] >= 0 && t[i] < 50 && next[i] >= 0 && next[i] < 50;
    printf("token sequences: labels are the next tokens: %s\n", shifted ? "yes" : "no");
    EXPECT(shifted, "token labels");
    dataset_close(&ds);
}

int main(void) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx;
    cpu_backend.init(&cfg, &ctx);
    test_counts();
    test_model_vs_reference(ctx);
    test_model_finite_differences(ctx);
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
    test_partition();
    test_sharding();
    test_cifar10_reader();
    cpu_backend.finalize(ctx);
    printf(failures ? "%d failure(s)\n" : "all model tests passed\n", failures);
    return failures ? 1 : 0;
}
