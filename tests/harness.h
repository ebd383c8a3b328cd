/* harness.h - what every C test program shares (in the spirit of llm.c's check_tensor): counted
 * checks that print what they compared, one failure count and exit status, and seeded random
 * inputs from base/rng.h.
 *
 *   check_close(label, got, ref, n, atol, rtol)
 *       element i passes when |got[i] - ref[i]| <= max(atol, rtol * |ref[i]|); NaN never passes
 *       (outputs pre-filled with NaN catch an element a kernel forgot). Prints one line
 *           LABEL: max abs diff A, max rel diff R (tolerance max(atol, rtol*|ref|)) ok|FAIL
 *       (R over the elements where rtol*|ref| > atol) and on failure the worst element (index, got,
 *       ref). atol = rtol = 0: exact.
 *   check_equal_i32(label, got, ref, n)   integers, exactly
 *   check_same_bits(label, got, ref, n)   floats bit for bit (memcmp), first difference on failure
 *   EXPECT(cond, fmt, ...)                one line "ok: MESSAGE" or "FAIL: MESSAGE (file:line)"
 *   check_count(ok)                       counts a check a helper printed itself (gradcheck.c)
 *   check_summary()                       prints "PASS: N checks" or "FAIL: F of N checks failed"
 *                                         and returns the exit status: 0 or 1. main() ends with
 *                                         `return check_summary();`.
 *   fmt_label(fmt, ...)                   a formatted label for one call (8 rotating static
 *                                         buffers: keep a label that outlives 7 more calls in
 *                                         a local array)
 *
 * Random inputs: one splitmix64 stream (base/rng.h: draw i of seed s is rng_mix(s + i * golden
 * ratio)), reproducible from the seed a test sets with rand_seed(); the default seed is 1.
 *   rand_u64(), rand_uniform(lo, hi) [lo, hi), fill_uniform(a, n, lo, hi), rand_floats(n, lo, hi)
 *   (malloc'ed), fill_nan(a, n), halloc(n) (malloc'ed floats; exits 2 when out of memory).
 */
#ifndef DTBENCH_TESTS_HARNESS_H
#define DTBENCH_TESTS_HARNESS_H

#include <stddef.h>
#include <stdint.h>

int check_close(const char *label, const float *got, const float *ref, size_t n, double atol,
                double rtol);
int check_equal_i32(const char *label, const int32_t *got, const int32_t *ref, size_t n);
int check_same_bits(const char *label, const float *got, const float *ref, size_t n);

int expect_at(int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define EXPECT(cond, ...) expect_at(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

int check_count(int ok);
int check_summary(void);
const char *fmt_label(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void rand_seed(uint64_t seed);
uint64_t rand_u64(void);
float rand_uniform(float lo, float hi);
void fill_uniform(float *a, size_t n, float lo, float hi);
float *rand_floats(size_t n, float lo, float hi);
void fill_nan(float *a, size_t n);
float *halloc(size_t n);

#endif
