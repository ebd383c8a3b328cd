/* test_cuda_bn.c - batch norm at memory speed on the GPU (kernels/cuda/cuda_batchnorm_kernels.cu)
 * against the CPU backend, through the CUDA backend's table: the plain rows and the fused
 * BN -> ReLU and BN -> add -> ReLU operations (bn_act_*) against the CPU's unfused rows (batch
 * norm, residual add, ReLU in place; backward: ReLU in place, the add's gradient copied, batch
 * norm), and the one-block-per-channel kernels that tensors of 2^31 elements fall back to
 * (through their launchers). Shapes cover 4-float loads (planes of 4k, aligned), 1-float loads
 * (7x7 planes), many blocks per channel and a batch norm after a fully connected layer. Outputs
 * are pre-filled with NaN: an element a kernel forgets fails. Exits 77 (skipped) without a GPU.
 * Tolerances, |gpu - cpu| <= tol * max(1, |cpu|):
 *   0 (bit for bit): inference, the residual gradient dz (the masked dy);
 *   1e-5: training statistics (summed in another order: double partial sums per block against
 *         the CPU's float lanes), y, running statistics, dx, dgamma, dbeta. */
#include "harness.h"
#include "backend.h"
#include "cuda.h"
#include "cuda_kernels.h" /* defines: dtk_bn_*_simple */

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *G = &cuda_backend, *C = &cpu_backend;
static BackendCtx *gctx, *cctx;
static float *host(size_t n, float lo, float hi) {
    return rand_floats(n, lo, hi);
}
static float *copy(const float *x, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, x, n * sizeof *p);
    return p;
}
static float *up(const float *h, size_t n) {
    float *d = G->alloc(gctx, (n ? n : 1) * sizeof *d);
    G->upload(gctx, d, h, n * sizeof *d);
    return d;
}
static float *dnan(size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = NAN;
    float *d = up(h, n);
    free(h);
    return d;
}
/* the device's n values against the reference: |gpu - cpu| <= tol * max(1, |cpu|) */
static void cmp(const char *what, const float *dev, const float *ref, size_t n, double tol) {
    float *got = halloc(n);
    G->download(gctx, got, dev, n * sizeof *got);
    check_close(what, got, ref, n, tol, tol);
    free(got);
}

/* The inputs of one shape, on both sides. */
typedef struct {
    BnShape s;
    size_t n, c;
    float *x, *z, *dy, *ga, *be, *rm, *rv;        /* host */
    float *dX, *dZ, *dDY, *dGA, *dBE, *dRM, *dRV; /* device */
} Case;

static void make(Case *k, int batch, int c, int spatial) {
    k->s = (BnShape){batch, c, spatial, 1e-5f, 0.1f};
    k->n = (size_t)batch * c * spatial, k->c = (size_t)c;
    k->x = host(k->n, -2, 3), k->z = host(k->n, -1, 1), k->dy = host(k->n, -1, 1);
    k->ga = host(k->c, 0.5f, 1.5f), k->be = host(k->c, -1, 1);
    k->rm = host(k->c, -1, 1), k->rv = host(k->c, 0.5f, 2);
    k->dX = up(k->x, k->n), k->dZ = up(k->z, k->n), k->dDY = up(k->dy, k->n);
    k->dGA = up(k->ga, k->c), k->dBE = up(k->be, k->c), k->dRM = up(k->rm, k->c);
    k->dRV = up(k->rv, k->c);
}
static void drop(Case *k) {
    float *h[] = {k->x, k->z, k->dy, k->ga, k->be, k->rm, k->rv};
    float *d[] = {k->dX, k->dZ, k->dDY, k->dGA, k->dBE, k->dRM, k->dRV};
    for (int i = 0; i < 7; i++)
        free(h[i]), G->free(gctx, d[i]);
}

