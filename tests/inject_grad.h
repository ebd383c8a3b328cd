/* inject_grad.h - layer_compare's --inject-grad (tests/layer_compare.c): a backend whose
 * convolution and fully connected backward add an error as large as the whole gradient (its
 * 2-norm) to element 0 of one layer's weight gradient and input gradient, so that a test can
 * check that the comparison names the layer that went wrong. */
#ifndef DTBENCH_INJECT_GRAD_H
#define DTBENCH_INJECT_GRAD_H

#include "backend.h"

/* be's table with the two backward passes wrapped (one wrapped backend per program) */
const BackendOps *inject_grad_wrap(const BackendOps *be);
/* the weight gradient to perturb (device memory), and the type of the activations (and their
 * gradients) of the model it belongs to */
void inject_grad_at(const float *dw, ActType act);

#endif
