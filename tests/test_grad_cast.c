/* test_grad_cast.c - --grad-dtype's conversions and MPI sum (comm/grad_cast.c) against a naive
 * reference written here from the formats' definitions:
 *   - decoding: every one of the 65536 bf16 and fp16 patterns against sign * significand *
 *     2^exponent computed with ldexp (NaN patterns: a NaN of the same sign);
 *   - round trip: every non-NaN pattern decodes and encodes back to itself;
 *   - rounding: for every pair of neighbouring patterns, the exact midpoint (ties to even), the
 *     floats just below and above it and just inside each end, plus 10^6 random fp32 patterns,
 *     against the reference: the nearest pattern by binary search over the decoded values, ties to
 *     the even pattern, overflow to inf when the nearest would be 2^(emax+1) (IEEE 754);
 *   - grad_pack / grad_unpack / grad_round agree with the scalar conversions;
 *   - the MPI sum (applied with MPI_Reduce_local) gives the reference rounding of the exact sum
 *     for 10^6 random pairs of finite values of each type, overflow included.
 * Prints the number of values checked and the mismatches; one check per format and one for the
 * names (tests/harness.h), exit 0 pass, 1 fail. */
#include "mpi_check.h" /* defines: MPI_CHECK */
#include "grad_cast.h"
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A 2-byte format: exponent bits, explicit significand bits (bf16 8/7, fp16 5/10). */
typedef struct {
    const char *name;
    GradDtype dt;
    int ebits, mbits;
} Format;

static const Format FORMATS[2] = {{"bf16", GRAD_BF16, 8, 7}, {"fp16", GRAD_FP16, 5, 10}};

static uint16_t inf_pattern(const Format *f) {
    return (uint16_t)(((1u << f->ebits) - 1u) << f->mbits);
}

/* The value of a pattern from the definition; NaN patterns give NAN. */
static double ref_decode(const Format *f, uint16_t p) {
    int bias = (1 << (f->ebits - 1)) - 1;
    unsigned e = (p >> f->mbits) & ((1u << f->ebits) - 1u), m = p & ((1u << f->mbits) - 1u);
    double sign = (p >> 15) ? -1.0 : 1.0, v;
    if (e == (1u << f->ebits) - 1u)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, 1 - bias - f->mbits);
    else
        v = ldexp((double)((1u << f->mbits) + m), (int)e - bias - f->mbits);
    return sign * v;
}

/* Nearest pattern to x (not NaN), ties to even; past the largest finite value, the value the next
 * pattern would have with an unbounded exponent decides (it is 2^(emax+1)): inf. */
