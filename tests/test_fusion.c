/* test_fusion.c - which rows the model fuses when it is built (src/model/model_fuse.c), and that a
 * fused model trains exactly as the unfused one, on the CPU. A fake backend table is the CPU
 * backend plus fused batch-norm operations (bn_act_*) made of the CPU's own unfused calls in the
 * unfused order (tests/fused_rows.h: batch norm, residual add, ReLU; backward: ReLU in place, the
 * add's gradient, batch norm), so a fused model must give the unfused model's bits:
 *   - the fusions chosen for the zoo's models: ResNet-50 33 BN->ReLU and 16 BN->add->ReLU,
 *     ResNet-8 4 and 3, none in LeNet, GoogLeNet, LSTM-32 (no batch norm; FCN, AlexNet and VGG16
 *     have none either and are left out for their size); the same on the CPU backend (whose
 *     table has them: kernels/cpu/cpu_norm.c), none on its table without them; every fused ReLU and
 *     add skipped;
 *   - the CPU backend's own fused operations against the fake's, bit for bit, forward (training
 *     and inference) and backward, with and without the add, on random data;
 *   - ResNet-8 and a model whose block input is read twice, trained two steps whole and in two
 *     micro-batches on the fake and on the CPU backend: losses and parameters bit for bit the
 *     CPU backend's without fused operations, and the
 *     overlap hook (model_backward_part_hook) told the same offsets in the same order (a batch
 *     norm run at its add's place reports its gradients at its own place, when every later
 *     parameter is final). */
#include "fused_rows.h" /* defines: fused_rows_install, fused_rows_calls */
#include "harness.h"
#include "layers.h"
#include "alloc.h" /* defines: xcalloc, xmalloc */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const ModelDesc model_lenet, model_googlenet, model_resnet50, model_resnet8, model_lstm32;

/* one counted check (tests/harness.h), its message already formatted */
static void check(int ok, const char *what) {
    EXPECT(ok, "%s", what);
}

/* The CPU backend with fused batch norm made of its own unfused calls, and without any. */
static size_t count(const BnShape *s) {
    return (size_t)s->batch * s->c * s->spatial;
}
static BackendOps fused, unfused;
static void make_fused(void) {
    unfused = cpu_backend;
    unfused.name = "unfused";
    unfused.bn_act_forward_train = NULL, unfused.bn_act_forward_infer = NULL;
    unfused.bn_act_backward = NULL;
    fused = cpu_backend;
    fused.name = "fused";
    fused_rows_install(&fused, &cpu_backend, 0);
}

/* The CPU backend's fused kernels against the fake's composites, bit for bit. */
static void test_cpu_kernels(void) {
    const BnShape s = {.batch = 3, .c = 5, .spatial = 37, .eps = 1e-5f, .momentum = 0.1f};
    const size_t n = count(&s), c = (size_t)s.c;
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx = NULL;
    cpu_backend.init(&cfg, &ctx);
    float *x = rand_floats(n, -2, 2), *z = rand_floats(n, -1, 1), *g = rand_floats(c, 0.5f, 1.5f);
    float *b = rand_floats(c, -0.5f, 0.5f), *dy0 = rand_floats(n, -1, 1);
    for (int add = 0; add <= 1; add++) {
        float *y[2], *dy[2], *dx[2], *dz[2], *st[2], *gr[2];
        for (int k = 0; k < 2; k++) {
            y[k] = xcalloc(n, sizeof(float)), dx[k] = xcalloc(n, sizeof(float));
            dz[k] = xcalloc(n, sizeof(float)), dy[k] = xmalloc(n * sizeof(float));
            memcpy(dy[k], dy0, n * sizeof(float));
            st[k] = xcalloc(4 * c, sizeof(float)), gr[k] = xcalloc(2 * c, sizeof(float));
            const BackendOps *be = k ? &cpu_backend : &fused;
            for (size_t j = 0; j < c; j++)
                st[k][3 * c + j] = 1.0f; /* running variance */
            be->bn_act_forward_train(ctx, &s, x, g, b, add ? z : NULL, y[k], st[k], st[k] + c,
                                     st[k] + 2 * c, st[k] + 3 * c);
            be->bn_act_backward(ctx, &s, x, g, st[k], st[k] + c, y[k], dy[k], dx[k],
                                add ? dz[k] : NULL, gr[k], gr[k] + c);
        }
        char what[160];
        snprintf(what, sizeof what, "CPU bn_act training forward and backward%s = the fake's bits",
                 add ? " with the add" : "");
        check(!memcmp(y[0], y[1], n * sizeof(float)) && !memcmp(dx[0], dx[1], n * sizeof(float)) &&
                  !memcmp(dz[0], dz[1], n * sizeof(float)) &&
                  !memcmp(st[0], st[1], 4 * c * sizeof(float)) &&
                  !memcmp(gr[0], gr[1], 2 * c * sizeof(float)),
              what);
        fused.bn_act_forward_infer(ctx, &s, x, g, b, st[0] + 2 * c, st[0] + 3 * c, add ? z : NULL,
                                   y[0]);
        cpu_backend.bn_act_forward_infer(ctx, &s, x, g, b, st[0] + 2 * c, st[0] + 3 * c,
                                         add ? z : NULL, y[1]);
        snprintf(what, sizeof what, "CPU bn_act inference%s = the fake's bits",
                 add ? " with the add" : "");
        check(!memcmp(y[0], y[1], n * sizeof(float)), what);
        for (int k = 0; k < 2; k++)
            free(y[k]), free(dy[k]), free(dx[k]), free(dz[k]), free(st[k]), free(gr[k]);
    }
    free(x), free(z), free(g), free(b), free(dy0);
    cpu_backend.finalize(ctx);
}