/* mode 0: plain rows; 1: bn_act without add; 2: with the add */
static void test_mode(int batch, int c, int spatial, int mode) {
    Case k;
    make(&k, batch, c, spatial);
    const size_t n = k.n, nc = k.c;
    const float *z = mode == 2 ? k.z : NULL, *dZ = mode == 2 ? k.dZ : NULL;
    char tag[96];
    snprintf(tag, sizeof tag, "[%d,%d,%d] %s", batch, c, spatial,
             mode == 0   ? "batch norm"
             : mode == 1 ? "bn+relu"
                         : "bn+add+relu");
    char what[160];
#define WHAT(s) (snprintf(what, sizeof what, "%s %s", tag, s), what)
    /* CPU: the unfused rows */
    float *y = malloc(n * 4), *mean = malloc(nc * 4), *inv = malloc(nc * 4);
    float *rm = copy(k.rm, nc), *rv = copy(k.rv, nc), *yi = malloc(n * 4);
    C->batchnorm_forward_infer(cctx, &k.s, k.x, k.ga, k.be, rm, rv, yi);
    C->batchnorm_forward_train(cctx, &k.s, k.x, k.ga, k.be, y, mean, inv, rm, rv);
    if (z) C->add_forward(cctx, n, y, z, y), C->add_forward(cctx, n, yi, z, yi);
    if (mode) C->relu_forward(cctx, n, y, y), C->relu_forward(cctx, n, yi, yi);
    float *g = copy(k.dy, n), *dx = malloc(n * 4), *dg = malloc(nc * 4), *db = malloc(nc * 4);
    if (mode) C->relu_backward(cctx, n, y, g, g);
    C->batchnorm_backward(cctx, &k.s, k.x, k.ga, mean, inv, g, dx, dg, db);
    /* GPU */
    float *dY = dnan(n), *dYI = dnan(n), *dM = dnan(nc), *dI = dnan(nc), *dDX = dnan(n),
          *dDZ = dnan(n), *dDG = dnan(nc), *dDB = dnan(nc);
    if (mode == 0) {
        G->batchnorm_forward_infer(gctx, &k.s, k.dX, k.dGA, k.dBE, k.dRM, k.dRV, dYI);
        G->batchnorm_forward_train(gctx, &k.s, k.dX, k.dGA, k.dBE, dY, dM, dI, k.dRM, k.dRV);
        G->batchnorm_backward(gctx, &k.s, k.dX, k.dGA, dM, dI, k.dDY, dDX, dDG, dDB);
    } else {
        G->bn_act_forward_infer(gctx, &k.s, k.dX, k.dGA, k.dBE, k.dRM, k.dRV, dZ, dYI);
        G->bn_act_forward_train(gctx, &k.s, k.dX, k.dGA, k.dBE, dZ, dY, dM, dI, k.dRM, k.dRV);
        G->bn_act_backward(gctx, &k.s, k.dX, k.dGA, dM, dI, dY, k.dDY, dDX, z ? dDZ : NULL, dDG,
                           dDB);
    }
    cmp(WHAT("inference"), dYI, yi, n, 0);
    cmp(WHAT("training forward"), dY, y, n, 1e-5);
    cmp(WHAT("  saved mean"), dM, mean, nc, 1e-5);
    cmp(WHAT("  saved 1/std"), dI, inv, nc, 1e-5);
    cmp(WHAT("  running mean"), k.dRM, rm, nc, 1e-5);
    cmp(WHAT("  running variance (unbiased)"), k.dRV, rv, nc, 1e-5);
    cmp(WHAT("  backward dx"), dDX, dx, n, 1e-5);
    cmp(WHAT("  dgamma"), dDG, dg, nc, 1e-5);
    cmp(WHAT("  dbeta"), dDB, db, nc, 1e-5);
    if (z) cmp(WHAT("  residual gradient dz"), dDZ, g, n, 0);
    float *d[] = {dY, dYI, dM, dI, dDX, dDZ, dDG, dDB};
    for (int i = 0; i < 8; i++)
        G->free(gctx, d[i]);
    free(y), free(mean), free(inv), free(rm), free(rv), free(yi), free(g), free(dx), free(dg),
        free(db);
    drop(&k);
}

/* The fallback kernels, through their launchers on the backend's stream. */
static void test_simple(int batch, int c, int spatial) {
    Case k;
    make(&k, batch, c, spatial);
    const size_t n = k.n, nc = k.c;
    cudaStream_t st = cuda_backend_stream(gctx);
    float *y = malloc(n * 4), *mean = malloc(nc * 4), *inv = malloc(nc * 4), *dx = malloc(n * 4),
          *dg = malloc(nc * 4), *db = malloc(nc * 4), *rm = copy(k.rm, nc), *rv = copy(k.rv, nc);
    C->batchnorm_forward_train(cctx, &k.s, k.x, k.ga, k.be, y, mean, inv, rm, rv);
    C->batchnorm_backward(cctx, &k.s, k.x, k.ga, mean, inv, k.dy, dx, dg, db);
    float *dY = dnan(n), *dM = dnan(nc), *dI = dnan(nc), *dDX = dnan(n), *dDG = dnan(nc),
          *dDB = dnan(nc);
    int ok =
        dtk_bn_forward_train_simple(st, &k.s, k.dX, k.dGA, k.dBE, dY, dM, dI, k.dRM, k.dRV) ==
            cudaSuccess &&
        dtk_bn_backward_simple(st, &k.s, k.dX, k.dGA, dM, dI, k.dDY, dDX, dDG, dDB) == cudaSuccess;
    EXPECT(ok, "simple kernels launched");
    cmp("simple kernels: training forward", dY, y, n, 1e-5);
    cmp("  running variance (unbiased)", k.dRV, rv, nc, 1e-5);
    cmp("  backward dx", dDX, dx, n, 1e-5);
    cmp("  dgamma", dDG, dg, nc, 1e-5);
    float *d[] = {dY, dM, dI, dDX, dDG, dDB};
    for (int i = 0; i < 6; i++)
        G->free(gctx, d[i]);
    free(y), free(mean), free(inv), free(dx), free(dg), free(db), free(rm), free(rv);
    drop(&k);
}

int main(void) {
    rand_seed(26);
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    BackendConfig cfg = {.threads = 1, .verbose = 1}; /* fp32 */
    if (G->init(&cfg, &gctx) != 0 || C->init(&cfg, &cctx) != 0) return 1;
    const int shapes[][3] = {
        {32, 16, 28 * 28}, /* 4-float loads, several blocks per channel */
        {16, 24, 49},      /* 7x7 planes: 1-float loads */
        {3, 5, 9},         /* fewer elements than a block's threads */
        {64, 10, 1},       /* after a fully connected layer */
        {8, 64, 56 * 56},  /* ResNet-50's first stage, batch 8 */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int mode = 0; mode < 3; mode++)
            test_mode(shapes[i][0], shapes[i][1], shapes[i][2], mode);
    test_simple(8, 6, 49);
    G->finalize(gctx), C->finalize(cctx);
    return check_summary();
}
