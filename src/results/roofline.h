/* roofline.h - the peaks --profile-layers' roofline compares each layer with: the device's
 * memory bandwidth and its compute at the run's precision. A GPU that dtbench's table knows, by
 * the name the CUDA backend records (/ranks/device_name): the vendor's datasheet figures. Any
 * other device (a CPU, a GPU not in the table, a MIG slice): measured at start through the
 * backend's own operations, each a fraction of a second, best of a few tries: the bandwidth by a
 * device-to-device copy (GPUs) or a STREAM-like triad y += a x (the backend's axpy: as its
 * element-wise kernels run), the compute by one large product through the backend's fully
 * connected forward (its BLAS: OpenBLAS sgemm on --threads threads, cuBLAS). Each peak says how
 * it was found; a peak that can be neither looked up nor measured is NaN, with the reason. */
#ifndef DTBENCH_ROOFLINE_H
#define DTBENCH_ROOFLINE_H

#include "backend.h"

#define ROOFLINE_HOW_LEN 256

typedef struct RooflinePeak {
    double bandwidth; /* B/s (NaN: unknown) */
    double flops;     /* FLOP/s at the run's precision (NaN: unknown) */
    char bandwidth_how[ROOFLINE_HOW_LEN], flops_how[ROOFLINE_HOW_LEN];
} RooflinePeak;

/* The table's peaks of the GPU named `device` for `precision` (fp32: its CUDA cores; tf32 and
 * bf16/fp16: its tensor cores, dense): 1, or 0 when the table does not know the name. */
int roofline_known_gpu(const char *device, Precision precision, RooflinePeak *peak);

/* The peaks of ctx's device (`device`: its name, as /ranks/device_name): the table's for a GPU it
 * knows, else measured with be's operations on ctx (which must be idle: it synchronises). A GPU's
 * product is measured only in fp32 and tf32 on fp32 activations (act), where the backend's fully
 * connected forward takes any buffers; otherwise its compute peak is NaN. */
void roofline_peak(const BackendOps *be, BackendCtx *ctx, const char *device, Precision precision,
                   ActFormat act, RooflinePeak *peak);

/* Its compute peak alone, as roofline_peak finds it (the bandwidth is left NaN, not measured):
 * the table's, else the product measured at start (half a second at most: the product grows to
 * 10 ms, then the best of 5). The root attribute peak_flops (MFU) of every run. */
void roofline_peak_flops(const BackendOps *be, BackendCtx *ctx, const char *device,
                         Precision precision, ActFormat act, RooflinePeak *peak);

#endif
