/* test_cpu_optim.c - the CPU backend's loss and optimizer (kernels/cpu_optim.c): softmax
 * cross-entropy (loss, correct count and logit gradients; one class, extreme logits where exp()
 * would overflow without subtracting the max, FCN-5's 26752 classes; with and without dlogits)
 * and the SGD step over several steps with and without momentum, against the naive references
 * (tests/ref_optim.c); then the logit gradient against finite differences of the loss
 * (tests/gradcheck.h). */
#include "gradcheck.h"
#include "kernel_test.h"
#include "ref_kernels.h"

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

    gradcheck_xent(4, 7);
    gradcheck_xent(1, 10);
    gradcheck_xent(16, 100);
    return kernel_test_finish();
}
