/* test_cuda_zoo.c - every model-zoo operation of the CUDA backend against the CPU backend on the
 * same seeded inputs (the shapes of the zoo's layers, shrunk). Exits 77 (skipped) when no GPU is
 * visible. Element i passes when |gpu - cpu| <= tol * max(1, |cpu|); outputs are pre-filled with
 * NaN on the device, so an element a kernel forgets fails. Tolerances:
 *   exact (0): axpy, scale, copy, concat, add, dropout (mask and values), embedding, max pooling
 *              (values, argmax, gradient), average and global-average pooling, LRN (forward,
 *              backward), batch-norm inference: the kernels add the CPU's terms in the CPU's order
 *              and are built with -fmad=false (tests/test_device_arith.c checks the arithmetic
 *              itself on the CPU);
 *   1e-5:      batch-norm training (statistics summed in another order), its running statistics
 *              and backward;
 *   1e-4:      the LSTM (cuBLAS GEMMs in another order than OpenBLAS, through 6 steps).
 * Checks counted by tests/harness.h. Exit status: 0 all pass, 1 a failure, 77 no GPU. */
#include "backend.h"
#include "cuda.h"
#include "harness.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const BackendOps *G = &cuda_backend, *C = &cpu_backend;
static BackendCtx *gctx, *cctx;
static uint64_t rng = 0x2545F4914F6CDD1DULL;

static float *host(size_t n, float lo, float hi) {
    float *p = halloc(n);
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        p[i] = lo + (hi - lo) * (float)((rng >> 40) * (1.0 / 16777216.0));
    }
    return p;
}
static void *up(const void *h, size_t bytes) {
    void *d = G->alloc(gctx, bytes);
    G->upload(gctx, d, h, bytes);
    return d;
}
static float *dnan(size_t n) {
    float *h = halloc(n);
    fill_nan(h, n);
    float *d = up(h, n * sizeof *h);
    free(h);
    return d;
}
static void cmp(const char *what, const void *dev, const float *ref, size_t n, double tol) {
    float *got = halloc(n);
    G->download(gctx, got, dev, n * sizeof *got);
    double worst = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (!(d <= tol * fmax(1.0, fabs((double)ref[i])))) ok = 0;
        worst = isnan(d) ? INFINITY : fmax(worst, d);
    }
    printf("%s: max abs diff %.3g (tolerance %.0e) %s\n", what, worst, tol, ok ? "ok" : "FAIL");
    check_count(ok);
    free(got);
}
static void cmp_bytes(const char *what, const void *dev, const void *ref, size_t bytes) {
    unsigned char *got = malloc(bytes ? bytes : 1);
    G->download(gctx, got, dev, bytes);
    int ok = !memcmp(got, ref, bytes);
    printf("%s: %s\n", what, ok ? "ok (identical)" : "FAIL");
    check_count(ok);
    free(got);
}

static void test_blas1(void) {
    size_t n = 100003;
    float *x = host(n, -1, 1), *y = host(n, -1, 1), *dx = up(x, n * 4), *dy = up(y, n * 4);
    G->axpy(gctx, n, 0.37f, dx, dy), C->axpy(cctx, n, 0.37f, x, y);
    cmp("axpy", dy, y, n, 0);
    G->scale(gctx, n, -1.7f, dy), C->scale(cctx, n, -1.7f, y);
    cmp("scale", dy, y, n, 0);
    G->copy(gctx, dx, dy, n * 4);
    cmp("copy", dx, y, n, 0);
    G->free(gctx, dx), G->free(gctx, dy), free(x), free(y);
}