/* ---- which rows fuse ----------------------------------------------------------------------------
 */

static void fusions(const ModelDesc *d, int c, int h, int w, const BackendOps *be, int *relu,
                    int *add, int *skipped) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx = NULL;
    be->init(&cfg, &ctx);
    const ModelDesc *md = model_for_input(d, c, h, w);
    Model m;
    model_build(&m, md, c, h, w, md->classes, 1, be, ctx, 3);
    *relu = *add = *skipped = 0;
    for (int i = 0; i < m.nlayers; i++) {
        const Layer *L = &m.layers[i];
        if (L->fuse_relu >= 0 && L->fuse_add < 0) {
            (*relu)++;
            if (m.layers[L->fuse_relu].d.kind != LAYER_RELU) (*relu) += 1000;
        }
        if (L->fuse_add >= 0) {
            (*add)++;
            if (m.layers[L->fuse_add].exec_as != i || L->exec_as != -1) (*add) += 1000;
        }
        if (L->exec_as < 0) (*skipped)++;
    }
    model_free(&m);
    be->finalize(ctx);
}

static void test_choice(void) {
    const struct {
        const ModelDesc *d;
        int c, h, w, relu, add;
    } zoo[] = {{&model_resnet50, 3, 32, 32, 33, 16},
               {&model_resnet8, 3, 32, 32, 4, 3},
               {&model_lenet, 1, 28, 28, 0, 0},
               {&model_googlenet, 3, 32, 32, 0, 0},
               {&model_lstm32, 1, 1, 32, 0, 0}}; /* FCN, AlexNet, VGG16: no batch norm either */
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        int relu, add, skipped, crelu, cadd, cskipped, urelu, uadd, uskipped;
        fusions(zoo[i].d, zoo[i].c, zoo[i].h, zoo[i].w, &fused, &relu, &add, &skipped);
        fusions(zoo[i].d, zoo[i].c, zoo[i].h, zoo[i].w, &cpu_backend, &crelu, &cadd, &cskipped);
        fusions(zoo[i].d, zoo[i].c, zoo[i].h, zoo[i].w, &unfused, &urelu, &uadd, &uskipped);
        char what[240];
        snprintf(what, sizeof what,
                 "%s: %d BN->ReLU (want %d), %d BN->add->ReLU (want %d), %d rows skipped; on the "
                 "CPU backend the same (%d, %d, %d); without fused operations none (%d, %d, %d)",
                 zoo[i].d->name, relu, zoo[i].relu, add, zoo[i].add, skipped, crelu, cadd, cskipped,
                 urelu, uadd, uskipped);
        check(relu == zoo[i].relu && add == zoo[i].add && skipped == relu + 2 * add &&
                  crelu == relu && cadd == add && cskipped == skipped &&
                  urelu + uadd + uskipped == 0,
              what);
    }
}

/* ---- fused training = unfused training
 * ----------------------------------------------------------- */

/* conv - bn - relu - conv - bn - add(bn, block input) - relu twice, then global pooling and fc */
#define ROW(kind_, name_, out_, k_, in_)                                                           \
    {                                                                                              \
        .kind = kind_, .name = name_, .out = out_, .k = k_, .stride = 1, .pad = k_ / 2,            \
        .inputs = in_                                                                              \
    }
