/* gpu_kernels.c - the CUDA backend's memory-bound kernels alone, on the shapes ResNet-50 (batch
 * 256) and GoogLeNet (batch 128) give them in bf16 NHWC: batch norm forward and backward (plain,
 * with its ReLU, with a residual add and ReLU), max pooling and LRN forward and backward, called
 * through the backend's table (cuda_backend, --precision bf16, --act-layout nhwc) as the model
 * calls them. Each case: `warmup` calls, then `iters` back to back between two of the backend's
 * timer marks (CUDA events on its stream); the time per call and the bytes the kernels move by
 * their design (cuda_bn16_kernels.cu, cuda_act16_kernels.cu: each tensor read or written once a
 * pass), hence GB/s and the share of the device's peak memory bandwidth.
 *
 *   bench/gpu_kernels [--iters N] [--warmup N] [--only SUBSTRING] [--list]
 * One line per case: `case NAME ms MS bytes BYTES`; first `device NAME peak_gbs G` (from the
 * memory clock and bus width). --list prints the cases as JSON lines (what bench/torch_kernels.py
 * times in PyTorch) and touches no GPU. bench/gpu_kernels.sh runs both, alternated, and prints
 * the table. Built with the CUDA backend; needs a GPU. */
#include <config.h>
#include "backend.h"
#include "cuda.h"
#include "half_bits.h"
#include "rng.h" /* defines: rng_mix */

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { BN_FWD, BN_BWD, POOL_FWD, POOL_BWD, LRN_FWD, LRN_BWD } Op;
static const char *const OP_NAMES[] = {"bn_fwd",   "bn_bwd",  "pool_fwd",
                                       "pool_bwd", "lrn_fwd", "lrn_bwd"};

typedef struct {
    const char *name;
    Op op;
    int n, c, h, w;
    int mode;    /* batch norm: 0 plain, 1 + ReLU, 2 + residual add + ReLU */
    int k, s, p; /* pooling: window, stride, padding */
    int size;    /* LRN: window */
    float alpha, beta, bias;
} Case;

#define BN(name, op, n, c, h, w, mode)                                                             \
    { name, op, n, c, h, w, mode, 0, 0, 0, 0, 0, 0, 0 }
#define POOL(name, op, n, c, h, w, k, s, p)                                                        \
    { name, op, n, c, h, w, 0, k, s, p, 0, 0, 0, 0 }
#define LRN(name, op, n, c, h, w, size, a, b, k)                                                   \
    { name, op, n, c, h, w, 0, 0, 0, 0, size, a, b, k }

