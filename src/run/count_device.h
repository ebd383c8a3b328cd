/* count_device.h - a counting fake device, for tests on a CPU (tests/test_count_device.sh):
 * DTBENCH_COUNT_DEVICE=FILE with --device cpu makes dtbench train on the CPU backend's kernels
 * through a fake device (kernels/fake/fake_device.h) that declares device memory (so every device
 * path runs: the driver's synchronisation, host staging, the batch prefetch, step replay) and
 * counts, per iteration, into FILE what a GPU step must keep small: allocations, host
 * synchronisations, 16-bit weight casts (weights_ready), launches, prefetched uploads and whether they overlap queued
 * work, graph captures and replays. It checks as it runs, ending the job with a message on the
 * first breach:
 *   - prefetch order: a copy into a slot the compute stream may still read (no release since
 *     its wait); copies run only when the compute stream waits for them (deferred: a kernel that
 *     reads a batch before waiting for it computes on the previous one, and the results differ);
 *   - graphs: an allocation, a host synchronisation, an upload or a timer mark inside a capture
 *     (CUDA would fail there too); a replay whose calls or arguments differ from its capture (a
 *     captured graph replays stale arguments);
 *   - weights read by a product after the parameters changed and before weights_ready (a GPU's
 *     16-bit copy would be stale).
 * FILE gets one line per iteration and process: `count pid=P iter=I key=value ...` (see
 * count_device.c); iteration -1 is everything before the first. */
#ifndef DTBENCH_COUNT_DEVICE_H
#define DTBENCH_COUNT_DEVICE_H

#include "backend.h"

/* be itself, or the counting fake when DTBENCH_COUNT_DEVICE is set and be is the CPU backend. */
const BackendOps *count_device_wrap(const BackendOps *be);

#endif
