/* prefetch.h - the next training batch loaded and uploaded while the current step computes
 * (--prefetch; backend.h's "batch prefetch" operations). Internal to the driver (driver.c).
 *
 * Two slots, used in turn (iteration t in slot t % 2), each with page-locked host buffers the
 * data loader fills and device buffers the copy stream writes: slot 0's device buffers are the
 * model's own input and label buffers, slot 1's are allocated here, and the model reads the slot
 * of the step it computes (m->x, m->labels point there). The order, per iteration t:
 *   data phase   prefetch_take: the compute stream waits for slot t % 2's copies (loaded now if
 *                nothing was prefetched: the first iteration);
 *   forward, backward queued;
 *   prefetch_release(t): that work is the last to read slot t % 2;
 *   prefetch_load(t + 1): the host waits for slot (t+1) % 2's previous copies (done long ago:
 *                the compute stream waited for them an iteration before), fills its host buffers
 *                with batch t + 1 and queues their upload behind the slot's release; on a device
 *                the step's kernels are still running meanwhile.
 * So the batches, their order and every sample are those of the unprefetched loop (the loader
 * is called for t = 0, 1, 2, ... as before, only earlier), and the data phase records the time
 * the compute stream waits for its batch. A stage loads what it reads: samples on the first
 * stage of a pipeline, labels on the last. Evaluations upload their test batches into the slot
 * of the step just computed (the other holds the next batch) and release it again. A stop leaves
 * at most one batch in flight: prefetch_free waits for it before freeing. */
#ifndef DTBENCH_PREFETCH_H
#define DTBENCH_PREFETCH_H

#include "driver.h"

#include <stdint.h>

typedef struct {
    int on;
    int samples, labels; /* this stage reads samples (first stage), labels (last stage) */
    size_t sample_bytes, label_bytes;
    float *host_x[BACKEND_PREFETCH_SLOTS];
    int32_t *host_labels[BACKEND_PREFETCH_SLOTS];
    float *dev_x[BACKEND_PREFETCH_SLOTS];
    int32_t *dev_labels[BACKEND_PREFETCH_SLOTS];
    int64_t loaded[BACKEND_PREFETCH_SLOTS]; /* iteration whose batch the slot holds, -1: none */
} Prefetch;

/* Why --prefetch cannot run with this backend ("" when it can). */
const char *prefetch_why_not(const BackendOps *be, char *why, size_t len);

/* Off (p->on 0) unless d->set.prefetch and the stage reads a batch; allocates the buffers. */
void prefetch_init(Prefetch *p, Driver *d);
/* Queues iteration it's batch into slot it % 2 (see above). */
void prefetch_load(Prefetch *p, Driver *d, int64_t it);
/* The data phase of iteration it: the compute stream waits for its batch; the model reads it. */
void prefetch_take(Prefetch *p, Driver *d, int64_t it);
/* The compute work queued so far is the last to read iteration it's slot. */
void prefetch_release(Prefetch *p, Driver *d, int64_t it);
/* Waits for copies in flight, points the model back at its own buffers, frees the rest. */
void prefetch_free(Prefetch *p, Driver *d);

#endif
