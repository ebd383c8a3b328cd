/* schedule.h - the schedule seam: in which order one pipeline stage runs the forward and backward
 * passes of its M micro-batches in one iteration. One const struct per schedule, one file each:
 *   src/run/schedule_data.c   data:  one stage, one micro-batch: forward, then backward (data
 *                                parallelism: the one-stage, one-micro-batch pipeline)
 *   src/run/schedule_gpipe.c  gpipe: forwards 0..M-1, then backwards M-1..0 (GPipe)
 *   src/run/schedule_1f1b.c   1f1b:  PipeDream-Flush: warm-up forwards, then one forward and one
 *                                backward in turn, then the remaining backwards
 * A schedule only orders steps; the driver (src/run/driver.c) runs them (receive, compute, send),
 * marks the phases, records, evaluates and stops, the same way for every schedule. Every schedule
 * gives the same gradients: the sum over micro-batches of each one's gradient (loss scaled 1/M),
 * in another order of summation. Like the other seams, each declares the options it reads and
 * what it supports, for the resolver (src/run/resolve.c). */
#ifndef DTBENCH_SCHEDULE_H
#define DTBENCH_SCHEDULE_H

typedef enum { STEP_FORWARD, STEP_BACKWARD } StepKind;

typedef struct {
    StepKind kind;
    int microbatch;
} ScheduleStep;

typedef struct ScheduleOps {
    const char *name;
    /* Long options it reads (comma-separated); given explicitly with a schedule that does not
     * read them, they are refused. */
    const char *reads;
    /* 1: runs K >= 1 stages and M >= 1 micro-batches, passing host buffers between stages
     * (src/run/pipeline_p2p.c): --parallel model / hybrid. 0: one stage, one micro-batch (data). */
    int pipeline;
    /* 1: works with a backend on device memory (BackendOps.device_memory). */
    int device_memory;
    /* Fills steps[0 .. 2M) for stage k of K: each micro-batch's forward once and its backward
     * once, the forward first. The stages' orders must let the pipeline progress (no cycle of
     * waits between neighbours), and every stage must end with the backward of the same
     * micro-batch: its header carries the last stage's final stop decision (driver_stage.c). */
    void (*steps)(int k, int K, int M, ScheduleStep *steps);
} ScheduleOps;

extern const ScheduleOps data_schedule;   /* src/run/schedule_data.c */
extern const ScheduleOps gpipe_schedule;  /* src/run/schedule_gpipe.c */
extern const ScheduleOps onef1b_schedule; /* src/run/schedule_1f1b.c */

#endif
