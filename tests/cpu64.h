/* cpu64.h - the CPU backend with float64 convolutions and fully connected layers (tests/cpu64.c),
 * the second CPU configuration of the layer comparison (tests/layer_compare.c). */
#ifndef DTBENCH_CPU64_H
#define DTBENCH_CPU64_H

#include "backend.h"

const BackendOps *cpu64_backend(void);

#endif
