/* test_model.c - the model zoo (src/model/models.c) and the model's gradients (src/model/model.c)
 * on the CPU backend:
 *   1. parameter counts match the published ones (LeNet 431,080; FCN-5 117,997,696; FCN-8
 *      130,586,752; AlexNet 61,100,840 and its CIFAR-10 variant 89,578; VGG16 138,357,544;
 *      GoogLeNet 6,998,552; ResNet-50 25,557,032; LSTM-32/64 6,180,624; GPT-2 124,439,808 and
 *      GPT-2 medium 354,823,168, as Hugging Face's GPT2LMHeadModel counts them) and some layer
 *      shapes are the published ones;
 *   2. LeNet's model_backward against a chain of the naive reference kernels (every parameter),
 *      and FCN-5's against central finite differences of the loss (max-pool ties make finite
 *      differences unreliable for LeNet at float precision).
 *   3. AdamW's weight decay falls on the weights of convolutions, fully connected, embedding and
 *      LSTM layers only (model_decay_ranges), and model_adamw applies it there, also on a part.
 * The graph runtime on small models is tests/test_model_graph.c, pipeline cuts
 * tests/test_partition.c, the data sets tests/test_data.c. */
#include "harness.h"
#include "model.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_fcn5, model_fcn8, model_alexnet, model_vgg16,
    model_googlenet, model_resnet50, model_lstm32, model_lstm64, model_gpt2, model_gpt2_medium,
    model_nanogpt_char;

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
        {&model_gpt2, 1, 1, 1024, 50257, 124439808},
        {&model_gpt2, 1, 1, 64, 50257, 124439808}, /* a shorter sequence: the same tables */
        {&model_gpt2_medium, 1, 1, 1024, 50257, 354823168},
        /* 256 x 384 x 2 + 6 x (2 x 768 + 384 x 1152 + 1152 + 384 x 384 + 384 + 384 x 1536 + 1536
         * + 1536 x 384 + 384) + 768 */
        {&model_nanogpt_char, 1, 1, 256, 256,
         2 * 256 * 384 +
             6 * (2 * 768 + 384 * 1152 + 1152 + 384 * 384 + 384 + 384 * 1536 + 1536 + 1536 * 384 +
                  384) +
             768},
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
        EXPECT(found, "%s has a layer %s", shapes_224[i].d->name, shapes_224[i].layer);
        model_free(&m);
    }
    /* An input too small for the model is reported, not planned into nonsense. */
    model_plan(&m, &model_vgg16, 1, 28, 28, 10, 1);
    printf("vgg16 on [1,28,28]: %s\n", m.problem);
    EXPECT(strstr(m.problem, "pool5") != NULL, "vgg16 on 28x28 input is reported as too small");
    model_free(&m);
    printf("published parameter counts and shapes checked\n");
}

/* The whole network's gradient computed by chaining the naive reference kernels of
 * tests/ref_*.c over the model's layer table: independent of model.c's forward/backward. */
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
            FcShape s = {.batch = n, .in = (int)l->in_size, .out = l->out_c};
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
            FcShape s = {.batch = n, .in = (int)l->in_size, .out = l->out_c};
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
    EXPECT(worst <= 1e-5 * scale && scale > 0, "lenet gradients match the reference chain");
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

static int same_ranges(const DecayRange *a, const DecayRange *b, int n) {
    for (int i = 0; i < n; i++)
        if (a[i].off != b[i].off || a[i].count != b[i].count || !a[i].decay != !b[i].decay)
            return 0;
    return 1;
}

/* The runs of decay of LeNet (every tensor a run: w decays, b not), ResNet-50 (convolutions
 * without bias, each followed by a batch norm whose gain and shift do not decay) and LSTM-32. */
