/* prefetch.h - the next training batch made by the loader's threads (src/data/loader.h) and
 * uploaded while the current step computes (--prefetch; backend.h's "batch prefetch" operations).
 * Internal to the driver (driver.c).
 *
 * Two slots, used in turn (iteration t in slot t % 2), each with page-locked host buffers the
 * loader fills and device buffers the copy stream writes: slot 0's device buffers are the
 * model's own input and label buffers, slot 1's are allocated here, and the model reads the slot
 * of the step it computes (m->x, m->labels point there). The order, per iteration t:
 *   data phase   prefetch_take(t): unless batch t's upload was queued during step t-1, the
 *                driver's thread waits for the loader to make it (load_wait) and queues its
 *                upload; the compute stream waits for slot t % 2's copies; then the loader is
 *                asked for batch t + 1 into slot (t+1) % 2, whose host buffers the copy of
 *                batch t - 1 read (the host fences it: done long ago);
 *   forward, backward queued;
 *   prefetch_release(t): that work is the last to read slot t % 2;
 *   prefetch_upload_next(t + 1): if the loader has made batch t + 1, its upload is queued behind
 *                the slot's release and runs while the step computes (before the backward mark:
 *                no host work for it lies between backward and the exchange);
 *   prefetch_upload_during(t + 1): where the host would next wait for the device (the exchange's
 *                synchronisation, fp16's overflow check, the record's read of the marks), it
 *                waits for the loader instead while the device still computes, and queues the
 *                upload as soon as the batch is made, so that a batch made during the step is
 *                uploaded during it (a graphed step is queued in a fraction of a millisecond,
 *                long before a batch is made); once the device is done it stops waiting: a
 *                batch still in the making then is late, and prefetch_take(t + 1) waits for it
 *                inside the next data phase.
 * So nothing the host does to make a batch lies between the end of backward and the exchange
 * while the device has nothing to compute, and a loader slower than the step shows as the data
 * phase and load_wait, never as another phase. The batches, their order and every sample are
 * those of the unprefetched loop (the same dataset_train_batch slices, only made on other threads
 * and earlier). Evaluations upload their test batches into the slot of the step just computed
 * (the other one holds the next batch) and release it again. A stop leaves at most one batch in
 * the making (abandoned) and one copy in flight: prefetch_free waits for the copy before
 * freeing. */
#ifndef DTBENCH_PREFETCH_H
#define DTBENCH_PREFETCH_H

#include "driver.h"
#include "loader.h" /* defines: Loader */

#include <stdint.h>

typedef struct {
    int on;
    int samples, labels; /* this stage reads samples (first stage), labels (last stage) */
    size_t sample_bytes, label_bytes;
    float *host_x[BACKEND_PREFETCH_SLOTS];
    int32_t *host_labels[BACKEND_PREFETCH_SLOTS];
    float *dev_x[BACKEND_PREFETCH_SLOTS];
    int32_t *dev_labels[BACKEND_PREFETCH_SLOTS];
    int64_t asked[BACKEND_PREFETCH_SLOTS];  /* iteration asked of the loader, -1: none */
    int64_t queued[BACKEND_PREFETCH_SLOTS]; /* iteration whose upload is queued, -1: none */
    int64_t total;                          /* iterations in the run: none asked beyond */
    Loader *loader;
    double made[BACKEND_PREFETCH_SLOTS]; /* the loader's time making the slot's batch, s */
} Prefetch;

/* Why --prefetch cannot run with this backend ("" when it can). */
const char *prefetch_why_not(const BackendOps *be, char *why, size_t len);

/* Off (p->on 0) unless d->set.prefetch and the stage reads a batch; allocates the buffers. */
void prefetch_init(Prefetch *p, Driver *d);
/* The data phase of iteration it (see above): the compute stream waits for its batch, the model
 * reads it; *load: the loader's time making it, *load_wait: the time this call waited for the
 * loader (0: its upload was queued during the previous step). */
void prefetch_take(Prefetch *p, Driver *d, int64_t it, double *load, double *load_wait);
/* After the step's compute is queued: batch it's upload, if the loader has made it (see above). */
void prefetch_upload_next(Prefetch *p, Driver *d, int64_t it);
/* Before a host wait for the device: until timer mark `mark` has happened, waits for the loader
 * and queues batch it's upload once it is made; when_idle 1: also once the mark has happened, if
 * the batch is made by then (0: host work would leave the device idle). At once when the upload
 * is queued already or the backend cannot tell (no timer_done: marks happen when recorded). */
void prefetch_upload_during(Prefetch *p, Driver *d, int64_t it, int mark, int when_idle);
/* The compute work queued so far is the last to read iteration it's slot. */
void prefetch_release(Prefetch *p, Driver *d, int64_t it);
/* Abandons a batch in the making, waits for copies in flight, points the model back at its own
 * buffers, frees the rest. */
void prefetch_free(Prefetch *p, Driver *d);

#endif