static const Case CASES[] = {
    BN("r50.bn1+relu", BN_FWD, 256, 64, 112, 112, 1),
    BN("r50.bn1+relu", BN_BWD, 256, 64, 112, 112, 1),
    BN("r50.layer1.bn1+relu", BN_FWD, 256, 64, 56, 56, 1),
    BN("r50.layer1.bn1+relu", BN_BWD, 256, 64, 56, 56, 1),
    BN("r50.layer1.bn3+add+relu", BN_FWD, 256, 256, 56, 56, 2),
    BN("r50.layer1.bn3+add+relu", BN_BWD, 256, 256, 56, 56, 2),
    BN("r50.layer1.downsample_bn", BN_FWD, 256, 256, 56, 56, 0),
    BN("r50.layer1.downsample_bn", BN_BWD, 256, 256, 56, 56, 0),
    BN("r50.layer3.bn3+add+relu", BN_FWD, 256, 1024, 14, 14, 2),
    BN("r50.layer3.bn3+add+relu", BN_BWD, 256, 1024, 14, 14, 2),
    BN("r50.layer4.bn3+add+relu", BN_FWD, 256, 2048, 7, 7, 2),
    BN("r50.layer4.bn3+add+relu", BN_BWD, 256, 2048, 7, 7, 2),
    POOL("r50.maxpool", POOL_FWD, 256, 64, 112, 112, 3, 2, 1),
    POOL("r50.maxpool", POOL_BWD, 256, 64, 112, 112, 3, 2, 1),
    POOL("googlenet.pool1/3x3_s2", POOL_FWD, 128, 64, 112, 112, 3, 2, 1),
    POOL("googlenet.pool1/3x3_s2", POOL_BWD, 128, 64, 112, 112, 3, 2, 1),
    POOL("googlenet.pool2/3x3_s2", POOL_FWD, 128, 192, 56, 56, 3, 2, 1),
    POOL("googlenet.pool2/3x3_s2", POOL_BWD, 128, 192, 56, 56, 3, 2, 1),
    POOL("googlenet.inception_3a/pool", POOL_FWD, 128, 192, 28, 28, 3, 1, 1),
    POOL("googlenet.inception_3a/pool", POOL_BWD, 128, 192, 28, 28, 3, 1, 1),
    LRN("googlenet.pool1/norm1", LRN_FWD, 128, 64, 56, 56, 5, 1e-4f, 0.75f, 1.0f),
    LRN("googlenet.pool1/norm1", LRN_BWD, 128, 64, 56, 56, 5, 1e-4f, 0.75f, 1.0f),
    LRN("googlenet.conv2/norm2", LRN_FWD, 128, 192, 56, 56, 5, 1e-4f, 0.75f, 1.0f),
    LRN("googlenet.conv2/norm2", LRN_BWD, 128, 192, 56, 56, 5, 1e-4f, 0.75f, 1.0f),
};
#define NCASES (sizeof CASES / sizeof CASES[0])

static int out_len(int in, int k, int s, int p) {
    return (in + 2 * p - k) / s + 1;
}
static size_t count(const Case *c) {
    return (size_t)c->n * c->c * c->h * c->w;
}
/* a pooling case's output values (0 for the others) */
static size_t pooled(const Case *c) {
    if (c->op != POOL_FWD && c->op != POOL_BWD) return 0;
    return (size_t)c->n * c->c * out_len(c->h, c->k, c->s, c->p) * out_len(c->w, c->k, c->s, c->p);
}

/* What the kernels move by design, bytes: 2 a 16-bit value, 4 an argmax or an LRN scale. */
static double bytes_moved(const Case *c) {
    const double n = (double)count(c), o = (double)pooled(c);
    switch (c->op) {
    case BN_FWD:
        return (c->mode == 2 ? 4 : 3) * 2 * n; /* x twice, y (z) */
    case BN_BWD:
        return (c->mode == 0 ? 5 : 7) * 2 * n; /* x, dy (act_y) twice; dx (dz) */
    case POOL_FWD:
        return 2 * n + (2 + 4) * o; /* x; y, argmax */
    case POOL_BWD:
        return (4 + 2) * o + 2 * n; /* argmax, dy; dx */
    case LRN_FWD:
        return (2 + 2 + 4) * n; /* x; y, scale */
    case LRN_BWD:
        return (3 * 2 + 4 + 2) * n; /* x, y, dy, scale; dx */
    }
    return 0;
}

static void list(void) {
    for (size_t i = 0; i < NCASES; i++) {
        const Case *c = &CASES[i];
        printf("{\"name\": \"%s\", \"op\": \"%s\", \"n\": %d, \"c\": %d, \"h\": %d, \"w\": %d, "
               "\"mode\": %d, \"k\": %d, \"s\": %d, \"p\": %d, \"size\": %d, \"alpha\": %g, "
               "\"beta\": %g, \"bias\": %g, \"bytes\": %.0f}\n",
               c->name, OP_NAMES[c->op], c->n, c->c, c->h, c->w, c->mode, c->k, c->s, c->p, c->size,
               (double)c->alpha, (double)c->beta, (double)c->bias, bytes_moved(c));
    }
}

/* ---- buffers ------------------------------------------------------------------------------- */

