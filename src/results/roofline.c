/* roofline.c - the device's peaks for --profile-layers' roofline (see roofline.h): a table of known
 * GPUs from the vendor's datasheets, and the measurement at start for any other device. */
#include "roofline.h"
#include "clock.h" /* defines: dt_now */

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- the table ----------------------------------------------------------------------------------
 * NVIDIA's datasheets, per GPU: memory bandwidth, and the dense peaks of its CUDA cores in fp32
 * and of its tensor cores in TF32 and BF16 (FP16 is the same). Datasheets quote tensor figures
 * "with sparsity" (2:4 structured sparsity, which dtbench never uses): those are halved here.
 * The names are those cudaGetDeviceProperties gives (nvidia-smi's "Product Name"); a MIG slice
 * has another name, and is measured. Sources:
 *   A100: https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/
 *         nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf (FP32 19.5, TF32 156, BF16 312)
 *   A10:  https://www.nvidia.com/en-us/data-center/products/a10-gpu/ (TF32 125*, BF16 250*)
 *   H100: https://www.nvidia.com/en-us/data-center/h100/ (SXM: FP32 67, TF32 989*, BF16 1,979*,
 *         3.35 TB/s; NVL: 60, 835*, 1,671*, 3.9 TB/s); H100 PCIe 80GB: the 2022 H100 datasheet
 *         (51, 756*, 1,513*, 2 TB/s)
 *   H200: https://www.nvidia.com/en-us/data-center/h200/ (SXM: 67, 989*, 1,979*, 4.8 TB/s;
 *         NVL: 60, 835*, 1,671*, 4.8 TB/s)
 *   GH200 480GB: https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/ (the H100 of
 *         the superchip with 96 GB HBM3, 4 TB/s)
 *   B200: https://www.nvidia.com/en-us/data-center/hgx/ (HGX B200, eight GPUs: FP32 600, TF32
 *         18,000*, BF16 36,000*, 64 TB/s; an eighth each)
 *   L40S: https://www.nvidia.com/en-us/data-center/l40s/ (91.6, 366*, 733*, 864 GB/s)
 *   L4:   https://www.nvidia.com/en-us/data-center/l4/ (30.3, 120*, 242*, 300 GB/s)
 * (* with sparsity) */
typedef struct {
    const char *name;
    double tbps;             /* memory bandwidth, TB/s */
    double fp32, tf32, bf16; /* dense TFLOP/s */
    const char *source;
} KnownGpu;

static const KnownGpu GPUS[] = {
    {"NVIDIA A100-SXM4-40GB", 1.555, 19.5, 156.0, 312.0, "A100 datasheet"},
    {"NVIDIA A100-SXM4-80GB", 2.039, 19.5, 156.0, 312.0, "A100 datasheet"},
    {"NVIDIA A100-PCIE-40GB", 1.555, 19.5, 156.0, 312.0, "A100 datasheet"},
    {"NVIDIA A100 80GB PCIe", 1.935, 19.5, 156.0, 312.0, "A100 datasheet"},
    {"NVIDIA A10", 0.600, 31.2, 62.5, 125.0, "A10 datasheet"},
    {"NVIDIA H100 80GB HBM3", 3.35, 67.0, 494.5, 989.5, "H100 SXM datasheet"},
    {"NVIDIA H100 PCIe", 2.0, 51.0, 378.0, 756.5, "H100 PCIe datasheet (2022)"},
    {"NVIDIA H100 NVL", 3.9, 60.0, 417.5, 835.5, "H100 NVL datasheet"},
    {"NVIDIA H200", 4.8, 67.0, 494.5, 989.5, "H200 SXM datasheet"},
    {"NVIDIA H200 NVL", 4.8, 60.0, 417.5, 835.5, "H200 NVL datasheet"},
    {"NVIDIA GH200 480GB", 4.0, 67.0, 494.5, 989.5, "GH200 datasheet"},
    {"NVIDIA B200", 8.0, 75.0, 1125.0, 2250.0, "HGX B200 specifications, per GPU"},
    {"NVIDIA L40S", 0.864, 91.6, 183.0, 366.5, "L40S datasheet"},
    {"NVIDIA L4", 0.300, 30.3, 60.0, 121.0, "L4 datasheet"},
};

int roofline_known_gpu(const char *device, Precision precision, RooflinePeak *peak) {
    for (size_t i = 0; i < sizeof GPUS / sizeof GPUS[0]; i++) {
        const KnownGpu *g = &GPUS[i];
        if (strcmp(device, g->name)) continue;
        const double tflops = precision == PRECISION_FP32   ? g->fp32
                              : precision == PRECISION_TF32 ? g->tf32
                                                            : g->bf16;
        const char *unit = precision == PRECISION_FP32 ? "fp32 CUDA cores" : "dense tensor cores";
        peak->bandwidth = g->tbps * 1e12, peak->flops = tflops * 1e12;
        snprintf(peak->bandwidth_how, ROOFLINE_HOW_LEN, "%s: %g TB/s (%s)", g->name, g->tbps,
                 g->source);
        snprintf(peak->flops_how, ROOFLINE_HOW_LEN, "%s: %g TFLOP/s %s, %s (%s)", g->name, tflops,
                 PRECISION_NAME(precision), unit, g->source);
        return 1;
    }
    return 0;
}

/* ---- the measurement ------------------------------------------------------------------------ */

#define TRIES           5    /* best of: the first try may pay for page faults and clocks */
#define PRODUCT_SECONDS 0.01 /* the product grows until one call takes this long */
#define PRODUCT_MAX     4096

