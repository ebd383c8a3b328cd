/* test_cpu_optim.c - the CPU backend's loss and optimizer (kernels/cpu/cpu_optim.c): softmax
 * cross-entropy (loss, correct count and logit gradients; one class, extreme logits where exp()
 * would overflow without subtracting the max, FCN-5's 26752 classes; with and without dlogits)
 * and the SGD step over several steps with and without momentum, and the AdamW step over several
 * steps with and without weight decay, against the naive references (tests/ref_optim.c) and, for
 * AdamW, against PyTorch's values written out (torch.optim.AdamW); AdamW over a shard of a layout
 * with runs that decay and runs that do not (kernels/common/optimizer.c, what the parameter servers
 * run); then the logit gradient against finite differences of the loss (tests/gradcheck.h). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "optimizer.h" /* defines: optimizer_adamw_ranges */
#include "ref_kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_xent(int n, int c, float scale) {
    char shape[96];
    snprintf(shape, sizeof shape, "n=%d c=%d |logits|<=%g", n, c, scale);
    size_t nz = (size_t)n * c;
    float *z = falloc(nz), *dz = falloc(nz), *rdz = halloc(nz);
    int32_t *lab = malloc((size_t)n * sizeof(int32_t));
    fill_uniform(z, nz, -scale, scale);
    for (int i = 0; i < n; i++) {
        lab[i] = (int32_t)(rand_u64() % (uint64_t)c);
        if (i % 3 == 0) z[(size_t)i * c + lab[i]] += scale; /* some rows predicted correctly */
    }

    fill_nan(dz, nz);
    int rcorr = -2;
    float *st = falloc(2), *st2 = falloc(2); /* {loss, correct} */
    fill_nan(st, 2), fill_nan(st2, 2);
    B->softmax_xent(ctx, n, c, z, lab, dz, st);
    double rloss = ref_softmax_xent(n, c, z, lab, rdz, &rcorr);
    B->softmax_xent(ctx, n, c, z, lab, NULL, st2);
    float loss = st[0], loss2 = st2[0];
    int corr = (int)st[1], corr2 = (int)st2[1];
    float fl = (float)rloss;
    check_close(fmt_label("softmax_xent loss %s", shape), &loss, &fl, 1, 1e-5, 1e-5);
    check_close(fmt_label("softmax_xent loss (dlogits=NULL) %s", shape), &loss2, &fl, 1, 1e-5,
                1e-5);
    /* dlogits are O(1/n): relative to max(1/n, |ref|) */
    check_close(fmt_label("softmax_xent dlogits %s", shape), dz, rdz, nz, 1e-4 * (1.0 / n), 1e-4);
    int32_t cc[2] = {corr, corr2}, rc[2] = {rcorr, rcorr};
    check_equal_i32(fmt_label("softmax_xent correct %s", shape), cc, rc, 2);

    B->free(ctx, z), B->free(ctx, dz), B->free(ctx, st), B->free(ctx, st2);
    free(rdz), free(lab);
}

static void test_sgd(size_t n, float lr, float momentum, float wd, int steps) {
    char shape[128];
    snprintf(shape, sizeof shape, "n=%zu lr=%g momentum=%g wd=%g steps=%d", n, lr, momentum, wd,
             steps);
    float *p = falloc(n), *g = falloc(n), *v = momentum != 0.0f ? falloc(n) : NULL;
    float *rp = halloc(n), *rv = halloc(n);
    fill_uniform(p, n, -1, 1);
    memcpy(rp, p, n * sizeof(float));
    if (v) memset(rv, 0, n * sizeof(float)); /* v comes zeroed from alloc() */
    for (int st = 0; st < steps; st++) {
        fill_uniform(g, n, -1, 1);
        B->sgd_update(ctx, n, p, g, v, lr, momentum, wd);
        ref_sgd_update(n, rp, g, v ? rv : NULL, lr, momentum, wd);
    }
    check_close(fmt_label("sgd_update p %s", shape), p, rp, n, 1e-5, 1e-5);
    if (v) check_close(fmt_label("sgd_update v %s", shape), v, rv, n, 1e-5, 1e-5);
    B->free(ctx, p), B->free(ctx, g), B->free(ctx, v);
    free(rp), free(rv);
}

/* backend.h's AdamWStep of step t >= 1 */
static AdamWStep adamw_step(float lr, float beta1, float beta2, float eps, float wd, int t) {
    return (AdamWStep){.lr = lr,
                       .beta1 = beta1,
                       .beta2 = beta2,
                       .eps = eps,
                       .weight_decay = wd,
                       .bias1 = (float)(1.0 - pow(beta1, t)),
                       .bias2 = (float)(1.0 - pow(beta2, t))};
}

