/* calibrate.h - times a bucket engine's collectives alone on a run's buckets (see exchange.h,
 * ExchangeCalibration), and the bucket cut every strategy shares. */
#ifndef DTBENCH_CALIBRATE_H
#define DTBENCH_CALIBRATE_H

#include "buckets.h"
#include "exchange.h"

/* Bucket k of n floats in buckets of b covers [n - (k+1)b, n - kb), clipped at 0: cut from the
 * END, since backward produces the last layers' gradients first. */
static inline size_t bucket_lo(size_t hi, size_t b) {
    return hi > b ? hi - b : 0;
}

/* Set by the program (or NULL: never): a non-zero return on any rank ends the measured
 * repetitions after the current one, on every rank together (a run asked to stop while it sets
 * up). */
extern int (*calibrate_interrupted)(void);

/* Collective over comm, the engine's ranks. buf[n] in the backend's memory. iters 0: the
 * unmeasured warm-up only (overlap: also in the non-blocking form that overlapped iterations
 * use). */
void transport_calibrate(BucketEngine *e, MPI_Comm comm, const BackendOps *be, BackendCtx *ctx,
                         float *buf, size_t n, size_t bucket, int iters, int overlap,
                         ExchangeCalibration *out);

/* How the calibration was measured, one line for the result file (root attribute
 * calibration_method): "after-backward: ..." (what precedes each timed repetition), or "none"
 * when nothing was measured. */
void calibrate_method(const ExchangeCalibration *cal, char *buf, size_t len);

#endif