/* The seconds `calls` calls of op(arg) take on the device, the best of `tries`. */
static double best_time(const BackendOps *be, BackendCtx *ctx, void (*op)(const void *),
                        const void *arg, int calls, int tries) {
    double best = INFINITY;
    for (int t = 0; t < tries; t++) {
        be->synchronize(ctx);
        const double t0 = dt_now();
        for (int c = 0; c < calls; c++)
            op(arg);
        be->synchronize(ctx);
        const double s = dt_now() - t0;
        if (s < best) best = s;
    }
    return best;
}

typedef struct {
    const BackendOps *be;
    BackendCtx *ctx;
    float *a, *b, *c;
    size_t bytes; /* of a and b */
    FcShape fc;
} Job;

static void run_copy(const void *arg) {
    const Job *j = arg;
    j->be->copy(j->ctx, j->b, j->a, j->bytes);
}

static void run_axpy(const void *arg) {
    const Job *j = arg;
    j->be->axpy(j->ctx, j->bytes / sizeof(float), 0.5f, j->a, j->b);
}

static void run_product(const void *arg) {
    const Job *j = arg;
    j->be->fc_forward(j->ctx, &j->fc, j->a, j->b, NULL, j->c);
}

/* Arrays well beyond the last-level cache, as STREAM asks: on a CPU four times its L3, within
 * [32, 256] MiB; on a GPU 256 MiB (twice a B200's L2, five times an H100's). */
static size_t array_bytes(int device_memory) {
    if (device_memory) return (size_t)256 << 20;
    long l3 = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t bytes = l3 > 0 ? 4 * (size_t)l3 : (size_t)128 << 20;
    if (bytes < (size_t)32 << 20) bytes = (size_t)32 << 20;
    if (bytes > (size_t)256 << 20) bytes = (size_t)256 << 20;
    return bytes;
}

static void measure_bandwidth(const BackendOps *be, BackendCtx *ctx, RooflinePeak *peak) {
    const int device = be->device_memory;
    if (device ? !be->copy : !be->axpy) {
        snprintf(peak->bandwidth_how, ROOFLINE_HOW_LEN, "unknown: the %s backend has no %s",
                 be->name, device ? "copy" : "axpy");
        return;
    }
    Job j = {be, ctx, NULL, NULL, NULL, array_bytes(device), {0}};
    j.a = be->alloc(ctx, j.bytes), j.b = be->alloc(ctx, j.bytes);
    /* a copy reads and writes each byte once; y += a x reads x and y and writes y */
    const int calls = device ? 4 : 1;
    const double moved = (device ? 2.0 : 3.0) * (double)j.bytes * calls;
    peak->bandwidth = moved / best_time(be, ctx, device ? run_copy : run_axpy, &j, calls, TRIES);
    snprintf(peak->bandwidth_how, ROOFLINE_HOW_LEN,
             "measured at start: %s over two arrays of %zu MiB (%s), best of %d",
             device ? "device-to-device copy, 2 bytes moved per byte copied"
                    : "y += a x through the backend's axpy (STREAM's triad: 12 bytes per element)",
             j.bytes >> 20, be->name, TRIES);
    be->free(ctx, j.a), be->free(ctx, j.b);
}

/* One n x n x n product through the backend's fully connected forward (x[n,n] W[n,n]^T). */
static double product_time(const BackendOps *be, BackendCtx *ctx, int n, int tries) {
    const size_t bytes = (size_t)n * n * sizeof(float);
    Job j = {.be = be, .ctx = ctx, .fc = (FcShape){n, n, n, 0, 0, 1}};
    j.a = be->alloc(ctx, bytes), j.b = be->alloc(ctx, bytes), j.c = be->alloc(ctx, bytes);
    const double s = best_time(be, ctx, run_product, &j, 1, tries);
    be->free(ctx, j.a), be->free(ctx, j.b), be->free(ctx, j.c);
    return s;
}

static void measure_compute(const BackendOps *be, BackendCtx *ctx, Precision precision,
                            ActFormat act, RooflinePeak *peak) {
    if (be->device_memory &&
        (act.type != ACT_FP32 || (precision != PRECISION_FP32 && precision != PRECISION_TF32))) {
        snprintf(peak->flops_how, ROOFLINE_HOW_LEN,
                 "unknown: a %s product on %s activations is not measured (its fully connected "
                 "forward reads the model's own weight copies)",
                 PRECISION_NAME(precision), ACT_TYPE_NAME(act.type));
        return;
    }
    int n = 256;
    while (n < PRODUCT_MAX && product_time(be, ctx, n, 1) < PRODUCT_SECONDS)
        n *= 2;
    peak->flops = 2.0 * n * n * (double)n / product_time(be, ctx, n, TRIES);
    snprintf(peak->flops_how, ROOFLINE_HOW_LEN,
             "measured at start: one %dx%dx%d product through the %s backend's fully connected "
             "forward (its BLAS) at precision %s, best of %d",
             n, n, n, be->name, PRECISION_NAME(precision), TRIES);
}

void roofline_peak(const BackendOps *be, BackendCtx *ctx, const char *device, Precision precision,
                   ActFormat act, RooflinePeak *peak) {
    memset(peak, 0, sizeof *peak);
    peak->bandwidth = peak->flops = NAN;
    if (be->device_memory && roofline_known_gpu(device, precision, peak)) return;
    measure_bandwidth(be, ctx, peak);
    measure_compute(be, ctx, precision, act, peak);
}

void roofline_peak_flops(const BackendOps *be, BackendCtx *ctx, const char *device,
                         Precision precision, ActFormat act, RooflinePeak *peak) {
    memset(peak, 0, sizeof *peak);
    peak->bandwidth = peak->flops = NAN;
    if (be->device_memory && roofline_known_gpu(device, precision, peak)) return;
    snprintf(peak->bandwidth_how, ROOFLINE_HOW_LEN, "unknown: not measured");
    measure_compute(be, ctx, precision, act, peak);
}