static void test_pool(int n, int c, int h, int k, int st, int pad) {
    int ho = (h + 2 * pad - k) / st + 1;
    PoolShape s = {n, c, h, h, k, st, pad, ho, ho};
    size_t ni = (size_t)n * c * h * h, no = (size_t)n * c * ho * ho;
    float *x = host(ni, -1, 1), *gy = host(no, -1, 1), *y = malloc(no * 4), *dx = malloc(ni * 4);
    int32_t *am = malloc(no * 4);
    float *dX = up(x, ni * 4), *dG = up(gy, no * 4), *dY = dnan(no), *dDX = dnan(ni);
    int32_t *dAM = G->alloc(gctx, no * 4);
    char what[96];
    C->maxpool_forward(cctx, &s, x, y, am), C->maxpool_backward(cctx, &s, am, gy, dx);
    G->maxpool_forward(gctx, &s, dX, dY, dAM), G->maxpool_backward(gctx, &s, dAM, dG, dDX);
    snprintf(what, sizeof what, "maxpool %dx%d/%d pad %d on %dx%d", k, k, st, pad, h, h);
    cmp(what, dY, y, no, 0);
    cmp_bytes("  argmax", dAM, am, no * 4);
    cmp("  backward", dDX, dx, ni, 0);
    C->avgpool_forward(cctx, &s, x, y), C->avgpool_backward(cctx, &s, gy, dx);
    G->avgpool_forward(gctx, &s, dX, dY), G->avgpool_backward(gctx, &s, dG, dDX);
    snprintf(what, sizeof what, "avgpool %dx%d/%d pad %d", k, k, st, pad);
    cmp(what, dY, y, no, 0);
    cmp("  backward", dDX, dx, ni, 0);
    C->global_avgpool_forward(cctx, (size_t)n, (size_t)c, (size_t)h * h, x, y);
    G->global_avgpool_forward(gctx, (size_t)n, (size_t)c, (size_t)h * h, dX, dY);
    cmp("global avgpool", dY, y, (size_t)n * c, 0);
    C->global_avgpool_backward(cctx, (size_t)n, (size_t)c, (size_t)h * h, gy, dx);
    G->global_avgpool_backward(gctx, (size_t)n, (size_t)c, (size_t)h * h, dG, dDX);
    cmp("  backward", dDX, dx, ni, 0);
    void *d[] = {dX, dG, dY, dDX, dAM};
    for (int i = 0; i < 5; i++)
        G->free(gctx, d[i]);
    free(x), free(gy), free(y), free(dx), free(am);
}

static void test_lrn(void) {
    LrnShape s = {4, 16, 6, 6, 5, 1e-4f, 0.75f, 2.0f};
    size_t n = 4 * 16 * 36;
    float *x = host(n, -3, 3), *gy = host(n, -1, 1), *y = malloc(n * 4), *sc = malloc(n * 4),
          *dx = malloc(n * 4);
    float *dX = up(x, n * 4), *dG = up(gy, n * 4), *dY = dnan(n), *dS = dnan(n), *dDX = dnan(n);
    C->lrn_forward(cctx, &s, x, y, sc), C->lrn_backward(cctx, &s, x, y, sc, gy, dx);
    G->lrn_forward(gctx, &s, dX, dY, dS), G->lrn_backward(gctx, &s, dX, dY, dS, dG, dDX);
    cmp("LRN size 5 forward", dY, y, n, 0);
    cmp("  scale", dS, sc, n, 0);
    cmp("  backward", dDX, dx, n, 0);
    void *d[] = {dX, dG, dY, dS, dDX};
    for (int i = 0; i < 5; i++)
        G->free(gctx, d[i]);
    free(x), free(gy), free(y), free(sc), free(dx);
}

static void test_bn(int batch, int c, int spatial) {
    BnShape s = {batch, c, spatial, 1e-5f, 0.1f};
    size_t n = (size_t)batch * c * spatial;
    float *x = host(n, -2, 3), *gy = host(n, -1, 1), *ga = host(c, 0.5f, 1.5f),
          *be = host(c, -1, 1), *rm = host(c, -1, 1), *rv = host(c, 0.5f, 2), *y = malloc(n * 4),
          *dx = malloc(n * 4), *mean = malloc(c * 4), *inv = malloc(c * 4), *dga = malloc(c * 4),
          *dbe = malloc(c * 4);
    float *dX = up(x, n * 4), *dG = up(gy, n * 4), *dGA = up(ga, c * 4), *dBE = up(be, c * 4),
          *dRM = up(rm, c * 4), *dRV = up(rv, c * 4), *dY = dnan(n), *dDX = dnan(n), *dM = dnan(c),
          *dI = dnan(c), *dDGA = dnan(c), *dDBE = dnan(c);
    C->batchnorm_forward_infer(cctx, &s, x, ga, be, rm, rv, y);
    G->batchnorm_forward_infer(gctx, &s, dX, dGA, dBE, dRM, dRV, dY);
    cmp("batch norm inference", dY, y, n, 0);
    C->batchnorm_forward_train(cctx, &s, x, ga, be, y, mean, inv, rm, rv);
    G->batchnorm_forward_train(gctx, &s, dX, dGA, dBE, dY, dM, dI, dRM, dRV);
    cmp("batch norm training forward", dY, y, n, 1e-5);
    cmp("  saved mean", dM, mean, c, 1e-5);
    cmp("  saved 1/std", dI, inv, c, 1e-5);
    cmp("  running mean", dRM, rm, c, 1e-5);
    cmp("  running variance (unbiased)", dRV, rv, c, 1e-5);
    C->batchnorm_backward(cctx, &s, x, ga, mean, inv, gy, dx, dga, dbe);
    G->batchnorm_backward(gctx, &s, dX, dGA, dM, dI, dG, dDX, dDGA, dDBE);
    cmp("  backward dx", dDX, dx, n, 1e-5);
    cmp("  dgamma", dDGA, dga, c, 1e-5);
    cmp("  dbeta", dDBE, dbe, c, 1e-5);
    void *d[] = {dX, dG, dGA, dBE, dRM, dRV, dY, dDX, dM, dI, dDGA, dDBE};
    for (int i = 0; i < 12; i++)
        G->free(gctx, d[i]);
    free(x), free(gy), free(ga), free(be), free(rm), free(rv), free(y), free(dx), free(mean),
        free(inv), free(dga), free(dbe);
}

