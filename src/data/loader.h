/* loader.h - the batch loader: threads of its own that make training batches into host buffers
 * while the driver's thread queues the step, so that making a batch never sits inside a timed
 * phase of the driver's thread (src/run/prefetch.h uses it; the driver times on the backend's
 * clock, and a host that is busy loading while the device has nothing queued shows up as device
 * idle time in whichever phase the host is in).
 *
 * One request per slot at a time (slots 0 .. LOADER_SLOTS-1). A request is made by one
 * thread (the data set's shuffled positions: dataset_batch_indices) and copied by all `threads`
 * (dataset_fill on disjoint ranges of samples). Each batch records how long the loader took to
 * make it (its `made` time, on the loader's threads) and how long the driver waited for it. */
#ifndef DTBENCH_LOADER_H
#define DTBENCH_LOADER_H

#include "data.h"

#include <stdint.h>

/* Slots: batches asked for and not yet waited for, at most. */
#define LOADER_SLOTS 4

typedef struct Loader Loader;

/* Starts `threads` (1 or more) threads with every signal blocked (signals go to the driver's
 * thread). Batches are this shard's slices of the global batch (dataset_train_batch). */
Loader *loader_create(Dataset *ds, int global_batch, int shard, int nshards, int threads);
/* Asks for iteration it's batch in `slot`: samples into x (NULL: labels only), labels into
 * labels. The buffers belong to the loader until loader_wait(slot) returns. */
void loader_submit(Loader *l, int slot, int64_t it, float *x, int32_t *labels);
/* 1 when slot's batch is made (loader_wait would not block). */
int loader_ready(Loader *l, int slot);
/* Waits at most `seconds` (under a second) for slot's batch; 1 when it is made. */
int loader_wait_for(Loader *l, int slot, double seconds);
/* Blocks until slot's batch is made. Returns the seconds this call waited; *made: the seconds
 * the loader took to make the batch (from starting it to its last sample). */
double loader_wait(Loader *l, int slot, double *made);
/* Abandons a batch in the making (at a stop), joins the threads, frees. NULL: nothing. */
void loader_free(Loader *l);

#endif
