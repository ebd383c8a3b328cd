/* kernel_test.h - set-up shared by the CPU kernel tests (tests/test_cpu_*.c): the backend under
 * test on one thread, and its memory. Each of those programs compares the kernels of one
 * kernels/cpu/cpu_*.c file with the naive references (tests/ref_*.c) and checks their backward
 * passes by finite differences (tests/gradcheck.h); checks and random inputs: tests/harness.h. */
#ifndef DTBENCH_TESTS_KERNEL_TEST_H
#define DTBENCH_TESTS_KERNEL_TEST_H

#include "backend.h"
#include "harness.h"

extern const BackendOps *B; /* &cpu_backend */
extern BackendCtx *ctx;

/* initialises the CPU backend on one thread and seeds the random inputs; exits 1 on failure */
void kernel_test_init(uint64_t seed);
/* finalises the backend; returns check_summary()'s exit status */
int kernel_test_finish(void);
/* n floats of backend memory (what the driver uses); exits 2 when out of memory */
float *falloc(size_t n);

#endif