static void test_concat_add_dropout(void) {
    const int batch = 5;
    const size_t sizes[3] = {7, 0, 12}, total = 19;
    float *a = host(batch * 7, -1, 1), *b = host(batch * 12, -1, 1), *y = malloc(batch * total * 4);
    float *dA = up(a, batch * 7 * 4), *dB = up(b, batch * 12 * 4), *dY = dnan(batch * total);
    const float *xs[3] = {a, NULL, b}, *dxs_in[3] = {dA, NULL, dB};
    C->concat_forward(cctx, batch, 3, xs, sizes, y);
    G->concat_forward(gctx, batch, 3, dxs_in, sizes, dY);
    cmp("concat forward", dY, y, batch * total, 0);
    float *dA2 = dnan(batch * 7), *dB2 = dnan(batch * 12);
    float *outs[3] = {dA2, NULL, dB2};
    G->concat_backward(gctx, batch, 3, sizes, dY, outs);
    cmp("  backward (first input)", dA2, a, batch * 7, 0);
    cmp("  backward (last input)", dB2, b, batch * 12, 0);

    size_t n = 4099;
    float *p = host(n, -1, 1), *q = host(n, -1, 1), *r = malloc(n * 4);
    float *dP = up(p, n * 4), *dQ = up(q, n * 4), *dR = dnan(n);
    C->add_forward(cctx, n, p, q, r), G->add_forward(gctx, n, dP, dQ, dR);
    cmp("residual add", dR, r, n, 0);
    G->add_forward(gctx, n, dP, dQ, dP); /* in place */
    cmp("  in place", dP, r, n, 0);

    DropoutShape s = {.batch = 6, .size = 1001, .rate = 0.5f, .seed = 42, .first_sample = 12};
    size_t m = 6 * 1001;
    float *x = host(m, -1, 1), *gy = host(m, -1, 1), *dy = malloc(m * 4), *dx = malloc(m * 4);
    uint8_t *mask = malloc(m);
    float *dX = up(x, m * 4), *dGY = up(gy, m * 4), *dDY = dnan(m), *dDX = dnan(m);
    uint8_t *dMask = G->alloc(gctx, m);
    C->dropout_forward(cctx, &s, x, dy, mask), C->dropout_backward(cctx, &s, mask, gy, dx);
    G->dropout_forward(gctx, &s, dX, dDY, dMask), G->dropout_backward(gctx, &s, dMask, dGY, dDX);
    cmp_bytes("dropout mask = the CPU's", dMask, mask, m);
    cmp("  values", dDY, dy, m, 0);
    cmp("  backward", dDX, dx, m, 0);
    void *d[] = {dA, dB, dY, dA2, dB2, dP, dQ, dR, dX, dGY, dDY, dDX, dMask};
    for (int i = 0; i < 13; i++)
        G->free(gctx, d[i]);
    free(a), free(b), free(y), free(p), free(q), free(r), free(x), free(gy), free(dy), free(dx),
        free(mask);
}