/* `steps` AdamW steps on n parameters against the reference; m and v stay the kernel's own. */
static void test_adamw(size_t n, float lr, float beta1, float beta2, float eps, float wd,
                       int steps) {
    char shape[160];
    snprintf(shape, sizeof shape, "n=%zu lr=%g betas=(%g,%g) eps=%g wd=%g steps=%d", n, lr, beta1,
             beta2, eps, wd, steps);
    float *p = falloc(n), *g = falloc(n), *m = falloc(n), *v = falloc(n); /* m, v: zeroed */
    float *rp = halloc(n), *rm = halloc(n), *rv = halloc(n);
    fill_uniform(p, n, -1, 1);
    memcpy(rp, p, n * sizeof(float));
    memset(rm, 0, n * sizeof(float)), memset(rv, 0, n * sizeof(float));
    for (int t = 1; t <= steps; t++) {
        fill_uniform(g, n, -1, 1);
        if (t == 2) g[0] = 0.0f; /* a zero gradient after a non-zero one */
        AdamWStep a = adamw_step(lr, beta1, beta2, eps, wd, t);
        B->adamw_update(ctx, n, p, g, m, v, &a);
        ref_adamw_update(n, rp, g, rm, rv, t, lr, beta1, beta2, eps, wd);
    }
    check_close(fmt_label("adamw_update p %s", shape), p, rp, n, 1e-6, 1e-5);
    check_close(fmt_label("adamw_update m %s", shape), m, rm, n, 1e-6, 1e-5);
    check_close(fmt_label("adamw_update v %s", shape), v, rv, n, 1e-7, 1e-5);
    B->free(ctx, p), B->free(ctx, g), B->free(ctx, m), B->free(ctx, v);
    free(rp), free(rm), free(rv);
}

/* Three steps on two parameters against the values of torch.optim.AdamW (PyTorch 1.13, float64)
 * with lr 0.1, betas (0.9, 0.95), eps 1e-8, from p = (1, -0.5) and gradients (0.5, -2),
 * (-0.25, 0.001), (1, 0). Step 1 by hand, weight decay 0.1: p = 1 x (1 - 0.1 x 0.1) = 0.99;
 * m = 0.1 x 0.5 = 0.05, v = 0.05 x 0.25 = 0.0125; bias1 = 0.1, bias2 = 0.05; sqrt(v) / sqrt(bias2)
 * = 0.5, so p = 0.99 - (0.1 / 0.1) x 0.05 / (0.5 + 1e-8) = 0.89 + 2e-9 = 0.890000002. */
static void test_adamw_torch(float wd) {
    static const float grads[3][2] = {{0.5f, -2.0f}, {-0.25f, 0.001f}, {1.0f, 0.0f}};
    static const double want_wd0[3][2] = {{0.90000000199999997, -0.40000000050000001},
                                          {0.87316305787582738, -0.33217293788201496},
                                          {0.80828856549526495, -0.27906449766213709}};
    static const double want_wd01[3][2] = {{0.89000000199999996, -0.3950000005},
                                           {0.85426305785582735, -0.32322293787701495},
                                           {0.78084593489670662, -0.26688226827836692}};
    static const double want_m[2] = {0.11799999999999998, -0.16190999999999997};
    static const double want_v[2] = {0.064250000000000057, 0.18050004750000015};
    float *p = falloc(2), *g = falloc(2), *m = falloc(2), *v = falloc(2);
    p[0] = 1.0f, p[1] = -0.5f;
    for (int t = 1; t <= 3; t++) {
        memcpy(g, grads[t - 1], sizeof grads[0]);
        AdamWStep a = adamw_step(0.1f, 0.9f, 0.95f, 1e-8f, wd, t);
        B->adamw_update(ctx, 2, p, g, m, v, &a);
        const double *w = wd > 0 ? want_wd01[t - 1] : want_wd0[t - 1];
        float want[2] = {(float)w[0], (float)w[1]};
        check_close(fmt_label("adamw_update = torch.optim.AdamW wd=%g step %d", wd, t), p, want, 2,
                    1e-6, 1e-6);
    }
    float wm[2] = {(float)want_m[0], (float)want_m[1]},
          wv[2] = {(float)want_v[0], (float)want_v[1]};
    check_close(fmt_label("adamw_update moments = torch.optim.AdamW's wd=%g", wd), m, wm, 2, 1e-7,
                1e-6);
    check_close(fmt_label("adamw_update second moments = torch.optim.AdamW's wd=%g", wd), v, wv, 2,
                1e-8, 1e-6);
    B->free(ctx, p), B->free(ctx, g), B->free(ctx, m), B->free(ctx, v);
}

static int adamw_calls;
static void counting_adamw(BackendCtx *c, size_t n, float *p, const float *g, float *m, float *v,
                           const AdamWStep *a) {
    adamw_calls++;
    B->adamw_update(c, n, p, g, m, v, a);
}

