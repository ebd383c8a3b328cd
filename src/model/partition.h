/* partition.h - where a model can be cut into pipeline stages, and where it is cut: balanced by
 * FLOPs, or at the layer indices given with --split. No MPI: tests call it directly.
 *
 * Stage k holds rows [first[k], first[k+1]) of the model table; first[0] = 0, first[K] = nlayers.
 * A cut before row s is possible when exactly one tensor crosses it, the output of row s-1: every
 * row from s on reads only rows s-1 and later. In a chain every cut is possible; in GoogLeNet the
 * cuts fall between inception modules, in ResNet between residual blocks. */
#ifndef DTBENCH_PARTITION_H
#define DTBENCH_PARTITION_H

#include "model.h"

#include <stddef.h>

/* cut_ok[s] = 1 when the model can be cut before row s (s in 1..nlayers-1; cut_ok[0] = 0).
 * Returns the number of such rows. */
int partition_cuts(const Model *plan, int *cut_ok);

/* The `stages` stages whose largest forward FLOPs is smallest, in first[stages + 1]. Returns 0, or
 * -1 when the model has fewer than stages - 1 possible cuts. */
int partition_balance(const Model *plan, int stages, int *first);

/* --split: stages - 1 increasing row indices where stages 2..K begin ("12,30"). Returns 0 with
 * first[] filled, or -1 with one line naming --split and what is accepted in err. */
int partition_parse(const Model *plan, const char *text, int stages, int *first, char *err,
                    size_t errlen);

/* The possible cuts as compact ranges ("1-6", "4,10,24,38"), into buf. */
void partition_cuts_text(const Model *plan, char *buf, size_t len);

/* Forward FLOPs per sample of rows [a, b). */
double partition_flops(const Model *plan, int a, int b);

#endif