static const BackendOps *G = &cuda_backend;
static BackendCtx *ctx;
static void *bufs[16];
static int nbufs;

static void *dev(size_t bytes) {
    void *p = G->alloc(ctx, bytes ? bytes : 1);
    bufs[nbufs++] = p;
    return p;
}
/* n bf16 values in [-2, 2) (a seeded block repeated: the kernels' speed does not depend on them) */
static void *act(size_t n, uint64_t seed) {
    enum { BLOCK = 1 << 20 };
    uint16_t *h = malloc(BLOCK * sizeof *h);
    for (size_t i = 0; i < BLOCK; i++)
        h[i] = gc_bf16_from_float((float)(rng_mix(seed + i) >> 40) * 0x1p-22f - 2.0f);
    void *d = dev(n * 2);
    for (size_t at = 0; at < n; at += BLOCK)
        G->upload(ctx, (uint16_t *)d + at, h, (n - at < BLOCK ? n - at : BLOCK) * 2);
    free(h);
    return d;
}
static float *params(size_t n, float v) {
    float *h = malloc(n * sizeof *h), *d = dev(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        h[i] = v;
    G->upload(ctx, d, h, n * sizeof *d);
    free(h);
    return d;
}
static void free_all(void) {
    G->synchronize(ctx);
    for (int i = 0; i < nbufs; i++)
        G->free(ctx, bufs[i]);
    nbufs = 0;
}

/* ---- one case ------------------------------------------------------------------------------ */

typedef struct {
    const Case *c;
    BnShape bn;
    PoolShape pool;
    LrnShape lrn;
    float *x, *y, *z, *dy, *dx, *dz, *aux;
    float *gamma, *beta, *mean, *invstd, *rm, *rv, *dg, *db;
    int32_t *argmax;
} Run;

static void call(Run *r) {
    const Case *c = r->c;
    switch (c->op) {
    case BN_FWD:
        if (c->mode == 0)
            G->batchnorm_forward_train(ctx, &r->bn, r->x, r->gamma, r->beta, r->y, r->mean,
                                       r->invstd, r->rm, r->rv);
        else
            G->bn_act_forward_train(ctx, &r->bn, r->x, r->gamma, r->beta, r->z, r->y, r->mean,
                                    r->invstd, r->rm, r->rv);
        break;
    case BN_BWD:
        if (c->mode == 0)
            G->batchnorm_backward(ctx, &r->bn, r->x, r->gamma, r->mean, r->invstd, r->dy, r->dx,
                                  r->dg, r->db);
        else
            G->bn_act_backward(ctx, &r->bn, r->x, r->gamma, r->mean, r->invstd, r->y, r->dy, r->dx,
                               r->dz, r->dg, r->db);
        break;
    case POOL_FWD:
        G->maxpool_forward(ctx, &r->pool, r->x, r->y, r->argmax);
        break;
    case POOL_BWD:
        G->maxpool_backward(ctx, &r->pool, r->argmax, r->dy, r->dx);
        break;
    case LRN_FWD:
        G->lrn_forward(ctx, &r->lrn, r->x, r->y, r->aux);
        break;
    case LRN_BWD:
        G->lrn_backward(ctx, &r->lrn, r->x, r->y, r->aux, r->dy, r->dx);
        break;
    }
}

/* The case's buffers, and what its backward reads made by its forward. */
static void prepare(Run *r, const Case *c) {
    memset(r, 0, sizeof *r);
    r->c = c;
    const size_t n = count(c), o = pooled(c), C = (size_t)c->c;
    r->x = act(n, 1);
    if (c->op == BN_FWD || c->op == BN_BWD) {
        r->bn = (BnShape){c->n, c->c, c->h * c->w, 1e-5f, 0.1f};
        r->y = dev(n * 2), r->z = c->mode == 2 ? act(n, 2) : NULL;
        r->gamma = params(C, 1.0f), r->beta = params(C, 0.0f), r->rm = params(C, 0.0f);
        r->rv = params(C, 1.0f), r->mean = dev(C * 4), r->invstd = dev(C * 4);
        if (c->op == BN_BWD) {
            r->dy = act(n, 3), r->dx = dev(n * 2), r->dz = c->mode == 2 ? dev(n * 2) : NULL;
            r->dg = dev(C * 4), r->db = dev(C * 4);
            const Case fwd = {c->name, BN_FWD, c->n, c->c, c->h, c->w, c->mode,
                              0,       0,      0,    0,    0,    0,    0};
            r->c = &fwd, call(r), r->c = c;
        }
    } else if (c->op == POOL_FWD || c->op == POOL_BWD) {
        r->pool = (PoolShape){c->n,
                              c->c,
                              c->h,
                              c->w,
                              c->k,
                              c->s,
                              c->p,
                              out_len(c->h, c->k, c->s, c->p),
                              out_len(c->w, c->k, c->s, c->p)};
        r->y = dev(o * 2), r->argmax = dev(o * 4);
        if (c->op == POOL_BWD) {
            r->dy = act(o, 3), r->dx = dev(n * 2);
            G->maxpool_forward(ctx, &r->pool, r->x, r->y, r->argmax);
        }
    } else {
        r->lrn = (LrnShape){c->n, c->c, c->h, c->w, c->size, c->alpha, c->beta, c->bias};
        r->y = dev(n * 2), r->aux = dev(n * 4);
        if (c->op == LRN_BWD) {
            r->dy = act(n, 3), r->dx = dev(n * 2);
            G->lrn_forward(ctx, &r->lrn, r->x, r->y, r->aux);
        }
    }
}

static double time_case(const Case *c, int warmup, int iters) {
    Run r;
    prepare(&r, c);
    for (int i = 0; i < warmup; i++)
        call(&r);
    G->timer_record(ctx, 0);
    for (int i = 0; i < iters; i++)
        call(&r);
    G->timer_record(ctx, 1);
    const double s = G->timer_elapsed(ctx, 0, 1) / iters;
    free_all();
    return s;
}

static double peak_gbs(int device, char *name, size_t len) {
    struct cudaDeviceProp p;
    int khz = 0, bits = 0;
    if (cudaGetDeviceProperties(&p, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
        snprintf(name, len, "unknown");
        return 0.0;
    }
    snprintf(name, len, "%s", p.name);
    for (char *q = name; *q; q++)
        if (*q == ' ') *q = '_';
    return 2.0 * khz * 1e3 * (bits / 8.0) / 1e9; /* double data rate */
}

int main(int argc, char **argv) {
    int iters = 20, warmup = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            list();
            return 0;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr,
                    "gpu_kernels: usage: %s [--iters N] [--warmup N] [--only SUBSTRING] "
                    "[--list]\n",
                    argv[0]);
            return 2;
        }
    }
    if (iters < 1 || warmup < 0) {
        fprintf(stderr, "gpu_kernels: --iters must be >= 1 and --warmup >= 0\n");
        return 2;
    }
    if (cuda_device_count() == 0) {
        fprintf(stderr, "gpu_kernels: no CUDA device visible\n");
        return 77;
    }
    BackendConfig cfg = {.threads = 1, .precision = PRECISION_BF16, .act_layout = ACT_NHWC};
    if (G->init(&cfg, &ctx) != 0) return 1;
    char name[256];
    const double peak = peak_gbs(0, name, sizeof name);
    printf("device %s peak_gbs %.1f\n", name, peak);
    for (size_t i = 0; i < NCASES; i++) {
        const Case *c = &CASES[i];
        if (only && !strstr(c->name, only)) continue;
        const double s = time_case(c, warmup, iters);
        printf("case %s.%s ms %.4f bytes %.0f\n", c->name, OP_NAMES[c->op], s * 1e3,
               bytes_moved(c));
        fflush(stdout);
    }
    G->finalize(ctx);
    return 0;
}
