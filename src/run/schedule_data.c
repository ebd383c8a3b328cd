/* schedule_data.c - the data-parallel schedule: the whole model on one stage, the rank's share
 * of the batch in one micro-batch: forward, then backward (see schedule.h). */
#include "schedule.h"

static void data_steps(int k, int K, int M, ScheduleStep *steps) {
    (void)k, (void)K, (void)M; /* K = M = 1 (the resolver allows nothing else) */
    steps[0] = (ScheduleStep){STEP_FORWARD, 0};
    steps[1] = (ScheduleStep){STEP_BACKWARD, 0};
}

const ScheduleOps data_schedule = {
    .name = "data",
    .reads = "schedule", /* --schedule data names it */
    .pipeline = 0,
    .device_memory = 1,
    .steps = data_steps,
};
