/* gradcheck.h - finite-difference checks of backward kernels (tests/test_cpu_*.c).
 *
 * A layer under test is wrapped in a scalar loss: L = sum(y .* r) for a fixed random r (so
 * dL/dy = r), or the mean cross-entropy itself for softmax_xent. The analytic gradient comes from
 * the backend's backward with dy = r; the numerical one from central differences of the backend's
 * own float forward, (L(p+h) - L(p-h)) / (2h), accumulated in double, with h the perturbation
 * actually representable in float. A sample of GRADCHECK_SAMPLES entries of a gradient (all of
 * them when fewer) is compared with
 *     rel = |fd - analytic| / max(|fd|, |analytic|, floor)  <=  GRADCHECK_RTOL
 * (floor keeps near-zero gradients from being judged relatively). Inputs of ReLU and max pooling
 * are placed away from their kinks (fill_ramp: values 0.05 apart, eps = 1e-2), and an entry whose
 * perturbation still changes the branch taken (the pooling argmax) is skipped; a check where
 * every entry was skipped fails. Each fd_check is one counted check (harness.h). */
#ifndef DTBENCH_TESTS_GRADCHECK_H
#define DTBENCH_TESTS_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#define GRADCHECK_SAMPLES 40
#define GRADCHECK_RTOL    1e-2

/* A layer under test: loss() runs the forward on the current inputs and returns L;
 * same_branch(), when set, says whether the last two forwards (the one after mark() and the
 * latest) took the same branch, i.e. no kink was crossed. */
typedef struct Probe {
    double (*loss)(struct Probe *);
    int (*same_branch)(struct Probe *); /* may be NULL */
    void (*mark)(struct Probe *);       /* remember the branch of the current forward */
    void *layer;
} Probe;

/* Checks grad[n] (analytic) against central differences of probe->loss in param[n]. */
void fd_check(const char *layer, const char *what, Probe *pr, float *param, const float *grad,
              size_t n, float eps, double floor);

/* A generic layer: forward() writes y[ny] from the current inputs held in state; loss
 * sum(y .* r). Max pooling records its branch in argmax[nargmax] (argmax_mark: the marked one). */
typedef struct GradLayer {
    void (*forward)(struct GradLayer *);
    float *y, *r;
    size_t ny;
    void *state;
    int32_t *argmax, *argmax_mark;
    size_t nargmax;
} GradLayer;

/* a Probe over a GradLayer; with_branch: compare the argmax between perturbations */
Probe grad_layer_probe(GradLayer *l, int with_branch);

double dot(const float *a, const float *b, size_t n);
/* distinct values `gap` apart, shuffled: no ties, no kink within eps < gap/2 */
void fill_ramp(float *x, size_t n, float gap);

#endif