/* optimizer_adamw_ranges on the shard [7, 33) of a layout of 40 parameters whose runs are [0, 10)
 * decaying, [10, 15) not, [15, 25) and [25, 30) decaying (one stretch), [30, 35) not and [35, 40)
 * in none: with zero gradients and moments only the decay moves a parameter (x 1 - lr wd), and
 * the shard takes 4 calls. */
static void test_adamw_ranges(void) {
    const DecayRange r[] = {{0, 10, 1}, {10, 5, 0}, {15, 10, 1}, {25, 5, 1}, {30, 5, 0}};
    const size_t lo = 7, hi = 33;
    float *p = falloc(40), *g = falloc(40), *m = falloc(40), *v = falloc(40), want[40];
    for (int i = 0; i < 40; i++)
        p[i] = want[i] = (float)(i + 1);
    for (size_t i = lo; i < hi; i++)
        if ((i < 10) || (i >= 15 && i < 30)) want[i] *= 0.5f;
    BackendOps counting = *B;
    counting.adamw_update = counting_adamw;
    const AdamWStep a = {.lr = 0.5f,
                         .beta1 = 0.9f,
                         .beta2 = 0.95f,
                         .eps = 1e-8f,
                         .weight_decay = 1.0f,
                         .bias1 = 0.1f,
                         .bias2 = 0.05f};
    adamw_calls = 0;
    optimizer_adamw_ranges(&counting, ctx, &a, r, 5, lo, hi - lo, p + lo, g + lo, m + lo, v + lo);
    check_close("adamw over a shard's runs: decay on the decaying ones only", p, want, 40, 0, 0);
    int32_t calls[1] = {adamw_calls}, four[1] = {4};
    check_equal_i32("adamw over a shard's runs: one call per stretch of the same decay", calls,
                    four, 1);
    B->free(ctx, p), B->free(ctx, g), B->free(ctx, m), B->free(ctx, v);
}

/* ---- finite differences ---- */

typedef struct {
    int n, c;
    float *z;
    int32_t *labels;
} XentLayer;

static double xent_loss(Probe *pr) {
    XentLayer *l = pr->layer;
    float stats[2]; /* {loss, correct}: host memory on the CPU backend */
    B->softmax_xent(ctx, l->n, l->c, l->z, l->labels, NULL, stats);
    return stats[0];
}

static void gradcheck_xent(int n, int c) {
    XentLayer l = {.n = n, .c = c};
    char name[64];
    snprintf(name, sizeof name, "softmax_xent n=%d c=%d", n, c);
    size_t nz = (size_t)n * c;
    l.z = falloc(nz);
    l.labels = B->alloc(ctx, (size_t)n * sizeof(int32_t));
    float *dz = falloc(nz);
    fill_uniform(l.z, nz, -2, 2);
    for (int i = 0; i < n; i++)
        l.labels[i] = (int32_t)(rand_u64() % (uint64_t)c);

    float stats[2];
    B->softmax_xent(ctx, n, c, l.z, l.labels, dz, stats);
    Probe pr = {.loss = xent_loss, .layer = &l};
    /* Gradients are O(1/n) and smaller for many classes, while the float loss (~log c) carries
     * ~1e-7 relative rounding, i.e. ~2e-5 of noise in fd at eps = 1e-2: entries below 0.1/n are
     * therefore judged absolutely (error <= 1e-3/n). */
    fd_check(name, "dlogits", &pr, l.z, dz, nz, 1e-2f, 0.1 / n);

    B->free(ctx, l.z), B->free(ctx, l.labels), B->free(ctx, dz);
}

int main(void) {
    kernel_test_init(0x0971);
    test_xent(64, 10, 5.0f);
    test_xent(1, 1, 1.0f);
    test_xent(1, 10, 3.0f);
    test_xent(7, 5, 500.0f); /* exp() would overflow without subtracting the max */
    test_xent(3, 26752, 5.0f);
    test_sgd(1003, 0.1f, 0.9f, 5e-4f, 3);
    test_sgd(1003, 0.05f, 0.0f, 1e-4f, 2); /* no momentum: v == NULL */
    test_sgd(17, 0.01f, 0.9f, 0.0f, 4);
    test_adamw(1003, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 5); /* the vector loop and its tail */
    test_adamw(1003, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 5); /* nanoGPT's GPT-2 settings */
    test_adamw(17, 0.01f, 0.8f, 0.999f, 1e-6f, 0.01f, 7);
    test_adamw_torch(0.0f);
    test_adamw_torch(0.1f);
    test_adamw_ranges();

    gradcheck_xent(4, 7);
    gradcheck_xent(1, 10);
    gradcheck_xent(16, 100);
    return kernel_test_finish();
}
