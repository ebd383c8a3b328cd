/* profile.h - the per-layer profile (--profile-layers N): for N iterations after the warm-up,
 * each layer's forward and backward time on the backend's timeline, through the model's
 * observer (src/model/model.h): a timer mark (BackendOps.timer_record: a CUDA event on the compute
 * stream, the clock on the CPU) just before and just after each layer's forward and backward,
 * four slots per layer above the driver's phase marks. The marks are read after the iteration,
 * as the phases are; the host time the marks took is the profile's cost (/iterations/
 * profile_cost). One micro-batch only (resolve.c refuses more): a layer runs once per step.
 * Fused rows (src/model/model_fuse.c): a fused group's time is its first row's (the one that ran
 * it: a batch norm with its ReLU and residual add, a convolution with its ReLU's forward); the rows
 * fused into it read 0 in that direction. */
#ifndef DTBENCH_PROFILE_H
#define DTBENCH_PROFILE_H

#include "model.h"

#include <stdint.h>

/* Layers a model part may have for the profile: four timer slots each. */
#define PROFILE_MAX_LAYERS ((BACKEND_TIMER_SLOTS - BACKEND_PHASE_SLOTS) / 4)

typedef struct LayerProfile LayerProfile;

/* A profile of iterations [first, first + iters) of model part m (NULL when iters is 0). */
LayerProfile *profile_create(Model *m, int64_t first, int iters);
void profile_free(LayerProfile *p);

/* Before iteration `it`'s steps: marks from here on when `it` is profiled. */
void profile_begin(LayerProfile *p, int64_t it);
/* After iteration `it`'s update (outside the timed phases): when it was profiled, its index
 * among the profiled iterations (else -1), with forward[nlayers] and backward[nlayers] (the
 * whole model's layers; NaN for those this part does not hold) in seconds, and *cost the host
 * time the marks took; the observer is removed. */
int profile_end(LayerProfile *p, int64_t it, double *forward, double *backward, double *cost);

/* The roofline's amounts of model part m, one call of each of the whole model's nlayers layers
 * on the part's batch (one micro-batch, as profiled): amounts[PROFILE_AMOUNTS][nlayers], each row
 * of model_layer_cost in the order forward FLOPs, backward FLOPs, forward bytes, backward bytes;
 * NaN for the layers m does not hold, and 0 where the times are 0 (rows fused into another). */
enum { PROFILE_AMOUNTS = 4 };
void profile_amounts(const Model *m, double *amounts);

#endif
