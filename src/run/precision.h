/* precision.h - --precision beyond the kernels (its modes and their names: backend.h): which
 * modes scale their loss, and fp16's dynamic loss scaler, with PyTorch's
 * torch.cuda.amp.GradScaler rules (docs/gpu.md "Precision"):
 *   the loss (its gradient) is multiplied by `scale` before backward; after the exchange the
 *   gradients are checked: any inf/NaN -> the step is skipped and scale *= backoff (0.5), the
 *   count of good steps restarts; else they are unscaled (x 1/scale) and the step runs, and after
 *   `interval` (2000) good steps in a row scale *= growth (2) if that stays finite.
 * The state machine is plain C (no backend) so tests/test_precision.c checks it alone. */
#ifndef DTBENCH_PRECISION_H
#define DTBENCH_PRECISION_H

#include "backend.h" /* defines: Precision, PRECISION_NAMES, PRECISION_NAME */

#include <stdint.h>

/* 1 when mode p runs with dynamic loss scaling: fp16 (and, for tests on CPUs, any mode when
 * DTBENCH_TEST_LOSS_SCALING=1: the scaler's path in the real loop, fp32 arithmetic). */
int precision_loss_scaling(Precision p);
/* Tests only: 1 when DTBENCH_TEST_OVERFLOW (comma-separated iterations) names iteration `it`:
 * the driver then puts an inf into rank 0's gradients before the exchange. */
int precision_test_overflow(long long it);

typedef struct {
    double scale;    /* current loss scale */
    double growth;   /* factor after `interval` good steps */
    double backoff;  /* factor after an overflow */
    int interval;    /* good steps in a row before growing */
    int good;        /* good steps since the last change */
    int64_t skipped; /* steps skipped so far */
} LossScaler;

/* GradScaler's defaults: scale 65536, growth 2 every 2000 good steps, backoff 0.5. */
void loss_scaler_init(LossScaler *s);
/* One step's outcome; returns 1 if the step must be skipped (found_nonfinite). */
int loss_scaler_update(LossScaler *s, int found_nonfinite);

#endif