static uint16_t ref_round(const Format *f, const double *vals, double x) {
    uint16_t sign = signbit(x) ? 0x8000 : 0, top = inf_pattern(f); /* vals[0 .. top]: ascending */
    double a = fabs(x);
    if (a >= vals[top]) return sign | top; /* vals[top]: 2^(emax+1) */
    unsigned lo = 0, hi = top;             /* vals[lo] <= a < vals[hi] */
    while (hi - lo > 1) {
        unsigned mid = (lo + hi) / 2;
        if (vals[mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    double dlo = a - vals[lo], dhi = vals[hi] - a;
    unsigned p = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
    return (uint16_t)(sign | p);
}

static uint16_t cast(const Format *f, float x) {
    return f->dt == GRAD_BF16 ? grad_bf16_from_float(x) : grad_fp16_from_float(x);
}

static float uncast(const Format *f, uint16_t p) {
    return f->dt == GRAD_BF16 ? grad_bf16_to_float(p) : grad_fp16_to_float(p);
}

static long checked, wrong;

static void expect_round(const Format *f, const double *vals, float x) {
    if (isnan(x)) return;
    uint16_t got = cast(f, x), want = ref_round(f, vals, (double)x);
    checked++;
    if (got != want && wrong++ < 10)
        printf("FAIL: %s(%.9g): 0x%04x, reference 0x%04x\n", f->name, (double)x, got, want);
}

static uint32_t rnd32(void) {
    return (uint32_t)(rand_u64() >> 32);
}

static float float_of(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void test_format(const Format *f) {
    uint16_t top = inf_pattern(f);
    double *vals = malloc(((size_t)top + 1) * sizeof(double));
    for (unsigned p = 0; p < top; p++)
        vals[p] = ref_decode(f, (uint16_t)p);
    vals[top] = ldexp(1.0, (1 << (f->ebits - 1))); /* 2^(emax+1) */
    long before = wrong;

    for (unsigned p = 0; p < 65536; p++) { /* decoding and round trip, every pattern */
        double want = ref_decode(f, (uint16_t)p);
        float got = uncast(f, (uint16_t)p);
        checked++;
        int ok = isnan(want)
                     ? isnan(got) && !!signbit(got) == !!(p >> 15)
                     : (double)got == want && !!signbit(got) == !!(p >> 15) && cast(f, got) == p;
        if (!ok && wrong++ < 10)
            printf("FAIL: %s pattern 0x%04x: decoded %.9g, reference %.9g, back 0x%04x\n", f->name,
                   p, (double)got, want, cast(f, got));
    }
    for (unsigned p = 0; p < top; p++) /* around every midpoint and every value, both signs */
        for (int s = 0; s < 2; s++) {
            double sg = s ? -1.0 : 1.0, lo = vals[p], hi = vals[p + 1];
            float mid = (float)(sg * (lo + hi) / 2); /* exact: at most 12 significant bits */
            expect_round(f, vals, mid);
            expect_round(f, vals, nextafterf(mid, 0.0f));
            expect_round(f, vals, nextafterf(mid, (float)(sg * INFINITY)));
            expect_round(f, vals, nextafterf((float)(sg * lo), (float)(sg * INFINITY)));
            expect_round(f, vals, nextafterf((float)(sg * hi), 0.0f));
        }
    expect_round(f, vals, INFINITY), expect_round(f, vals, -INFINITY);
    expect_round(f, vals, 3.4028235e38f), expect_round(f, vals, 1e-45f);
    for (int i = 0; i < 1000000; i++)
        expect_round(f, vals, float_of(rnd32()));
    checked++;
    if (!isnan(uncast(f, cast(f, NAN))) && wrong++ < 10) printf("FAIL: %s(NaN) not NaN\n", f->name);

    /* the array forms */
    enum { N = 4099 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    uint16_t *w = malloc(N * sizeof(uint16_t));
    for (int i = 0; i < N; i++)
        x[i] = float_of(rnd32() & 0xbfffffffu); /* finite, |x| < 2 */
    grad_pack(f->dt, w, x, N);
    grad_unpack(f->dt, y, w, N, 0.25f);
    for (int i = 0; i < N; i++) {
        checked++;
        if ((w[i] != cast(f, x[i]) || y[i] != uncast(f, w[i]) * 0.25f) && wrong++ < 10)
            printf("FAIL: %s pack/unpack at %d\n", f->name, i);
    }
    memcpy(y, x, N * sizeof(float));
    grad_round(f->dt, y, N);
    for (int i = 0; i < N; i++) {
        checked++;
        if (y[i] != uncast(f, cast(f, x[i])) && wrong++ < 10)
            printf("FAIL: %s grad_round at %d\n", f->name, i);
    }

    /* the MPI sum: inout[i] = round(in[i] + inout[i]), exact sums in double (see header) */
    uint16_t *a = malloc(N * sizeof(uint16_t)), *b = malloc(N * sizeof(uint16_t));
    for (int rep = 0; rep < 250; rep++) {
        for (int i = 0; i < N; i++) {
            do { /* odd repetitions: b near a in magnitude (ties, cancellation, overflow) */
                a[i] = (uint16_t)rnd32(), b[i] = (uint16_t)rnd32();
                if (rep % 2)
                    b[i] = (uint16_t)((b[i] & 0x8000u) | ((a[i] + (rnd32() % 64)) & 0x7fffu));
            } while (!isfinite(ref_decode(f, a[i])) || !isfinite(ref_decode(f, b[i])));
        }
        memcpy(w, b, N * sizeof(uint16_t));
        MPI_CHECK(MPI_Reduce_local(a, w, N, grad_mpi_type(f->dt), grad_mpi_sum(f->dt)));
        for (int i = 0; i < N; i++) {
            double sum = ref_decode(f, a[i]) + ref_decode(f, b[i]);
            uint16_t want = ref_round(f, vals, sum);
            checked++;
            if (w[i] != want && wrong++ < 10)
                printf("FAIL: %s sum 0x%04x + 0x%04x = 0x%04x, reference 0x%04x\n", f->name, a[i],
                       b[i], w[i], want);
        }
    }
    EXPECT(wrong == before, "%s: %ld mismatches", f->name, wrong - before);
    free(vals), free(x), free(y), free(w), free(a), free(b);
}

int main(int argc, char **argv) {
    MPI_CHECK(MPI_Init(&argc, &argv));
    mpi_check_start();
    for (int i = 0; i < 2; i++)
        test_format(&FORMATS[i]);
    EXPECT(grad_dtype_parse("bf16") == GRAD_BF16 && grad_dtype_parse("fp16") == GRAD_FP16 &&
               grad_dtype_parse("fp32") == GRAD_FP32 && grad_dtype_parse("fp8") == -1 &&
               grad_dtype_size(GRAD_BF16) == 2 && grad_dtype_size(GRAD_FP32) == 4,
           "--grad-dtype names and sizes");
    printf("%ld values checked, %ld wrong\n", checked, wrong);
    MPI_Finalize();
    return check_summary();
}
