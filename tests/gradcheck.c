/* gradcheck.c - finite-difference checks of backward kernels (see gradcheck.h). */
#include "gradcheck.h"

#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double dot(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

void fd_check(const char *layer, const char *what, Probe *pr, float *param, const float *grad,
              size_t n, float eps, double floor) {
    size_t count = n < GRADCHECK_SAMPLES ? n : GRADCHECK_SAMPLES, skipped = 0;
    double max_rel = 0.0;
    for (size_t s = 0; s < count; s++) {
        size_t j = n <= GRADCHECK_SAMPLES ? s : (size_t)(rand_u64() % n);
        const float p0 = param[j];
        param[j] = p0 + eps;
        const double h_plus = (double)param[j] - p0;
        const double l_plus = pr->loss(pr);
        if (pr->mark) pr->mark(pr);
        param[j] = p0 - eps;
        const double h_minus = (double)param[j] - p0;
        const double l_minus = pr->loss(pr);
        int straddles = pr->same_branch && !pr->same_branch(pr);
        param[j] = p0;
        if (straddles) {
            skipped++;
            continue;
        }
        const double fd = (l_plus - l_minus) / (h_plus - h_minus);
        const double an = grad[j];
        const double rel = fabs(fd - an) / fmax(floor, fmax(fabs(fd), fabs(an)));
        if (!(rel <= max_rel)) max_rel = isnan(rel) ? INFINITY : fmax(rel, max_rel);
    }
    int ok = max_rel <= GRADCHECK_RTOL && skipped < count;
    printf("gradcheck %s %s: %zu entries (%zu skipped at kinks), max rel err %.2e (tolerance "
           "%.0e) %s\n",
           layer, what, count, skipped, max_rel, GRADCHECK_RTOL, ok ? "ok" : "FAIL");
    check_count(ok);
}

static double layer_loss(Probe *pr) {
    GradLayer *l = pr->layer;
    l->forward(l);
    return dot(l->y, l->r, l->ny);
}

static void layer_mark(Probe *pr) {
    GradLayer *l = pr->layer;
    memcpy(l->argmax_mark, l->argmax, l->nargmax * sizeof(int32_t));
}

static int layer_same(Probe *pr) {
    GradLayer *l = pr->layer;
    return memcmp(l->argmax_mark, l->argmax, l->nargmax * sizeof(int32_t)) == 0;
}

Probe grad_layer_probe(GradLayer *l, int with_branch) {
    Probe pr = {.loss = layer_loss, .layer = l};
    if (with_branch) pr.same_branch = layer_same, pr.mark = layer_mark;
    return pr;
}

void fill_ramp(float *x, size_t n, float gap) {
    for (size_t i = 0; i < n; i++)
        x[i] = gap * (float)i - 0.5f * gap * (float)n;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(rand_u64() % (i + 1));
        float t = x[i];
        x[i] = x[j], x[j] = t;
    }
}