static void test_decay_ranges(void) {
    Model m;
    model_plan(&m, &model_lenet, 1, 28, 28, 10, 1);
    const DecayRange lenet[] = {{0, 500, 1},       {500, 20, 0},       {520, 25000, 1},
                                {25520, 50, 0},    {25570, 400000, 1}, {425570, 500, 0},
                                {426070, 5000, 1}, {431070, 10, 0}};
    DecayRange got[8];
    int n = model_decay_ranges(&m, got, 8);
    EXPECT(n == 8 && same_ranges(got, lenet, 8), "lenet: %d runs of weight decay", n);
    model_free(&m);

    model_plan(&m, &model_resnet50, 3, 224, 224, 1000, 1);
    n = model_decay_ranges(&m, NULL, 0);
    DecayRange *r = calloc((size_t)n, sizeof *r);
    model_decay_ranges(&m, r, n);
    size_t decayed = 0, covered = 0;
    int ordered = 1;
    for (int i = 0; i < n; i++) {
        ordered &= r[i].off == covered && (i == 0 || r[i].decay != r[i - 1].decay);
        covered += r[i].count, decayed += r[i].decay ? r[i].count : 0;
    }
    /* the 53 convolutions and the fc weights (25,557,032 less the fc bias 1000, and each batch
     * norm's 2 x channels: 53,120 in all) */
    printf("resnet50: %d runs, %zu of %zu parameters decay\n", n, decayed, covered);
    EXPECT(ordered && covered == m.nparams && decayed == 25557032 - 1000 - 53120 && n == 108,
           "resnet50: convolution and fc weights decay, batch norms and the fc bias do not");
    free(r);
    model_free(&m);

    model_plan(&m, &model_lstm32, 1, 1, 32, 10000, 1);
    const size_t emb = 10000 * 256, lw = 4 * 256 * 512, lb = 4 * 256; /* an LSTM's w and b */
    const DecayRange lstm[] = {{0, emb + lw, 1}, /* the embedding, then lstm1's w */
                               {emb + lw, lb, 0},
                               {emb + lw + lb, lw, 1},     /* lstm2 */
                               {emb + 2 * lw + lb, lb, 0}, /* fc: */
                               {emb + 2 * (lw + lb), 2560000, 1},
                               {emb * 2 + 2 * (lw + lb), 10000, 0}};
    n = model_decay_ranges(&m, got, 8);
    EXPECT(n == 6 && same_ranges(got, lstm, 6),
           "lstm32: the embedding, LSTM and fc weights decay, their biases not (%d runs)", n);
    model_free(&m);
}

/* model_adamw with zero gradients moves only by the weight decay: decaying parameters are
 * multiplied by 1 - lr x wd, the others stay; on the whole of LeNet and on a part of it (the
 * offsets of a pipeline stage). */
static void test_adamw_decay(BackendCtx *ctx) {
    for (int first = 0; first <= 2; first += 2) {
        Model m;
        model_build_part(&m, &model_lenet, 1, 28, 28, 10, 2, 1, first, model_lenet.nlayers,
                         &cpu_backend, ctx, 7);
        model_use_adamw(&m);
        float *before = malloc(m.nparams * sizeof(float));
        memcpy(before, m.params, m.nparams * sizeof(float));
        memset(m.grads, 0, m.nparams * sizeof(float));
        const AdamWStep a = {.lr = 0.5f,
                             .beta1 = 0.9f,
                             .beta2 = 0.95f,
                             .eps = 1e-8f,
                             .weight_decay = 1.0f,
                             .bias1 = 0.1f,
                             .bias2 = 0.05f};
        model_adamw(&m, &a);
        int bad = 0;
        for (int l = first; l < m.nlayers; l++) {
            const Layer *L = &m.layers[l];
            size_t w = L->w_off - m.param_base, b = L->b_off - m.param_base;
            for (size_t i = 0; i < L->nw; i++)
                bad += m.params[w + i] != 0.5f * before[w + i];
            for (size_t i = 0; i < L->nb; i++)
                bad += m.params[b + i] != before[b + i];
        }
        EXPECT(bad == 0, "lenet layers %d..: AdamW's decay on the weights only (%d off)", first,
               bad);
        free(before);
        model_free(&m);
    }
}

int main(void) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx;
    cpu_backend.init(&cfg, &ctx);
    test_counts();
    test_model_vs_reference(ctx);
    test_model_finite_differences(ctx);
    test_decay_ranges();
    test_adamw_decay(ctx);
    cpu_backend.finalize(ctx);
    return check_summary();
}