static void test_embedding_lstm(void) {
    EmbeddingShape e = {.rows = 70, .vocab = 50, .dim = 16};
    float *ids = malloc(70 * 4), *w = host(50 * 16, -1, 1), *gy = host(70 * 16, -1, 1);
    for (int r = 0; r < 70; r++)
        ids[r] = (float)((r * 13) % 53) - 1.0f; /* a few outside [0, 50) */
    float *y = malloc(70 * 16 * 4), *dw = malloc(50 * 16 * 4);
    float *dI = up(ids, 70 * 4), *dW = up(w, 50 * 16 * 4), *dGY = up(gy, 70 * 16 * 4),
          *dY = dnan(70 * 16), *dDW = dnan(50 * 16);
    C->embedding_forward(cctx, &e, ids, w, y), C->embedding_backward(cctx, &e, ids, gy, dw);
    G->embedding_forward(gctx, &e, dI, dW, dY), G->embedding_backward(gctx, &e, dI, dGY, dDW);
    cmp("embedding forward", dY, y, 70 * 16, 0);
    cmp("  backward", dDW, dw, 50 * 16, 0);

    LstmShape s = {.batch = 3, .seq = 6, .in = 16, .hidden = 24};
    size_t nx = 3 * 6 * 16, ny = 3 * 6 * 24, nw = 96 * 40;
    float *x = host(nx, -1, 1), *lw = host(nw, -0.3f, 0.3f), *lb = host(96, -0.5f, 0.5f),
          *ly = malloc(ny * 4), *gly = host(ny, -1, 1), *ldx = malloc(nx * 4),
          *ldw = malloc(nw * 4), *ldb = malloc(96 * 4);
    void *res = malloc(C->lstm_reserve_bytes(cctx, &s)),
         *work = malloc(C->lstm_workspace_bytes(cctx, &s));
    C->lstm_forward(cctx, &s, x, lw, lb, ly, res, work);
    C->lstm_backward(cctx, &s, x, lw, ly, res, gly, ldx, ldw, ldb, work);
    float *dx_ = up(x, nx * 4), *dlw = up(lw, nw * 4), *dlb = up(lb, 96 * 4), *dly = dnan(ny),
          *dgly = up(gly, ny * 4), *dldx = dnan(nx), *dldw = dnan(nw), *dldb = dnan(96);
    void *dres = G->alloc(gctx, G->lstm_reserve_bytes(gctx, &s)),
         *dwork = G->alloc(gctx, G->lstm_workspace_bytes(gctx, &s));
    G->lstm_forward(gctx, &s, dx_, dlw, dlb, dly, dres, dwork);
    G->lstm_backward(gctx, &s, dx_, dlw, dly, dres, dgly, dldx, dldw, dldb, dwork);
    cmp("LSTM forward (6 steps)", dly, ly, ny, 1e-4);
    cmp("  backward dx", dldx, ldx, nx, 1e-4);
    cmp("  dW", dldw, ldw, nw, 1e-4);
    cmp("  db", dldb, ldb, 96, 1e-4);
    void *d[] = {dI, dW, dGY, dY, dDW, dx_, dlw, dlb, dly, dgly, dldx, dldw, dldb, dres, dwork};
    for (int i = 0; i < 15; i++)
        G->free(gctx, d[i]);
    free(ids), free(w), free(gy), free(y), free(dw), free(x), free(lw), free(lb), free(ly),
        free(gly), free(ldx), free(ldw), free(ldb), free(res), free(work);
}

int main(void) {
    if (cuda_device_count() == 0) {
        printf("SKIP: no CUDA device visible\n");
        return 77;
    }
    BackendConfig cfg = {.threads = 1, .verbose = 1}; /* fp32 */
    if (G->init(&cfg, &gctx) != 0 || C->init(&cfg, &cctx) != 0) return 1;
    test_blas1();
    test_pool(2, 3, 13, 3, 2, 1); /* GoogLeNet */
    test_pool(2, 3, 13, 3, 2, 0); /* AlexNet */
    test_pool(2, 4, 8, 2, 2, 0);  /* VGG16 */
    test_pool(2, 3, 7, 3, 1, 1);  /* inception pool branch */
    test_lrn();
    test_bn(8, 6, 49);  /* after a convolution */
    test_bn(16, 10, 1); /* after a fully connected layer */
    test_concat_add_dropout();
    test_embedding_lstm();
    G->finalize(gctx), C->finalize(cctx);
    return check_summary();
}
