/* step_graph.h - a training step's forward pass (with its loss) and backward pass replayed from
 * graphs the backend captured (--graphs; backend.h's "step replay" operations): one launch each
 * instead of one per kernel, which is what small, launch-bound models (LeNet, LSTMs, small
 * batches) spend their step on.
 *
 * What is captured, and when: a step of one stage and one micro-batch. Its first forward and
 * backward run eagerly (lazy set-up: cuBLAS, 16-bit scratch, softmax scratch, plans of shapes
 * first seen); from the second step on, each part runs from the graph captured for the
 * arguments it reads that may change between steps: the input and label buffers (the batch
 * prefetch alternates two, src/run/prefetch.h). Dropout's mask follows the batch's first sample,
 * which its kernels read from backend memory (model_set_sample_origin queues it there before the
 * step), so a replayed step draws that step's mask: models with dropout (AlexNet, VGG16,
 * GoogLeNet) are replayed too. fp16's loss scale is read from backend memory the same way
 * (model_set_loss_scale, the backend's scale_by), so a change of scale replays the same graph;
 * only a backend without scale_by keys graphs on the scale's value. A new combination is
 * captured when first met (with prefetch: steps 1 and 2, in the warm-up by default); at most
 * STEP_GRAPH_CACHE graphs are kept.
 *
 * Phase marks stay on the device's clock: the graph is split at the phase boundary. The driver
 * records MARK_DATA before the forward graph, MARK_FORWARD between the two and MARK_BACKWARD
 * after the backward graph, as ordinary events on the compute stream; no mark is recorded inside
 * a graph. The data wait, the exchange and the update run eagerly, as do evaluations.
 *
 * Per mode (step_graphs_parts): refused with a reason where a step cannot be replayed:
 * pipelines (each micro-batch step synchronises and exchanges messages), micro-batches (their
 * losses are read inside the step), --profile-layers (layers are timed between eager launches),
 * a layer whose kernels take per-step values as arguments (none in the zoo), a backend without
 * the operations (the CPU). With --overlap the backward pass stays eager (it
 * starts the exchange between layers); the forward pass is still replayed. */
#ifndef DTBENCH_STEP_GRAPH_H
#define DTBENCH_STEP_GRAPH_H

#include "backend.h"
#include "model.h"
#include "options.h" /* defines: Toggle */

#include <stddef.h>

enum { STEP_GRAPH_FORWARD = 1, STEP_GRAPH_BACKWARD = 2 };
#define STEP_GRAPH_CACHE 8

/* The parts of a step (STEP_GRAPH_* mask) that --graphs `mode` (auto, on, off) replays with this
 * backend, the whole planned model and the mode; why gets the reason for what is left out ("" when
 * nothing is). Plain logic, no backend call: main.c refuses --graphs on with the reason. */
int step_graphs_parts(Toggle mode, const BackendOps *be, const Model *plan, int stages,
                      int microbatches, int overlap, int profile, char *why, size_t len);

typedef struct StepGraphs StepGraphs;

/* NULL when parts is 0. */
StepGraphs *step_graphs_create(Model *m, int parts);
/* The step's forward pass and loss (model_forward_part and model_loss_queue on samples [0, n),
 * micro-batch 0, training), or its backward pass (model_backward_part, overwriting the
 * gradients), from a graph. Returns 0 when the caller must run it eagerly itself: g NULL, the
 * part not replayed, or the first step. */
int step_graphs_forward(StepGraphs *g, int n);
int step_graphs_backward(StepGraphs *g, int n);
/* Graphs captured so far. */
long step_graphs_captures(const StepGraphs *g);
void step_graphs_free(StepGraphs *g);

#endif