static const LayerDesc BLOCKS[] = {
    ROW(LAYER_CONV, "stem", 6, 3, NULL),
    ROW(LAYER_RELU, "stem_relu", 0, 0, NULL),
    ROW(LAYER_CONV, "a.conv1", 6, 3, NULL),
    ROW(LAYER_BATCHNORM, "a.bn1", 0, 0, NULL),
    ROW(LAYER_RELU, "a.relu1", 0, 0, NULL),
    ROW(LAYER_CONV, "a.conv2", 6, 3, NULL),
    ROW(LAYER_BATCHNORM, "a.bn2", 0, 0, NULL),
    ROW(LAYER_ADD, "a.add", 0, 0, "a.bn2,stem_relu"),
    ROW(LAYER_RELU, "a.relu", 0, 0, NULL),
    ROW(LAYER_CONV, "b.conv1", 6, 1, NULL),
    ROW(LAYER_BATCHNORM, "b.bn1", 0, 0, NULL),
    ROW(LAYER_ADD, "b.add", 0, 0, "a.relu,b.bn1"), /* the batch norm second */
    ROW(LAYER_RELU, "b.relu", 0, 0, NULL),
    ROW(LAYER_GLOBAL_AVGPOOL, "pool", 0, 0, NULL),
    ROW(LAYER_FC, "fc", 0, 0, NULL),
};
static const ModelDesc model_blocks = {.name = "blocks",
                                       .about = "two residual blocks",
                                       .in_c = 3,
                                       .in_h = 6,
                                       .in_w = 6,
                                       .classes = 4,
                                       .nlayers = (int)(sizeof BLOCKS / sizeof BLOCKS[0]),
                                       .layers = BLOCKS};

enum { BATCH = 4, STEPS = 2, MAX_READY = 256 };
typedef struct {
    size_t at[MAX_READY];
    int n;
} Ready;
static void on_ready(void *user, size_t first) {
    Ready *r = user;
    if (r->n < MAX_READY) r->at[r->n] = first;
    r->n++;
}

static float *train(const ModelDesc *d, const BackendOps *be, int mb, float *loss, Ready *ready) {
    BackendConfig cfg = {.threads = 1};
    BackendCtx *ctx = NULL;
    be->init(&cfg, &ctx);
    Model m;
    model_build_part(&m, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH, mb, 0, d->nlayers, be,
                     ctx, 5);
    model_use_optimizer(&m, 0);
    const size_t nx = (size_t)BATCH * m.x_size;
    float *x = xmalloc(nx * sizeof *x);
    int32_t labels[BATCH];
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i * 3 + 1) % m.classes;
    be->upload(ctx, m.x, x, nx * sizeof *x);
    be->upload(ctx, m.labels, labels, sizeof labels);
    const int chunk = BATCH / mb;
    ready->n = 0;
    for (int step = 0; step < STEPS; step++) {
        loss[step] = 0;
        for (int k = 0; k < mb; k++) {
            model_forward_part(&m, k * chunk, chunk, k, 1);
            loss[step] += model_loss_part(&m, k * chunk, chunk, 1, 1.0f / mb, NULL) / mb;
            model_backward_part_hook(&m, k * chunk, chunk, k, k > 0, on_ready, ready);
        }
        model_sgd(&m, 0.05f, 0.9f, 1e-4f);
    }
    float *p = xmalloc(m.nparams * sizeof *p);
    be->download(ctx, p, m.params, m.nparams * sizeof *p);
    model_free(&m);
    be->finalize(ctx);
    free(x);
    return p;
}

static void test_training(const ModelDesc *d, int mb) {
    Model plan;
    model_plan(&plan, d, d->in_c, d->in_h, d->in_w, d->classes, BATCH);
    const size_t n = plan.nparams;
    model_free(&plan);
    float lu[STEPS], lf[STEPS], lc[STEPS];
    Ready ru, rf, rc;
    fused_rows_calls = 0;
    float *pu = train(d, &unfused, mb, lu, &ru), *pf = train(d, &fused, mb, lf, &rf);
    float *pc = train(d, &cpu_backend, mb, lc, &rc);
    char what[240];
    snprintf(what, sizeof what,
             "%s, %d micro-batch(es): fused (the fake, and the CPU backend's kernels) = unfused "
             "bit for bit (losses, parameters), the overlap hook told the same %d offsets in "
             "order; %d fused calls",
             d->name, mb, rf.n, fused_rows_calls);
    check(fused_rows_calls > 0 && !memcmp(lu, lf, sizeof lu) && !memcmp(pu, pf, n * sizeof *pu) &&
              !memcmp(lu, lc, sizeof lu) && !memcmp(pu, pc, n * sizeof *pu) && ru.n == rf.n &&
              ru.n == rc.n && ru.n <= MAX_READY &&
              !memcmp(ru.at, rf.at, (size_t)ru.n * sizeof ru.at[0]) &&
              !memcmp(ru.at, rc.at, (size_t)ru.n * sizeof ru.at[0]),
          what);
    free(pu), free(pf), free(pc);
}

int main(void) {
    make_fused();
    test_cpu_kernels();
    test_choice();
    for (int mb = 1; mb <= 2; mb++) {
        test_training(&model_blocks, mb);
        test_training(&model_resnet8, mb);
    }
    return check_summary();
}
