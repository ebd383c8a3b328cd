/* sampler.h - a thread that samples what the rank's device draws and holds, at a set rate
 * (--sample-hz), with timestamps on the aligned clock of the iterations (seconds since rank 0's
 * t0, corrected by this rank's clock offset), for the result file's /samples group.
 *   GPU (a PCI bus id given, NVML loadable): board power (W), device memory in use (MiB, all
 *       processes), GPU utilisation (%), from NVML (src/results/nvml.c).
 *   CPU (or NVML missing): the process's CPU utilisation (% of one core, from its CPU time,
 *       CLOCK_PROCESS_CPUTIME_ID, over the wall time since the previous sample; can exceed 100
 *       with threads) and resident memory (MiB, /proc/self/statm); power is NaN.
 * Samples go into a buffer of fixed capacity made at creation, so the sampling thread never
 * allocates and never touches the file: the recorder pulls them between iterations (sampler_pull)
 * and writes them with its blocks. When the buffer is full, later samples are counted, not kept. */
#ifndef DTBENCH_SAMPLER_H
#define DTBENCH_SAMPLER_H

#include "recorder.h" /* defines: SampleRecord */

#include <stddef.h>
#include <stdint.h>

typedef struct Sampler Sampler;

/* capacity: samples kept. gpu_pci_bus_id: the GPU to sample, or NULL for the CPU process. When
 * NVML cannot be used for the GPU, the CPU source is used and `note` says why (else it is empty).
 * clock_offset and t0 place the samples on the aligned clock. */
Sampler *sampler_create(double hz, int64_t capacity, const char *gpu_pci_bus_id,
                        double clock_offset, double t0, char *note, size_t notelen);
const char *sampler_source(const Sampler *s); /* "nvml" or "procfs" */
/* Starts the thread (first sample at once) / stops it and waits for it (no sample after). */
void sampler_start(Sampler *s);
void sampler_stop(Sampler *s);
/* Copies up to max samples not pulled yet into out; returns how many. Any thread but the sampler's.
 */
int sampler_pull(void *sampler, SampleRecord *out, int max);
int64_t sampler_taken(const Sampler *s);   /* samples kept so far */
int64_t sampler_dropped(const Sampler *s); /* samples not kept because the buffer was full */
void sampler_free(Sampler *s);

/* The CPU readings, exposed for tests: process CPU time (s) and resident memory (MiB). */
double sampler_cpu_seconds(void);
double sampler_resident_mib(void);

#endif
