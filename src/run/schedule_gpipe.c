/* schedule_gpipe.c - GPipe: every stage runs the forwards of micro-batches 0..M-1, then the
 * backwards M-1..0 (see schedule.h). Activations of all M micro-batches are kept until their
 * backward. */
#include "schedule.h"

static void gpipe_steps(int k, int K, int M, ScheduleStep *steps) {
    (void)k, (void)K;
    for (int j = 0; j < M; j++) {
        steps[j] = (ScheduleStep){STEP_FORWARD, j};
        steps[M + j] = (ScheduleStep){STEP_BACKWARD, M - 1 - j};
    }
}

const ScheduleOps gpipe_schedule = {
    .name = "gpipe",
    .reads = "stages,split,microbatches,schedule",
    .pipeline = 1,
    .device_memory = 1, /* messages staged through the host (driver_stage.c) */
    .steps = gpipe_steps,
};
