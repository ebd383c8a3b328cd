/* test_model.c - the model zoo and the model runtime on the CPU backend:
 *   1. parameter counts match the published ones (LeNet 431,080; FCN-5 117,997,696; FCN-8
 *      130,586,752) and LeNet's layer shapes are Caffe's;
 *   2. LeNet's model_backward against a chain of the naive reference kernels (every parameter),
 *      and FCN-5's against central finite differences of the loss (max-pool ties make finite
 *      differences unreliable for LeNet at float precision);
 *   3. data sharding: the slices of P ranks put together are the batch of one process. */
#include "data.h"
#include "model.h"
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_fcn5, model_fcn8;

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
            PoolShape s = {n, l->in_c, l->in_h, l->in_w, l->d.k, l->d.stride, l->out_h, l->out_w};
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
            PoolShape s = {n, l->in_c, l->in_h, l->in_w, l->d.k, l->d.stride, l->out_h, l->out_w};
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

int main(void) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx;
    cpu_backend.init(&cfg, &ctx);
    test_counts();
    test_model_vs_reference(ctx);
    test_model_finite_differences(ctx);
    test_sharding();
    cpu_backend.finalize(ctx);
    printf(failures ? "%d failure(s)\n" : "all model tests passed\n", failures);
    return failures ? 1 : 0;
}
