/* test_model.c - the model zoo and the model runtime on the CPU backend:
 *   1. parameter counts match the published ones (LeNet 431,080; FCN-5 117,997,696; FCN-8
 *      130,586,752) and LeNet's layer shapes are Caffe's;
 *   2. a whole LeNet forward/backward against central finite differences of the loss;
 *   3. data sharding: the slices of P ranks put together are the batch of one process. */
#include "data.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const BackendOps cpu_backend;
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

static void test_counts(void)
{
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
    int shapes[][3] = {{20, 24, 24}, {20, 12, 12}, {50, 8, 8}, {50, 4, 4}, {500, 1, 1},
                       {500, 1, 1},  {10, 1, 1}};
    for (int i = 0; i < m.nlayers; i++)
        EXPECT(m.layers[i].out_c == shapes[i][0] && m.layers[i].out_h == shapes[i][1] &&
                   m.layers[i].out_w == shapes[i][2],
               "lenet layer %s shape [%d,%d,%d]", m.layers[i].d.name, m.layers[i].out_c,
               m.layers[i].out_h, m.layers[i].out_w);
    /* conv1: 2*20*24*24*25 FLOPs per sample */
    EXPECT(fabs(m.layers[0].flops - 2.0 * 20 * 24 * 24 * 25) < 1, "conv1 FLOPs");
    model_free(&m);
}

/* Loss of the model's current parameters on its batch, in float as the trainer computes it. */
static double loss_now(Model *m, int n)
{
    return model_forward(m, n, 0, NULL);
}

static void test_model_gradient(void)
{
    BackendConfig cfg = {1, 0, 0};
    BackendCtx *ctx;
    cpu_backend.init(&cfg, &ctx);
    const int n = 3;
    Model m;
    model_build(&m, &model_lenet, 1, 28, 28, 10, n, &cpu_backend, ctx, 7);
    for (int i = 0; i < n * 784; i++) m.x[i] = (float)((i * 7919) % 1000) / 1000.0f;
    for (int i = 0; i < n; i++) m.labels[i] = (i * 3) % 10;
    model_forward(&m, n, 1, NULL);
    model_backward(&m, n);
    float *grads = malloc(m.nparams * sizeof(float));
    memcpy(grads, m.grads, m.nparams * sizeof(float));

    /* A spread of parameters in every layer, weights and biases. */
    int checked = 0, bad = 0;
    double worst = 0;
    for (int l = 0; l < m.nlayers; l++) {
        const Layer *L = &m.layers[l];
        if (!L->nparams) continue;
        for (int j = 0; j < 12; j++) {
            size_t idx = L->w_off + (size_t)((j * 2654435761u) % L->nparams);
            float keep = m.params[idx];
            const float eps = 1e-2f;
            m.params[idx] = keep + eps;
            double up = loss_now(&m, n);
            m.params[idx] = keep - eps;
            double down = loss_now(&m, n);
            m.params[idx] = keep;
            double fd = (up - down) / (2.0 * eps), an = grads[idx];
            double err = fabs(fd - an) / (fabs(fd) + fabs(an) + 1e-3);
            if (err > worst) worst = err;
            if (err > 5e-2 && fabs(fd - an) > 2e-4) {
                printf("  %s param %zu: analytic %.6g, finite difference %.6g\n", L->d.name, idx, an,
                       fd);
                bad++;
            }
            checked++;
        }
    }
    printf("lenet whole-model gradient: %d parameters checked, max relative error %.3g "
           "(tolerance 5e-2 or 2e-4 absolute), %d off\n",
           checked, worst, bad);
    EXPECT(bad == 0, "lenet model gradient against finite differences");
    free(grads);
    model_free(&m);
    cpu_backend.finalize(ctx);
}

static void test_sharding(void)
{
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

int main(void)
{
    test_counts();
    test_model_gradient();
    test_sharding();
    printf(failures ? "%d failure(s)\n" : "all model tests passed\n", failures);
    return failures ? 1 : 0;
}
