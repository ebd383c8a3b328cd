/* schedule_1f1b.c - 1F1B as in PipeDream-Flush (Narayanan et al., 2021): stage k of K first runs
 * min(K-1-k, M) warm-up forwards, then alternates one forward and one backward (the backward of
 * the oldest micro-batch in flight) until every forward has run, then drains the remaining
 * backwards; the gradients are flushed (exchanged and applied) once per iteration, so the
 * parameters follow GPipe's (and one process's) trajectory. Backwards run in order 0..M-1, so a
 * stage has at most K-k micro-batches in flight rather than M (this implementation still keeps a
 * slot per micro-batch: it shows the schedule's timing, not its memory saving). */
#include "schedule.h"

static void onef1b_steps(int k, int K, int M, ScheduleStep *steps) {
    int warmup = K - 1 - k < M ? K - 1 - k : M, n = 0, f = 0, b = 0;
    while (f < warmup)
        steps[n++] = (ScheduleStep){STEP_FORWARD, f++};
    while (f < M) {
        steps[n++] = (ScheduleStep){STEP_FORWARD, f++};
        steps[n++] = (ScheduleStep){STEP_BACKWARD, b++};
    }
    while (b < M)
        steps[n++] = (ScheduleStep){STEP_BACKWARD, b++};
}

const ScheduleOps onef1b_schedule = {
    .name = "1f1b",
    .reads = "stages,split,microbatches,schedule",
    .pipeline = 1,
    .device_memory = 1, /* messages staged through the host (driver_stage.c) */
    .steps = onef1b_steps,
};
