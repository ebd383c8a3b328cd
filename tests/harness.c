/* harness.c - the C tests' checks, failure count and random inputs (see harness.h). */
#include "harness.h"

#include "rng.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks, failures;

int check_count(int ok) {
    checks++;
    failures += !ok;
    return ok;
}

int check_close(const char *label, const float *got, const float *ref, size_t n, double atol,
                double rtol) {
    double max_abs = 0.0, max_rel = 0.0, worst_excess = -INFINITY;
    size_t worst = 0, relative = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)ref[i]), r = fabs((double)ref[i]);
        double tol = fmax(atol, rtol * r);
        if (!(d <= tol)) ok = 0; /* also catches NaN */
        if (isnan(d)) d = INFINITY;
        max_abs = fmax(max_abs, d);
        if (rtol * r > atol) /* where the relative part governs */
            max_rel = fmax(max_rel, d / r), relative++;
        if (d - tol > worst_excess) worst_excess = d - tol, worst = i;
    }
    if (atol == 0.0 && rtol == 0.0)
        printf("%s: max abs diff %.3g (tolerance 0, exact) %s\n", label, max_abs,
               ok ? "ok" : "FAIL");
    else if (relative)
        printf("%s: max abs diff %.3g, max rel diff %.3g (tolerance max(%.3g, %.3g*|ref|)) %s\n",
               label, max_abs, max_rel, atol, rtol, ok ? "ok" : "FAIL");
    else
        printf("%s: max abs diff %.3g (tolerance max(%.3g, %.3g*|ref|)) %s\n", label, max_abs, atol,
               rtol, ok ? "ok" : "FAIL");
    if (!ok)
        printf("  worst element [%zu]: got %.9g, ref %.9g\n", worst, (double)got[worst],
               (double)ref[worst]);
    return check_count(ok);
}

int check_equal_i32(const char *label, const int32_t *got, const int32_t *ref, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (got[i] != ref[i] && !bad++) first = i;
    printf("%s: %zu of %zu differ (tolerance 0) %s\n", label, bad, n, bad ? "FAIL" : "ok");
    if (bad) printf("  first difference [%zu]: got %d, ref %d\n", first, got[first], ref[first]);
    return check_count(!bad);
}

int check_same_bits(const char *label, const float *got, const float *ref, size_t n) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float)) && !bad++) first = i;
    printf("%s: %zu of %zu differ (bit for bit) %s\n", label, bad, n, bad ? "FAIL" : "ok");
    if (bad)
        printf("  first difference [%zu]: got %.9g, ref %.9g\n", first, (double)got[first],
               (double)ref[first]);
    return check_count(!bad);
}

int expect_at(int ok, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf(ok ? "ok: " : "FAIL: ");
    vprintf(fmt, ap);
    va_end(ap);
    if (ok)
        printf("\n");
    else
        printf(" (%s:%d)\n", file, line);
    return check_count(ok);
}

int check_summary(void) {
    if (failures)
        printf("FAIL: %d of %d checks failed\n", failures, checks);
    else
        printf("PASS: %d checks\n", checks);
    fflush(stdout);
    return failures ? 1 : 0;
}

const char *fmt_label(const char *fmt, ...) {
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

/* ---- random inputs: splitmix64 (base/rng.h) ---- */

static uint64_t state = 1;

void rand_seed(uint64_t seed) {
    state = seed;
}

uint64_t rand_u64(void) {
    uint64_t key = state;
    state += 0x9e3779b97f4a7c15ULL;
    return rng_mix(key); /* rng_mix adds the increment itself: splitmix64's next(seed) */
}

float rand_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((rand_u64() >> 40) * (1.0 / 16777216.0));
}

void fill_uniform(float *a, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++)
        a[i] = rand_uniform(lo, hi);
}

float *halloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "malloc of %zu floats failed\n", n);
        exit(2);
    }
    return p;
}

float *rand_floats(size_t n, float lo, float hi) {
    float *p = halloc(n);
    fill_uniform(p, n, lo, hi);
    return p;
}

void fill_nan(float *a, size_t n) {
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
}
